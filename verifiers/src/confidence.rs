//! Confidence scores computed from token log-probabilities: the signals DeepConf
//! (Fu et al. 2025, "Deep Think with Confidence", arXiv 2508.15260) and self-certainty
//! (Kang et al. 2025, "Scalable Best-of-N Selection for Large Language Models via
//! Self-Certainty", arXiv 2502.18581) use to weight votes and stop weak traces early.
//!
//! Formulas (natural logarithms; `k` top-k log-probabilities `l_1..l_k` at a position):
//!
//! - token confidence: `C = −(1/k) Σ_j l_j` — high when the top candidates are *unlikely*
//!   alternatives, i.e. the model is sure of its pick (DeepConf eq. 2);
//! - entropy: `H = −Σ_j p_j ln p_j` with `p_j = exp(l_j) / Σ_i exp(l_i)` (renormalised over the
//!   given entries, so top-k gives the entropy of the truncated distribution);
//! - mean log-probability of the sampled tokens: `(1/n) Σ_t l_t`;
//! - group confidence: the mean token confidence over a sliding window of `w` tokens, stride 1
//!   (DeepConf eq. 3); a trace shorter than `w` is one group;
//! - lowest group confidence: the minimum group confidence (DeepConf eq. 6);
//! - bottom-`p`% confidence: the mean of the lowest `p`% of group confidences, at least one
//!   group (DeepConf eq. 5, `p = 10` in the paper);
//! - tail confidence: the mean token confidence over the last `t` tokens (DeepConf eq. 7);
//! - self-certainty of a position with `V` log-probabilities: `KL(U ‖ p) = −ln V − (1/V) Σ_j l_j`,
//!   averaged over positions. With top-k log-probabilities `V = k`, an approximation of the
//!   paper's full-vocabulary quantity.
//!
//! Invariants: total — empty inputs give 0 (per token) or `None` (per trace); non-finite
//! log-probabilities (a `−∞` for an impossible candidate) are skipped rather than poisoning the
//! mean; a window or tail of 0 counts as 1.

/// DeepConf token confidence: the negative mean of the top-k log-probabilities at one position.
/// 0 for an empty slice.
pub fn token_confidence(top_logprobs: &[f32]) -> f32 {
    -finite_mean(top_logprobs).unwrap_or(0.0)
}

/// Entropy (nats) of the distribution given by `logprobs` (full vocabulary or top-k,
/// renormalised). 0 for an empty slice.
pub fn entropy(logprobs_full_or_topk: &[f32]) -> f32 {
    let finite: Vec<f64> = logprobs_full_or_topk
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| f64::from(l))
        .collect();
    let Some(max) = finite.iter().copied().reduce(f64::max) else {
        return 0.0;
    };
    let z: f64 = finite.iter().map(|l| (l - max).exp()).sum();
    let lse = max + z.ln();
    let h: f64 = finite
        .iter()
        .map(|l| {
            let lp = l - lse;
            -lp.exp() * lp
        })
        .sum();
    h.max(0.0) as f32
}

/// The mean log-probability of the sampled tokens. 0 for an empty slice.
pub fn mean_logprob(token_logprobs: &[f32]) -> f32 {
    finite_mean(token_logprobs).unwrap_or(0.0)
}

/// DeepConf group confidences: the mean of `token_conf` over every window of `window`
/// consecutive tokens (stride 1). A trace shorter than the window is one group; an empty trace
/// has none.
pub fn group_confidences(token_conf: &[f32], window: usize) -> Vec<f32> {
    let w = window.max(1);
    if token_conf.is_empty() {
        return Vec::new();
    }
    if token_conf.len() <= w {
        return vec![mean(token_conf)];
    }
    let mut out = Vec::with_capacity(token_conf.len() - w + 1);
    let mut sum: f64 = token_conf[..w].iter().map(|&c| f64::from(c)).sum();
    out.push((sum / w as f64) as f32);
    for i in w..token_conf.len() {
        sum += f64::from(token_conf[i]) - f64::from(token_conf[i - w]);
        out.push((sum / w as f64) as f32);
    }
    out
}

