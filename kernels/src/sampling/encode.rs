//! The integer and bit-exact pieces the CPU sampler and the CUDA kernel share, so both pick
//! the same token: a row's parameters as the kernel reads them ([`RowCode`]), the ranking key,
//! the Cephes `exp` with every rounding spelled out, and the fixed-point token weights.
//!
//! Invariants (each mirrored line for line in `cuda/sampling.cu`):
//! - `rank_key` is a total order: larger logit first, lower id on ties, -0 read as +0;
//! - `weight` is `(exp_cephes((logit - max) * inv_temp) * 2^44) as u64`, each f32 operation
//!   rounded once (Rust never contracts `a * b + c`; the kernel uses `__fmul_rn`/`__fadd_rn`),
//!   so it is the same integer on both; `weight(max) = 2^44` exactly;
//! - with `vocab <= MAX_VOCAB` (2^19) every sum of weights is below 2^63.

use super::{SamplingConfig, SamplingError};

/// Largest vocabulary the integer masses allow (sums of 2^44-scaled weights stay below 2^63).
pub const MAX_VOCAB: usize = 1 << 19;

/// `top_p_fixed` at or above this disables top-p (it is `top_p = 1` in 32.32 fixed point).
pub(crate) const TOP_P_OFF: u64 = 1 << 32;

/// One row's parameters as `cuda/sampling.cu` reads them (`SampleRow`, same layout).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RowCode {
    /// Philox key.
    pub(crate) seed: u64,
    /// Philox counter (the row's draw index).
    pub(crate) offset: u64,
    /// `round(top_p * 2^32)`; `TOP_P_OFF` disables.
    pub(crate) top_p_fixed: u64,
    /// 0 disables.
    pub(crate) top_k: u32,
    /// `1 / temperature` as f32; 0 is greedy.
    pub(crate) inv_temp: f32,
    /// 0 disables.
    pub(crate) min_p: f32,
    /// Padding to the kernel's struct size.
    pub(crate) pad: u32,
}

impl RowCode {
    /// Validates `config` (the error names `row` and the field) and encodes it.
    pub(crate) fn new(
        row: usize,
        config: &SamplingConfig,
        seed: u64,
        offset: u64,
    ) -> Result<Self, SamplingError> {
        let bad = |field, value, reason| SamplingError::Param {
            row,
            field,
            value,
            reason,
        };
        let t = config.temperature;
        if !t.is_finite() || t < 0.0 {
            return Err(bad("temperature", t, "must be finite and >= 0"));
        }
        let inv_temp = if t == 0.0 { 0.0 } else { (1.0 / t) as f32 };
        if t > 0.0 && !(inv_temp.is_finite() && inv_temp > 0.0) {
            return Err(bad(
                "temperature",
                t,
                "1 / temperature must be a positive finite f32",
            ));
        }
        let p = config.top_p;
        if !(p > 0.0 && p <= 1.0) {
            return Err(bad("top_p", p, "must be in (0, 1]"));
        }
        let mp = config.min_p;
        if !(0.0..1.0).contains(&mp) {
            return Err(bad("min_p", mp, "must be in [0, 1)"));
        }
        if config.top_logprobs > super::MAX_TOP_LOGPROBS {
            return Err(bad(
                "top_logprobs",
                config.top_logprobs as f64,
                "must be at most MAX_TOP_LOGPROBS (20)",
            ));
        }
        Ok(RowCode {
            seed,
            offset,
            top_p_fixed: (p * TOP_P_OFF as f64).round() as u64,
            top_k: u32::try_from(config.top_k).unwrap_or(u32::MAX),
            inv_temp,
            min_p: mp as f32,
            pad: 0,
        })
    }
}

/// The ranking key of token `id` with logit `l` (not NaN): larger is ranked first.
pub(crate) fn rank_key(l: f32, id: u32) -> u64 {
    let l = if l == 0.0 { 0.0 } else { l };
    let b = l.to_bits();
    let ord = if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    };
    (u64::from(ord) << 32) | u64::from(u32::MAX - id)
}

/// The token id a key was made from.
pub(crate) fn key_id(key: u64) -> u32 {
    u32::MAX - key as u32
}

