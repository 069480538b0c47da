//! Statistics of an evaluation: the unbiased pass@k estimator here, and (re-exported from
//! `ponder_verifiers::metrics`, which the learned verifier's evaluation shares) AUROC, means
//! and seeded percentile-bootstrap confidence intervals.

pub use ponder_verifiers::metrics::{auroc, bootstrap_ci, mean, quantile};

/// Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
/// with `n` samples of which `c` are correct, `1 − C(n−c, k) / C(n, k)`, computed as a stable
/// product. `None` when `k == 0` or `k > n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // C(n−c, k)/C(n, k) = Π_{i=n−c+1}^{n} (1 − k/i)
    let fail: f64 = ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product();
    Some(1.0 - fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_matches_hand_computed_values() {
        // n=5, c=2, k=1: 2/5.
        assert!((pass_at_k(5, 2, 1).unwrap_or(0.0) - 0.4).abs() < 1e-12);
        // n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!((pass_at_k(5, 2, 2).unwrap_or(0.0) - 0.7).abs() < 1e-12);
        // n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252.
        assert!((pass_at_k(10, 3, 5).unwrap_or(0.0) - (1.0 - 21.0 / 252.0)).abs() < 1e-12);
        assert_eq!(pass_at_k(4, 0, 2), Some(0.0));
        assert_eq!(pass_at_k(4, 3, 2), Some(1.0));
        assert_eq!(pass_at_k(3, 1, 4), None);
        assert_eq!(pass_at_k(3, 1, 0), None);
    }
}