/// The lowest group confidence (DeepConf's "lowest group"); `None` for an empty trace.
pub fn lowest_group_confidence(token_conf: &[f32], window: usize) -> Option<f32> {
    group_confidences(token_conf, window)
        .into_iter()
        .reduce(f32::min)
}

/// The mean token confidence over the last `tail` tokens; `None` for an empty trace.
pub fn tail_confidence(token_conf: &[f32], tail: usize) -> Option<f32> {
    if token_conf.is_empty() {
        return None;
    }
    let t = tail.max(1).min(token_conf.len());
    Some(mean(&token_conf[token_conf.len() - t..]))
}

/// The mean of the lowest `pct` percent of group confidences (at least one group);
/// `None` for an empty trace. `pct` is clamped to `(0, 100]`; DeepConf uses 10.
pub fn bottom_percent_confidence(token_conf: &[f32], window: usize, pct: f32) -> Option<f32> {
    let mut groups = group_confidences(token_conf, window);
    if groups.is_empty() {
        return None;
    }
    groups.sort_by(f32::total_cmp);
    let pct = if pct.is_finite() {
        pct.clamp(0.0, 100.0)
    } else {
        100.0
    };
    let take =
        ((f64::from(pct) / 100.0 * groups.len() as f64).ceil() as usize).clamp(1, groups.len());
    Some(mean(&groups[..take]))
}

/// Self-certainty of one position: `KL(U ‖ p) = −ln V − (1/V) Σ_j l_j` over its `V`
/// log-probabilities. 0 for an empty slice.
pub fn token_self_certainty(logprobs: &[f32]) -> f32 {
    let finite: Vec<f32> = logprobs.iter().copied().filter(|l| l.is_finite()).collect();
    if finite.is_empty() {
        return 0.0;
    }
    let v = finite.len() as f64;
    (-v.ln() - f64::from(mean(&finite))) as f32
}

/// Self-certainty of a trace: the mean of [`token_self_certainty`] over its positions;
/// `None` for an empty trace.
pub fn self_certainty<T: AsRef<[f32]>>(per_token_logprobs: &[T]) -> Option<f32> {
    if per_token_logprobs.is_empty() {
        return None;
    }
    let per: Vec<f32> = per_token_logprobs
        .iter()
        .map(|t| token_self_certainty(t.as_ref()))
        .collect();
    Some(mean(&per))
}

/// Mean token confidence per step, given each step's length in tokens (steps past the end of
/// `token_conf` are cut short; an empty step scores 0).
pub fn step_confidences(token_conf: &[f32], step_lens: &[usize]) -> Vec<f32> {
    let mut start = 0usize;
    step_lens
        .iter()
        .map(|&len| {
            let end = start.saturating_add(len).min(token_conf.len());
            let s = &token_conf[start.min(end)..end];
            start = end;
            if s.is_empty() {
                0.0
            } else {
                mean(s)
            }
        })
        .collect()
}

/// DeepConf's trace-level summaries in one place, for strategies that filter or weight traces.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceConfidence {
    /// Mean token confidence over the whole trace.
    pub mean: f32,
    /// Lowest group confidence.
    pub lowest_group: f32,
    /// Mean of the bottom 10% of group confidences.
    pub bottom_10: f32,
    /// Mean token confidence over the tail.
    pub tail: f32,
}

impl TraceConfidence {
    /// The group window [`TraceConfidence::summary`] uses: traces of a small model run to a few
    /// hundred tokens, so DeepConf's 2048 would make every trace one group.
    pub const SUMMARY_WINDOW: usize = 16;
    /// The tail [`TraceConfidence::summary`] uses.
    pub const SUMMARY_TAIL: usize = 32;

    /// The summary every candidate reports and outcome verifiers read ([`crate::Solution`]):
    /// [`TraceConfidence::new`] with [`Self::SUMMARY_WINDOW`] and [`Self::SUMMARY_TAIL`];
    /// `None` for an empty trace (a generator that reports no log-probabilities).
    pub fn summary(token_conf: &[f32]) -> Option<Self> {
        Self::new(token_conf, Self::SUMMARY_WINDOW, Self::SUMMARY_TAIL)
    }

