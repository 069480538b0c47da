//! `QuantMatrix::stack` and `matmul_parts`: one matmul over stacked parts gives each part's own
//! outputs, bitwise, into one output or one per part (given, or new and never zeroed), and the
//! parts' views are the parts.

use ponder_kernels::{KernelError, KernelPath, QuantFormat, QuantMatrix};
use rand_chacha::ChaCha8Rng;

use crate::common::{activations, assert_bitwise, random_matrix, rng, run};

#[test]
fn a_stacked_matmul_is_the_parts_matmuls_side_by_side_bitwise() {
    let mut rng = rng(40);
    for format in [QuantFormat::Q4_1, QuantFormat::Q8_0] {
        // SmolLM2's q/k/v rows, then a last part ending in a partial tile.
        let parts: Vec<QuantMatrix> = [576, 192, 192, 37]
            .into_iter()
            .map(|n| random_matrix(&mut rng, format, n, 576))
            .collect();
        let (stack, views) = match QuantMatrix::stack(&parts) {
            Ok(s) => s,
            Err(e) => panic!("stack: {e}"),
        };
        assert_eq!(stack.rows(), 576 + 192 + 192 + 37);
        assert_eq!((stack.cols(), stack.format()), (576, format));
        for (view, part) in views.iter().zip(&parts) {
            assert_eq!(view.to_ggml_bytes(), part.to_ggml_bytes());
        }
        for path in KernelPath::ALL.into_iter().filter(|p| p.is_available()) {
            for m in [1, 7, 16, 26] {
                let x = activations(&mut rng, m, 576);
                let got = run(&stack, path, &x, m);
                let mut col = 0;
                for (view, part) in views.iter().zip(&parts) {
                    let own = run(part, path, &x, m);
                    assert_bitwise(&run(view, path, &x, m), &own, &format!("{path:?} view"));
                    let n = part.rows();
                    let side: Vec<f32> = (0..m)
                        .flat_map(|r| got[r * stack.rows() + col..][..n].to_vec())
                        .collect();
                    assert_bitwise(&side, &own, &format!("{path:?} {format:?} m={m} col={col}"));
                    col += n;
                }
            }
        }
    }
}

#[test]
fn parts_that_cannot_be_stacked_are_named() {
    let mut rng = rng(41);
    let a = random_matrix(&mut rng, QuantFormat::Q4_1, 32, 64);
    let partial = random_matrix(&mut rng, QuantFormat::Q4_1, 20, 64);
    let q8 = random_matrix(&mut rng, QuantFormat::Q8_0, 32, 64);
    let wide = random_matrix(&mut rng, QuantFormat::Q4_1, 32, 96);
    for (parts, part, needle) in [
        (vec![], 0, "no parts"),
        (vec![a.clone(), q8], 1, "format"),
        (vec![a.clone(), wide], 1, "cols 96"),
        (vec![partial.clone(), a.clone()], 0, "rows 20"),
    ] {
        match QuantMatrix::stack(&parts) {
            Err(e @ KernelError::Stack { part: p, .. }) => {
                assert_eq!(p, part, "{e}");
                assert!(e.to_string().contains(needle), "{e}");
            }
            other => panic!("expected a Stack error, got {:?}", other.map(|_| ())),
        }
    }
    // A partial tile is fine at the end.
    assert!(QuantMatrix::stack(&[a, partial]).is_ok());
}

#[test]
fn matmul_parts_writes_each_parts_columns_into_its_own_output() {
    let mut rng = rng(42);
    let (stack, parts) = q4_1_stack(&mut rng, &[1536, 1536]);
    for m in [1, 16, 33] {
        let x = activations(&mut rng, m, 576);
        let (mut gate, mut up) = (vec![f32::NAN; m * 1536], vec![f32::NAN; m * 1536]);
        if let Err(e) = stack.matmul_parts(&x, m, &mut [&mut gate, &mut up]) {
            panic!("matmul_parts: {e}");
        }
        let best = KernelPath::best();
        assert_bitwise(&gate, &run(&parts[0], best, &x, m), &format!("gate m={m}"));
        assert_bitwise(&up, &run(&parts[1], best, &x, m), &format!("up m={m}"));
    }
}

