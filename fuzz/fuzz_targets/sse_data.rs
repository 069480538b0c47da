//! Any string inside a streamed chunk survives the SSE framing: the `data:` line Ponder writes is
//! one line of JSON (no raw CR or LF) that parses back to the same string.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let value = json!({"choices": [{"delta": {"content": s}}]});
    // What `sse::data` sends: the value's compact JSON as the event's data.
    let line = value.to_string();
    assert!(!line.contains('\n') && !line.contains('\r'));
    let back: Value = serde_json::from_str(&line).expect("round trip");
    assert_eq!(back, value);
});
