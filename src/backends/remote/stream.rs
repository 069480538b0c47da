//! Reading a streamed `/v1/completions` reply (server-sent events): the `data:` chunks of one
//! choice folded into what a non-streamed reply would have said — the text, the logprobs, the
//! fields of the chunk that finished it (`finish_reason`, vLLM's `stop_reason`, SGLang's
//! `matched_stop`, llama.cpp's `__verbose.stop_type`) and the usage — so [`response::parse`]
//! reads both alike and every engine's way of naming its stop keeps working.
//!
//! Where each engine puts what Ponder needs in a stream:
//! - vLLM and SGLang: text deltas, then a chunk with the finish fields, then (with
//!   `stream_options.include_usage`) a chunk with no choices and the usage, then `[DONE]`; an
//!   error after the stream began is `data: {"error": {…, "code": 400}}` before `[DONE]`
//!   (vLLM's `create_streaming_error_response`, SGLang's `create_streaming_error_response`);
//! - llama.cpp's server: its final chunk carries the finish, the usage and (`--verbose`)
//!   `__verbose`; it reports errors as an `error:` line;
//! - Ponder: vLLM's shape, `stop_reason` on the finishing chunk;
//! - llama-cpp-python 0.3.36: no usage, and a stop string or EOS both end as `"stop"` with
//!   nothing to tell them apart — such a stream is [`Received::has_usage`] false, and the
//!   caller asks that backend without streaming from then on.
//!
//! A stream that breaks (an idle timeout between chunks, a dropped connection, a 5xx-like error
//! event) keeps what it delivered ([`StreamEnd::Broken`]), so the call can resume elsewhere.
//!
//! [`response::parse`]: super::response::parse
#![deny(clippy::indexing_slicing)]

use futures_util::{Stream, StreamExt};
use ponder_strategies::TokenInfo;
use serde_json::{Map, Value};

use super::response;

/// One choice's chunks so far, folded.
#[derive(Debug, Clone, Default)]
pub(super) struct Received {
    /// The text delivered.
    pub(super) text: String,
    /// Chunks that carried text (a token count where nothing better is known).
    pub(super) text_chunks: usize,
    /// The chunks' `logprobs`, each array concatenated.
    logprobs: Option<Map<String, Value>>,
    /// The finishing chunk's choice fields (without text and logprobs).
    finish: Option<Map<String, Value>>,
    /// Top-level fields of the chunks but `choices` and `usage`, the last one kept.
    top: Map<String, Value>,
    /// The last non-null `usage`.
    usage: Option<Value>,
}

