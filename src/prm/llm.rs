//! [`LlmPrm`]: the generator itself as a process reward model — after each step it is asked
//! whether that step is correct, and P("Yes") is read from its first answer token.
//!
//! It needs no reward model, only the strategies' [`Generator`] port, so it is the embedded
//! default with SmolLM2 (the LLM-as-a-judge PRM baseline of Zheng et al. 2024, "ProcessBench",
//! and Zhang et al. 2025). Layout: the judge's instructions are opened once as a prompt (their
//! KV shared by every check); a solution is forced text after them — the problem, then one line
//! per step. For step `k` a fork of "instructions + problem + steps 1..k" gets the question
//! appended and one greedy token is sampled; P(Yes) is renormalised over the "Yes" and "No"
//! variants among its top alternatives ([`yes_probability`]), [`UNSURE_SCORE`] when neither is
//! there. Every question of every candidate of a [`Verifier::score_batch`] goes to the engine in
//! one `extend`.
//!
//! Incremental: the sequences for step `k` and step `k+1` share "instructions + problem + steps
//! 1..k", which the engine's prefix cache serves, and step scores are cached by prefix
//! ([`StepCache`]) so a step already judged is never asked again. [`Verifier::cost_bound`] is
//! the generator's own bound on extending every question sequence together
//! ([`Generator::prefill_bound_batch`]) plus one sampled token each. Bad solutions (empty,
//! finished without a readable answer) score "no answer" without a model call.

use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use ponder_strategies::{
    ChatTemplateKwargs, ExtendRequest, Generator, GeneratorError, LogitAdjust, Prompt, Sampling,
    SeqHandle, StrategyError,
};
use ponder_verifiers::prm::yes_probability;
use ponder_verifiers::{Aggregation, AnswerState, Scores, Solution, Verifier, VerifierError};

use super::cache::StepCache;

/// The score of a step when the judge's first token offers neither "Yes" nor "No".
pub const UNSURE_SCORE: f32 = 0.5;

/// How the judge is asked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LlmPrmConfig {
    /// The judge's instructions, opened once as the user message.
    pub instructions: String,
    /// Forced text that starts a solution; `{problem}` is replaced by the problem.
    pub problem: String,
    /// Forced text of one step; `{n}` is its number (from 1), `{step}` its text (trimmed).
    pub step: String,
    /// Forced text asking about the latest step; `{n}` is its number.
    pub question: String,
    /// How step scores fold into the overall score.
    pub aggregation: Aggregation,
    /// Alternatives read from the first answer token (at most the engine's limit, 20).
    pub top_logprobs: usize,
    /// Step scores remembered (0: ask every step every time).
    pub cache_capacity: usize,
}

impl Default for LlmPrmConfig {
    fn default() -> Self {
        Self {
            instructions: "You check math solutions. I show you a problem and a solution, one step per line. \
                           For the step I ask about, answer Yes if it is correct and No if it is wrong."
                .into(),
            problem: "Problem: {problem}\n\nSolution:\n".into(),
            step: "Step {n}: {step}\n".into(),
            question: "\nIs step {n} correct? Answer Yes or No.\nAnswer:".into(),
            aggregation: Aggregation::Min,
            top_logprobs: 20,
            cache_capacity: 1 << 16,
        }
    }
}

/// The generator as a PRM.
pub struct LlmPrm {
    generator: Arc<dyn Generator>,
    config: LlmPrmConfig,
    root: SeqHandle,
    cache: StepCache,
}

impl std::fmt::Debug for LlmPrm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmPrm")
            .field("root", &self.root)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

const NAME: &str = "llm-prm";

/// The judge's generator failed: an outage of its backend stays an outage (by variant).
fn backend(e: StrategyError) -> VerifierError {
    match e {
        StrategyError::Generator(GeneratorError::Unavailable { .. }) => {
            VerifierError::Unavailable {
                verifier: NAME.into(),
                message: e.to_string(),
            }
        }
        e => VerifierError::Backend {
            verifier: NAME.into(),
            message: e.to_string(),
        },
    }
}

/// The question sequences of one solution, built on the generator.
struct Questions {
    /// Per step: its cache key, and its cached score if known.
    steps: Vec<(u64, Option<f32>)>,
    /// (step index, question sequence) for the steps to ask.
    asked: Vec<(usize, SeqHandle)>,
    /// Every sequence opened for this solution, to release.
    opened: Vec<SeqHandle>,
}

impl LlmPrm {
    /// Opens the judge's instructions on `generator` (once; every check forks from them).
    pub async fn new(
        generator: Arc<dyn Generator>,
        config: LlmPrmConfig,
    ) -> ponder_verifiers::Result<Self> {
        let (root, _) = generator
            .open(
                &Prompt {
                    system: None,
                    history: Vec::new(),
                    user: config.instructions.clone(),
                },
                // The judge's prompt is its own, not the request's conversation.
                &ChatTemplateKwargs::default(),
            )
            .await
            .map_err(backend)?;
        let cache = StepCache::new(config.cache_capacity);
        Ok(Self {
            generator,
            config,
            root,
            cache,
        })
    }

    fn step_text(&self, n: usize, step: &str) -> String {
        self.config
            .step
            .replace("{n}", &n.to_string())
            .replace("{step}", step.trim())
    }

    /// Builds the question sequences of the steps not in the cache. On error, everything
    /// opened so far is released.
    fn questions(&self, solution: &Solution<'_>) -> Result<Questions, StrategyError> {
        let mut q = Questions {
            steps: Vec::new(),
            asked: Vec::new(),
            opened: Vec::new(),
        };
        let built = self.build(solution, &mut q);
        if let Err(e) = built {
            self.release(&q);
            return Err(e);
        }
        Ok(q)
    }

