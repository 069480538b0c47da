//! Ponder over other engines' response shapes, replayed from the recorded fixtures in
//! `tests/fixtures/backends/` (one per engine and version; each says where its shape comes
//! from): a small HTTP server answers `/v1/completions` with the fixture's `step` response while
//! the prompt holds fewer than two steps, else with its `final` one (EOS), after validating the
//! request as that engine does (`engine_rules`: a refusal is the engine's 400). Step-level
//! strategies must then take more than one step on every engine — which needs the stop string
//! each engine reports in its own way — and spend exactly the completion tokens the engine
//! reported.
//!
//! Also here: the whole conversation reaches the backend's prompt; an `https://` backend with a
//! key and a private CA; `ponder serve --backend` with no local model installed.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use ponder::backends::{BackendKeys, RemoteGenerator, RemoteOptions, RemotePool};
use ponder::reason::{reason, ReasonRequest};
use ponder_strategies::{NodeStatus, Registry, Turn};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::engine_rules::Engine;

/// The engine fixtures the replay tests run over.
pub(crate) const FIXTURES: [&str; 5] = [
    "vllm.json",
    "sglang.json",
    "llamacpp-server.json",
    "llama-cpp-python.json",
    "ponder.json",
];

pub(crate) fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/backends")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("fixture JSON")
}

/// What the replay server saw and served.
#[derive(Default)]
pub(crate) struct Seen {
    /// Every prompt, in arrival order.
    pub(crate) prompts: Vec<String>,
    /// `usage.completion_tokens` summed over the responses served.
    pub(crate) completion_tokens: u64,
    /// Requests the engine's validation refused, with its message.
    pub(crate) refused: Vec<String>,
}

struct Replay {
    fixture: Value,
    key: Option<String>,
    seen: Mutex<Seen>,
}

/// The text a step response adds to a sequence (its text and the stop string).
fn step_text(f: &Value) -> String {
    format!(
        "{}{}",
        f["step"]["choices"][0]["text"].as_str().unwrap(),
        f["stop"].as_str().unwrap()
    )
}

async fn completions(
    State(r): State<Arc<Replay>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> axum::response::Response {
    if let Some(key) = &r.key {
        let ok = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {key}"));
        if !ok {
            let sent = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // Like some servers, echo what was sent: the client must not pass it on.
            return (StatusCode::UNAUTHORIZED, format!("invalid API key: {sent}")).into_response();
        }
    }
    let engine = Engine::of(&r.fixture);
    if let Err(message) = crate::engine_rules::validate(engine, &body) {
        r.seen
            .lock()
            .unwrap()
            .refused
            .push(format!("{message}: {body}"));
        let status = StatusCode::from_u16(engine.refusal_status()).unwrap();
        let error = json!({"error": {"message": message, "type": "BadRequestError",
            "code": status.as_u16()}});
        return (status, Json(error)).into_response();
    }
    let prompt = body["prompt"].as_str().unwrap_or("").to_string();
    let stop = r.fixture["stop"].as_str().unwrap();
    let asks_for_steps = body["stop"]
        .as_array()
        .is_some_and(|s| s.iter().any(|x| x == stop));
    let steps = prompt.matches(&step_text(&r.fixture)).count();
    let which = if asks_for_steps && steps < 2 {
        "step"
    } else {
        "final"
    };
    let response = r.fixture[which].clone();
    let mut seen = r.seen.lock().unwrap();
    seen.prompts.push(prompt);
    seen.completion_tokens += response["usage"]["completion_tokens"].as_u64().unwrap_or(0);
    Json(response).into_response()
}

/// A replay server on a tokio runtime of its own.
pub(crate) struct ReplayServer {
    pub(crate) url: String,
    pub(crate) addr: SocketAddr,
    replay: Arc<Replay>,
    _rt: tokio::runtime::Runtime,
}

impl ReplayServer {
    pub(crate) fn start(fixture: Value, key: Option<&str>) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let replay = Arc::new(Replay {
            fixture,
            key: key.map(str::to_string),
            seen: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/completions", post(completions))
            .route("/health", get(|| async { "ok" }))
            .with_state(Arc::clone(&replay));
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await });
        Self {
            url: format!("http://{addr}"),
            addr,
            replay,
            _rt: rt,
        }
    }

    pub(crate) fn seen<R>(&self, f: impl FnOnce(&Seen) -> R) -> R {
        f(&self.replay.seen.lock().unwrap())
    }

    /// `ponder serve` with only this server as its backend (its builder finished by
    /// `configure`), on `rt`; its URL.
    pub(crate) fn serve_in_front(
        &self,
        rt: &tokio::runtime::Runtime,
        configure: impl FnOnce(ponder::api::ServerBuilder) -> ponder::api::ServerBuilder,
    ) -> String {
        let state = configure(ponder::api::ServerBuilder::remote_only(pool(
            RemoteOptions::new(vec![self.url.clone()]),
        )))
        .build();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        rt.spawn(ponder::api::serve(listener, state, std::future::pending()));
        url
    }
}

