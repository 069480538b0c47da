//! `ponder generate` as a user runs it: the real binary, the real default model.

use std::process::Command;

use crate::util::smollm2_path;

fn ponder(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ponder"))
        .args(args)
        .arg("--model")
        .arg(smollm2_path())
        .output()
        .expect("run ponder")
}

#[test]
fn generate_answers_a_sum_and_reports_usage() {
    let out = ponder(&[
        "generate",
        "--prompt",
        "What is 2+3?",
        "--temperature",
        "0",
        "--max-tokens",
        "40",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains('5'), "expected the answer 5 in {stdout:?}");
    let usage = stderr.lines().last().unwrap_or_default();
    assert!(usage.starts_with("[usage] prompt_tokens="), "{stderr}");
    assert!(
        usage.contains("generated_tokens=") && usage.contains("tokens/s="),
        "{usage}"
    );
}

#[test]
fn same_seed_same_text_different_seed_different_text() {
    let run = |seed: &str| {
        let out = ponder(&[
            "generate",
            "--prompt",
            "Tell me a short story about a cat.",
            "--temperature",
            "1.0",
            "--seed",
            seed,
            "--max-tokens",
            "24",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let a = run("11");
    assert_eq!(a, run("11"));
    assert_ne!(a, run("12"));
}

#[test]
fn empty_prompt_fails_cleanly() {
    let out = ponder(&["generate", "--prompt", " "]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("prompt") && stderr.contains("empty"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
