//! Criterion bench: `QuantMatrix::matmul` against candle-core's `QMatMul::forward` on
//! SmolLM2-135M's shapes (Q4_1 projections and the Q8_0 lm_head) at m = 1 (decode) and m = 16
//! (a batch of 16 sequences), plus our scalar reference at m = 1 for scale.
//!
//! Run: `cargo bench -p ponder-kernels --bench qmatmul`. For one JSON summary of the same
//! comparison, see `examples/qmatmul_speed.rs`.

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ponder_kernels::{QuantFormat, QuantMatrix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// (name, format, n, k).
const SHAPES: [(&str, QuantFormat, usize, usize); 5] = [
    ("gate_up_1536x576", QuantFormat::Q4_1, 1536, 576),
    ("down_576x1536", QuantFormat::Q4_1, 576, 1536),
    ("q_o_576x576", QuantFormat::Q4_1, 576, 576),
    ("k_v_192x576", QuantFormat::Q4_1, 192, 576),
    ("lm_head_49152x576", QuantFormat::Q8_0, 49152, 576),
];

fn bench(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (name, format, n, k) in SHAPES {
        let w: Vec<f32> = (0..n * k).map(|_| rng.random_range(-0.1f32..0.1)).collect();
        let dtype = match format {
            QuantFormat::Q4_1 => GgmlDType::Q4_1,
            QuantFormat::Q8_0 => GgmlDType::Q8_0,
        };
        let Ok(qt) =
            Tensor::from_vec(w, (n, k), &Device::Cpu).and_then(|t| QTensor::quantize(&t, dtype))
        else {
            panic!("candle quantize failed for {name}");
        };
        let Ok(ours) = qt
            .data()
            .map(|d| d.into_owned())
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                QuantMatrix::from_ggml_bytes(format, n, k, bytes).map_err(|e| e.to_string())
            })
        else {
            panic!("QuantMatrix::from_ggml_bytes failed for {name}");
        };
        let Ok(theirs) = QMatMul::from_qtensor(qt) else {
            panic!("QMatMul failed for {name}")
        };

        let mut group = c.benchmark_group(name);
        group.sample_size(if n > 10_000 { 20 } else { 60 });
        for m in [1usize, 16] {
            group.throughput(Throughput::Elements((m * n * k) as u64));
            let x: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let Ok(xt) = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu) else {
                panic!("tensor")
            };
            let mut out = vec![0f32; m * n];
            group.bench_function(BenchmarkId::new("ours", m), |b| {
                b.iter(|| ours.matmul(&x, m, &mut out).is_ok())
            });
            group.bench_function(BenchmarkId::new("candle", m), |b| {
                b.iter(|| theirs.forward(&xt).is_ok())
            });
            if m == 1 {
                group.bench_function(BenchmarkId::new("ours_scalar", m), |b| {
                    b.iter(|| ours.matmul_scalar(&x, m, &mut out).is_ok())
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
