//! Activation quantization: f32 rows to the Q8_1 / Q8_0 blocks that candle-core 0.11.1 dots
//! against Q4_1 / Q8_0 weights, stored struct-of-arrays for the SIMD kernels.
//!
//! Invariants:
//! - Bitwise mirrors of `BlockQ8_1::from_float` and `BlockQ8_0::from_float` (candle-core 0.11.1
//!   `quantized/k_quants.rs`, itself llama.cpp's `quantize_row_q8_1` / `quantize_row_q8_0`):
//!   same f32 operations in the same order, same saturating `as i8` casts, the same `half`
//!   f16 rounding, including Q8_1's `s = f16(sum) * d` computed as an f16 product.
//! - Each row is quantized on its own, so a row's blocks never depend on the other rows (the
//!   first half of batch invariance).
//! - Scales are kept as the f32 value of the stored f16 (`f16::to_f32` is exact), which is all
//!   `vec_dot_unopt` ever reads of them.

use half::f16;
use rayon::prelude::*;

use super::groups::{Entry, Fill, RowGroups};
#[cfg(target_arch = "x86_64")]
use super::{quant_avx512, x86};
use crate::work_sharing::run_pair;

/// Elements per quantization block (Q4_1, Q8_0 and Q8_1 alike).
pub(crate) const QK: usize = 32;

/// Which activation block type to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActFormat {
    /// Q8_1: `d`, `s = f16(sum(q)) * d`, 32 i8 (the vec-dot type of Q4_1).
    Q8_1,
    /// Q8_0: `d`, 32 i8 (the vec-dot type of Q8_0).
    Q8_0,
}

/// How to compute a block's `amax` and quants: all choices are bitwise identical.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Quantizer {
    /// Plain Rust: the reference.
    Scalar,
    /// AVX2 (`x86::block_amax` / `x86::block_quants`).
    #[cfg(target_arch = "x86_64")]
    Avx2(x86::Avx2),
    /// AVX-512 (`quant_avx512`), 16 blocks per call.
    #[cfg(target_arch = "x86_64")]
    Avx512(x86::Avx512Vnni),
}

impl Quantizer {
    fn amax(self, xs: &[f32; QK]) -> f32 {
        match self {
            Quantizer::Scalar => {
                let mut amax = 0f32;
                for &x in xs {
                    amax = amax.max(x.abs());
                }
                amax
            }
            #[cfg(target_arch = "x86_64")]
            Quantizer::Avx2(t) => x86::block_amax(t, xs),
            #[cfg(target_arch = "x86_64")]
            Quantizer::Avx512(t) => x86::block_amax(t.avx2(), xs),
        }
    }

    /// `qs[j] = round(xs[j] * id) as i8`; returns `sum(qs)`.
    fn quants(self, xs: &[f32; QK], id: f32, qs: &mut [i8; QK]) -> i32 {
        match self {
            Quantizer::Scalar => {
                let mut sum = 0i32;
                for (q, &x) in qs.iter_mut().zip(xs) {
                    *q = f32::round(x * id) as i8;
                    sum += *q as i32;
                }
                sum
            }
            #[cfg(target_arch = "x86_64")]
            Quantizer::Avx2(t) => x86::block_quants(t, xs, id, qs),
            #[cfg(target_arch = "x86_64")]
            Quantizer::Avx512(t) => x86::block_quants(t.avx2(), xs, id, qs),
        }
    }

    /// Quantizes `xs[i]` into `out[i]`, each block as [`quantize_block`] does.
    fn blocks(self, format: ActFormat, xs: &[[f32; QK]], out: &mut [ActBlock]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Quantizer::Avx512(t) => quant_avx512::quantize_blocks(t, format, xs, out),
            _ => {
                for (xs, out) in xs.iter().zip(out) {
                    quantize_block(format, self, xs, out);
                }
            }
        }
    }
}

/// One quantized activation block, with the scalars the kernels read next to its quants.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ActBlock {
    /// The 32 quants.
    pub(crate) qs: [i8; QK],
    /// `f16::to_f32(block.d)`.
    pub(crate) d: f32,
    /// Q8_1: `f16::to_f32(block.s)`; Q8_0: 0 (unused).
    pub(crate) s: f32,
    /// `sum(qs)`, for the kernels that offset the weights by +128.
    pub(crate) qsum: i32,
}

