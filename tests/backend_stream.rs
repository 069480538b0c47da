//! Streamed backend calls on paused time: in-process fake backends (axum on loopback, in the
//! test's runtime) send server-sent events with `tokio::time::sleep` between chunks, and
//! reqwest's idle (read) timeout runs on the same paused clock, so "10 minutes" take
//! milliseconds. A generation that keeps streaming for 10 minutes does not time out; one that
//! stops sending past the idle timeout is continued on a second backend from the text it
//! delivered, charged once; a stream without usage (llama-cpp-python's) is asked again without
//! streaming, once per backend; an error event in the stream is the backend's refusal; and a
//! client's `traceparent` and `x-request-id` reach the backend.
//!
//! Paused time and real sockets: when every task waits, tokio's paused clock jumps to the next
//! timer even while bytes are still on their way through the kernel, so a client whose request
//! the backend has not read yet jumps straight to its idle timeout (it did, on a reused
//! connection, with only a 5 ms timer armed beside it). So the tests pause the clock and drive
//! it themselves ([`clock`]): 20 ms of test time per 200 µs of real time, with auto-advance
//! held off, so the sockets have hundreds of real milliseconds before a 30 s idle timeout can
//! fire, and 10 minutes take a few seconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use ponder::backends::{RemoteGenerator, RemoteOptions, RemotePool};
use ponder_strategies::{
    ExtendRequest, Extension, Generator, GeneratorError, Sampling, StopKind, StrategyError,
};
use serde_json::{json, Value};

/// One chunk's text (one token).
fn token(i: usize) -> String {
    format!("t{i} ")
}

/// A text chunk in vLLM's shape, with its token's logprob.
fn chunk(text: &str) -> String {
    let c = json!({"choices": [{"index": 0, "text": text, "finish_reason": null,
        "logprobs": {"tokens": [text], "token_logprobs": [-0.5], "top_logprobs": [{text: -0.5}]}}],
        "usage": null});
    format!("data: {c}\n\n")
}

