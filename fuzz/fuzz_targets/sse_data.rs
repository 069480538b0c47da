//! Any string inside a streamed chunk survives Ponder's SSE framing: up to three events (the
//! input split at NUL bytes) parse back, by the WHATWG rules, to the same JSON, then `[DONE]`.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks {
    include!("../checks.rs");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sse_data(data));
