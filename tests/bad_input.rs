//! Bad models and bad requests give clear errors naming the problem, never a panic.

use std::io::Write;
use std::path::{Path, PathBuf};

use ponder_engine::forward::SamplingParams;
use ponder_engine::forward::{encode_prompt, generate, LoadOptions, LoadedModel};
use ponder_engine::EngineError;

use crate::util::{smollm2, smollm2_path};

fn load(path: &Path) -> Result<LoadedModel, EngineError> {
    LoadedModel::load(&LoadOptions::cpu(path))
}

/// A minimal GGUF v3 file: string metadata and one tensor of raw type `dtype` with `data`.
fn write_gguf(path: &Path, metadata: &[(&str, &str)], tensor: (&str, &[u64], u32, &[u8])) {
    let mut b: Vec<u8> = Vec::new();
    let string = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend((metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        string(&mut b, k);
        b.extend(8u32.to_le_bytes()); // string
        string(&mut b, v);
    }
    let (name, dims, dtype, data) = tensor;
    string(&mut b, name);
    b.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(dtype.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend(data);
    std::fs::write(path, b).expect("write gguf");
}

fn temp_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[test]
fn missing_model_file_says_how_to_install() {
    let err = load(Path::new("/nonexistent/model.gguf")).expect_err("must fail");
    let msg = err.to_string();
    assert!(matches!(err, EngineError::ModelNotFound { .. }), "{msg}");
    assert!(
        msg.contains("/nonexistent/model.gguf") && msg.contains("setup-models.sh"),
        "{msg}"
    );
}

#[test]
fn corrupt_file_is_not_a_valid_gguf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = temp_file(&dir, "garbage.gguf");
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&path, junk).expect("write");
    let err = load(&path).expect_err("must fail");
    assert!(matches!(err, EngineError::CorruptModel { .. }), "{err}");
    assert!(err.to_string().contains("not a valid GGUF"), "{err}");
}

#[test]
fn truncated_files_are_reported_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = std::fs::read(smollm2_path()).expect("read model");
    // Cut inside the tensor data: the header parses, a tensor does not fit.
    let path = temp_file(&dir, "cut-data.gguf");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&full[..full.len() / 2]))
        .expect("write");
    let err = load(&path).expect_err("must fail");
    assert!(matches!(err, EngineError::CorruptModel { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
    // Cut inside the header.
    let path = temp_file(&dir, "cut-header.gguf");
    std::fs::write(&path, &full[..5000]).expect("write");
    let err = load(&path).expect_err("must fail");
    assert!(matches!(err, EngineError::CorruptModel { .. }), "{err}");
}

#[test]
fn unsupported_architecture_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = temp_file(&dir, "mamba.gguf");
    write_gguf(
        &path,
        &[("general.architecture", "mamba")],
        ("token_embd.weight", &[4, 2], 0, &[0u8; 32]),
    );
    let err = load(&path).expect_err("must fail");
    assert!(
        matches!(err, EngineError::UnsupportedArchitecture { ref arch, .. } if arch == "mamba"),
        "{err}"
    );
    assert!(
        ["mamba", "supported: llama", "qwen2"]
            .iter()
            .all(|part| err.to_string().contains(part)),
        "{err}"
    );
}

#[test]
fn unsupported_tensor_types_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 9 = Q8_1: a type candle can read but cannot multiply by; 16 = IQ2_XXS: unknown to candle.
    for (dtype, bytes) in [(9u32, 36usize), (16, 66)] {
        let path = temp_file(&dir, &format!("type{dtype}.gguf"));
        let data = vec![0u8; bytes * 8];
        write_gguf(
            &path,
            &[("general.architecture", "llama")],
            ("blk.0.attn_q.weight", &[256, 8], dtype, &data),
        );
        let err = load(&path).expect_err("must fail");
        assert!(
            matches!(err, EngineError::UnsupportedQuant { .. }),
            "type {dtype}: {err}"
        );
    }
}

#[test]
fn empty_prompt_is_rejected() {
    for prompt in ["", "   \n\t"] {
        let err = encode_prompt(smollm2(), prompt).expect_err("must fail");
        assert!(
            matches!(
                err,
                EngineError::InvalidInput {
                    field: "prompt",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn prompt_longer_than_context_is_rejected_with_both_numbers() {
    let m = smollm2();
    let context = m.model.config().context_length;
    let prompt = "lorem ipsum ".repeat(context);
    let err = encode_prompt(m, &prompt).expect_err("must fail");
    match err {
        EngineError::PromptTooLong { tokens, context: c } => {
            assert!(tokens >= context);
            assert_eq!(c, context);
        }
        other => panic!("expected PromptTooLong, got {other}"),
    }
}

#[test]
fn bad_generation_parameters_name_the_field() {
    let m = smollm2();
    let err = generate(m, "hi", 0, SamplingParams::greedy(), |_| {}).expect_err("max_tokens 0");
    assert!(
        matches!(
            err,
            EngineError::InvalidInput {
                field: "max_tokens",
                ..
            }
        ),
        "{err}"
    );
    let params = SamplingParams {
        temperature: f64::NAN,
        ..SamplingParams::default()
    };
    let err = generate(m, "hi", 4, params, |_| {}).expect_err("NaN temperature");
    assert!(
        matches!(
            err,
            EngineError::InvalidInput {
                field: "temperature",
                ..
            }
        ),
        "{err}"
    );
}
