//! How well a verifier's scores tell right answers from wrong ones, and how sure a measurement
//! is: the AUROC of scores, means, and seeded percentile-bootstrap confidence intervals (a
//! report built from them is reproducible byte for byte).
//!
//! Shared by the harness's reports (`ponder-eval report`) and the learned outcome verifier's
//! held-out evaluation (`ponder verifier eval`), so both state the same numbers the same way.

use rand::{Rng, SeedableRng};

/// The area under the ROC curve of `scores` separating `positives` from the rest: the
/// probability that a random positive scores above a random negative, ties counting half
/// (the Mann–Whitney U statistic over P·N). `None` without both a positive and a negative.
/// Non-finite scores count as the lowest.
pub fn auroc(scored: &[(f64, bool)]) -> Option<f64> {
    let clean = |s: f64| if s.is_finite() { s } else { f64::NEG_INFINITY };
    let mut xs: Vec<(f64, bool)> = scored.iter().map(|&(s, p)| (clean(s), p)).collect();
    xs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = xs.iter().filter(|x| x.1).count();
    let negatives = xs.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    // Midranks over tied groups, then U = (sum of positive ranks) − P(P+1)/2.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j < xs.len() && xs[j].0 == xs[i].0 {
            j += 1;
        }
        let midrank = (i + 1 + j) as f64 / 2.0;
        rank_sum += midrank * xs[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

/// Mean of `xs` (0 for none).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The `q`-quantile (0–1) of sorted values by linear interpolation.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A percentile-bootstrap confidence interval of the mean of `xs` at `level` (e.g. 0.95) from
/// `resamples` seeded resamples. Returns `(low, high)`; `(m, m)` for fewer than two values.
pub fn bootstrap_ci(xs: &[f64], level: f64, resamples: usize, seed: u64) -> (f64, f64) {
    if xs.len() < 2 {
        let m = mean(xs);
        return (m, m);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            (0..xs.len())
                .map(|_| xs[rng.random_range(0..xs.len())])
                .sum::<f64>()
                / xs.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    (quantile(&means, alpha), quantile(&means, 1.0 - alpha))
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn auroc_counts_ordered_pairs_and_half_ties() {
        // Perfect separation, perfect inversion, all tied.
        let perfect = [(0.9, true), (0.8, true), (0.1, false)];
        assert_eq!(auroc(&perfect), Some(1.0));
        let inverted = [(0.1, true), (0.8, false), (0.9, false)];
        assert_eq!(auroc(&inverted), Some(0.0));
        assert_eq!(auroc(&[(0.5, true), (0.5, false)]), Some(0.5));
        // Hand count: positives {0.7, 0.4}, negatives {0.5, 0.4, 0.1}:
        // 0.7 beats 3; 0.4 beats 0.1, ties 0.4 → 1.5; (3 + 1.5) / 6.
        let mixed = [
            (0.7, true),
            (0.4, true),
            (0.5, false),
            (0.4, false),
            (0.1, false),
        ];
        assert!((auroc(&mixed).unwrap_or(0.0) - 4.5 / 6.0).abs() < 1e-12);
        assert_eq!(auroc(&[(0.5, true)]), None);
        assert_eq!(auroc(&[(f64::NAN, true), (0.0, false)]), Some(0.0));
    }

    #[test]
    fn bootstrap_interval_contains_the_mean_and_narrows_with_n() {
        let xs = |n: usize| {
            (0..n)
                .map(|i| if i % 3 == 0 { 1.0 } else { 0.0 })
                .collect::<Vec<f64>>()
        };
        let small = xs(30);
        let large = xs(600);
        let (lo_s, hi_s) = bootstrap_ci(&small, 0.95, 2000, 1);
        let (lo_l, hi_l) = bootstrap_ci(&large, 0.95, 2000, 1);
        assert!(lo_s <= mean(&small) && mean(&small) <= hi_s);
        assert!(lo_l <= mean(&large) && mean(&large) <= hi_l);
        assert!(
            hi_l - lo_l < (hi_s - lo_s) / 2.0,
            "600 samples give a much narrower interval than 30"
        );
        assert_eq!(
            bootstrap_ci(&small, 0.95, 500, 9),
            bootstrap_ci(&small, 0.95, 500, 9),
            "seeded"
        );
    }
}