/// The end of a stream: the finish, the usage (when sent) and `[DONE]`.
fn end(prompt_tokens: u64, completion_tokens: u64, usage: bool) -> String {
    let finish = json!({"choices": [{"index": 0, "text": "", "finish_reason": "length",
        "stop_reason": null}], "usage": null});
    let mut s = format!("data: {finish}\n\n");
    if usage {
        let u = json!({"choices": [], "usage": {"prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens}});
        s.push_str(&format!("data: {u}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    s
}

/// What a fake backend does with the next call.
#[derive(Clone, Copy, Debug)]
enum Script {
    /// Streams `chunks` tokens, `gap` apart, then finishes with the usage.
    Stream { chunks: usize, gap: Duration },
    /// Streams `chunks` tokens, then sends nothing more (the connection stays open).
    Stall { chunks: usize },
    /// Streams `chunks` tokens and finishes without usage (llama-cpp-python); answers a
    /// non-streamed request with JSON.
    NoUsage { chunks: usize },
    /// Streams one token, then an error event with `code`.
    ErrorEvent { code: u16 },
}

/// A call a fake backend received.
#[derive(Debug, Clone)]
struct Call {
    port: u16,
    body: Value,
    headers: HeaderMap,
}

/// Calls and scripts shared by the fake backends of one test: the n-th call (on any backend)
/// follows the n-th script, the last one repeating.
#[derive(Default)]
struct Fake {
    scripts: Vec<Script>,
    calls: Mutex<Vec<Call>>,
}

impl Fake {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

async fn completions(
    State((fake, port)): State<(Arc<Fake>, u16)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let n = {
        let mut calls = fake.calls.lock().unwrap();
        calls.push(Call {
            port,
            body: body.clone(),
            headers,
        });
        calls.len() - 1
    };
    let script = *fake
        .scripts
        .get(n)
        .or(fake.scripts.last())
        .expect("a script");
    let prompt_tokens = 10;
    let streamed = body["stream"] == json!(true);
    if !streamed {
        let Script::NoUsage { chunks } = script else {
            panic!("only NoUsage answers without streaming");
        };
        let text: String = (0..chunks).map(token).collect();
        return Json(
            json!({"choices": [{"index": 0, "text": text, "finish_reason": "length"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": chunks}}),
        )
        .into_response();
    }
    let events = async_stream::stream! {
        match script {
            Script::Stream { chunks, gap } => {
                for i in 0..chunks {
                    tokio::time::sleep(gap).await;
                    yield Ok::<_, std::convert::Infallible>(chunk(&token(i)));
                }
                yield Ok(end(prompt_tokens, chunks as u64, true));
            }
            Script::Stall { chunks } => {
                for i in 0..chunks {
                    yield Ok(chunk(&token(i)));
                }
                std::future::pending::<()>().await;
            }
            Script::NoUsage { chunks } => {
                for i in 0..chunks {
                    yield Ok(chunk(&token(i)));
                }
                yield Ok(end(0, 0, false));
            }
            Script::ErrorEvent { code } => {
                yield Ok(chunk(&token(0)));
                let e = json!({"error": {"message": "prompt too long", "type": "BadRequestError",
                    "code": code}});
                yield Ok(format!("data: {e}\n\ndata: [DONE]\n\n"));
            }
        }
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(events))
        .unwrap()
}

/// Starts a fake backend on loopback in the current runtime; returns its URL.
async fn backend(fake: &Arc<Fake>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = Router::new()
        .route("/v1/completions", post(completions))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state((Arc::clone(fake), port));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{port}")
}

/// Drives the paused clock 20 ms per 200 µs of real time. A blocking task is always in flight
/// (tokio never auto-advances while one runs), so time moves only here.
fn clock() {
    tokio::spawn(async {
        loop {
            let _ = tokio::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_micros(200));
            })
            .await;
            tokio::time::advance(Duration::from_millis(20)).await;
        }
    });
}

fn pool(urls: Vec<String>, idle: Duration) -> Arc<RemotePool> {
    Arc::new(
        RemotePool::new(RemoteOptions {
            idle_timeout: idle,
            retries: 2,
            backoff: Duration::from_millis(10),
            ..RemoteOptions::new(urls)
        })
        .unwrap(),
    )
}

const PROMPT: &str = "Count slowly.";

/// One continuation of [`PROMPT`] of at most `max_tokens`.
async fn extend(
    generator: &RemoteGenerator,
    max_tokens: usize,
) -> Result<Extension, StrategyError> {
    let (seq, _) = generator.open_text(PROMPT).await?;
    let mut out = generator
        .extend(&[ExtendRequest {
            seq,
            max_tokens,
            stop: vec!["\n\n".into()],
            sampling: Sampling::default(),
            logits: Default::default(),
        }])
        .await?;
    Ok(out.remove(0))
}

#[tokio::test(start_paused = true)]
async fn a_backend_streaming_for_ten_minutes_does_not_time_out() {
    // A token every 5 s for 10 minutes, under a 30 s idle timeout.
    let fake = Arc::new(Fake {
        scripts: vec![Script::Stream {
            chunks: 120,
            gap: Duration::from_secs(5),
        }],
        ..Fake::default()
    });
    clock();
    let url = backend(&fake).await;
    let generator = RemoteGenerator::new(pool(vec![url], Duration::from_secs(30)));
    let started = tokio::time::Instant::now();
    let wall = std::time::Instant::now();
    let ext = extend(&generator, 500).await.expect("a healthy stream");
    assert!(
        started.elapsed() >= Duration::from_secs(600),
        "{:?}",
        started.elapsed()
    );
    assert!(
        wall.elapsed() < Duration::from_secs(60),
        "real time: {:?}",
        wall.elapsed()
    );
    assert_eq!(ext.text, (0..120).map(token).collect::<String>());
    assert_eq!(
        (ext.stop, ext.cost.generated, ext.tokens.len()),
        (StopKind::Length, 120, 120)
    );
    let calls = fake.calls();
    for c in &calls {
        eprintln!(
            "{} {} {}",
            c.body["prompt"], c.body["max_tokens"], c.body["stream"]
        );
    }
    assert_eq!(calls.len(), 1, "one call, never retried");
    assert_eq!(calls[0].body["stream"], json!(true));
    assert_eq!(
        calls[0].body["stream_options"]["include_usage"],
        json!(true)
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_is_continued_on_another_backend_and_charged_once() {
    let fake = Arc::new(Fake {
        scripts: vec![
            Script::Stall { chunks: 3 },
            Script::Stream {
                chunks: 2,
                gap: Duration::from_secs(1),
            },
        ],
        ..Fake::default()
    });
    clock();
    let urls = vec![backend(&fake).await, backend(&fake).await];
    let idle = Duration::from_secs(30);
    let generator = RemoteGenerator::new(pool(urls, idle));
    let started = tokio::time::Instant::now();
    let ext = extend(&generator, 100).await.expect("continued elsewhere");
    assert!(started.elapsed() >= idle, "{:?}", started.elapsed());
    let calls = fake.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_ne!(
        calls[0].port, calls[1].port,
        "the retry went to the other backend"
    );
    let delivered: String = (0..3).map(token).collect();
    assert_eq!(calls[0].body["prompt"], json!(PROMPT));
    assert_eq!(
        calls[1].body["prompt"],
        json!(format!("{PROMPT}{delivered}"))
    );
    assert_eq!(calls[1].body["max_tokens"], json!(97), "the tokens left");
    assert_eq!(
        ext.text,
        format!("{delivered}{}", (0..2).map(token).collect::<String>())
    );
    assert_eq!(ext.tokens.len(), 5);
    assert_eq!(
        ext.cost.generated, 5,
        "3 delivered + 2 continued, each once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_usage_is_asked_again_unstreamed_once_per_backend() {
    let fake = Arc::new(Fake {
        scripts: vec![Script::NoUsage { chunks: 4 }],
        ..Fake::default()
    });
    clock();
    let url = backend(&fake).await;
    let generator = RemoteGenerator::new(pool(vec![url], Duration::from_secs(30)));
    for _ in 0..2 {
        let ext = extend(&generator, 50).await.expect("answered unstreamed");
        assert_eq!((ext.cost.generated, ext.text.len()), (4, 12));
    }
    let streamed: Vec<bool> = fake
        .calls()
        .iter()
        .map(|c| c.body["stream"] == json!(true))
        .collect();
    assert_eq!(streamed, [true, false, false], "the choice is made once");
}

#[tokio::test(start_paused = true)]
async fn an_error_event_mid_stream_is_the_backends_refusal() {
    let fake = Arc::new(Fake {
        scripts: vec![Script::ErrorEvent { code: 400 }],
        ..Fake::default()
    });
    clock();
    let url = backend(&fake).await;
    let generator = RemoteGenerator::new(pool(vec![url], Duration::from_secs(30)));
    let err = extend(&generator, 50).await.expect_err("refused");
    match err {
        StrategyError::Generator(GeneratorError::Refused { status, body, .. }) => {
            assert_eq!(status, 400);
            assert!(body.contains("prompt too long"), "{body}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(fake.calls().len(), 1, "a refusal is not retried");
}

#[tokio::test(start_paused = true)]
async fn a_clients_traceparent_and_request_id_reach_the_backend() {
    let fake = Arc::new(Fake {
        scripts: vec![Script::Stream {
            chunks: 2,
            gap: Duration::from_millis(1),
        }],
        ..Fake::default()
    });
    clock();
    let url = backend(&fake).await;
    let state =
        ponder::api::ServerBuilder::remote_only(pool(vec![url], Duration::from_secs(30))).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ponder = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(ponder::api::serve(listener, state, std::future::pending()));
    let client = reqwest::Client::new();
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let requests = [
        (
            "/v1/completions",
            json!({"model": "ponder", "prompt": PROMPT, "max_tokens": 4}),
        ),
        (
            "/v1/reason",
            json!({"problem": "What is 3 + 4?", "strategy": "best_of_n",
                "params": {"n": 1, "max_tokens": 4}, "budget_tokens": 2000}),
        ),
    ];
    for (i, (route, body)) in requests.iter().enumerate() {
        let id = format!("req-{i}");
        let r = client
            .post(format!("{ponder}{route}"))
            .header("traceparent", traceparent)
            .header("x-request-id", &id)
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            200,
            "{route}: {}",
            r.text().await.unwrap_or_default()
        );
        let calls = fake.calls();
        let last = calls.last().expect("the backend was called");
        assert_eq!(last.headers["traceparent"], traceparent, "{route}");
        assert_eq!(last.headers["x-request-id"], id.as_str(), "{route}");
    }
}
