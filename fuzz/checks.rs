// The property each fuzz target checks, one function per target. Shared by the cargo-fuzz
// targets (`fuzz_targets/*.rs` `include!` this file) and the CI test that replays the committed
// corpora on stable (`tests/fuzz_corpus.rs`), so both hold the code to one contract. Each
// function panics exactly when the property fails.

/// Any bytes as the body of each POST route: parse + validate + strategy factory never panic,
/// and every rejection is a 4xx.
pub(crate) fn request_json(data: &[u8]) {
    let (limits, registry) = (
        ponder::api::Limits::default(),
        ponder_strategies::Registry::with_builtins(),
    );
    for route in ["/v1/chat/completions", "/v1/completions", "/v1/reason"] {
        if let Err(e) = ponder::api::check_body(route, data, &limits, &registry) {
            assert!(e.status().is_client_error(), "{e} -> {}", e.status());
        }
    }
}

/// Any string inside a streamed chunk survives Ponder's SSE framing: up to three events (the
/// input split at NUL bytes) parse back, by the WHATWG rules, to the same JSON, then `[DONE]`.
pub(crate) fn sse_data(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let values: Vec<_> = text
        .split('\0')
        .take(3)
        .map(|s| serde_json::json!({"choices": [{"delta": {"content": s}}], "t": s}))
        .collect();
    if let Err(e) = ponder::api::sse_wire::round_trip(&values) {
        panic!("{e}");
    }
}

/// Any model output and reference answer (split at the first NUL byte): extraction,
/// normalisation, the LaTeX parser, grading, equivalence and voting return, never panic.
pub(crate) fn answer_grader(data: &[u8]) {
    use ponder_verifiers::{
        equivalent, extract_answer, grade, latex, majority_vote, normalize_answer,
    };
    let text = String::from_utf8_lossy(data);
    let (output, reference) = text.split_once('\0').unwrap_or((&text, "1"));
    let _ = extract_answer(output);
    let _ = latex::parse(&normalize_answer(output));
    let _ = latex::parse(output);
    let _ = grade(reference, output);
    let _ = equivalent(output, reference);
    let _ = majority_vote([output, reference]);
}

/// Any template source (first line) and messages (the rest, `role:content` per line) render or
/// fail with an error, never a panic.
pub(crate) fn chat_template(data: &[u8]) {
    use ponder_engine::forward::ChatTemplate;
    use ponder_strategies::Turn;
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let source = lines.next().unwrap_or_default();
    let messages: Vec<Turn> = lines
        .map(|l| {
            let (role, content) = l.split_once(':').unwrap_or(("user", l));
            Turn::new(role, content)
        })
        .collect();
    if let Ok(t) = ChatTemplate::new(source, "<s>", "</s>") {
        let _ = t.render(&messages, true);
    }
}

/// Any bytes as a GGUF file: header, config and tokenizer reading give errors, never panics
/// that escape `GgufFile::open` (which catches candle's division by a zero alignment).
pub(crate) fn gguf_header(data: &[u8]) {
    use std::io::Write;
    let Ok(mut f) = tempfile::NamedTempFile::new() else {
        return;
    };
    if f.write_all(data).is_err() {
        return;
    }
    if let Ok(gguf) = ponder_engine::forward::GgufFile::open(f.path()) {
        let _ = gguf.config();
        let _ = ponder_engine::forward::TextTokenizer::from_gguf(&gguf);
    }
}
