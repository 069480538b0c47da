//! Every SIMD kernel path is bitwise equal to the scalar reference.

use ponder_kernels::{KernelPath, QuantFormat};

use crate::common::{activations, assert_bitwise, random_matrix, rng, run};

fn simd_paths() -> Vec<KernelPath> {
    let paths: Vec<_> = KernelPath::ALL
        .into_iter()
        .filter(|p| *p != KernelPath::Scalar && p.is_available())
        .collect();
    if paths.is_empty() {
        eprintln!("no SIMD kernel path on this CPU: only the scalar path is exercised");
    }
    paths
}

fn check_format(format: QuantFormat, seed: u64) {
    let paths = simd_paths();
    let mut rng = rng(seed);
    for k in [32, 64, 576, 1536] {
        for n in [1, 2, 3, 16, 17, 33, 48] {
            let w = random_matrix(&mut rng, format, n, k);
            let x = activations(&mut rng, 48, k);
            // Every row count up to 17, the AMX kernel's group boundaries beyond, and (48 rows
            // of 1536) activations that quantize over the thread pool; from 16 rows of 576
            // they quantize in two halves.
            for m in (1..=17).chain([25, 26, 32, 33, 35, 48]) {
                let x = &x[..m * k];
                let reference = run(&w, KernelPath::Scalar, x, m);
                assert!(
                    reference.iter().all(|v| v.is_finite()),
                    "{format:?} k={k} n={n} m={m}"
                );
                for &path in &paths {
                    let got = run(&w, path, x, m);
                    assert_bitwise(
                        &got,
                        &reference,
                        &format!("{path:?} {format:?} k={k} n={n} m={m}"),
                    );
                }
            }
        }
    }
}

#[test]
fn q4_1_simd_paths_match_scalar_bitwise() {
    check_format(QuantFormat::Q4_1, 1);
}

#[test]
fn q8_0_simd_paths_match_scalar_bitwise() {
    check_format(QuantFormat::Q8_0, 2);
}

#[test]
fn best_path_is_available_and_default() {
    let best = KernelPath::best();
    assert!(best.is_available());
    let mut rng = rng(3);
    let w = random_matrix(&mut rng, QuantFormat::Q4_1, 40, 96);
    let x = activations(&mut rng, 3, 96);
    let mut out = vec![0.0; 3 * 40];
    assert!(w.matmul(&x, 3, &mut out).is_ok());
    assert_bitwise(&out, &run(&w, best, &x, 3), "matmul vs best path");
}
