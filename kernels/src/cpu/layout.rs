//! The column-tiled weight layout the kernels stream: GGML blocks of 16 consecutive weight rows
//! (output columns) interleaved so that one SIMD lane holds one column, and its inverse.
//!
//! A *tile* is 16 weight rows; a *tile block* is block `b` (32 elements) of all 16 rows. Tiles
//! are stored one after another, each as its `nb` tile blocks in k order, so one pass over a
//! tile reads every weight byte exactly once. Inside a tile block (little-endian throughout):
//!
//! - Q4_1 (320 bytes = 16 x 20): `d[16]` f16, `m[16]` f16, then `qs[g][col][i]` for
//!   `g in 0..4, i in 0..4`, which is GGML byte `qs[4g + i]` of that column: its low nibble is
//!   element `4g + i`, its high nibble element `16 + 4g + i`.
//! - Q8_0 (544 bytes = 16 x 34): `d[16]` f16, then `qs[g][col][i]` for `g in 0..8, i in 0..4`,
//!   holding element `4g + i` as `(q as u8) ^ 0x80`, i.e. `q + 128` as an unsigned byte (what
//!   the u8 x i8 dot instructions want; the kernels subtract `128 * sum(activation)`).
//!
//! Invariants: the layout is a lossless permutation of the GGML bytes (`to_ggml` inverts
//! `from_ggml`; tested), and the pad columns of a last partial tile are zero-weight blocks whose
//! results are computed and discarded. This mirrors the 16-row tiles of candle's
//! `repack_x86.rs` and llama.cpp's repacked CPU kernels, but keeps GGML's block scales as f16.

use super::quant::QK;
use super::QuantFormat;

/// Output columns (weight rows) per tile: one 512-bit vector of f32 lanes.
pub(crate) const TILE: usize = 16;
/// Bytes of one Q4_1 block in GGML: f16 d, f16 m, 16 bytes of nibbles.
pub(crate) const GGML_Q4_1: usize = 20;
/// Bytes of one Q8_0 block in GGML: f16 d, 32 i8.
pub(crate) const GGML_Q8_0: usize = 34;
/// Bytes of one Q4_1 tile block.
pub(crate) const TB_Q4_1: usize = TILE * GGML_Q4_1;
/// Bytes of one Q8_0 tile block.
pub(crate) const TB_Q8_0: usize = TILE * GGML_Q8_0;
/// Offset of the `m[16]` array in a Q4_1 tile block.
pub(crate) const Q4_1_M: usize = 2 * TILE;
/// Offset of the quants in a Q4_1 tile block.
pub(crate) const Q4_1_QS: usize = 4 * TILE;
/// Offset of the quants in a Q8_0 tile block.
pub(crate) const Q8_0_QS: usize = 2 * TILE;

impl QuantFormat {
    /// Bytes of one GGML block of this format.
    pub(crate) fn ggml_block_bytes(self) -> usize {
        match self {
            QuantFormat::Q4_1 => GGML_Q4_1,
            QuantFormat::Q8_0 => GGML_Q8_0,
        }
    }

    /// Bytes of one tile block of this format.
    pub(crate) fn tile_block_bytes(self) -> usize {
        self.ggml_block_bytes() * TILE
    }
}

/// Where GGML byte `byte` of one column's block lands in a tile block, for column `j`.
/// (The f16 scale bytes are handled separately.)
#[inline]
fn qs_offset(format: QuantFormat, j: usize, qs_byte: usize) -> usize {
    let (base, g, i) = (
        match format {
            QuantFormat::Q4_1 => Q4_1_QS,
            QuantFormat::Q8_0 => Q8_0_QS,
        },
        qs_byte / 4,
        qs_byte % 4,
    );
    base + g * TILE * 4 + j * 4 + i
}

