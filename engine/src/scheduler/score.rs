//! Scoring requests: prefill a text inside the shared batches and read the model at chosen
//! positions, with no sampling — how process reward models run on the engine.
//!
//! A [`ScoreRequest`] names the tokens and the positions to read ([`ScoreOutput`]: final-normed
//! hidden states for a reward head, or the logits of a few tokens for a token-logit PRM). It is
//! admitted like a prompt: the prefix index serves its cached full blocks, and chunks of it are
//! computed in the same forward passes as everyone's decoding. When it finishes its sequence is
//! *parked*: its blocks, partial last block included, stay held, and a later request whose
//! tokens extend a parked sequence's tokens forks it (copy-on-write) and computes only what is
//! new. That is what makes a PRM incremental: step `k` of a solution is computed on top of the
//! parked steps `1..k-1`, so each step's tokens are computed once.
//!
//! Invariants: a position is read only after it was computed in this request's sequence (reuse
//! never skips past the first position still to read); parked sequences are released oldest
//! first beyond [`SchedulerConfig::max_parked`](super::SchedulerConfig), and all of them before
//! any running sequence is preempted or admission stalls.

use candle_core::Tensor;

use super::retain::{Reason, Retained};
use super::*;

/// What to read at each requested position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoreOutput {
    /// The final-normed hidden state (`hidden_size` floats): what a reward head reads.
    Hidden,
    /// The logits of these token ids, in this order (a token-logit PRM's good/bad tokens).
    TokenLogits(Vec<u32>),
    /// The log-probability of the token that follows each read position (`next[i]` follows
    /// `positions[i]`) and the `top` most likely tokens there: a prompt's logprobs, what
    /// `echo` with `logprobs` returns. Read into [`Scored::logprobs`].
    NextTokenLogprobs {
        /// The token after each read position.
        next: Vec<u32>,
        /// Alternatives per position.
        top: usize,
    },
}

/// The distribution at one read position ([`ScoreOutput::NextTokenLogprobs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NextTokenLogprob {
    /// Log-probability of the token that follows.
    pub logprob: f32,
    /// The most likely tokens as (id, log-probability), most likely first.
    pub top: Vec<(u32, f32)>,
}

/// A text to run through the model and read at `positions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreRequest {
    /// Token ids (at least one).
    pub tokens: Vec<u32>,
    /// Positions to read, strictly increasing, each below `tokens.len()`.
    pub positions: Vec<usize>,
    /// What to read there.
    pub output: ScoreOutput,
    /// Higher runs first and is preempted last.
    pub priority: i32,
}

/// A finished scoring request.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// One vector per requested position, in order ([`ScoreOutput::Hidden`],
    /// [`ScoreOutput::TokenLogits`]).
    pub values: Vec<Vec<f32>>,
    /// One distribution per requested position, in order
    /// ([`ScoreOutput::NextTokenLogprobs`]).
    pub logprobs: Vec<NextTokenLogprob>,
    /// Tokens run through the model for this request (recomputes after preemption included).
    pub computed: u64,
    /// Tokens served from cached blocks or a parked sequence.
    pub reused: u64,
}

/// A scoring sequence's request and progress.
#[derive(Debug)]
pub(super) struct ScoreState {
    positions: Vec<usize>,
    output: ScoreOutput,
    /// Values read so far (for `positions[..recorded()]`, one of the two kinds by `output`).
    values: Vec<Vec<f32>>,
    logprobs: Vec<NextTokenLogprob>,
}

