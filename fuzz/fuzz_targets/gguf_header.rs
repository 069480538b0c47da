//! Any bytes as a GGUF file: header, config and tokenizer reading give errors, never panics.
//!
//! `GgufFile::open` catches one known panic inside candle's reader (a `general.alignment` of 0
//! divides by zero) and reports a corrupt file. libfuzzer-sys's panic hook aborts on every panic,
//! caught or not, so the hook is reset to print nothing: a caught panic then passes, and one that
//! escapes still reaches libfuzzer-sys's own `catch_unwind`, which aborts (a crash is reported).
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks {
    include!("../checks.rs");
}

static QUIET_PANICS: std::sync::Once = std::sync::Once::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    QUIET_PANICS.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    checks::gguf_header(data)
});
