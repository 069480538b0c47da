//! Batch invariance: a row's output is the same alone, in any batch, on any thread count.

use ponder_kernels::{KernelPath, QuantFormat, QuantMatrix};

use crate::common::{activations, assert_bitwise, random_matrix, rng, run};

/// Each row of a 16-row batch equals that row computed alone (m = 1) and inside a 5-row batch.
fn check_rows(w: &QuantMatrix, path: KernelPath, x: &[f32]) {
    let (n, k) = (w.rows(), w.cols());
    let batch = run(w, path, x, 16);
    let five = run(w, path, &x[3 * k..8 * k], 5);
    assert_bitwise(
        &five,
        &batch[3 * n..8 * n],
        &format!("{path:?} rows 3..8 in m=5 vs m=16"),
    );
    for r in 0..16 {
        let alone = run(w, path, &x[r * k..(r + 1) * k], 1);
        assert_bitwise(
            &alone,
            &batch[r * n..(r + 1) * n],
            &format!("{path:?} row {r} m=1 vs m=16"),
        );
    }
}

#[test]
fn row_alone_equals_row_in_a_batch_of_16() {
    let mut rng = rng(10);
    // SmolLM2 shapes (parallel split) and small ones (one task, n below the thread count).
    for (format, n, k) in [
        (QuantFormat::Q4_1, 1536, 576),
        (QuantFormat::Q4_1, 576, 1536),
        (QuantFormat::Q4_1, 3, 32),
        (QuantFormat::Q8_0, 4099, 576),
        (QuantFormat::Q8_0, 2, 64),
    ] {
        let w = random_matrix(&mut rng, format, n, k);
        let x = activations(&mut rng, 16, k);
        for path in KernelPath::ALL.into_iter().filter(|p| p.is_available()) {
            check_rows(&w, path, &x);
        }
    }
}

#[test]
fn a_prefill_sized_batch_is_its_rows_alone() {
    // More rows than one pass over the weights takes (a prefill chunk is cut into passes of
    // 64 rows): 150 rows are three passes, the last one partial.
    let mut rng = rng(12);
    for format in [QuantFormat::Q4_1, QuantFormat::Q8_0] {
        let (n, k, m) = (40, 576, 150);
        let w = random_matrix(&mut rng, format, n, k);
        let x = activations(&mut rng, m, k);
        for path in KernelPath::ALL.into_iter().filter(|p| p.is_available()) {
            let batch = run(&w, path, &x, m);
            for r in 0..m {
                let alone = run(&w, path, &x[r * k..(r + 1) * k], 1);
                assert_bitwise(
                    &alone,
                    &batch[r * n..(r + 1) * n],
                    &format!("{path:?} {format:?} row {r} m=1 vs m={m}"),
                );
            }
            // Rows that straddle a pass boundary in the big batch, as one batch of their own.
            let mid = run(&w, path, &x[60 * k..80 * k], 20);
            assert_bitwise(
                &mid,
                &batch[60 * n..80 * n],
                &format!("{path:?} {format:?} rows 60..80"),
            );
            // The parts API cuts the same passes into each part.
            let parts = w
                .matmul_parts_vec(&x, m, &[32, 8])
                .unwrap_or_else(|e| panic!("parts: {e}"));
            for r in 0..m {
                assert_bitwise(
                    &parts[0][r * 32..(r + 1) * 32],
                    &batch[r * n..r * n + 32],
                    "part 0",
                );
                assert_bitwise(
                    &parts[1][r * 8..(r + 1) * 8],
                    &batch[r * n + 32..(r + 1) * n],
                    "part 1",
                );
            }
        }
    }
}

#[test]
fn thread_count_does_not_change_results() {
    let mut rng = rng(11);
    for format in [QuantFormat::Q4_1, QuantFormat::Q8_0] {
        let w = random_matrix(&mut rng, format, 1000, 576);
        let x = activations(&mut rng, 6, 576);
        let mut first: Option<Vec<f32>> = None;
        for threads in [1, 2, 3, 7] {
            let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                Ok(pool) => pool,
                Err(e) => panic!("thread pool: {e}"),
            };
            let out = pool.install(|| run(&w, KernelPath::best(), &x, 6));
            match &first {
                None => first = Some(out),
                Some(first) => {
                    assert_bitwise(&out, first, &format!("{format:?} {threads} threads"))
                }
            }
        }
    }
}