impl ScoreState {
    /// The first position not read yet (the sequence must be computed from here at most).
    fn first_pending(&self) -> usize {
        self.positions
            .get(self.recorded())
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// What the model should return for a chunk computing positions `start..start + len`.
    pub(super) fn readout(&self, start: usize, len: usize) -> Readout {
        let rows: Vec<usize> = self.positions[self.recorded()..]
            .iter()
            .take_while(|&&p| p < start + len)
            .map(|&p| p - start)
            .collect();
        match (&self.output, rows.is_empty()) {
            (_, true) => Readout::Nothing,
            (ScoreOutput::Hidden, false) => Readout::Hidden(rows),
            (ScoreOutput::TokenLogits(_) | ScoreOutput::NextTokenLogprobs { .. }, false) => {
                Readout::Logits(rows)
            }
        }
    }

    /// Positions read so far.
    fn recorded(&self) -> usize {
        self.values.len() + self.logprobs.len()
    }

    /// Stores what a chunk's readout returned (`[rows, hidden]` or `[rows, vocab]`).
    pub(super) fn record(&mut self, out: Option<Tensor>) -> Result<()> {
        let Some(out) = out else { return Ok(()) };
        let out = match &self.output {
            ScoreOutput::Hidden => out,
            ScoreOutput::TokenLogits(ids) => {
                let ids = Tensor::new(ids.as_slice(), out.device())?;
                out.index_select(&ids, 1)?
            }
            ScoreOutput::NextTokenLogprobs { next, top } => {
                let rows = candle_nn::ops::log_softmax(&out.to_dtype(candle_core::DType::F32)?, 1)?
                    .to_vec2::<f32>()?;
                for row in rows {
                    let i = self.logprobs.len();
                    let logprob = next
                        .get(i)
                        .and_then(|&t| row.get(t as usize))
                        .copied()
                        .unwrap_or(f32::NEG_INFINITY);
                    self.logprobs.push(NextTokenLogprob {
                        logprob,
                        top: top_k(&row, *top),
                    });
                }
                return Ok(());
            }
        };
        self.values.extend(out.to_vec2::<f32>()?);
        Ok(())
    }
}

/// The `k` largest entries of `row` as (index, value), largest first.
fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..row.len() as u32).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    let by_value = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]);
    idx.select_nth_unstable_by(k - 1, by_value);
    idx.truncate(k);
    idx.sort_by(by_value);
    idx.into_iter().map(|i| (i, row[i as usize])).collect()
}

impl Scheduler {
    /// Queues a scoring request; its result is taken with [`Scheduler::take_scored`] once a
    /// step finishes it. Returns its sequence id.
    ///
    /// Rejected at admission, with nothing queued: no tokens or positions, positions not
    /// strictly increasing or past the end, a token outside the vocabulary, a text longer than
    /// the context or the pool, logits asked of a model without a language-model head.
    pub fn submit_score(&mut self, req: ScoreRequest) -> Result<SeqId> {
        self.validate_score(&req)?;
        let id = self.alloc_id();
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.seqs.insert(
            id,
            Sequence {
                prompt_len: req.tokens.len(),
                tokens: req.tokens,
                computed: 0,
                generated: 0,
                phase: Phase::Prefill,
                role: Role::Score(ScoreState {
                    positions: req.positions,
                    output: req.output,
                    values: Vec::new(),
                    logprobs: Vec::new(),
                }),
                max_new_tokens: 0,
                stop_tokens: Arc::new(Vec::new()),
                stop_condition: None,
                prefill: (0, 0),
                priority: req.priority,
                arrival,
                running: false,
                cancelled: false,
                keep: false,
            },
        );
        self.waiting.push_back(id);
        Ok(id)
    }

