//! Parity with candle-core 0.11.1, quantizing the weights with candle itself.
//!
//! - Q4_1: candle's CPU `QMatMul` has only the generic `BlockQ4_1::vec_dot_unopt` for Q4_1 (no
//!   SIMD kernel, no repacking), whatever `m`, so ours must match it BITWISE. candle's dot
//!   debug-asserts an even block count, so `k = 32` is not compared here.
//! - Q8_0: bitwise against `BlockQ8_0::vec_dot_unopt` (with candle's own activation quantizer),
//!   and within 1e-5 relative to the magnitude of the terms against candle's `QMatMul`, whose
//!   x86 path is an AVX/FMA kernel with a different float order. When `k % 256 == 0` and
//!   `n % 16 == 0` on AVX-512 VNNI candle instead repacks and quantizes activations to Q8_K,
//!   which is a different approximation altogether, so those shapes are avoided here.

use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use ponder_kernels::{KernelPath, QuantFormat, QuantMatrix};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::common::{activations, assert_bitwise, rng, run};

/// An `n x k` f32 weight with a per-row scale, and its candle quantization.
fn candle_weight(
    rng: &mut ChaCha8Rng,
    dtype: GgmlDType,
    n: usize,
    k: usize,
) -> (Vec<f32>, QTensor) {
    let w: Vec<f32> = (0..n * k)
        .map(|i| rng.random_range(-1.0f32..1.0) * (1 + i / k % 5) as f32 * 0.02)
        .collect();
    let qt = Tensor::from_vec(w.clone(), (n, k), &Device::Cpu)
        .and_then(|t| QTensor::quantize(&t, dtype));
    match qt {
        Ok(qt) => (w, qt),
        Err(e) => panic!("candle quantize: {e}"),
    }
}

/// Our matrix from candle's bytes (checking that the layout round-trips them) and candle's
/// `QMatMul` over the same `QTensor`.
fn both(qt: QTensor, format: QuantFormat) -> (QuantMatrix, QMatMul) {
    let (n, k) = match qt.shape().dims2() {
        Ok(dims) => dims,
        Err(e) => panic!("{e}"),
    };
    let bytes = match qt.data() {
        Ok(data) => data.into_owned(),
        Err(e) => panic!("{e}"),
    };
    let ours = match QuantMatrix::from_ggml_bytes(format, n, k, bytes.clone()) {
        Ok(w) => w,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(ours.to_ggml_bytes(), bytes, "layout round trip");
    match QMatMul::from_qtensor(qt) {
        Ok(mm) => (ours, mm),
        Err(e) => panic!("{e}"),
    }
}

/// candle's `QMatMul::forward` on `m x k` activations, flattened.
fn forward(mm: &QMatMul, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    let y = Tensor::from_vec(x.to_vec(), (m, k), &Device::Cpu)
        .and_then(|x| mm.forward(&x))
        .and_then(|y| y.flatten_all()?.to_vec1::<f32>());
    match y {
        Ok(y) => y,
        Err(e) => panic!("candle forward: {e}"),
    }
}

#[test]
fn q4_1_matches_candle_qmatmul_bitwise() {
    let mut rng = rng(30);
    for (n, k) in [(1536, 576), (576, 1536), (192, 576), (33, 64)] {
        let (_, qt) = candle_weight(&mut rng, GgmlDType::Q4_1, n, k);
        let (ours, mm) = both(qt, QuantFormat::Q4_1);
        for m in [1, 7, 16] {
            let x = activations(&mut rng, m, k);
            let theirs = forward(&mm, &x, m, k);
            for path in KernelPath::ALL.into_iter().filter(|p| p.is_available()) {
                assert_bitwise(
                    &run(&ours, path, &x, m),
                    &theirs,
                    &format!("{path:?} n={n} k={k} m={m}"),
                );
            }
        }
    }
}

/// `BlockQ8_0::vec_dot_unopt` of every (row, column), with candle quantizing both sides.
fn candle_q8_0_unopt(w: &[f32], x: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let quantize = |v: &[f32]| {
        let mut blocks = vec![BlockQ8_0::zeros(); k / 32];
        BlockQ8_0::from_float(v, &mut blocks);
        blocks
    };
    let wq: Vec<_> = w.chunks_exact(k).map(quantize).collect();
    let mut out = Vec::with_capacity(m * n);
    for xr in x.chunks_exact(k) {
        let xq = quantize(xr);
        out.extend(wq.iter().map(|wr| BlockQ8_0::vec_dot_unopt(k, wr, &xq)));
    }
    out
}

#[test]
fn q8_0_matches_candle_unopt_bitwise_and_qmatmul_within_1e5() {
    let mut rng = rng(31);
    // The lm_head shape, and shapes candle runs on its AVX (not repacked) path.
    for (n, k, ms) in [
        (49152, 576, &[1][..]),
        (50, 1536, &[1, 7]),
        (300, 576, &[1, 7, 16]),
    ] {
        let (w, qt) = candle_weight(&mut rng, GgmlDType::Q8_0, n, k);
        let (ours, mm) = both(qt, QuantFormat::Q8_0);
        for &m in ms {
            let x = activations(&mut rng, m, k);
            let theirs = forward(&mm, &x, m, k);
            let got = run(&ours, KernelPath::best(), &x, m);
            if m <= 7 || n < 1000 {
                assert_bitwise(
                    &got,
                    &candle_q8_0_unopt(&w, &x, n, k, m),
                    &format!("unopt n={n} k={k} m={m}"),
                );
            }
            for r in 0..m {
                let xr = &x[r * k..(r + 1) * k];
                for c in 0..n {
                    let scale: f32 = w[c * k..(c + 1) * k]
                        .iter()
                        .zip(xr)
                        .map(|(a, b)| (a * b).abs())
                        .sum();
                    let (a, b) = (got[r * n + c], theirs[r * n + c]);
                    assert!(
                        (a - b).abs() <= 1e-5 * scale,
                        "n={n} k={k} m={m} r={r} c={c}: {a} vs {b} (scale {scale})"
                    );
                }
            }
        }
    }
}