pub(crate) fn pool(opts: RemoteOptions) -> Arc<RemotePool> {
    Arc::new(
        RemotePool::new(RemoteOptions {
            retries: 1,
            backoff: Duration::from_millis(10),
            ..opts
        })
        .expect("pool"),
    )
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn step_level_strategies_take_more_than_one_step_on_every_engine_fixture() {
    for name in FIXTURES {
        let f = fixture(name);
        for strategy in ["beam_search", "dvts", "answer_convergence"] {
            let server = ReplayServer::start(f.clone(), None);
            let generator = Arc::new(RemoteGenerator::new(pool(RemoteOptions::new(vec![server
                .url
                .clone()]))));
            let req = ReasonRequest {
                problem: "What is 3 + 4?".into(),
                history: Vec::new(),
                shots: Vec::new(),
                strategy: strategy.into(),
                params: if strategy == "answer_convergence" {
                    json!({"patience": 2})
                } else {
                    json!({"n": 4})
                },
                budget_tokens: 20_000,
                deadline_ms: None,
                seed: 1,
            };
            let outcome = block_on(reason(
                &Registry::with_builtins(),
                generator,
                None,
                &req,
                CancellationToken::new(),
            ))
            .unwrap_or_else(|e| panic!("{name} {strategy}: {e}"));
            let depth = outcome.tree.nodes().map(|n| n.depth).max().unwrap_or(0);
            assert!(
                depth >= 2,
                "{name} {strategy}: the search stopped after one step (depth {depth})"
            );
            // Steps end at the delimiter the engine reported, put back into the text.
            let step = step_text(&f);
            assert!(
                outcome.tree.nodes().any(|n| n.text == step),
                "{name} {strategy}: no node holds the step {step:?}"
            );
            // Generated tokens are the engine's own count.
            let served = server.seen(|s| s.completion_tokens);
            assert_eq!(
                outcome.usage.generated_tokens, served,
                "{name} {strategy}: usage is not in the engine's tokens"
            );
        }
    }
}

#[test]
fn a_length_cut_is_reported_as_such_on_every_engine_fixture() {
    // The fixture's `length` response answers everything: no step ends, nothing finishes.
    for name in FIXTURES {
        let mut f = fixture(name);
        f["step"] = f["length"].clone();
        f["final"] = f["length"].clone();
        let server = ReplayServer::start(f, None);
        let generator = Arc::new(RemoteGenerator::new(pool(RemoteOptions::new(vec![server
            .url
            .clone()]))));
        let req = ReasonRequest {
            problem: "What is 3 + 4?".into(),
            history: Vec::new(),
            shots: Vec::new(),
            strategy: "beam_search".into(),
            params: json!({"n": 2}),
            budget_tokens: 20_000,
            deadline_ms: None,
            seed: 1,
        };
        let outcome = block_on(reason(
            &Registry::with_builtins(),
            generator,
            None,
            &req,
            CancellationToken::new(),
        ))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Every step is cut at its token cap: none may count as a finished solution (the search
        // goes on past them, as step-level search does, until its step limit).
        let finished = outcome
            .tree
            .nodes()
            .filter(|n| n.status == NodeStatus::Finished)
            .count();
        assert_eq!(finished, 0, "{name}: a cut step is not a finished step");
        assert!(
            outcome
                .tree
                .nodes()
                .any(|n| n.status == NodeStatus::Truncated),
            "{name}: cut steps are marked truncated"
        );
    }
}

fn conversation() -> (Option<String>, Vec<Turn>, String) {
    (
        Some("You are terse.".into()),
        vec![
            Turn::new("user", "My name is Ada."),
            Turn::new("assistant", "Noted, Ada."),
        ],
        "What is 3 + 4? Address me by name.".into(),
    )
}

/// The same conversation as a chat request's messages.
pub(crate) fn conversation_messages() -> Value {
    let (system, history, user) = conversation();
    let mut m = vec![json!({"role": "system", "content": system})];
    m.extend(
        history
            .iter()
            .map(|t| json!({"role": t.role, "content": t.content})),
    );
    m.push(json!({"role": "user", "content": user}));
    Value::Array(m)
}

#[test]
fn the_whole_conversation_reaches_the_backend_prompt() {
    let server = ReplayServer::start(fixture("vllm.json"), None);
    let rt = crate::util::runtime(1);
    let url = server.serve_in_front(&rt, |b| b);
    let client = reqwest::Client::new();
    for strategy in [Some("best_of_n"), None] {
        let mut body =
            json!({"model": "ponder", "messages": conversation_messages(), "max_tokens": 16});
        if let Some(s) = strategy {
            body["strategy"] = json!(s);
            body["strategy_params"] = json!({"n": 1});
        }
        let (status, reply) = rt.block_on(async {
            let r = client
                .post(format!("{url}/v1/chat/completions"))
                .json(&body)
                .send()
                .await
                .unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        });
        assert_eq!(status, 200, "{strategy:?}: {reply}");
        let first = server.seen(|s| s.prompts.last().cloned()).unwrap();
        let expected = "<|im_start|>system\nYou are terse.<|im_end|>\n\
             <|im_start|>user\nMy name is Ada.<|im_end|>\n\
             <|im_start|>assistant\nNoted, Ada.<|im_end|>\n\
             <|im_start|>user\nWhat is 3 + 4? Address me by name.<|im_end|>\n\
             <|im_start|>assistant\n";
        assert!(
            first.starts_with(expected),
            "{strategy:?}: the backend was prompted with {first:?}"
        );
    }
}

/// A TLS terminator on loopback in front of `backend`, with a certificate for 127.0.0.1 signed
/// by a fresh CA; returns its https URL and the CA's PEM file.
pub(crate) fn tls_front(
    rt: &tokio::runtime::Runtime,
    backend: SocketAddr,
    dir: &Path,
) -> (String, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use tokio_rustls::rustls;
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (format!("https://127.0.0.1:{}", addr.port()), ca_file)
}

const KEY: &str = "sk-ponder-test-5f0e2c91";

#[test]
fn an_https_backend_with_a_key_and_a_private_ca_works_and_the_key_never_shows() {
    let server = ReplayServer::start(fixture("vllm.json"), Some(KEY));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (url, ca) = tls_front(&rt, server.addr, dir.path());
    let req = ReasonRequest {
        problem: "What is 3 + 4?".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "beam_search".into(),
        params: json!({"n": 2}),
        budget_tokens: 20_000,
        deadline_ms: None,
        seed: 1,
    };
    let run = |opts: RemoteOptions| {
        let p = pool(opts);
        let shown = format!("{p:?}");
        assert!(!shown.contains(KEY), "Debug shows the key: {shown}");
        let generator = Arc::new(RemoteGenerator::new(p));
        rt.block_on(reason(
            &Registry::with_builtins(),
            generator,
            None,
            &req,
            CancellationToken::new(),
        ))
    };
    let with = |keys: &str, ca: Option<&Path>| RemoteOptions {
        keys: BackendKeys::parse(keys),
        ca: ca.map(Path::to_path_buf),
        ..RemoteOptions::new(vec![url.clone()])
    };
    // The right key, the CA trusted: a multi-step search runs over TLS.
    let outcome = run(with(&format!("{url} {KEY}"), Some(&ca))).expect("https with key");
    assert!(outcome.tree.nodes().any(|n| n.depth >= 2));
    // Without the CA the certificate is refused.
    let err = run(with(KEY, None)).expect_err("unknown CA").to_string();
    assert!(err.contains("backend unavailable"), "{err}");
    // A wrong key is refused; the server echoes it back, the error does not.
    let wrong = "sk-wrong-key-77aa";
    let err = run(with(wrong, Some(&ca)))
        .expect_err("wrong key")
        .to_string();
    assert!(err.contains("401"), "{err}");
    assert!(!err.contains(wrong) && !err.contains(KEY), "{err}");
}

#[test]
fn serve_with_only_a_backend_and_no_local_model_serves_chat_and_strategies() {
    let server = ReplayServer::start(fixture("vllm.json"), Some(KEY));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (url, ca) = tls_front(&rt, server.addr, dir.path());
    let empty_models = dir.path().join("models");
    std::fs::create_dir(&empty_models).unwrap();
    let key_file = dir.path().join("backend-keys");
    std::fs::write(&key_file, format!("{url} {KEY}\n")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ponder"))
        .args(["serve", "--port", "0", "--backend", &url, "--backend-ca"])
        .arg(&ca)
        .arg("--backend-key-file")
        .arg(&key_file)
        .env("PONDER_MODELS", &empty_models)
        .env_remove("PONDER_MODEL")
        .env("RUST_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ponder serve");
    let ponder = crate::util::served_url(&mut child);
    let client = reqwest::Client::new();
    let chat = |body: Value| {
        crate::util::post_json(
            &rt,
            &client,
            &format!("{ponder}/v1/chat/completions"),
            &body,
        )
    };
    let (status, plain) = chat(
        json!({"model": "ponder", "messages": [{"role": "user", "content": "What is 3 + 4?"}], "max_tokens": 16, "n": 2}),
    );
    assert_eq!(status, 200, "{plain}");
    assert_eq!(
        plain["choices"].as_array().map(Vec::len),
        Some(2),
        "{plain}"
    );
    assert_eq!(
        plain["usage"]["completion_tokens"],
        2 * 11,
        "the backend's own count: {plain}"
    );
    let (status, searched) = chat(
        json!({"model": "ponder/beam_search", "messages": [{"role": "user", "content": "What is 3 + 4?"}], "strategy_params": {"n": 2}, "budget_tokens": 20000}),
    );
    assert_eq!(status, 200, "{searched}");
    assert_eq!(searched["ponder"]["answer"], "7", "{searched}");
    let metrics = rt.block_on(async {
        client
            .get(format!("{ponder}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(
        metrics.contains("ponder_backend_up{backend=") && metrics.trim_end().ends_with("# EOF"),
        "{metrics}"
    );
    let _ = child.kill();
    let _ = child.wait();
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(!logs.is_empty(), "trace logging produced nothing to check");
    assert!(!logs.contains(KEY), "the key is in the logs");
}

#[test]
fn the_whole_conversation_reaches_the_local_prompt() {
    use ponder_engine::forward::encode_prompt;
    use ponder_strategies::Turn;
    let server = crate::server::TestServer::start(|b| b);
    let body = json!({"model": "ponder", "messages": conversation_messages(), "strategy": "best_of_n",
                      "strategy_params": {"n": 1, "max_tokens": 8}, "budget_tokens": 4000});
    let (status, reply) = server.send(
        reqwest::Client::new()
            .post(server.url("/v1/chat/completions"))
            .json(&body),
    );
    assert_eq!(status, 200, "{reply}");
    // The strategy's prompt is the rendered conversation, every message of it, in order.
    let model = crate::util::smollm2();
    let (system, history, user) = conversation();
    let mut messages = vec![Turn::new("system", system.as_deref().unwrap())];
    messages.extend(history.iter().map(|t| Turn::new(&t.role, &t.content)));
    messages.push(Turn::new("user", &user));
    let rendered = model.render_chat(&messages).unwrap();
    assert!(rendered.contains("My name is Ada.") && rendered.contains("Noted, Ada."));
    let expected = encode_prompt(model, &rendered).unwrap().len() as u64;
    assert_eq!(
        reply["ponder"]["usage"]["prompt_tokens"].as_u64(),
        Some(expected),
        "{reply}"
    );
    // The last message alone (what was sent before) is a different, shorter prompt.
    let alone = model
        .render_chat(&[
            Turn::new("system", system.as_deref().unwrap()),
            Turn::new("user", &user),
        ])
        .unwrap();
    assert!(encode_prompt(model, &alone).unwrap().len() < expected as usize);
}
