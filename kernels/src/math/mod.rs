//! Scalar math the kernels and the engine share, written so loops over slices vectorise: `exp`
//! (attention's softmax, the sampler's probabilities) and the reductions `sum` and `max` over
//! a slice (16 independent lanes, so a vocabulary-sized pass runs at vector speed instead of
//! one dependent add per element), and the feed-forward gate `silu_mul` with the `exp` it
//! needs (`glibc_expf`: glibc's bits at vector speed). Pure functions, no state. `x86.rs`
//! holds the AVX-512 form of `silu_mul`, bitwise the portable one.

#[cfg(target_arch = "x86_64")]
mod x86;

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

/// Adds 16 lanes as `sum` does at its end (`tree` with `+`): for callers that keep lanes of
/// their own and want `sum`'s bits.
#[inline]
pub fn tree_sum(lanes: [f32; LANES]) -> f32 {
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
/// Cephes `expf` in fused form: `x = n ln2 + r` with `n = round(x log2 e)` (ties to even),
/// `ln2` split in two for an exact `r` (two multiply-adds), a degree-5 polynomial for
/// `e^r` by Horner's rule in multiply-adds, and the product with `2^n` (exact: `2^n` is a normal
/// float, so the one rounding is the product's). Inputs are clamped to [-87, 88] (so `e^-inf`
/// gives about 1.6e-38, not 0; the kernels only call it on differences with a finite max). NaN
/// passes through. On AVX-512 the same steps are 15 vector instructions (`round` is
/// `vrndscaleps`, the product `vscalefps`); the attention kernel's `exp16` is this function lane
/// for lane. Multiply-adds fuse where the build targets FMA (`mul_add`).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    // `n = round(x log2 e)`, ties to even, by the 1.5 * 2^23 shifter (the add rounds to an
    // integer; what a vector `round` gives, and unlike a float-to-int cast it vectorises).
    let t = x * EXP_LOG2E + SHIFTER;
    let n = t - SHIFTER;
    let r = mul_add(n, -EXP_LN2_HI, x);
    let r = mul_add(n, -EXP_LN2_LO, r);
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = mul_add(p, r, c);
    }
    let y = mul_add(p, r * r, r) + 1.0;
    // t's bit pattern is SHIFTER's plus n, an integer in [-126, 127] after the clamp.
    let n_int = t.to_bits().wrapping_sub(SHIFTER.to_bits());
    y * f32::from_bits(n_int.wrapping_add(127) << 23)
}

/// 1.5 * 2^23: adding it to a float of magnitude below 2^22 rounds it to an integer.
const SHIFTER: f32 = 12_582_912.0;

/// `exp`'s constants: `log2 e`, `ln 2` split high/low, and the polynomial's coefficients
/// (Cephes `expf`), highest degree first.
pub(crate) const EXP_LOG2E: f32 = std::f32::consts::LOG2_E;
pub(crate) const EXP_LN2_HI: f32 = 0.693_359_4;
pub(crate) const EXP_LN2_LO: f32 = -2.121_944_4e-4;
pub(crate) const EXP_POLY: [f32; 6] = [
    1.987_569_2e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];

/// `a * b + c`, fused (one rounding) where the build targets FMA hardware, else two roundings.
///
/// Fixed at compile time, so within one build every caller gets the same bits (`f32::mul_add`
/// without hardware FMA would be a slow libm call).
#[inline(always)]
pub(crate) fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(any(target_feature = "fma", target_arch = "aarch64"))]
    {
        a.mul_add(b, c)
    }
    #[cfg(not(any(target_feature = "fma", target_arch = "aarch64")))]
    {
        a * b + c
    }
}