/// `m` quantized activation rows of `k` elements. Rows `first_row..m` are plain blocks (row
/// `r`, block `b` is `blocks[(r - first_row) * nb + b]`); the rows before `first_row`, if
/// any, are only in the AMX kernels' [`RowGroups`].
#[derive(Debug, Clone)]
pub(crate) struct QuantizedRows {
    /// Blocks per row (`k / QK`).
    pub(crate) nb: usize,
    first_row: usize,
    blocks: Vec<ActBlock>,
    groups: Option<RowGroups>,
}

/// Activations (floats) from which quantizing splits the work over rayon's threads: a
/// prefill chunk's, not a decode step's (where waking a thread costs more).
const PAR_MIN_FLOATS: usize = 1 << 16;

/// Activations (floats) from which quantizing is split in two halves, one on a helper
/// (`run_pair`, the forward pass's hot helper): a batched decode step's (with the regrouping for
/// the AMX kernel, ~2 ms of serial work per 16-row step of the default model), not a single
/// stream's.
const HALVES_MIN_FLOATS: usize = 1 << 13;

/// How one quantization call shares its work (any split gives the same bits: blocks are
/// quantized independently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// On the calling thread.
    Alone,
    /// Two halves, on the calling thread and one helper.
    Halves,
    /// Over rayon's pool.
    Pool,
}

impl Split {
    fn for_floats(floats: usize) -> Self {
        if floats >= PAR_MIN_FLOATS {
            Split::Pool
        } else if floats >= HALVES_MIN_FLOATS {
            Split::Halves
        } else {
            Split::Alone
        }
    }
}

impl QuantizedRows {
    /// Quantizes `m` rows of `x` (row-major, `k` a multiple of `QK`, `x.len() == m * k`) into
    /// plain blocks.
    #[cfg(test)]
    pub(crate) fn quantize(
        format: ActFormat,
        quantizer: Quantizer,
        x: &[f32],
        m: usize,
        k: usize,
    ) -> Self {
        Self::quantize_grouped(format, quantizer, x, m, k, 0)
    }

    /// Quantizes `m` rows of `x` (row-major, `k` a multiple of `QK`, `x.len() == m * k`): the
    /// first `grouped` rows (`<= m`) straight into [`RowGroups`], the layout the AMX kernels
    /// read, and the rest into plain blocks.
    pub(crate) fn quantize_grouped(
        format: ActFormat,
        quantizer: Quantizer,
        x: &[f32],
        m: usize,
        k: usize,
        grouped: usize,
    ) -> Self {
        let (nb, grouped) = (k / QK, grouped.min(m));
        let (in_groups, rest) = x.split_at((grouped * k).min(x.len()));
        let (rest, _) = rest.as_chunks::<QK>();
        let zero = ActBlock {
            qs: [0; QK],
            d: 0.0,
            s: 0.0,
            qsum: 0,
        };
        let mut blocks = vec![zero; rest.len()];
        let mut groups = (grouped > 0).then(|| RowGroups::zeroed(grouped, nb));
        let quantize = |xs: &[[f32; QK]], out: &mut [ActBlock]| quantizer.blocks(format, xs, out);
        let fill = Fill {
            x: in_groups,
            rows: grouped,
            nb,
            quantize,
        };
        let entries: &mut [Entry] = match groups.as_mut() {
            Some(groups) => groups.entries_mut(),
            None => &mut [],
        };
        match Split::for_floats(x.len()) {
            Split::Alone => {
                fill.run(0, entries);
                quantize(rest, &mut blocks);
            }
            Split::Halves => {
                let (e_half, b_half) = (entries.len().div_ceil(2), blocks.len().div_ceil(2));
                let (e0, e1) = entries.split_at_mut(e_half);
                let (b0, b1) = blocks.split_at_mut(b_half);
                let (x0, x1) = rest.split_at(b_half);
                let halves = [(0, e0, x0, b0), (e_half, e1, x1, b1)];
                run_pair(halves, &|(first, entries, xs, out)| {
                    fill.run(*first, entries);
                    quantize(xs, out);
                });
            }
            Split::Pool => {
                let tasks = 4 * rayon::current_num_threads().max(1);
                let per = entries.len().div_ceil(tasks).max(1);
                entries
                    .par_chunks_mut(per)
                    .enumerate()
                    .for_each(|(c, entries)| fill.run(c * per, entries));
                let per = rest.len().div_ceil(tasks).max(1);
                blocks
                    .par_chunks_mut(per)
                    .zip(rest.par_chunks(per))
                    .for_each(|(out, xs)| quantize(xs, out));
            }
        }
        Self {
            nb,
            first_row: grouped,
            blocks,
            groups,
        }
    }

