//! Scalar math the kernels and the engine share, written so loops over slices vectorise: `exp`
//! (attention's softmax, the sampler's probabilities) and the reductions `sum` and `max` over
//! a slice (16 independent lanes, so a vocabulary-sized pass runs at vector speed instead of
//! one dependent add per element). Pure functions, no state.

/// Lanes of `sum`, `max` and `tree`.
pub(crate) const LANES: usize = 16;

/// `sum xs` in a fixed order: lane `i` adds elements `i, i + 16, ...` from +0.0, then the
/// lanes are added pairwise (`i` with `i + 8`, then `+ 4`, `+ 2`, `+ 1`).
#[inline]
pub fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let (chunks, rest) = xs.as_chunks::<LANES>();
    for c in chunks {
        for i in 0..LANES {
            lanes[i] += c[i];
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane += x;
    }
    tree(lanes, |a, b| a + b)
}

/// The largest element, ignoring NaN (as `f32::max` does); `-inf` for an empty slice.
#[inline]
pub fn max(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let (chunks, rest) = xs.as_chunks::<LANES>();
    for c in chunks {
        for i in 0..LANES {
            lanes[i] = lanes[i].max(c[i]);
        }
    }
    for (lane, &x) in lanes.iter_mut().zip(rest) {
        *lane = lane.max(x);
    }
    tree(lanes, f32::max)
}

/// The fixed reduction tree over 16 lanes: `op(v[i], v[i + 8])` for `i < 8`, then the same
/// with offsets 4, 2 and 1; the lower lane is always the first operand. Attention's numerics
/// contract (`attention::scores`) is written in it.
#[inline(always)]
pub(crate) fn tree(v: [f32; LANES], op: impl Fn(f32, f32) -> f32) -> f32 {
    let h: [f32; 8] = std::array::from_fn(|i| op(v[i], v[i + 8]));
    let g: [f32; 4] = std::array::from_fn(|i| op(h[i], h[i + 4]));
    op(op(g[0], g[2]), op(g[1], g[3]))
}

/// `e^x` for f32, within about 2 ulp of the true value, written with plain arithmetic so a loop
/// over a slice vectorises (std's `f32::exp` is a libm call per element).
///
/// Cephes `expf`: `x = n ln2 + r` with `n = round(x / ln2)` (by the 1.5·2^23 shifter trick),
/// `ln2` split in two for an exact `r`, a degree-5 polynomial for `e^r`, and `2^n` built in the
/// exponent bits. Inputs are clamped to [-87, 88] (so `e^-inf` gives about 1.6e-38, not 0; the
/// kernels only call it on differences with a finite max). NaN passes through.
#[inline]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const SHIFTER: f32 = 12_582_912.0;
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let t = x * LOG2E + SHIFTER;
    let n = t - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // t's bit pattern is SHIFTER's plus n (|n| < 2^22 keeps t in [2^23, 2^24)).
    let n_int = t.to_bits().wrapping_sub(SHIFTER.to_bits());
    let pow2n = f32::from_bits(n_int.wrapping_add(127) << 23);
    y * pow2n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_and_max_agree_with_plain_folds() {
        for len in [0usize, 1, 15, 16, 17, 100, 49_152] {
            let xs: Vec<f32> = (0..len)
                .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
                .collect();
            let want: f64 = xs.iter().map(|&x| x as f64).sum();
            assert!(
                (sum(&xs) as f64 - want).abs() < 1e-3 * (1.0 + want.abs()),
                "len {len}"
            );
            assert_eq!(
                max(&xs),
                xs.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                "len {len}"
            );
        }
        assert_eq!(max(&[f32::NAN, 1.0, f32::NAN]), 1.0, "NaN is ignored");
    }

    #[test]
    fn exp_is_within_3_ulp_of_std_over_the_kernel_range() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let (got, want) = (exp(x), (x as f64).exp());
            worst = worst.max(((got as f64 - want) / want).abs() as f32);
            x += 0.001_37;
        }
        assert!(worst < 3.0 * f32::EPSILON, "worst relative error {worst}");
        assert_eq!(
            exp(0.0),
            1.0,
            "e^0 must be exactly 1 so an unchanged max leaves a state alone"
        );
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
    }
}
