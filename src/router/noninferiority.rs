//! Whether a cheaper calibration row may stand in for the most accurate one: a one-sided
//! paired non-inferiority test over the calibration problems both rows were measured on.
//!
//! Compute-optimal allocation (Snell et al. 2024) runs the configuration with the best
//! expected accuracy the budget buys; spending less is only right when the cheaper
//! configuration is shown to lose at most `margin` — "not significantly worse" (a wide CI that
//! includes 0) is not that. With `d_i = x_i − y_i` over the shared problems (each 1 correct, 0
//! wrong), the cheaper row is non-inferior when the lower end of the 95% confidence interval
//! of the mean difference, `d̄ − 1.96·s/√n`, lies above `−margin` (the normal approximation of
//! the paired difference; the calibration bins hold hundreds of problems).
//!
//! This module only computes; which rows are compared is the allocator's.

/// z for a one-sided 97.5% bound (the lower end of a two-sided 95% interval).
const Z_95: f64 = 1.959_964;

/// The lower end of the 95% interval of the mean paired difference `x − y` between two
/// outcome strings (`'1'` correct, anything else wrong), or `None` when they are not over the
/// same problems (different lengths) or there are none.
///
/// ```
/// use ponder::router::noninferiority::paired_lower_bound;
///
/// assert_eq!(paired_lower_bound("1100", "1100"), Some(0.0));
/// let lower = paired_lower_bound("0000011111", "1111111111").unwrap_or(0.0);
/// assert!(lower < -0.5, "{lower}");
/// assert_eq!(paired_lower_bound("10", "101"), None);
/// ```
pub fn paired_lower_bound(x: &str, y: &str) -> Option<f64> {
    if x.len() != y.len() || x.is_empty() {
        return None;
    }
    let diffs: Vec<f64> = x
        .bytes()
        .zip(y.bytes())
        .map(|(a, b)| f64::from(u8::from(a == b'1')) - f64::from(u8::from(b == b'1')))
        .collect();
    let n = diffs.len() as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    if diffs.len() < 2 {
        return Some(mean);
    }
    let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(mean - Z_95 * (var / n).sqrt())
}

/// Whether outcomes `cheaper` are non-inferior to `best` within `margin` (module doc).
pub fn non_inferior(cheaper: &str, best: &str, margin: f64) -> bool {
    paired_lower_bound(cheaper, best).is_some_and(|lower| lower > -margin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn identical_outcomes_are_non_inferior_and_a_clear_loss_is_not() {
        let best = "1".repeat(60) + &"0".repeat(240);
        assert!(non_inferior(&best, &best, 0.01));
        // Loses 30 of the 60 the best solves, wins none: −0.1 with a tight interval.
        let worse = "1".repeat(30) + &"0".repeat(270);
        assert!(!non_inferior(&worse, &best, 0.05));
        assert!(non_inferior(&worse, &best, 0.2));
    }

    #[test]
    fn few_problems_cannot_show_non_inferiority_however_close() {
        // Equal accuracy on 10 problems, but disagreeing on half: the interval is wide.
        assert!(!non_inferior("1010101010", "0101010101", 0.05));
    }

    proptest! {
        #![proptest_config(ProptestConfig { rng_seed: proptest::test_runner::RngSeed::Fixed(17), ..ProptestConfig::default() })]

        /// The bound never exceeds the observed mean difference, and a row is always
        /// non-inferior to itself.
        #[test]
        fn the_bound_is_below_the_mean(xs in proptest::collection::vec(any::<(bool, bool)>(), 1..300)) {
            let s = |f: fn(&(bool, bool)) -> bool| -> String {
                xs.iter().map(|p| if f(p) { '1' } else { '0' }).collect()
            };
            let (x, y) = (s(|p| p.0), s(|p| p.1));
            let mean = xs.iter().map(|p| f64::from(u8::from(p.0)) - f64::from(u8::from(p.1))).sum::<f64>()
                / xs.len() as f64;
            let lower = paired_lower_bound(&x, &y);
            prop_assert!(lower.is_some_and(|l| l <= mean + 1e-12));
            prop_assert!(non_inferior(&x, &x, 1e-9));
        }
    }
}
