//! The committed fuzz corpora (`fuzz/corpus/<target>/`, grown and minimised by `bash
//! scripts/fuzz.sh`) replayed on stable through the same checks the cargo-fuzz targets run
//! (`fuzz/checks.rs`): every input a fuzzer kept stays a passing input.

use std::path::Path;

#[allow(dead_code)] // `checks` is shared with the fuzz targets, each of which uses one function
#[path = "../fuzz/checks.rs"]
mod checks;

/// Runs `check` on every file of `fuzz/corpus/<target>`; returns how many there were.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in &entries {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!(
                "{target}: the corpus input {} fails its check",
                path.display()
            );
        }
    }
    entries.len()
}

#[test]
fn every_committed_fuzz_input_passes_its_check() {
    for (target, check) in [
        ("request_json", checks::request_json as fn(&[u8])),
        ("sse_data", checks::sse_data),
        ("answer_grader", checks::answer_grader),
        ("chat_template", checks::chat_template),
        ("gguf_header", checks::gguf_header),
    ] {
        let n = replay(target, check);
        assert!(n > 0, "fuzz/corpus/{target} is empty");
    }
}
