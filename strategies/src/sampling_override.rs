//! [`SamplingOverride`]: what the caller of a search asked of its sampling — an OpenAI
//! request's `temperature`, `top_p`, `top_k`, `min_p`, `stop` and `max_tokens` — applied by the
//! [`Context`](crate::Context) to every generation a strategy makes, over the strategy's own
//! settings, so that no sampling field of a request is dropped when a strategy runs it. A field
//! left unset keeps the strategy's value; an empty override changes nothing (a search replays
//! as before).
//!
//! What each field does, for every strategy alike:
//! - `temperature`, `top_p`, `top_k`, `min_p` replace the strategy's sampling of each branch
//!   (its per-branch seed is kept). Answer probes (greedy reads of the answer so far) and
//!   verifiers do not sample an answer and keep theirs.
//! - `stop`: a caller's stop string ends the branch it appears in, as the model's end of
//!   sequence would (the branch is finished; its text keeps the stop, which the HTTP API cuts
//!   off as OpenAI does). The strategy's own step delimiters still only cut steps.
//! - `max_tokens`: the most tokens one branch generates, over all its steps (OpenAI's cap on a
//!   completion, per branch). A branch that reaches it is finished; extending it again
//!   generates nothing.

use serde::{Deserialize, Serialize};

use crate::generator::{Extension, Sampling, StopKind};
use crate::stop::Stops;

/// The caller's sampling fields, each `None` (or empty) where the strategy's own applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingOverride {
    /// Softmax temperature (0 = greedy).
    pub temperature: Option<f64>,
    /// Nucleus mass.
    pub top_p: Option<f64>,
    /// Top-k cut (0 = off).
    pub top_k: Option<usize>,
    /// Min-p cut (0 = off).
    pub min_p: Option<f64>,
    /// Stop strings that end a branch.
    pub stop: Vec<String>,
    /// Most tokens one branch generates.
    pub max_tokens: Option<usize>,
}

impl SamplingOverride {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `strategy`'s sampling with the overridden fields replaced.
    pub fn sampling(&self, strategy: Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.unwrap_or(strategy.temperature),
            top_p: self.top_p.unwrap_or(strategy.top_p),
            top_k: self.top_k.unwrap_or(strategy.top_k),
            min_p: self.min_p.unwrap_or(strategy.min_p),
            ..strategy
        }
    }

    /// The strategy's stop strings, then the caller's not among them.
    pub fn stops(&self, strategy: &[String]) -> Vec<String> {
        let mut all = strategy.to_vec();
        for s in &self.stop {
            if !s.is_empty() && !all.contains(s) {
                all.push(s.clone());
            }
        }
        all
    }

    /// Tokens a branch that has generated `tokens` may still generate (`None`: no cap).
    pub fn room(&self, tokens: usize) -> Option<usize> {
        self.max_tokens.map(|m| m.saturating_sub(tokens))
    }

    /// Whether `ext`, which took its branch to `tokens` generated tokens, ends the branch: it
    /// stopped at one of the caller's stop strings, or the branch reached `max_tokens`.
    pub fn ends_branch(&self, tokens: usize, ext: &Extension) -> bool {
        let stopped = ext.stop == StopKind::Stop && Stops::new(&self.stop).any_in(&ext.text);
        stopped || self.room(tokens) == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Cost;

    fn ext(text: &str, stop: StopKind) -> Extension {
        Extension {
            text: text.into(),
            tokens: Vec::new(),
            stop,
            cost: Cost::default(),
        }
    }

    #[test]
    fn unset_fields_keep_the_strategys_and_set_ones_replace_them() {
        let strategy = Sampling {
            seed: 9,
            ..Sampling::default()
        };
        assert_eq!(SamplingOverride::default().sampling(strategy), strategy);
        let o = SamplingOverride {
            temperature: Some(0.0),
            top_k: Some(5),
            ..SamplingOverride::default()
        };
        let s = o.sampling(strategy);
        assert_eq!((s.temperature, s.top_k), (0.0, 5));
        assert_eq!(
            (s.top_p, s.min_p, s.seed),
            (strategy.top_p, strategy.min_p, 9)
        );
    }

    #[test]
    fn the_callers_stops_join_the_strategys_and_end_a_branch() {
        let o = SamplingOverride {
            stop: vec!["\n\n".into(), "Q:".into()],
            max_tokens: Some(10),
            ..SamplingOverride::default()
        };
        assert_eq!(o.stops(&["\n\n".into()]), vec!["\n\n", "Q:"]);
        assert!(o.ends_branch(3, &ext("x Q:", StopKind::Stop)));
        assert!(!o.ends_branch(3, &ext("x\n", StopKind::Length)));
        assert!(o.ends_branch(10, &ext("x", StopKind::Length)));
        assert_eq!((o.room(4), o.room(12)), (Some(6), Some(0)));
        assert_eq!(SamplingOverride::default().room(4), None);
    }
}
