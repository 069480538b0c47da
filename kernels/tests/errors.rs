//! Wrong shapes are typed errors naming the argument and the expected size.

use ponder_kernels::{KernelError, QuantFormat, QuantMatrix};

use crate::common::{ggml_bytes, random_matrix, rng};

#[test]
fn cols_not_a_block_multiple_is_rejected() {
    let err = QuantMatrix::from_ggml_bytes(QuantFormat::Q4_1, 2, 48, vec![0; 60]).err();
    assert!(
        matches!(
            err,
            Some(KernelError::ColsNotBlockMultiple {
                cols: 48,
                block: 32,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn wrong_weight_byte_count_names_bytes_and_expected_size() {
    let mut rng = rng(20);
    let mut bytes = ggml_bytes(&mut rng, QuantFormat::Q8_0, 3, 64);
    bytes.pop();
    let err = QuantMatrix::from_ggml_bytes(QuantFormat::Q8_0, 3, 64, bytes).err();
    match err {
        Some(
            e @ KernelError::WeightBytes {
                expected: 204,
                got: 203,
                ..
            },
        ) => {
            assert!(
                e.to_string().contains("`bytes`") && e.to_string().contains("204"),
                "{e}"
            );
        }
        other => panic!("expected WeightBytes, got {other:?}"),
    }
}

#[test]
fn wrong_input_and_output_lengths_are_rejected() {
    let mut rng = rng(21);
    let w = random_matrix(&mut rng, QuantFormat::Q4_1, 5, 64);
    let mut out = vec![0.0; 2 * 5];
    match w.matmul(&[0.0; 127], 2, &mut out) {
        Err(
            e @ KernelError::InputLen {
                expected: 128,
                got: 127,
                ..
            },
        ) => assert!(e.to_string().contains("`x`"), "{e}"),
        other => panic!("expected InputLen, got {other:?}"),
    }
    match w.matmul(&[0.0; 128], 2, &mut out[..9]) {
        Err(
            e @ KernelError::OutputLen {
                expected: 10,
                got: 9,
                ..
            },
        ) => assert!(e.to_string().contains("`out`"), "{e}"),
        other => panic!("expected OutputLen, got {other:?}"),
    }
}

#[test]
fn empty_shapes_are_no_ops() {
    let mut rng = rng(22);
    let w = random_matrix(&mut rng, QuantFormat::Q8_0, 4, 32);
    assert!(w.matmul(&[], 0, &mut []).is_ok());
    let empty = QuantMatrix::from_ggml_bytes(QuantFormat::Q4_1, 0, 64, Vec::new());
    let Ok(empty) = empty else {
        panic!("0 x 64 matrix rejected")
    };
    assert!(empty.matmul(&[0.0; 64], 1, &mut []).is_ok());
    // k = 0: every dot product is an empty sum.
    let Ok(w) = QuantMatrix::from_ggml_bytes(QuantFormat::Q8_0, 3, 0, Vec::new()) else {
        panic!("3 x 0 matrix rejected")
    };
    let mut out = [f32::NAN; 6];
    assert!(w.matmul(&[], 2, &mut out).is_ok());
    assert_eq!(out, [0.0; 6]);
}