/// Rearranges GGML block bytes of an `n x k` matrix (already length-checked) into tiles.
pub(crate) fn from_ggml(format: QuantFormat, n: usize, k: usize, ggml: &[u8]) -> Vec<u8> {
    let nb = k / QK;
    let gb = format.ggml_block_bytes();
    let tb = format.tile_block_bytes();
    let tiles = n.div_ceil(TILE);
    let mut out = vec![0u8; tiles * nb * tb];
    if format == QuantFormat::Q8_0 {
        // Pad columns hold q = 0, stored as 0x80.
        for blk in out.chunks_exact_mut(tb) {
            blk[Q8_0_QS..].fill(0x80);
        }
    }
    for c in 0..n {
        let (t, j) = (c / TILE, c % TILE);
        for b in 0..nb {
            let src = &ggml[(c * nb + b) * gb..][..gb];
            let dst = &mut out[(t * nb + b) * tb..][..tb];
            dst[2 * j..2 * j + 2].copy_from_slice(&src[0..2]);
            match format {
                QuantFormat::Q4_1 => {
                    dst[Q4_1_M + 2 * j..Q4_1_M + 2 * j + 2].copy_from_slice(&src[2..4]);
                    for (q, &byte) in src[4..].iter().enumerate() {
                        dst[qs_offset(format, j, q)] = byte;
                    }
                }
                QuantFormat::Q8_0 => {
                    for (q, &byte) in src[2..].iter().enumerate() {
                        dst[qs_offset(format, j, q)] = byte ^ 0x80;
                    }
                }
            }
        }
    }
    out
}

/// Inverse of [`from_ggml`]: the GGML block bytes of the `n` real columns.
pub(crate) fn to_ggml(format: QuantFormat, n: usize, k: usize, tiles: &[u8]) -> Vec<u8> {
    let nb = k / QK;
    let gb = format.ggml_block_bytes();
    let tb = format.tile_block_bytes();
    let mut out = vec![0u8; n * nb * gb];
    for c in 0..n {
        let (t, j) = (c / TILE, c % TILE);
        for b in 0..nb {
            let src = &tiles[(t * nb + b) * tb..][..tb];
            let dst = &mut out[(c * nb + b) * gb..][..gb];
            dst[0..2].copy_from_slice(&src[2 * j..2 * j + 2]);
            match format {
                QuantFormat::Q4_1 => {
                    dst[2..4].copy_from_slice(&src[Q4_1_M + 2 * j..Q4_1_M + 2 * j + 2]);
                    for (q, byte) in dst[4..].iter_mut().enumerate() {
                        *byte = src[qs_offset(format, j, q)];
                    }
                }
                QuantFormat::Q8_0 => {
                    for (q, byte) in dst[2..].iter_mut().enumerate() {
                        *byte = src[qs_offset(format, j, q)] ^ 0x80;
                    }
                }
            }
        }
    }
    out
}

/// Reads the little-endian f16 at `bytes[at..at + 2]` as f32 (exact).
#[inline]
pub(crate) fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// The 32 weights of column `j` in a Q4_1 tile block, in element order (0..=15 each).
pub(crate) fn q4_1_weights(blk: &[u8], j: usize) -> [i32; QK] {
    let mut w = [0i32; QK];
    for q in 0..QK / 2 {
        let byte = blk[qs_offset(QuantFormat::Q4_1, j, q)];
        w[q] = (byte & 0x0F) as i32;
        w[q + QK / 2] = (byte >> 4) as i32;
    }
    w
}

/// The 32 weights of column `j` in a Q8_0 tile block, in element order.
pub(crate) fn q8_0_weights(blk: &[u8], j: usize) -> [i32; QK] {
    let mut w = [0i32; QK];
    for (q, wq) in w.iter_mut().enumerate() {
        *wq = (blk[qs_offset(QuantFormat::Q8_0, j, q)] ^ 0x80) as i8 as i32;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn layout_round_trips_for_both_formats_and_partial_tiles() {
        for format in [QuantFormat::Q4_1, QuantFormat::Q8_0] {
            for (n, k) in [(1, 32), (17, 64), (33, 96), (48, 32)] {
                let ggml = bytes(n * (k / QK) * format.ggml_block_bytes(), n as u32);
                let tiles = from_ggml(format, n, k, &ggml);
                assert_eq!(
                    tiles.len(),
                    n.div_ceil(TILE) * (k / QK) * format.tile_block_bytes()
                );
                assert_eq!(
                    to_ggml(format, n, k, &tiles),
                    ggml,
                    "{format:?} n={n} k={k}"
                );
            }
        }
    }

    #[test]
    fn q4_1_nibbles_follow_ggml_element_order() {
        // Column 0, block 0: qs[j] = j | (15 - j) << 4  =>  w[j] = j, w[16 + j] = 15 - j.
        let mut ggml = vec![0u8; GGML_Q4_1];
        for j in 0..16 {
            ggml[4 + j] = j as u8 | ((15 - j as u8) << 4);
        }
        let tiles = from_ggml(QuantFormat::Q4_1, 1, 32, &ggml);
        let w = q4_1_weights(&tiles, 0);
        for j in 0..16 {
            assert_eq!((w[j], w[16 + j]), (j as i32, 15 - j as i32));
        }
    }
}
