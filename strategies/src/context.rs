//! [`Context`]: what a running strategy holds — the metered generator, the verifier, the search
//! tree, the candidates found so far, the seed and the cancellation token.
//!
//! Strategies never call the [`Generator`] directly: every call goes through the context, which
//! reserves budget first, checks the deadline and cancellation, records each generated step in
//! the tree and settles the cost. A strategy works with [`Branch`]es (a sequence plus the tree
//! node it ends at); forking a branch is free, extending a batch of branches is one engine call,
//! and scoring a batch of branches is one verifier submission ([`Context::score_batch`]).
//! Answer probes are in `probe.rs`, drawing whole samples (and a router's early look at them)
//! in `samples.rs`, recording candidates in `candidates.rs`; the caller's sampling fields
//! (`sampling_override.rs`) apply to every generation here.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ponder_verifiers::{
    canonical_answer, extract_answer, token_confidence, ReasoningParser, Verifier,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio_util::sync::CancellationToken;

use crate::budget::{Budget, Charge, Meter, Usage};
use crate::error::{GeneratorError, Result, StrategyError};
use crate::generator::{
    ChatTemplateKwargs, CostTally, ExtendRequest, Extension, Generator, LogitAdjust, Prompt,
    Sampling, SeqHandle, StopKind,
};
use crate::outcome::{Candidate, RoutingDecision, SearchFinish};
use crate::progress::{Progress, ProgressSender};
use crate::samples::SamplePool;
use crate::sampling_override::SamplingOverride;
use crate::strategy::Problem;
use crate::tree::{NodeId, NodeStatus, SearchTree};

/// Text appended to a fork to ask for the answer so far (a cheap probe, as in Dynasor's
/// "probe-in-the-middle").
pub const ANSWER_PROBE: &str =
    "\n\n... Oh, I suddenly got the answer to the whole problem. **Final Answer**: \\boxed{";

/// Most tokens [`Context::add_candidate_forced`] decodes for a forced answer.
pub const FORCED_ANSWER_TOKENS: usize = 16;

/// A sequence being searched, and where it stands in the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// The generator's sequence.
    pub seq: SeqHandle,
    /// The tree node its text ends at.
    pub node: NodeId,
    /// Tokens generated along the path from the root.
    pub tokens: usize,
    /// Per generated token along the path, its DeepConf token confidence.
    pub confidences: Vec<f32>,
    /// Sum of generated tokens' logprobs along the path.
    pub logprob_sum: f64,
    /// Set once the model ended the solution (end-of-sequence).
    pub finished: bool,
    /// How its last extension ended.
    pub last_stop: Option<StopKind>,
}

impl Branch {
    /// Mean token logprob along the path (0 for an empty path).
    pub fn mean_logprob(&self) -> f64 {
        if self.tokens == 0 {
            0.0
        } else {
            self.logprob_sum / self.tokens as f64
        }
    }

    /// Mean token confidence along the path (DeepConf's average trace confidence).
    pub fn mean_confidence(&self) -> f32 {
        if self.confidences.is_empty() {
            0.0
        } else {
            self.confidences.iter().sum::<f32>() / self.confidences.len() as f32
        }
    }
}

/// How to generate one step (or a whole solution: no stop strings).
#[derive(Debug, Clone, PartialEq)]
pub struct StepSpec {
    /// Most tokens per extension.
    pub max_tokens: usize,
    /// Stop strings (the step delimiter).
    pub stop: Vec<String>,
    /// Sampling; the seed is replaced per branch by [`Context::seed_for`].
    pub sampling: Sampling,
}