    fn validate_score(&self, req: &ScoreRequest) -> Result<()> {
        let bad =
            |field: &'static str, reason: String| Err(EngineError::InvalidInput { field, reason });
        let config = self.model.config();
        if req.tokens.is_empty() {
            return bad("tokens", "is empty".into());
        }
        if req.tokens.len() > config.context_length {
            return Err(EngineError::PromptTooLong {
                tokens: req.tokens.len(),
                context: config.context_length,
            });
        }
        if let Some(t) = req
            .tokens
            .iter()
            .find(|&&t| t as usize >= config.vocab_size)
        {
            return bad(
                "tokens",
                format!(
                    "token id {t} is outside the vocabulary of {}",
                    config.vocab_size
                ),
            );
        }
        if req.positions.is_empty() {
            return bad("positions", "no position to read".into());
        }
        if req.positions.windows(2).any(|w| w[0] >= w[1]) {
            return bad("positions", "must be strictly increasing".into());
        }
        if let Some(&p) = req.positions.last().filter(|&&p| p >= req.tokens.len()) {
            return bad(
                "positions",
                format!("position {p} is past the {} tokens", req.tokens.len()),
            );
        }
        if let ScoreOutput::NextTokenLogprobs { next, .. } = &req.output {
            if next.len() != req.positions.len() {
                return bad(
                    "output",
                    format!(
                        "{} next tokens for {} positions",
                        next.len(),
                        req.positions.len()
                    ),
                );
            }
        }
        let read_ids = match &req.output {
            ScoreOutput::Hidden => None,
            ScoreOutput::TokenLogits(ids) => Some(ids),
            ScoreOutput::NextTokenLogprobs { next, .. } => Some(next),
        };
        if let Some(ids) = read_ids {
            if ids.is_empty() {
                return bad("output", "no token ids to read logits of".into());
            }
            if let Some(t) = ids.iter().find(|&&t| t as usize >= config.vocab_size) {
                return bad(
                    "output",
                    format!(
                        "token id {t} is outside the vocabulary of {}",
                        config.vocab_size
                    ),
                );
            }
            if !self.model.has_lm_head() {
                return bad(
                    "output",
                    "the model has no language-model head; read hidden states".into(),
                );
            }
        }
        let needed = req.tokens.len().div_ceil(self.store.block_size()) + 1;
        let total = self.store.stats().total_blocks;
        if needed > total {
            return Err(EngineError::ExceedsKvPool {
                what: "scoring",
                needed,
                total,
            });
        }
        Ok(())
    }

    /// Finished scoring requests since the last call, with their sequence ids.
    pub fn take_scored(&mut self) -> Vec<(SeqId, Scored)> {
        std::mem::take(&mut self.scored)
    }

    /// Positions a newly opened scoring sequence `id` (the prefix index served `reused` tokens):
    /// continues the longest parked sequence its tokens extend when that covers more, and never
    /// starts past the first position still to read. Returns where computing starts.
    pub(super) fn resume_score(&mut self, id: SeqId, reused: usize) -> Result<usize> {
        let Some(s) = self.seqs.get(&id) else {
            return Ok(reused);
        };
        let Role::Score(score) = &s.role else {
            return Ok(reused);
        };
        // At least the last token is always computed, and nothing still to read is skipped.
        let limit = score.first_pending().min(s.tokens.len().saturating_sub(1));
        let best = self
            .retained
            .longest_score_prefix_of(&s.tokens)
            .map(|r| (r.id, r.tokens.len().min(limit)));
        match best {
            Some((parent, start)) if start > reused.min(limit) => {
                self.store.release(id);
                self.store.fork(parent, id)?;
                if self.store.seq_len(id) > start {
                    self.store.truncate(id, start)?;
                }
                self.retained.touch(parent);
                Ok(start)
            }
            _ => {
                let start = reused.min(limit);
                if start < reused {
                    self.store.truncate(id, start)?;
                }
                Ok(start)
            }
        }
    }

    /// A scoring sequence computed its last token: park it and record its result.
    pub(super) fn finish_score(&mut self, id: SeqId) {
        let Some(s) = self.seqs.remove(&id) else {
            return;
        };
        let Role::Score(score) = s.role else { return };
        self.counters.score_requests += 1;
        self.scored.push((
            id,
            Scored {
                values: score.values,
                logprobs: score.logprobs,
                computed: s.prefill.0,
                reused: s.prefill.1,
            },
        ));
        self.retain(Retained {
            id,
            reason: Reason::Score,
            tokens: s.tokens,
            logits: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::top_k;

    #[test]
    fn top_k_is_the_k_largest_largest_first_and_clamped_to_the_row() {
        let row = [0.1, -2.0, 3.0, 0.5, 3.0, -0.2];
        let top = top_k(&row, 3);
        assert_eq!(top.len(), 3);
        let values: Vec<f32> = top.iter().map(|&(_, v)| v).collect();
        assert_eq!(values, vec![3.0, 3.0, 0.5]);
        assert!(top.iter().all(|&(i, v)| row[i as usize] == v));
        assert_eq!(top_k(&row, 0), Vec::new());
        assert_eq!(top_k(&row, 99).len(), row.len());
        assert_eq!(top_k(&[], 2), Vec::new());
    }
}