/// `2^(i/32)` as glibc's `__exp2f_data.tab` stores it: the bits of the double nearest
/// `2^(i/32)`, minus `i << 47` (added back with the exponent).
const EXP2F_TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `e^x` with the bits of glibc's `expf` (what std's `f32::exp` calls on Linux) for every
/// finite `|x| < 88`, written without a call so that a loop over a slice vectorises; other
/// inputs go to `f32::exp`.
///
/// glibc's algorithm (`sysdeps/ieee754/flt-32/e_expf.c`, unchanged since 2.28) in double
/// precision: `x·32/ln2 = k + r`, `2^(k/32)` from a 32-entry table, a cubic for `2^(r/32)`,
/// one rounding to f32 at the end. The variant glibc picks on CPUs with FMA rounds `r = z − kd`
/// once, as a fused multiply-add (with two roundings, 2 of the inputs below differ in the last
/// bit), so `r` is a `mul_add` here. Checked against glibc 2.36's `expf` on an FMA machine for
/// every f32 with `|x| < 88` (2.2 billion inputs, no difference); the tests check a sample.
/// On a CPU without FMA glibc takes its other variant, and where `f32::exp` is not glibc's at
/// all this is still `e^x` within glibc's 0.502 ulp.
///
/// Why it exists: a model's projections quantize their inputs to 8 bits, so a 1-ulp change in
/// an activation can move a logit by ~0.1 (see `silu_mul`); matching candle bit for bit is what
/// keeps the engine's parity with candle-transformers exact.
#[inline(always)]
fn glibc_expf_core(x: f32) -> f32 {
    let xd = x as f64;
    let kd = EXPF_INV_LN2_N * xd + EXPF_SHIFT;
    let ki = kd.to_bits();
    let kd = kd - EXPF_SHIFT;
    let r = EXPF_INV_LN2_N.mul_add(xd, -kd);
    let s = f64::from_bits(EXP2F_TAB[(ki % 32) as usize].wrapping_add(ki << 47));
    let z = EXPF_C0 * r + EXPF_C1;
    let y = EXPF_C2 * r + 1.0;
    let y = z * (r * r) + y;
    (y * s) as f32
}

/// `32 / ln 2` (0x1.71547652b82fep+5), glibc's `expf` constants below likewise.
const EXPF_INV_LN2_N: f64 = 46.166_241_308_446_83;
/// 0x1.8p52: adding it rounds to an integer held in the low mantissa bits.
const EXPF_SHIFT: f64 = 6_755_399_441_055_744.0;
/// The cubic for `2^(r/32)`: 0x1.c6af84b912394p-20, 0x1.ebfce50fac4f3p-13, 0x1.62e42ff0c52d6p-6.
const EXPF_C0: f64 = 1.693_835_925_092_021_2e-6;
const EXPF_C1: f64 = 2.345_980_978_950_900_4e-4;
const EXPF_C2: f64 = 2.166_084_939_661_313_4e-2;

/// `glibc_expf_core` for any input: `e^x` with the bits of std's `f32::exp` on glibc.
#[inline]
pub fn glibc_expf(x: f32) -> f32 {
    if x.abs() < 88.0 {
        glibc_expf_core(x)
    } else {
        x.exp()
    }
}

/// The SwiGLU gate in place: `gate[i] = silu(gate[i]) * up[i]` with `silu(g) = g / (1 + e^-g)`,
/// over `min(gate.len(), up.len())` elements. The same operations as candle's `silu` followed
/// by its `mul` (so the same bits where std's `exp` is glibc's, see [`glibc_expf`]), in one
/// pass and vectorised; candle's `silu` calls libm once per element.
///
/// Bitwise, not merely close, on purpose: flipping the last bit of every gate output of
/// SmolLM2 moved its first logits by 0.25, because each projection quantizes its input to
/// 8 bits and a value that crosses a rounding boundary moves a whole quantum.
///
/// On AVX-512 CPUs a hand-vectorised form runs (`x86.rs`, same bits); this loop is the
/// portable form, which the compiler vectorises with a gather for the table.
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = x86::Avx512::detect() {
        return x86::silu_mul(token, gate, up);
    }
    silu_mul_portable(gate, up);
}