    /// Summarises a trace's token confidences with the given group window and tail length
    /// (DeepConf uses 2048 for both); `None` for an empty trace.
    pub fn new(token_conf: &[f32], window: usize, tail: usize) -> Option<Self> {
        Some(Self {
            mean: finite_mean(token_conf)?,
            lowest_group: lowest_group_confidence(token_conf, window)?,
            bottom_10: bottom_percent_confidence(token_conf, window, 10.0)?,
            tail: tail_confidence(token_conf, tail)?,
        })
    }
}

fn mean(xs: &[f32]) -> f32 {
    finite_mean(xs).unwrap_or(0.0)
}

fn finite_mean(xs: &[f32]) -> Option<f32> {
    let (sum, n) = xs
        .iter()
        .filter(|x| x.is_finite())
        .fold((0.0f64, 0usize), |(s, n), &x| (s + f64::from(x), n + 1));
    (n > 0).then(|| (sum / n as f64) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-5
    }

    #[test]
    fn token_confidence_is_negative_mean_logprob() {
        assert!(close(token_confidence(&[-0.1, -2.0, -3.9]), 2.0));
        assert_eq!(token_confidence(&[]), 0.0);
        assert!(close(token_confidence(&[-1.0, f32::NEG_INFINITY]), 1.0));
    }

    #[test]
    fn entropy_of_uniform_and_certain() {
        let l = (0.25f32).ln();
        assert!(close(entropy(&[l; 4]), 4f32.ln()));
        assert!(close(entropy(&[0.0, f32::NEG_INFINITY]), 0.0));
        // Renormalised: two equal top-k entries are a fair coin whatever their mass.
        assert!(close(entropy(&[-3.0, -3.0]), 2f32.ln()));
        assert_eq!(entropy(&[]), 0.0);
    }

    #[test]
    fn groups_slide_with_stride_one() {
        let c = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(group_confidences(&c, 2), vec![1.5, 2.5, 3.5]);
        assert_eq!(group_confidences(&c, 10), vec![2.5]);
        assert_eq!(group_confidences(&c, 0), c.to_vec());
        assert!(group_confidences(&[], 3).is_empty());
        assert_eq!(lowest_group_confidence(&c, 2), Some(1.5));
        assert_eq!(lowest_group_confidence(&[], 2), None);
    }

    #[test]
    fn tail_and_bottom_percent() {
        let c = [5.0, 1.0, 2.0, 3.0];
        assert_eq!(tail_confidence(&c, 2), Some(2.5));
        assert_eq!(tail_confidence(&c, 100), Some(2.75));
        assert_eq!(tail_confidence(&[], 2), None);
        // Groups of 1: bottom 50% of [5,1,2,3] is mean(1,2).
        assert_eq!(bottom_percent_confidence(&c, 1, 50.0), Some(1.5));
        // At least one group.
        assert_eq!(bottom_percent_confidence(&c, 1, 0.0), Some(1.0));
    }

    #[test]
    fn self_certainty_is_zero_for_uniform() {
        let l = (0.25f32).ln();
        assert!(close(token_self_certainty(&[l; 4]), 0.0));
        // A peaked distribution is further from uniform.
        let peaked = [
            (0.97f32).ln(),
            (0.01f32).ln(),
            (0.01f32).ln(),
            (0.01f32).ln(),
        ];
        assert!(token_self_certainty(&peaked) > 0.5);
        assert_eq!(self_certainty::<Vec<f32>>(&[]), None);
        assert!(close(
            self_certainty(&[vec![l; 4], vec![l; 4]]).unwrap_or(-1.0),
            0.0
        ));
    }

    #[test]
    fn per_step_means() {
        let c = [1.0, 3.0, 2.0, 2.0, 9.0];
        assert_eq!(
            step_confidences(&c, &[2, 2, 3, 1]),
            vec![2.0, 2.0, 9.0, 0.0]
        );
    }

    #[test]
    fn trace_summary() {
        assert_eq!(TraceConfidence::new(&[], 4, 4), None);
        let t = TraceConfidence::new(&[2.0, 2.0, 2.0], 2, 2);
        assert_eq!(
            t,
            Some(TraceConfidence {
                mean: 2.0,
                lowest_group: 2.0,
                bottom_10: 2.0,
                tail: 2.0
            })
        );
    }
}