impl Received {
    /// Folds one chunk in.
    fn push(&mut self, chunk: &Value) {
        let Some(fields) = chunk.as_object() else {
            return;
        };
        for (k, v) in fields {
            match k.as_str() {
                "choices" => {}
                "usage" if !v.is_null() => self.usage = Some(v.clone()),
                "usage" => {}
                _ if !v.is_null() => {
                    self.top.insert(k.clone(), v.clone());
                }
                _ => {}
            }
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        if let Some(text) = choice.get("text").and_then(Value::as_str) {
            if !text.is_empty() {
                self.text.push_str(text);
                self.text_chunks += 1;
            }
        }
        if let Some(lp) = choice.get("logprobs").and_then(Value::as_object) {
            let acc = self.logprobs.get_or_insert_with(Map::new);
            for (k, v) in lp {
                match (acc.get_mut(k), v) {
                    (Some(Value::Array(have)), Value::Array(more)) => have.extend(more.clone()),
                    _ => {
                        acc.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
            let mut fields = choice.as_object().cloned().unwrap_or_default();
            fields.remove("text");
            fields.remove("logprobs");
            self.finish = Some(fields);
        }
    }

    /// Whether a chunk said why the choice ended.
    pub(super) fn finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Whether the stream reported the usage (the engine's token counts).
    pub(super) fn has_usage(&self) -> bool {
        self.usage.is_some()
    }

    /// The tokens delivered, with their logprobs (none when the engine sent no logprobs).
    pub(super) fn tokens(&self) -> Vec<TokenInfo> {
        match &self.logprobs {
            Some(lp) => response::token_infos(&Value::Object(lp.clone())),
            None => Vec::new(),
        }
    }

    /// What a non-streamed reply would have been: one choice, the usage, the other fields.
    pub(super) fn response(&self) -> Value {
        let mut choice = self.finish.clone().unwrap_or_default();
        choice.insert("index".into(), Value::from(0));
        choice.insert("text".into(), Value::String(self.text.clone()));
        if let Some(lp) = &self.logprobs {
            choice.insert("logprobs".into(), Value::Object(lp.clone()));
        }
        let mut v = self.top.clone();
        v.insert("choices".into(), Value::Array(vec![Value::Object(choice)]));
        if let Some(u) = &self.usage {
            v.insert("usage".into(), u.clone());
        }
        Value::Object(v)
    }
}

/// How a stream ended.
#[derive(Debug)]
pub(super) enum StreamEnd {
    /// `[DONE]`, or the end of the body after a finishing chunk.
    Done(Received),
    /// It broke before the choice finished: idle past the timeout, the connection dropped, an
    /// unreadable chunk or an error event that is not the request's fault.
    Broken {
        /// What it delivered before.
        received: Received,
        /// What happened.
        error: String,
    },
    /// An error event with a 4xx status other than 429: the request's fault.
    Refused {
        /// The status the engine gave.
        status: u16,
        /// Its message.
        message: String,
    },
}

/// The status and message of an error event, in vLLM's or SGLang's shape (`{"error": {message,
/// type, code}}` or `{"object": "error", message, code}`) or llama.cpp's (`{"error": {code,
/// message, type}}`, or a bare message).
fn error_of(v: &Value) -> Option<(Option<u16>, String)> {
    let e = match v.get("error") {
        Some(e) => e,
        None if v.get("object").and_then(Value::as_str) == Some("error") => v,
        None => return None,
    };
    Some(error_fields(e, v))
}

/// The status and message of the error `e` (inside `v`).
fn error_fields(e: &Value, v: &Value) -> (Option<u16>, String) {
    let code = e
        .get("code")
        .or_else(|| v.get("code"))
        .and_then(|c| match c {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
    let status = code
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (100..600).contains(c));
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| e.to_string(), str::to_string);
    (status, message)
}

/// What one event says.
enum Event {
    /// `data: …`.
    Data(String),
    /// llama.cpp's `error: …`.
    Error(String),
}

/// Splits the bytes of an SSE body into events (the WHATWG event-stream format: `data:` lines
/// joined by newlines until a blank line; comments and other fields skipped).
#[derive(Default)]
struct Events {
    line: Vec<u8>,
    data: Option<String>,
}

impl Events {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, out);
            } else {
                self.line.push(b);
            }
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) {
        let line = String::from_utf8_lossy(line);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            self.flush(out);
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "error" => out.push(Event::Error(value.to_string())),
            _ => {}
        }
    }

    /// Ends the event being read (a blank line, or the end of the body).
    fn flush(&mut self, out: &mut Vec<Event>) {
        if let Some(d) = self.data.take() {
            out.push(Event::Data(d));
        }
    }

    fn finish(&mut self, out: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.line_done(&line, out);
        }
        self.flush(out);
    }
}

/// What an error event means: the request's fault (a 4xx but 429) is refused, anything else
/// breaks the stream.
fn on_error(status: Option<u16>, message: String, received: Received) -> StreamEnd {
    match status {
        Some(s) if (400..500).contains(&s) && s != 429 => StreamEnd::Refused { status: s, message },
        _ => StreamEnd::Broken {
            received,
            error: match status {
                Some(s) => format!("error event {s} mid-stream: {message}"),
                None => format!("error event mid-stream: {message}"),
            },
        },
    }
}