/// The logit a key was made from.
pub(crate) fn key_logit(key: u64) -> f32 {
    let ord = (key >> 32) as u32;
    f32::from_bits(if ord & 0x8000_0000 != 0 {
        ord & 0x7fff_ffff
    } else {
        !ord
    })
}

/// `e^x` for f32 by Cephes' `expf`, exactly as the kernel's `exp_cephes` (constants by bits,
/// operations in the kernel's order): within about 2 ulp; clamps to [-87, 88]; NaN passes.
pub(crate) fn exp_cephes(x: f32) -> f32 {
    let c = f32::from_bits;
    let x = if x < c(0xc2ae_0000) {
        c(0xc2ae_0000)
    } else {
        x
    };
    let x = if x > c(0x42b0_0000) {
        c(0x42b0_0000)
    } else {
        x
    };
    let shifter = c(0x4b40_0000);
    let t = x * c(0x3fb8_aa3b) + shifter;
    let n = t - shifter;
    let r = (x - n * c(0x3f31_8000)) - n * c(0xb95e_8083);
    let mut p = c(0x3950_6968);
    p = p * r + c(0x3ab7_43ce);
    p = p * r + c(0x3c08_8908);
    p = p * r + c(0x3d2a_a9c1);
    p = p * r + c(0x3e2a_aaaa);
    p = p * r + c(0x3f00_0000);
    let y = (p * (r * r) + r) + 1.0;
    let n_int = t.to_bits().wrapping_sub(shifter.to_bits());
    y * f32::from_bits(n_int.wrapping_add(127) << 23)
}

/// The tempered probability of a logit relative to the max, `e^((l - max) * inv_temp)`.
pub(crate) fn tempered(l: f32, max: f32, inv_temp: f32) -> f32 {
    exp_cephes((l - max) * inv_temp)
}

/// A tempered probability in 20.44 fixed point (truncated).
pub(crate) fn fixed(w: f32) -> u64 {
    (w * f32::from_bits(0x5580_0000)) as u64
}

/// `ceil(z * p / 2^32)`, exactly (the kernel's `scale_ceil`, written with u128 here).
pub(crate) fn scale_ceil(z: u64, p: u64) -> u64 {
    (u128::from(z) * u128::from(p)).div_ceil(1 << 32) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_logit_then_lower_id() {
        let mut xs = [
            (1.5f32, 3u32),
            (-2.0, 0),
            (1.5, 1),
            (f32::NEG_INFINITY, 2),
            (0.0, 5),
        ];
        xs.sort_by_key(|&(l, id)| std::cmp::Reverse(rank_key(l, id)));
        let ids: Vec<u32> = xs.iter().map(|x| x.1).collect();
        assert_eq!(ids, vec![1, 3, 5, 0, 2]);
        assert_eq!(rank_key(-0.0, 4), rank_key(0.0, 4));
        for (l, id) in [(1.5f32, 3u32), (-7.25, 9), (f32::NEG_INFINITY, 0), (0.0, 1)] {
            assert_eq!(key_logit(rank_key(l, id)), l);
            assert_eq!(key_id(rank_key(l, id)), id);
        }
    }

    #[test]
    fn cephes_exp_is_close_to_std_and_exact_at_zero() {
        assert_eq!(exp_cephes(0.0), 1.0);
        assert_eq!(fixed(exp_cephes(0.0)), 1 << 44);
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let rel = ((exp_cephes(x) as f64 - want) / want).abs();
            assert!(rel < 3.0 * f32::EPSILON as f64, "x = {x}: {rel}");
            x += 0.0173;
        }
        assert!(exp_cephes(f32::NAN).is_nan());
        assert_eq!(fixed(exp_cephes(f32::NEG_INFINITY)), 0);
    }

    #[test]
    fn scale_ceil_matches_the_kernels_64_bit_form() {
        let kernel = |z: u64, p: u64| {
            let lo = (z & 0xffff_ffff) * p;
            (z >> 32) * p + (lo >> 32) + u64::from(lo & 0xffff_ffff != 0)
        };
        for z in [0u64, 1, 1 << 44, (1 << 63) - 1, 123_456_789_012_345] {
            for p in [0u64, 1, 1 << 31, (1 << 32) - 1, 3_000_000_000] {
                assert_eq!(scale_ceil(z, p), kernel(z, p), "{z} {p}");
            }
        }
    }
}