/// [`silu_mul`]'s portable loop.
fn silu_mul_portable(gate: &mut [f32], up: &[f32]) {
    const CHUNK: usize = 64;
    let n = gate.len().min(up.len());
    let mut e = [0f32; CHUNK];
    for (g, u) in gate[..n].chunks_mut(CHUNK).zip(up[..n].chunks(CHUNK)) {
        let e = &mut e[..g.len()];
        for (e, &g) in e.iter_mut().zip(g.iter()) {
            *e = glibc_expf_core(-g);
        }
        // Rare: |g| >= 88 or NaN, outside the core's range.
        if !g.iter().all(|g| g.abs() < 88.0) {
            for (e, &g) in e.iter_mut().zip(g.iter()) {
                *e = glibc_expf(-g);
            }
        }
        for ((g, &u), &e) in g.iter_mut().zip(u).zip(e.iter()) {
            *g = (*g / (1.0 + e)) * u;
        }
    }
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

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_expf_has_the_bits_of_std_exp() {
        // Every 997th bit pattern (4.3 million inputs: both signs, subnormals, the edges at
        // +-88, infinities and NaNs), plus the two inputs where a plain `z - kd` would differ.
        let mut bits = 0u32;
        let mut checked = 0;
        loop {
            let x = f32::from_bits(bits);
            let (got, want) = (glibc_expf(x), x.exp());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "exp({x:e}): {got:e} vs {want:e}"
            );
            checked += 1;
            match bits.checked_add(997) {
                Some(b) => bits = b,
                None => break,
            }
        }
        assert!(checked > 4_000_000);
        for x in [
            32.564_632f32,
            -63.099_46,
            88.0,
            -88.0,
            87.999_99,
            -87.999_99,
        ] {
            // `black_box`: LLVM folds `exp` of a constant with its own (differently rounded) code.
            let want = std::hint::black_box(x).exp();
            assert_eq!(glibc_expf(x).to_bits(), want.to_bits(), "exp({x:e})");
        }
    }

    /// The exhaustive form of the test above (all 2^32 inputs; ~12 s in a release build):
    /// `cargo test -p ponder-kernels --release --lib every_input -- --ignored`.
    #[test]
    #[ignore]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_expf_has_the_bits_of_std_exp_for_every_input() {
        let differ = (0..=u32::MAX)
            .map(f32::from_bits)
            .filter(|x| {
                let (got, want) = (glibc_expf(*x), x.exp());
                got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan())
            })
            .count();
        assert_eq!(differ, 0);
    }

    /// The AVX-512 gate against the portable loop on a sweep of every 251st f32 bit pattern
    /// (both signs, every exponent, NaN and infinities included) and ragged tails.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx512_gate_has_the_portable_bits() {
        let Some(token) = x86::Avx512::detect() else {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        };
        let gate: Vec<f32> = (0..=u32::MAX).step_by(251).map(f32::from_bits).collect();
        let up: Vec<f32> = (0..gate.len())
            .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        for len in [gate.len(), 15, 16, 17, 1000] {
            let (mut want, mut got) = (gate[..len].to_vec(), gate[..len].to_vec());
            silu_mul_portable(&mut want, &up[..len]);
            x86::silu_mul(token, &mut got, &up[..len]);
            let differ = want
                .iter()
                .zip(&got)
                .filter(|(w, g)| w.to_bits() != g.to_bits() && !(w.is_nan() && g.is_nan()))
                .count();
            assert_eq!(differ, 0, "{differ} of {len} gates differ");
        }
    }

    /// The exhaustive form of the test above (every f32 gate; ~25 s in a release build;
    /// computing `r` with two roundings instead of the fused one changes a single gate of the
    /// 2^32, which only this form catches):
    /// `cargo test -p ponder-kernels --release --lib every_gate -- --ignored`.
    #[test]
    #[ignore]
    #[cfg(target_arch = "x86_64")]
    fn the_avx512_gate_has_the_portable_bits_for_every_gate() {
        let Some(token) = x86::Avx512::detect() else {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        };
        let up = vec![1.0f32; 1 << 20];
        let mut differ = 0usize;
        for start in (0..=u32::MAX as u64).step_by(1 << 20) {
            let gate: Vec<f32> = (start..start + (1 << 20))
                .map(|b| f32::from_bits(b as u32))
                .collect();
            let (mut want, mut got) = (gate.clone(), gate);
            silu_mul_portable(&mut want, &up);
            x86::silu_mul(token, &mut got, &up);
            differ += want
                .iter()
                .zip(&got)
                .filter(|(w, g)| w.to_bits() != g.to_bits() && !(w.is_nan() && g.is_nan()))
                .count();
        }
        assert_eq!(differ, 0);
    }

    #[test]
    fn silu_mul_is_candles_silu_then_mul() {
        let gate: Vec<f32> = (0..4001)
            .map(|i| -100.0 + i as f32 * 0.05)
            .chain([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-40])
            .collect();
        let up: Vec<f32> = (0..gate.len())
            .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut got = gate.clone();
        silu_mul(&mut got, &up);
        for ((&g, &u), &y) in gate.iter().zip(&up).zip(&got) {
            let want = (g / (1.0 + glibc_expf(-g))) * u;
            assert!(
                y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                "g {g}, u {u}: {y} vs {want}"
            );
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            {
                let candle = (g / (1.0 + (-g).exp())) * u;
                assert!(
                    y.to_bits() == candle.to_bits() || (y.is_nan() && candle.is_nan()),
                    "g {g}: {y} vs candle {candle}"
                );
            }
        }
        // Only the shorter slice's length is written.
        let mut short = vec![2.0f32; 3];
        silu_mul(&mut short, &[1.0]);
        assert_eq!(short[1..], [2.0, 2.0]);
    }
}