/// Reads `body` (the bytes of an SSE reply) to its end.
pub(super) async fn read<S, B, E>(body: S) -> StreamEnd
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut received = Received::default();
    let mut events = Events::default();
    let mut ready = Vec::new();
    let mut ended = false;
    loop {
        if !ended {
            match body.next().await {
                Some(Ok(bytes)) => events.feed(bytes.as_ref(), &mut ready),
                Some(Err(e)) => {
                    return StreamEnd::Broken {
                        received,
                        error: format!("the stream broke: {e}"),
                    }
                }
                None => {
                    events.finish(&mut ready);
                    ended = true;
                }
            }
        }
        for event in ready.drain(..) {
            let data = match event {
                Event::Error(text) => {
                    let parsed = serde_json::from_str::<Value>(&text).ok();
                    // llama.cpp's `error:` line holds the error object itself.
                    let (status, message) = match &parsed {
                        Some(v) => error_of(v).unwrap_or_else(|| error_fields(v, v)),
                        None => (None, text.clone()),
                    };
                    return on_error(status, message, received);
                }
                Event::Data(d) => d,
            };
            if data.trim() == "[DONE]" {
                return StreamEnd::Done(received);
            }
            let chunk: Value = match serde_json::from_str(&data) {
                Ok(v) => v,
                Err(e) => {
                    return StreamEnd::Broken {
                        received,
                        error: format!("unreadable chunk ({e}): {}", truncate(&data)),
                    }
                }
            };
            if let Some((status, message)) = error_of(&chunk) {
                return on_error(status, message, received);
            }
            received.push(&chunk);
        }
        if ended {
            return if received.finished() {
                StreamEnd::Done(received)
            } else {
                StreamEnd::Broken {
                    received,
                    error: "the stream ended before the completion did".into(),
                }
            };
        }
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use ponder_strategies::{StopKind, Stops};
    use serde_json::json;

    fn body(parts: &[&str]) -> impl Stream<Item = Result<Vec<u8>, String>> {
        let owned: Vec<Result<Vec<u8>, String>> =
            parts.iter().map(|p| Ok(p.as_bytes().to_vec())).collect();
        futures_util::stream::iter(owned)
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn run(parts: &[&str]) -> StreamEnd {
        block_on(read(body(parts)))
    }

    fn sse(chunks: &[Value]) -> String {
        let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        s.push_str("data: [DONE]\n\n");
        s
    }

    #[test]
    fn a_vllm_stream_reads_as_its_non_streamed_reply() {
        let text = sse(&[
            json!({"choices": [{"index": 0, "text": "We add", "logprobs": {"tokens": ["We", " add"],
                "token_logprobs": [-0.1, -0.2], "top_logprobs": [{"We": -0.1}, {" add": -0.2}]},
                "finish_reason": null, "stop_reason": null}], "usage": null}),
            json!({"choices": [{"index": 0, "text": " 3.", "logprobs": {"tokens": [" 3."],
                "token_logprobs": [-0.3], "top_logprobs": [{" 3.": -0.3}]},
                "finish_reason": "stop", "stop_reason": "\n\n"}], "usage": null}),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}),
        ]);
        // Split mid-line and mid-character boundaries do not matter.
        let (a, b) = text.split_at(17);
        let StreamEnd::Done(r) = run(&[a, b]) else {
            panic!("not done")
        };
        assert!(r.has_usage());
        let c = response::parse(&r.response(), &Stops::new(["\n\n"])).unwrap();
        assert_eq!(c.text, "We add 3.\n\n");
        assert_eq!(c.stop, StopKind::Stop);
        assert_eq!(c.tokens.len(), 3);
        assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(7), Some(4)));
    }

    #[test]
    fn llama_cpps_final_chunk_carries_its_verbose_stop_type() {
        let text = sse(&[
            json!({"choices": [{"index": 0, "text": "x", "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                "__verbose": {"stop_type": "word", "stopping_word": "\n\n"}}),
        ]);
        let StreamEnd::Done(r) = run(&[&text]) else {
            panic!("not done")
        };
        let c = response::parse(&r.response(), &Stops::new(["\n\n"])).unwrap();
        assert_eq!((c.text.as_str(), c.stop), ("x\n\n", StopKind::Stop));
    }

    #[test]
    fn a_stream_without_usage_says_so() {
        let text = sse(&[json!({"choices": [{"text": "x", "finish_reason": "stop"}]})]);
        let StreamEnd::Done(r) = run(&[&text]) else {
            panic!("not done")
        };
        assert!(!r.has_usage());
    }

    #[test]
    fn a_4xx_error_event_is_refused_and_a_5xx_breaks_keeping_the_text() {
        let first = json!({"choices": [{"text": "ab", "finish_reason": null}]});
        let refused = sse(&[
            first.clone(),
            json!({"error": {"message": "bad", "code": 400}}),
        ]);
        assert!(matches!(
            run(&[&refused]),
            StreamEnd::Refused { status: 400, ref message } if message == "bad"
        ));
        let old_shape = sse(&[json!({"object": "error", "message": "no", "code": 422})]);
        assert!(matches!(
            run(&[&old_shape]),
            StreamEnd::Refused { status: 422, .. }
        ));
        let failed = sse(&[
            first,
            json!({"error": {"message": "engine died", "code": 500}}),
        ]);
        match run(&[&failed]) {
            StreamEnd::Broken { received, error } => {
                assert_eq!(received.text, "ab");
                assert!(error.contains("engine died"), "{error}");
            }
            other => panic!("{other:?}"),
        }
        let llama = "error: {\"code\": 400, \"message\": \"too long\", \"type\": \"x\"}\n\n";
        assert!(matches!(
            run(&[llama]),
            StreamEnd::Refused { status: 400, .. }
        ));
    }

    #[test]
    fn a_body_that_ends_unfinished_or_fails_is_broken_with_what_it_delivered() {
        let part = "data: {\"choices\": [{\"text\": \"ab\", \"finish_reason\": null}]}\n\n";
        match run(&[part, ": keep-alive\n\n"]) {
            StreamEnd::Broken { received, .. } => {
                assert_eq!((received.text.as_str(), received.text_chunks), ("ab", 1))
            }
            other => panic!("{other:?}"),
        }
        let failing = futures_util::stream::iter(vec![
            Ok(part.as_bytes().to_vec()),
            Err("operation timed out".to_string()),
        ]);
        match block_on(read(failing)) {
            StreamEnd::Broken { received, error } => {
                assert_eq!(received.text, "ab");
                assert!(error.contains("timed out"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }
}
