//! Any string inside a streamed chunk survives Ponder's SSE framing: the events axum writes for
//! `sse::data` parse back, by the WHATWG rules, to the same JSON, and the stream ends `[DONE]`
//! (the check is `ponder::api::sse_wire::round_trip`, which the CI proptest also runs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Up to three events, split at NUL bytes.
    let values: Vec<_> = text.split('\0').take(3).map(|s| json!({"choices": [{"delta": {"content": s}}], "t": s})).collect();
    if let Err(e) = ponder::api::sse_wire::round_trip(&values) {
        panic!("{e}");
    }
});