    fn build(&self, solution: &Solution<'_>, q: &mut Questions) -> Result<(), StrategyError> {
        let mut hasher = DefaultHasher::new();
        hasher.write(solution.problem.as_bytes());
        hasher.write_u8(0xff);
        for step in solution.steps {
            hasher.write(step.trim().as_bytes());
            hasher.write_u8(0xff);
            let key = hasher.finish();
            q.steps.push((key, self.cache.get(key)));
        }
        let Some(last) = q.steps.iter().rposition(|(_, s)| s.is_none()) else {
            return Ok(());
        };
        let base = self.generator.fork(self.root)?;
        q.opened.push(base);
        self.generator.append(
            base,
            &self.config.problem.replace("{problem}", solution.problem),
        )?;
        for (k, step) in solution.steps.iter().enumerate().take(last + 1) {
            self.generator.append(base, &self.step_text(k + 1, step))?;
            if q.steps[k].1.is_none() {
                let ask = self.generator.fork(base)?;
                q.opened.push(ask);
                self.generator.append(
                    ask,
                    &self.config.question.replace("{n}", &(k + 1).to_string()),
                )?;
                q.asked.push((k, ask));
            }
        }
        Ok(())
    }

    fn release(&self, q: &Questions) {
        for &seq in &q.opened {
            self.generator.release(seq);
        }
    }
}

#[async_trait]
impl Verifier for LlmPrm {
    fn name(&self) -> &str {
        NAME
    }

    async fn score(&self, solution: Solution<'_>) -> ponder_verifiers::Result<Scores> {
        Ok(self
            .score_batch(&[solution])
            .await?
            .into_iter()
            .next()
            .unwrap_or_else(|| Scores::no_answer(solution.steps.len())))
    }

    /// Every question of every solution in one `extend` call.
    async fn score_batch(
        &self,
        solutions: &[Solution<'_>],
    ) -> ponder_verifiers::Result<Vec<Scores>> {
        let mut built: Vec<Option<Questions>> = Vec::with_capacity(solutions.len());
        for solution in solutions {
            if AnswerState::of(solution).is_no_answer() {
                built.push(None);
                continue;
            }
            match self.questions(solution) {
                Ok(q) => built.push(Some(q)),
                Err(e) => {
                    built.iter().flatten().for_each(|q| self.release(q));
                    return Err(backend(e));
                }
            }
        }
        let sampling = Sampling::greedy(
            self.config
                .top_logprobs
                .min(ponder_engine::MAX_TOP_LOGPROBS),
        );
        let requests: Vec<ExtendRequest> = built
            .iter()
            .flatten()
            .flat_map(|q| q.asked.iter())
            .map(|&(_, seq)| ExtendRequest {
                seq,
                max_tokens: 1,
                stop: Vec::new(),
                sampling,
                logits: LogitAdjust::default(),
            })
            .collect();
        let extended = if requests.is_empty() {
            Ok(Vec::new())
        } else {
            self.generator.extend(&requests).await
        };
        built.iter().flatten().for_each(|q| self.release(q));
        let mut answers = extended.map_err(backend)?.into_iter();
        let mut out = Vec::with_capacity(solutions.len());
        for (solution, q) in solutions.iter().zip(built) {
            let Some(q) = q else {
                out.push(Scores::no_answer(solution.steps.len()));
                continue;
            };
            let mut steps: Vec<f32> = q
                .steps
                .iter()
                .map(|(_, s)| s.unwrap_or(UNSURE_SCORE))
                .collect();
            let mut cost = 0;
            for &(k, _) in &q.asked {
                let ext = answers.next().ok_or_else(|| {
                    backend(StrategyError::from(GeneratorError::Missing {
                        what: "answer to a step question",
                    }))
                })?;
                cost += ext.cost.prefill_computed + ext.cost.generated;
                let p = ext
                    .tokens
                    .first()
                    .and_then(|t| yes_probability(&t.top))
                    .unwrap_or(UNSURE_SCORE);
                self.cache.insert(q.steps[k].0, p);
                steps[k] = p;
            }
            let overall = self
                .config
                .aggregation
                .apply(&steps)
                .unwrap_or(ponder_verifiers::NO_ANSWER_SCORE);
            out.push(Scores {
                steps,
                overall,
                cost,
            });
        }
        Ok(out)
    }

    /// The generator's bound on the context the question sequences compute together, plus one
    /// sampled token each; 0 when every step is cached or the solution has no answer.
    fn cost_bound(&self, solution: &Solution<'_>) -> u64 {
        if AnswerState::of(solution).is_no_answer() {
            return 0;
        }
        let Ok(q) = self.questions(solution) else {
            return 0;
        };
        let seqs: Vec<SeqHandle> = q.asked.iter().map(|&(_, seq)| seq).collect();
        // A batch the generator cannot bound is bounded by nothing: refuse to promise.
        let bound = match self.generator.prefill_bound_batch(&seqs) {
            Ok(prefill) => prefill as u64 + seqs.len() as u64,
            Err(_) => u64::MAX,
        };
        self.release(&q);
        bound
    }
}

impl Drop for LlmPrm {
    fn drop(&mut self) {
        self.generator.release(self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_of_the_judge_stays_an_outage_and_nothing_else_becomes_one() {
        let outage = backend(
            GeneratorError::Unavailable {
                attempts: 2,
                last: "connection refused".into(),
            }
            .into(),
        );
        assert!(
            matches!(outage, VerifierError::Unavailable { .. }),
            "{outage:?}"
        );
        let failure = backend(GeneratorError::Stopped.into());
        assert!(
            matches!(failure, VerifierError::Backend { .. }),
            "{failure:?}"
        );
    }
}
