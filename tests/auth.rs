//! Authentication over real HTTP: with keys configured, every route but `/health` and `/ready`
//! (the probes) refuses a missing, wrong or malformed key with 401 in OpenAI's error shape, and
//! accepts a good one; and no key, good or bad, ever reaches the logs (every tracing event of the
//! server's threads, at TRACE level, is captured and searched).

use std::io::Write;
use std::sync::{Arc, Mutex};

use ponder::api::ApiKeys;
use serde_json::{json, Value};
use tracing_subscriber::fmt::MakeWriter;

use crate::server::TestServer;

const GOOD: &str = "sk-ponder-auth-good-5f1c9e";
const BAD: &str = "sk-ponder-auth-bad-a17d02";

/// Every log line the server's threads write.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    fn text(&self) -> String {
        self.0
            .lock()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }
}

/// Every route, with a body a good key gets an answer to.
fn routes() -> Vec<(&'static str, &'static str, Option<Value>)> {
    let chat = json!({"model": "ponder", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "seed": 1});
    vec![
        ("GET", "/metrics", None),
        ("GET", "/v1/models", None),
        ("GET", "/v1/strategies", None),
        ("GET", "/openapi.json", None),
        ("POST", "/v1/chat/completions", Some(chat)),
        (
            "POST",
            "/v1/completions",
            Some(json!({"model": "ponder", "prompt": "1, 2,", "max_tokens": 2, "seed": 1})),
        ),
        (
            "POST",
            "/v1/reason",
            Some(
                json!({"problem": "What is 1+1?", "strategy": "best_of_n", "params": {"n": 1, "max_tokens": 4}, "budget_tokens": 200}),
            ),
        ),
        ("GET", "/v1/nope", None),
        ("DELETE", "/v1/models", None),
    ]
}

#[test]
fn every_route_but_the_probes_requires_the_key_and_no_key_is_ever_logged() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let on_start = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&on_start)))
        .build()
        .expect("tokio");
    let _guard = tracing::dispatcher::set_default(&dispatch);
    let server = TestServer::start_on(rt, |b| b.api_keys(ApiKeys::new([GOOD])));
    let client = reqwest::Client::new();
    let send =
        |method: &str, path: &str, body: &Option<Value>, auth: Option<String>| -> (u16, Value) {
            let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
            let mut req = client.request(method, server.url(path));
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            server.send(req)
        };
    let refusals = [
        None,
        Some(format!("Bearer {BAD}")),
        Some(BAD.to_string()),
        Some(format!("Basic {GOOD}")),
        Some(format!("Bearer {GOOD}x")),
        Some("Bearer ".into()),
    ];
    for (method, path, body) in routes() {
        for auth in &refusals {
            let (status, err) = send(method, path, &body, auth.clone());
            assert_eq!(status, 401, "{method} {path} with {auth:?}: {err}");
            assert_eq!(
                err["error"]["type"], "authentication_error",
                "{method} {path}: {err}"
            );
            assert_eq!(
                err["error"]["code"], "invalid_api_key",
                "{method} {path}: {err}"
            );
            assert!(
                err["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{err}"
            );
            assert!(
                !err.to_string().contains("sk-ponder"),
                "a key leaked into {err}"
            );
        }
        for scheme in ["Bearer", "bearer"] {
            let (status, out) = send(method, path, &body, Some(format!("{scheme} {GOOD}")));
            assert_ne!(
                status, 401,
                "{method} {path} with the good key ({scheme}): {out}"
            );
            assert!(status < 500, "{method} {path}: {status} {out}");
        }
    }
    for probe in ["/health", "/ready"] {
        assert_eq!(send("GET", probe, &None, None).0, 200, "{probe} stays open");
        assert_eq!(
            send("GET", probe, &None, Some(format!("Bearer {BAD}"))).0,
            200,
            "{probe} ignores a bad key"
        );
    }
    drop(server);
    let text = logs.text();
    assert!(!text.is_empty(), "the capture saw the server's logs");
    for key in [GOOD, BAD, "sk-ponder"] {
        assert!(!text.contains(key), "{key} appears in the logs:\n{text}");
    }
}
