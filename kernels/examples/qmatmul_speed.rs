//! Times `QuantMatrix::matmul` against candle-core's `QMatMul::forward` on SmolLM2-135M's
//! matmul shapes, in one process, and prints one JSON object: per shape and batch size the
//! median microseconds of each and `speedup` = candle / ours, plus a per-token estimate for
//! decode (the 7 matrices of each of 30 layers, plus the Q8_0 lm_head). Where the best path is
//! AMX, `vnni_us` times the AVX-512 VNNI path on the same inputs (`amx_speedup` = vnni / ours).
//!
//! Run: `cargo run -p ponder-kernels --release --example qmatmul_speed`.

use std::time::{Duration, Instant};

use anyhow::Result;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use ponder_kernels::{KernelPath, QuantFormat, QuantMatrix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// (name, format, n, k, uses per token in SmolLM2-135M decode).
const SHAPES: [(&str, QuantFormat, usize, usize, usize); 5] = [
    ("gate_up", QuantFormat::Q4_1, 1536, 576, 60),
    ("down", QuantFormat::Q4_1, 576, 1536, 30),
    ("q_o", QuantFormat::Q4_1, 576, 576, 60),
    ("k_v", QuantFormat::Q4_1, 192, 576, 60),
    ("lm_head", QuantFormat::Q8_0, 49152, 576, 1),
];

/// Median wall time of `f` over repeated runs filling about `budget`.
fn median_us(budget: Duration, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 10 || (start.elapsed() < budget && times.len() < 5000) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let budget = Duration::from_millis(400);
    let mut rows = Vec::new();
    let mut per_token = [[0f64; 3]; 2]; // [m index][ours, candle, vnni]
    let vnni = (KernelPath::best() == KernelPath::Amx).then_some(KernelPath::Avx512Vnni);
    for (name, format, n, k, uses) in SHAPES {
        let w: Vec<f32> = (0..n * k).map(|_| rng.random_range(-0.1f32..0.1)).collect();
        let dtype = match format {
            QuantFormat::Q4_1 => GgmlDType::Q4_1,
            QuantFormat::Q8_0 => GgmlDType::Q8_0,
        };
        let qt = QTensor::quantize(&Tensor::from_vec(w, (n, k), &Device::Cpu)?, dtype)?;
        let ours = QuantMatrix::from_ggml_bytes(format, n, k, qt.data()?.into_owned())?;
        let theirs = QMatMul::from_qtensor(qt)?;
        for (mi, m) in [1usize, 16].into_iter().enumerate() {
            let x: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?;
            let mut out = vec![0f32; m * n];
            let ours_us = median_us(budget, || Ok(ours.matmul(&x, m, &mut out)?))?;
            let candle_us = median_us(budget, || Ok(theirs.forward(&xt).map(drop)?))?;
            per_token[mi][0] += ours_us * uses as f64;
            per_token[mi][1] += candle_us * uses as f64;
            let mut row = json!({
                "shape": name, "format": format!("{format:?}"), "n": n, "k": k, "m": m,
                "ours_us": round(ours_us), "candle_us": round(candle_us),
                "speedup": round(candle_us / ours_us),
            });
            if let Some(path) = vnni {
                let vnni_us = median_us(budget, || Ok(ours.matmul_with(path, &x, m, &mut out)?))?;
                per_token[mi][2] += vnni_us * uses as f64;
                row["vnni_us"] = json!(round(vnni_us));
                row["amx_speedup"] = json!(round(vnni_us / ours_us));
            }
            rows.push(row);
        }
    }
    let estimate = |mi: usize| -> Value {
        let mut step = json!({
            "ours_us": round(per_token[mi][0]), "candle_us": round(per_token[mi][1]),
            "speedup": round(per_token[mi][1] / per_token[mi][0]),
        });
        if vnni.is_some() {
            step["vnni_us"] = json!(round(per_token[mi][2]));
            step["amx_speedup"] = json!(round(per_token[mi][2] / per_token[mi][0]));
        }
        step
    };
    let report = json!({
        "path": format!("{:?}", KernelPath::best()),
        "threads": rayon::current_num_threads(),
        "shapes": rows,
        "decode_matmuls_per_step": { "m1": estimate(0), "m16": estimate(1) },
    });
    println!("{report}");
    Ok(())
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}
