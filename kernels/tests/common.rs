//! Seeded random fixtures shared by the test modules.

use half::f16;
use ponder_kernels::{QuantFormat, QuantMatrix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `m x k` activations: uniform values of a per-row scale, plus the awkward blocks the
/// quantizer must handle exactly: an all-zero block, an outlier, and (row 2) subnormal values,
/// whose f32 inverse scale overflows and saturates quants to -128 / 127.
pub(crate) fn activations(rng: &mut ChaCha8Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(m * k);
    for r in 0..m {
        let scale = match r % 4 {
            0 => 1.0,
            1 => 0.01,
            2 => 1e-39,
            _ => 30.0,
        };
        x.extend((0..k).map(|_| rng.random_range(-1.0f32..1.0) * scale));
        let row = &mut x[r * k..];
        if k >= 64 && r % 3 == 0 {
            row[32..64].fill(0.0);
        }
        row[(r * 7) % k] *= 50.0;
    }
    x
}

/// Random GGML bytes for an `n x k` matrix: every quant pattern (for Q8_0 including -128),
/// finite f16 scales of mixed magnitude.
pub(crate) fn ggml_bytes(rng: &mut ChaCha8Rng, format: QuantFormat, n: usize, k: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n * (k / 32) {
        let d = rng.random_range(1e-4f32..0.05);
        out.extend(f16::from_f32(d).to_bits().to_le_bytes());
        let quants = match format {
            QuantFormat::Q4_1 => {
                let m = rng.random_range(-1.0f32..0.2);
                out.extend(f16::from_f32(m).to_bits().to_le_bytes());
                16
            }
            QuantFormat::Q8_0 => 32,
        };
        out.extend((0..quants).map(|_| rng.random::<u8>()));
    }
    out
}

pub(crate) fn random_matrix(
    rng: &mut ChaCha8Rng,
    format: QuantFormat,
    n: usize,
    k: usize,
) -> QuantMatrix {
    match QuantMatrix::from_ggml_bytes(format, n, k, ggml_bytes(rng, format, n, k)) {
        Ok(w) => w,
        Err(e) => panic!("valid random matrix rejected: {e}"),
    }
}

/// Asserts `a` and `b` are bitwise equal, reporting the first differing index.
#[track_caller]
pub(crate) fn assert_bitwise(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        panic!(
            "{what}: element {i} differs: {} vs {} ({:#x} vs {:#x})",
            a[i],
            b[i],
            a[i].to_bits(),
            b[i].to_bits()
        );
    }
}

/// `w.matmul_with(path, ...)` into a fresh buffer.
pub(crate) fn run(
    w: &QuantMatrix,
    path: ponder_kernels::KernelPath,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; m * w.rows()];
    if let Err(e) = w.matmul_with(path, x, m, &mut out) {
        panic!("matmul failed: {e}");
    }
    out
}