#[test]
fn output_parts_that_do_not_split_the_columns_are_named() {
    let mut rng = rng(43);
    let w = random_matrix(&mut rng, QuantFormat::Q4_1, 40, 64);
    let x = activations(&mut rng, 2, 64);
    // (widths of the outputs in floats per row, or a length that is not a whole row count)
    for (lens, part, needle) in [
        ([2 * 16 + 1, 2 * 24], 0, "not a multiple of m"),
        ([2 * 20, 2 * 20], 0, "width 20"),
        ([2 * 16, 2 * 8], 2, "add up to 24"),
    ] {
        let (mut a, mut b) = (vec![0f32; lens[0]], vec![0f32; lens[1]]);
        match w.matmul_parts(&x, 2, &mut [&mut a, &mut b]) {
            Err(e @ KernelError::OutputParts { part: p, .. }) => {
                assert_eq!(p, part, "{e}");
                assert!(e.to_string().contains(needle), "{e}");
            }
            other => panic!("expected an OutputParts error, got {other:?}"),
        }
    }
    let (mut a, mut b) = (vec![0f32; 2 * 16], vec![0f32; 2 * 24]);
    assert!(w.matmul_parts(&x, 2, &mut [&mut a, &mut b]).is_ok());
}

#[test]
fn new_output_vectors_hold_what_given_outputs_get_bitwise() {
    let mut rng = rng(44);
    let widths = [576, 192, 37];
    let (stack, parts) = q4_1_stack(&mut rng, &widths);
    // One row (serial), a decode batch (AMX groups where available), a prefill-sized chunk
    // (helpers, quantization split over threads) and no rows at all.
    for m in [1, 16, 130, 0] {
        let x = activations(&mut rng, m, 576);
        let got = match stack.matmul_parts_vec(&x, m, &widths) {
            Ok(v) => v,
            Err(e) => panic!("matmul_parts_vec m={m}: {e}"),
        };
        let mut want: Vec<Vec<f32>> = widths.iter().map(|w| vec![f32::NAN; m * w]).collect();
        let mut outs: Vec<&mut [f32]> = want.iter_mut().map(|v| v.as_mut_slice()).collect();
        if let Err(e) = stack.matmul_parts(&x, m, &mut outs) {
            panic!("matmul_parts m={m}: {e}");
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_bitwise(g, w, &format!("part {i} m={m}"));
        }
        match parts[0].matmul_vec(&x, m) {
            Ok(v) => assert_bitwise(&v, &want[0], &format!("matmul_vec m={m}")),
            Err(e) => panic!("matmul_vec m={m}: {e}"),
        }
    }
    // Widths that do not split the columns are refused before anything is computed.
    let x = activations(&mut rng, 2, 576);
    assert!(matches!(
        stack.matmul_parts_vec(&x, 2, &[576, 200, 29]),
        Err(KernelError::OutputParts { part: 1, .. })
    ));
    assert!(matches!(
        stack.matmul_parts_vec(&x, 2, &[576, 192]),
        Err(KernelError::OutputParts { part: 2, .. })
    ));
    assert!(matches!(
        stack.matmul_parts_vec(&x[1..], 2, &widths),
        Err(KernelError::InputLen { .. })
    ));
}

/// Random Q4_1 parts of `rows` rows each (576 columns) and their stack.
fn q4_1_stack(rng: &mut ChaCha8Rng, rows: &[usize]) -> (QuantMatrix, Vec<QuantMatrix>) {
    let parts: Vec<QuantMatrix> = rows
        .iter()
        .map(|&n| random_matrix(rng, QuantFormat::Q4_1, n, 576))
        .collect();
    match QuantMatrix::stack(&parts) {
        Ok((stack, _)) => (stack, parts),
        Err(e) => panic!("stack: {e}"),
    }
}
