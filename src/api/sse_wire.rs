//! The SSE round-trip check shared by the property test (`hostile_tests`), the `sse_data` fuzz
//! target (`fuzz/`) and the corpus replay (`tests/fuzz_corpus.rs`): values sent as Ponder's
//! `data:` events, encoded by axum exactly as a response body is, then parsed back the way the
//! WHATWG spec tells a browser or client to. Hidden from the docs: a test aid, not API.

use std::convert::Infallible;

use axum::response::sse::Sse;
use axum::response::IntoResponse;
use serde_json::Value;

use super::sse;

/// The `data` payloads of an SSE stream, parsed as the WHATWG spec says (lines end at CRLF, CR or
/// LF; `data:` drops one leading space; several data lines join with LF; a blank line dispatches).
pub(crate) fn parse(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(d);
            }
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
    events
}

/// Sends `values` as data events followed by `[DONE]` through axum's SSE body, parses the bytes
/// back, and says what differs, if anything.
pub fn round_trip(values: &[Value]) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let mut events: Vec<_> = values.iter().map(sse::data).collect();
    events.push(sse::done());
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
    let body = Sse::new(stream).into_response().into_body();
    let bytes = rt
        .block_on(axum::body::to_bytes(body, usize::MAX))
        .map_err(|e| e.to_string())?;
    let wire = String::from_utf8_lossy(&bytes);
    let data = parse(&wire);
    if data.len() != values.len() + 1 {
        return Err(format!(
            "{} events sent, {} parsed from {wire:?}",
            values.len() + 1,
            data.len()
        ));
    }
    for (d, v) in data.iter().zip(values) {
        let back: Value = serde_json::from_str(d).map_err(|e| format!("{e}: {d:?}"))?;
        if &back != v {
            return Err(format!("sent {v}, parsed back {back}"));
        }
    }
    match data.last().map(String::as_str) {
        Some("[DONE]") => Ok(()),
        other => Err(format!("the last event is {other:?}, not [DONE]")),
    }
}