/// The state of one running search.
pub struct Context {
    pub(crate) generator: Arc<dyn Generator>,
    pub(crate) verifier: Option<Arc<dyn Verifier>>,
    /// Set by [`Context::set_verifier_aside`]: score as though no verifier were configured.
    verifier_aside: AtomicBool,
    pub(crate) meter: Meter,
    tree: Mutex<SearchTree>,
    pub(crate) candidates: Mutex<Vec<Candidate>>,
    live: Mutex<BTreeSet<SeqHandle>>,
    pub(crate) cancel: CancellationToken,
    seed: u64,
    /// The caller's sampling fields, over every generation's ([`Context::with_sampling`]).
    sampling: SamplingOverride,
    pub(crate) problem: Problem,
    /// The caller's chat-template variables, rendered into every prompt this search opens
    /// ([`Context::with_template_kwargs`]).
    template_kwargs: ChatTemplateKwargs,
    prompt_tokens: Mutex<u64>,
    router: Mutex<Option<Arc<dyn RoutingDecision>>>,
    progress: Option<ProgressSender>,
    /// The first deadline or cancellation a call of this search ran into, even if the
    /// strategy caught the error and returned normally.
    interruption: Mutex<Option<SearchFinish>>,
    /// Samples a probe drew for the strategy that runs next ([`Context::probe_samples`]).
    pool: Mutex<SamplePool>,
    /// Each solution's final answer once read, by (node, forced) ([`Context::final_answer`]).
    pub(crate) answers: Mutex<HashMap<(NodeId, bool), Option<String>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("seed", &self.seed)
            .field("usage", &self.meter.usage())
            .finish_non_exhaustive()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// SplitMix64: a well-mixed 64-bit seed from a counter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Context {
    /// A context for `problem` over `generator` with `budget`.
    pub fn new(generator: Arc<dyn Generator>, problem: Problem, budget: Budget) -> Self {
        Self {
            generator,
            verifier: None,
            verifier_aside: AtomicBool::new(false),
            meter: Meter::new(budget),
            tree: Mutex::new(SearchTree::new()),
            candidates: Mutex::new(Vec::new()),
            live: Mutex::new(BTreeSet::new()),
            cancel: CancellationToken::new(),
            seed: 0,
            sampling: SamplingOverride::default(),
            problem,
            template_kwargs: ChatTemplateKwargs::default(),
            prompt_tokens: Mutex::new(0),
            router: Mutex::new(None),
            progress: None,
            interruption: Mutex::new(None),
            pool: Mutex::new(SamplePool::default()),
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// Scores steps and answers with `verifier` (a PRM, a grader…). Without one, strategies
    /// score by the model's own confidence.
    pub fn with_verifier(mut self, verifier: Arc<dyn Verifier>) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Seeds every sampling decision and random choice of the search.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Applies the caller's sampling fields to every generation of the search, over the
    /// strategy's own (see [`SamplingOverride`]).
    pub fn with_sampling(mut self, sampling: SamplingOverride) -> Self {
        self.sampling = sampling;
        self
    }

    /// The caller's sampling fields.
    pub fn sampling(&self) -> &SamplingOverride {
        &self.sampling
    }

    /// Renders every prompt of the search ([`Context::open`], [`Context::open_with`]) with the
    /// caller's chat-template variables (a chat request's `chat_template_kwargs`, e.g. Qwen3's
    /// `enable_thinking`), so a strategy's prompts are the ones plain decoding would render.
    pub fn with_template_kwargs(mut self, template: ChatTemplateKwargs) -> Self {
        self.template_kwargs = template;
        self
    }

    /// The caller's chat-template variables.
    pub fn template_kwargs(&self) -> &ChatTemplateKwargs {
        &self.template_kwargs
    }

    /// Reports [`Progress`] (settled steps, new candidates with the leader and vote margin) to
    /// `sender` while the search runs.
    pub fn with_progress(mut self, sender: ProgressSender) -> Self {
        self.progress = Some(sender);
        self
    }

    pub(crate) fn report(&self, event: impl FnOnce() -> Progress) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(event());
        }
    }

    /// Reports node `id`'s current state (a [`Progress::Node`]; never the root, the prompt).
    pub(crate) fn report_node(&self, tree: &SearchTree, id: NodeId) {
        if let (Some(tx), Some(n)) = (
            &self.progress,
            tree.get(id).filter(|n| n.id != SearchTree::ROOT),
        ) {
            let _ = tx.send(Progress::node(
                n,
                self.usage().spent(),
                self.budget().tokens,
            ));
        }
    }