    /// Whether quantizing `floats` activations shares the work with other threads (so a
    /// matmul must quantize before its own tasks occupy them).
    pub(crate) fn splits(floats: usize) -> bool {
        Split::for_floats(floats) != Split::Alone
    }

    /// The rows in AMX groups, if [`Self::quantize_grouped`] put any there.
    pub(crate) fn row_groups(&self) -> Option<&RowGroups> {
        self.groups.as_ref()
    }

    /// Row `r` (at least the first row not in groups), block `b`.
    #[inline]
    pub(crate) fn block(&self, r: usize, b: usize) -> &ActBlock {
        &self.blocks[(r - self.first_row) * self.nb + b]
    }
}

/// One block as `BlockQ8_1::from_float` / `BlockQ8_0::from_float` (the non-NEON branch) does
/// it. The two candle loops differ only in the order they visit elements, which nothing here
/// depends on.
fn quantize_block(format: ActFormat, quantizer: Quantizer, xs: &[f32; QK], out: &mut ActBlock) {
    let amax = quantizer.amax(xs);
    let d = amax / ((1 << 7) - 1) as f32;
    let id = if d != 0f32 { 1. / d } else { 0. };
    let d16 = f16::from_f32(d);
    let sum = quantizer.quants(xs, id, &mut out.qs);
    out.d = d16.to_f32();
    out.qsum = sum;
    out.s = match format {
        // candle multiplies in f16 (`f16 * f16`, which `half` rounds through f32 back to f16).
        ActFormat::Q8_1 => (f16::from_f32(sum as f32) * d16).to_f32(),
        ActFormat::Q8_0 => 0.0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs where rounding, saturation and special values decide the result.
    const EDGES: [f32; 30] = [
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999997,
        -0.49999997,
        126.5,
        -127.5,
        127.49999,
        -128.5,
        128.0,
        -129.0,
        1e10,
        -1e10,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        1e-45,
        -1e-40,
        8388607.5,
        -8388607.5,
        16777215.0,
        3.4e38,
        -0.75,
        0.75,
        42.0,
    ];

    #[test]
    fn q8_1_sum_matches_quants_and_scale_is_f16_product() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 - 20.5) * 0.37).collect();
        let rows = QuantizedRows::quantize(ActFormat::Q8_1, Quantizer::Scalar, &x, 1, 64);
        for b in 0..2 {
            let blk = rows.block(0, b);
            let sum: i32 = blk.qs.iter().map(|&q| q as i32).sum();
            assert_eq!(sum, blk.qsum);
            let d16 = f16::from_f32(blk.d);
            let s = (f16::from_f32(sum as f32) * d16).to_f32();
            assert_eq!(s.to_bits(), blk.s.to_bits());
        }
        // The largest magnitude maps to +-127.
        assert_eq!(
            rows.block(0, 1).qs.iter().map(|q| q.unsigned_abs()).max(),
            Some(127)
        );
    }

    /// The AVX2 quantizer equals the scalar one bitwise on halfway cases, saturation, NaN,
    /// infinities, signed zeros and subnormals, and on random blocks of many scales.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_quantizer_matches_scalar_on_edge_cases() {
        let Some(avx2) = x86::Avx2::detect() else {
            eprintln!("no AVX2: skipped");
            return;
        };
        let simd = Quantizer::Avx2(avx2);
        let edges = EDGES;
        let mut blocks: Vec<[f32; QK]> = Vec::new();
        let mut block = [0f32; QK];
        for (i, e) in edges.iter().enumerate() {
            block[i % QK] = *e;
        }
        blocks.push(block);
        let mut state = 12345u32;
        for scale in [1e-42f32, 1e-30, 1e-3, 1.0, 37.0, 1e20] {
            for _ in 0..50 {
                let mut b = [0f32; QK];
                for x in &mut b {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    *x = ((state >> 8) as f32 / (1 << 24) as f32 - 0.5) * scale;
                }
                blocks.push(b);
            }
        }
        for (i, xs) in blocks.iter().enumerate() {
            assert_eq!(
                simd.amax(xs).to_bits(),
                Quantizer::Scalar.amax(xs).to_bits(),
                "amax {i}"
            );
            for id in [
                1.0,
                0.0,
                0.37,
                127.0 / 3.0,
                1e30,
                f32::INFINITY,
                Quantizer::Scalar.amax(xs),
            ] {
                let (mut a, mut b) = ([0i8; QK], [0i8; QK]);
                let sums = (
                    simd.quants(xs, id, &mut a),
                    Quantizer::Scalar.quants(xs, id, &mut b),
                );
                assert_eq!((a, sums.0), (b, sums.1), "block {i} id {id}");
            }
        }
    }

    /// The AVX-512 quantizer (16 blocks per batch) equals the scalar one bitwise: every field
    /// of every block, for both formats, on rows holding the edge cases (halfway values,
    /// saturation, NaN, infinities, signed zeros, subnormals) and random blocks of scales from
    /// subnormal to huge, in row counts that leave partial batches.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_quantizer_matches_scalar_bitwise() {
        let Some(t) = x86::Avx512Vnni::detect() else {
            eprintln!("no AVX-512: skipped");
            return;
        };
        let edges = EDGES;
        let mut x: Vec<f32> = Vec::new();
        // Blocks whose largest value is each edge in turn, so `d` and `id` take edge values too.
        for (i, &e) in edges.iter().enumerate() {
            x.extend((0..QK).map(|j| {
                if j == i % QK {
                    e
                } else {
                    edges[(i + j) % edges.len()] * 1e-3
                }
            }));
        }
        // Blocks with `d` = 1, 1/2 and 2 exactly (max 127 d), so `x * id` lands on the halfway
        // and just-below-halfway values the rounding must get right.
        for d in [1.0f32, 0.5, 2.0] {
            // The edges inside [-127, 127], so the block's maximum stays 127 d.
            let halfway: Vec<f32> = EDGES.into_iter().filter(|e| e.abs() <= 127.0).collect();
            x.push(127.0 * d);
            x.extend((1..QK).map(|j| halfway[j % halfway.len()] * d));
        }
        // All-positive blocks: sums above 2048, odd and even, which f16 cannot all hold.
        for offset in 0..6 {
            x.extend((0..QK).map(|j| 90.0 + (j * 7 + offset) as f32 % 37.0));
        }
        x.extend([f32::NAN; QK]);
        x.extend([0.0; QK]);
        let mut state = 99u32;
        for scale in [1e-42f32, 1e-30, 1e-3, 1.0, 37.0, 1e20, 3e38] {
            for _ in 0..37 * QK {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                x.push(((state >> 8) as f32 / (1 << 24) as f32 - 0.5) * scale);
            }
        }
        let k = 3 * QK;
        x.truncate(x.len() / k * k);
        for format in [ActFormat::Q8_1, ActFormat::Q8_0] {
            for m in [1, 5, x.len() / k] {
                let x = &x[..m * k];
                let want = QuantizedRows::quantize(format, Quantizer::Scalar, x, m, k);
                let got = QuantizedRows::quantize(format, Quantizer::Avx512(t), x, m, k);
                for r in 0..m {
                    for b in 0..k / QK {
                        let (w, g) = (want.block(r, b), got.block(r, b));
                        let at = format!("{format:?} m {m} row {r} block {b}");
                        assert_eq!(w.qs, g.qs, "{at}");
                        assert_eq!(w.qsum, g.qsum, "{at}");
                        assert_eq!(w.d.to_bits(), g.d.to_bits(), "{at}");
                        assert_eq!(w.s.to_bits(), g.s.to_bits(), "{at}");
                    }
                }
            }
        }
    }

    #[test]
    fn zero_block_has_zero_scale_and_quants() {
        let rows = QuantizedRows::quantize(ActFormat::Q8_0, Quantizer::Scalar, &[0.0; 32], 1, 32);
        assert_eq!(rows.block(0, 0).d, 0.0);
        assert!(rows.block(0, 0).qs.iter().all(|&q| q == 0));
    }
}
