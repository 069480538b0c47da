//! Any bytes as a GGUF file: header, config and tokenizer reading give errors, never panics.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use ponder::engine::{GgufFile, TextTokenizer};

fuzz_target!(|data: &[u8]| {
    let Ok(mut f) = tempfile::NamedTempFile::new() else { return };
    if f.write_all(data).is_err() {
        return;
    }
    if let Ok(gguf) = GgufFile::open(f.path()) {
        let _ = gguf.config();
        let _ = TextTokenizer::from_gguf(&gguf);
    }
});