    /// Stops the search (with its best answer so far) when `token` is cancelled.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The problem being solved.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The search's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A seed for the `k`-th draw made at `node`: deterministic, distinct per (node, k).
    pub fn seed_for(&self, node: NodeId, k: u64) -> u64 {
        mix(mix(self.seed ^ mix(node as u64)) ^ k)
    }

    /// A seeded RNG for a strategy's own random choices, one stream per `stream`.
    pub fn rng(&self, stream: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(mix(self.seed ^ mix(stream ^ 0x5EED)))
    }

    /// Usage so far.
    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens(),
            ..self.meter.usage()
        }
    }

    /// The budget.
    pub fn budget(&self) -> Budget {
        self.meter.budget()
    }

    /// Lowers this search's token cap to `tokens` (never raises it): a strategy that hands the
    /// search to another under a smaller allocation, as `auto` does with the router's choice.
    pub fn narrow_budget(&self, tokens: u64) {
        self.meter.narrow(tokens);
    }

    /// Tokens left to spend (neither spent nor reserved).
    pub fn available(&self) -> u64 {
        self.meter.available()
    }

    /// Tokens of the rendered prompt (known after [`Context::open`]).
    pub fn prompt_tokens(&self) -> u64 {
        *lock(&self.prompt_tokens)
    }

    /// Records what a router predicted and chose for this search; [`crate::run`] puts it in the
    /// [`crate::Outcome`]'s `router` field.
    /// A later call replaces an earlier one (a decision a probe revised).
    pub fn set_router(&self, decision: impl RoutingDecision) {
        *lock(&self.router) = Some(Arc::new(decision));
    }

    /// The router decision recorded with [`Context::set_router`], if any.
    pub fn router(&self) -> Option<Arc<dyn RoutingDecision>> {
        lock(&self.router).clone()
    }

    /// Whether a verifier scores this search (configured and not set aside).
    pub fn has_verifier(&self) -> bool {
        self.verifier().is_some()
    }

    /// The verifier's [`Verifier::name`], or `none` without one (the name calibration rows
    /// record what they were measured with by).
    pub fn verifier_name(&self) -> &str {
        self.verifier().map_or("none", |v| v.name())
    }

    /// From now on this search scores as though no verifier were configured (by the model's
    /// own confidence): for a caller that runs a configuration measured without one — the
    /// router's `auto` running a calibration row whose verifier is `none` on a server that has
    /// one. There is no way back within the search.
    pub fn set_verifier_aside(&self) {
        self.verifier_aside.store(true, Ordering::Relaxed);
    }

    pub(crate) fn verifier(&self) -> Option<&dyn Verifier> {
        if self.verifier_aside.load(Ordering::Relaxed) {
            return None;
        }
        self.verifier.as_deref()
    }

    /// Fails if the search was cancelled or its deadline passed.
    pub fn check(&self) -> Result<()> {
        if self.cancel.is_cancelled() {
            return Err(self.interrupted(StrategyError::Cancelled));
        }
        self.meter.check_deadline().map_err(|e| self.interrupted(e))
    }

    /// Records `e` if it is the search's first deadline or cancellation; returns it.
    pub(crate) fn interrupted(&self, e: StrategyError) -> StrategyError {
        let reason = match e {
            StrategyError::Cancelled => SearchFinish::Cancelled,
            StrategyError::DeadlineExceeded { .. } => SearchFinish::Deadline,
            _ => return e,
        };
        lock(&self.interruption).get_or_insert(reason);
        e
    }

    /// The deadline or cancellation that interrupted a call of this search, if any: [`crate::run`]
    /// reports it as the finish reason even when the strategy caught the error and returned its
    /// answer so far.
    pub fn interruption(&self) -> Option<SearchFinish> {
        *lock(&self.interruption)
    }

    /// Runs `f` on the tree.
    pub fn with_tree<R>(&self, f: impl FnOnce(&mut SearchTree) -> R) -> R {
        f(&mut lock(&self.tree))
    }

    /// A copy of the tree.
    pub fn tree(&self) -> SearchTree {
        lock(&self.tree).clone()
    }

    /// Candidates recorded so far.
    pub fn candidates(&self) -> Vec<Candidate> {
        lock(&self.candidates).clone()
    }

    /// Records the solution that got furthest ([`SearchTree::furthest`]) as an unfinished
    /// candidate, its answer read from its text (nothing more is generated), so a search that
    /// ended before recording any candidate still answers with what it wrote; `None` when
    /// nothing was generated.
    pub(crate) fn add_furthest_partial(&self) -> Option<usize> {
        let (node, text, tokens, score) = self.with_tree(|t| {
            let id = t.furthest()?;
            let score = t.get(id).and_then(|n| n.score);
            if let Some(n) = t.get_mut(id) {
                n.status = NodeStatus::Truncated;
            }
            Some((id, t.text(id), t.path_tokens(id), score))
        })?;
        let answer = extract_answer(&text).map(|a| canonical_answer(&a));
        self.with_tree(|t| {
            if let Some(n) = t.get_mut(node) {
                n.answer = answer.clone();
            }
            t.note(node, "furthest_partial", true);
        });
        let mut c = lock(&self.candidates);
        c.push(Candidate {
            node,
            text,
            answer,
            score,
            tokens,
            confidence: None,
            trace_confidence: None,
            finished: false,
        });
        Some(c.len() - 1)
    }

    /// Whether the problem's prompt, in the model's chat format, leaves a thinking block open
    /// for the model (an R1-style template ends with `<think>`): then the model's output holds
    /// only the closing tag. `false` where the generator renders no chats (it serves strategies
    /// only, or cannot show its format).
    pub fn prompt_opens_thinking(&self) -> bool {
        self.generator
            .render_chat(&self.problem_prompt().turns(), &self.template_kwargs)
            .is_ok_and(|text| ReasoningParser::think().opens_in(&text))
    }

    /// The problem as a prompt: its system message, earlier turns and question.
    fn problem_prompt(&self) -> Prompt {
        Prompt {
            system: self.problem.system.clone(),
            history: self.problem.history.clone(),
            user: self.problem.question.clone(),
        }
    }

    /// Opens the problem's prompt as the root branch.
    pub async fn open(&self) -> Result<Branch> {
        self.open_with(&self.problem_prompt()).await
    }

    /// Opens another prompt (a synthesis or judging pass) as a branch under the tree's root.
    pub async fn open_with(&self, prompt: &Prompt) -> Result<Branch> {
        self.check()?;
        let (seq, prompt_tokens) = self.generator.open(prompt, &self.template_kwargs).await?;
        lock(&self.live).insert(seq);
        let mut first = lock(&self.prompt_tokens);
        if *first == 0 {
            *first = prompt_tokens as u64;
        }
        drop(first);
        if prompt_tokens as u64 >= self.budget().tokens {
            return Err(StrategyError::BudgetTooSmall {
                budget: self.budget().tokens,
                spent: 0,
                prompt_tokens: prompt_tokens as u64,
            });
        }
        Ok(Branch {
            seq,
            node: SearchTree::ROOT,
            tokens: 0,
            confidences: Vec::new(),
            logprob_sum: 0.0,
            finished: false,
            last_stop: None,
        })
    }

    /// A copy of `branch` sharing its KV (free).
    pub fn fork(&self, branch: &Branch) -> Result<Branch> {
        let seq = self.generator.fork(branch.seq)?;
        lock(&self.live).insert(seq);
        Ok(Branch {
            seq,
            ..branch.clone()
        })
    }

    /// The probe's pooled samples.
    pub(crate) fn pool(&self) -> MutexGuard<'_, SamplePool> {
        lock(&self.pool)
    }

    /// Most context tokens one extension of all `branches` together may compute.
    pub(crate) fn prefill_bound(&self, branches: &[Branch]) -> Result<u64> {
        let seqs: Vec<SeqHandle> = branches.iter().map(|b| b.seq).collect();
        Ok(self.generator.prefill_bound_batch(&seqs)? as u64)
    }

    /// Forgets a branch's sequence.
    pub fn release(&self, branch: &Branch) {
        if lock(&self.live).remove(&branch.seq) {
            self.generator.release(branch.seq);
        }
    }

    /// Releases every sequence still open (the driver calls this when a search ends).
    pub fn release_all(&self) {
        let live = std::mem::take(&mut *lock(&self.live));
        for seq in live {
            self.generator.release(seq);
        }
    }

    /// Extends each branch by one step, all in one batch, and records each step as a child
    /// of the branch's node. Branch `i` samples with seed `seed_for(node_i, draw_i)`.
    ///
    /// The budget is divided evenly: if it cannot cover `spec.max_tokens` for every branch,
    /// each gets an equal share; if a share would be zero, the call is refused.
    pub async fn extend(
        &self,
        branches: Vec<(Branch, u64)>,
        spec: &StepSpec,
    ) -> Result<Vec<Branch>> {
        self.extend_as(branches, spec, Charge::Generation)
            .await
            .map(|v| v.into_iter().map(|(b, _)| b).collect())
    }

    /// [`Context::extend`] charged as `charge`. A generation takes the caller's sampling
    /// fields over `spec`'s; a branch already at the caller's `max_tokens` is not sent and gets
    /// an empty extension.
    pub(crate) async fn extend_as(
        &self,
        branches: Vec<(Branch, u64)>,
        spec: &StepSpec,
        charge: Charge,
    ) -> Result<Vec<(Branch, Extension)>> {
        let asked = (charge == Charge::Generation).then_some(&self.sampling);
        let full: Vec<bool> = branches
            .iter()
            .map(|(b, _)| asked.and_then(|a| a.room(b.tokens)) == Some(0))
            .collect();
        if !full.contains(&true) {
            return self.extend_batch(branches, spec, charge).await;
        }
        let todo = branches
            .iter()
            .zip(&full)
            .filter(|(_, full)| !**full)
            .map(|(b, _)| b.clone())
            .collect();
        let mut done = self.extend_batch(todo, spec, charge).await?.into_iter();
        let empty = Extension {
            text: String::new(),
            tokens: Vec::new(),
            stop: StopKind::Length,
            cost: crate::generator::Cost::default(),
        };
        branches
            .into_iter()
            .zip(full)
            .map(|((b, _), full)| match full {
                true => Ok((b, empty.clone())),
                false => done
                    .next()
                    .ok_or_else(|| GeneratorError::Missing { what: "branch" }.into()),
            })
            .collect()
    }

    /// One generator call for `branches` (see [`Context::extend_as`]).
    async fn extend_batch(
        &self,
        branches: Vec<(Branch, u64)>,
        spec: &StepSpec,
        charge: Charge,
    ) -> Result<Vec<(Branch, Extension)>> {
        let asked = (charge == Charge::Generation).then_some(&self.sampling);
        self.check()?;
        if branches.is_empty() {
            return Ok(Vec::new());
        }
        let seqs: Vec<SeqHandle> = branches.iter().map(|(b, _)| b.seq).collect();
        let prefill = self.generator.prefill_bound_batch(&seqs)? as u64;
        let n = branches.len() as u64;
        let available = self.meter.available();
        let share = available.saturating_sub(prefill) / n;
        let max_tokens = (spec.max_tokens as u64).min(share) as usize;
        if max_tokens == 0 {
            return Err(StrategyError::BudgetExhausted {
                budget: self.budget().tokens,
                spent: self.usage().spent(),
                needed: prefill + n,
            });
        }
        // Each branch's cap: the step's, the caller's room left in the branch, the budget share.
        let caps: Vec<usize> = branches
            .iter()
            .map(|(b, _)| {
                let room = asked.and_then(|a| a.room(b.tokens)).unwrap_or(usize::MAX);
                spec.max_tokens.min(room)
            })
            .collect();
        let sum: u64 = caps.iter().map(|c| (*c).min(max_tokens) as u64).sum();
        let reservation = self.meter.reserve(prefill + sum)?;
        let (stop, sampling) = match asked {
            Some(a) => (a.stops(&spec.stop), a.sampling(spec.sampling)),
            None => (spec.stop.clone(), spec.sampling),
        };
        let requests: Vec<ExtendRequest> = branches
            .iter()
            .zip(&caps)
            .map(|((b, draw), cap)| ExtendRequest {
                seq: b.seq,
                max_tokens: (*cap).min(max_tokens),
                stop: stop.clone(),
                sampling: Sampling {
                    seed: self.seed_for(b.node, *draw),
                    ..sampling
                },
                logits: LogitAdjust::default(),
            })
            .collect();
        // The call races cancellation and the deadline; the loser is dropped (the engine then
        // cancels its sequences) and charged what the engine computed until then.
        let tally = CostTally::default();
        let result = tokio::select! {
            r = self.generator.extend_tallied(&requests, &tally) => r,
            _ = self.cancel.cancelled() => Err(StrategyError::Cancelled),
            e = self.meter.deadline_passed() => Err(e),
        };
        let extensions = match result {
            Ok(e) => e,
            Err(e) => {
                self.meter.settle(reservation, tally.get(), charge);
                return Err(self.interrupted(e));
            }
        };
        let mut total = crate::generator::Cost::default();
        for e in &extensions {
            total += e.cost;
        }
        self.meter.settle(reservation, total, charge);
        self.report(|| {
            let usage = self.usage();
            Progress::Step {
                branches: extensions.len(),
                generated_tokens: usage.generated_tokens,
                spent: usage.spent(),
                budget: self.budget().tokens,
            }
        });
        let mut out = Vec::with_capacity(extensions.len());
        let mut tree = lock(&self.tree);
        for (((mut b, _), ext), cap) in branches.into_iter().zip(extensions).zip(caps) {
            // Cut short by the budget share, not by the step's or the caller's cap.
            let capped = max_tokens < cap;
            let lp: f64 = ext.tokens.iter().map(|t| t.logprob as f64).sum();
            let mean = if ext.tokens.is_empty() {
                None
            } else {
                Some((lp / ext.tokens.len() as f64) as f32)
            };
            if charge == Charge::Generation {
                let parent_was_open = tree
                    .get(b.node)
                    .is_some_and(|p| p.status == NodeStatus::Open);
                let node = tree.add(b.node, &ext.text, ext.tokens.len(), mean);
                if parent_was_open {
                    self.report_node(&tree, b.node);
                }
                if ext.stop == StopKind::Length && capped {
                    tree.set_status(node, NodeStatus::Truncated);
                }
                self.report_node(&tree, node);
                b.node = node;
            }
            b.tokens += ext.tokens.len();
            b.logprob_sum += lp;
            b.confidences.extend(ext.tokens.iter().map(|t| {
                let top: Vec<f32> = t.top.iter().map(|(_, l)| *l).collect();
                token_confidence(&top)
            }));
            b.finished =
                ext.stop == StopKind::Eos || asked.is_some_and(|a| a.ends_branch(b.tokens, &ext));
            b.last_stop = Some(ext.stop);
            out.push((b, ext));
        }
        Ok(out)
    }

    /// Appends forced text to `branch` (text the model did not write: a "Wait", an answer
    /// delimiter), recorded in the tree as a child node of no generated tokens; computed, and
    /// charged as prefill, by the branch's next extension. Returns the branch at that node.
    pub fn force(&self, branch: &Branch, text: &str) -> Result<Branch> {
        self.check()?;
        self.generator.append(branch.seq, text)?;
        let node = self.with_tree(|t| {
            let node = t.add(branch.node, text, 0, None);
            self.report_node(t, node);
            node
        });
        Ok(Branch {
            node,
            finished: false,
            last_stop: None,
            ..branch.clone()
        })
    }

    /// Marks a branch's node as pruned and releases its sequence.
    pub fn prune(&self, branch: &Branch) {
        self.with_tree(|t| {
            t.set_status(branch.node, NodeStatus::Pruned);
            self.report_node(t, branch.node);
        });
        self.release(branch);
    }
}
