//! The HTTP API (axum): OpenAI-compatible `/v1/chat/completions` and `/v1/completions` with
//! Ponder's budget extensions, the native `/v1/reason`, discovery (`/v1/models`,
//! `/v1/strategies`, `/openapi.json`), operations (`/health`, `/ready`, `/metrics`), and the
//! browser pages (`/` playground, `/trace`, `/report`; see `api/ui.rs`).
//!
//! [`ServerBuilder`] assembles an [`AppState`] (runtime, strategy registry — users register their
//! own strategies here —, limits, API keys); [`app`] turns it into a `Router` that tests drive
//! in-process and [`serve`] runs on a listener with graceful shutdown. Handlers share the state
//! through `Arc`s and message the executor actor; no lock is held across an `.await`. Errors
//! all go through [`AppError`] (the OpenAI error shape). Every request carries an id and a
//! span (`api/trace.rs`): `x-request-id` in, the same header out, one access log line at `info`.
//! Follows TGI's router and axum's layout.

mod chat_fields;
pub mod cli;
#[cfg(test)]
mod defaults_tests;
mod echo;
mod effort;
mod error;
mod extract;
#[cfg(test)]
mod field_inventory_tests;
mod fields;
mod generate;
mod guard;
mod handlers;
#[cfg(test)]
mod hostile_tests;
mod metrics;
mod openapi;
mod plain;
mod responses;
mod schemas;
mod sse;
#[doc(hidden)]
pub mod sse_wire;
mod thinking;
mod trace;
mod types;
mod ui;
mod validate;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use ponder_strategies::{Generator, Registry};
use ponder_verifiers::{ReasoningChoice, ReasoningParser, Verifier};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub use error::{AppError, ErrorBody, ErrorDetail, ValidationError};
pub use guard::{Admission, ApiKeys};
pub use metrics::Metrics;
pub use validate::{check_body, Limits};

use crate::backends::{RemoteGenerator, RemotePool};
use crate::prm::SearchVerifier;
use crate::router::{Exemplars, Shot};
use extract::BodyLimit;
use ponder_engine::InterToken;
use ponder_engine::Runtime;

/// Everything a handler can reach.
pub struct AppState {
    /// The local engine; `None` when every request runs on the backends.
    runtime: Option<Arc<Runtime>>,
    remote: Option<Arc<RemotePool>>,
    registry: Arc<Registry>,
    verifier: Option<SearchVerifier>,
    exemplars: Option<ExampleSource>,
    limits: Limits,
    keys: ApiKeys,
    metrics: Arc<Metrics>,
    admission: Arc<Admission>,
    draining: AtomicBool,
    model_id: String,
    created: u64,
    /// Splits a chat reply's thinking off its content (`None`: never split): the server's
    /// `--reasoning-parser`, resolved against the model's chat template.
    reasoning: Option<ReasoningParser>,
    /// What `auto` resolves to for this server's model (a request's `reasoning_parser`).
    template_parser: ReasoningParser,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("model", &self.model_id)
            .field("registry", &self.registry)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// Builds a worked-example pool (for [`ServerBuilder::exemplars_on_first_use`]).
pub type ExemplarLoader = Arc<dyn Fn() -> crate::router::Result<Exemplars> + Send + Sync>;

/// Where a search's worked examples (`shots`) come from.
enum ExampleSource {
    /// A pool built before the server started.
    Ready(Arc<Exemplars>),
    /// A pool built on the first request that asks for examples.
    OnFirstUse {
        load: ExemplarLoader,
        pool: tokio::sync::OnceCell<Arc<Exemplars>>,
    },
}

impl AppState {
    /// The `k` worked examples the router chooses for `question` from the server's pool (none
    /// for `k` 0). A request that asks for examples from a server without a pool is refused,
    /// naming `shots`.
    async fn worked_examples(&self, question: &str, k: usize) -> Result<Vec<Shot>, AppError> {
        // A blank question is refused by the request's validation next; nothing to choose for.
        if k == 0 || question.trim().is_empty() {
            return Ok(Vec::new());
        }
        let pool = match &self.exemplars {
            None => {
                return Err(ValidationError::invalid(
                    "shots",
                    "this server has no worked-example pool (start it with --exemplars FILE)",
                )
                .into())
            }
            Some(ExampleSource::Ready(pool)) => Arc::clone(pool),
            Some(ExampleSource::OnFirstUse { load, pool }) => Arc::clone(
                pool.get_or_try_init(|| async {
                    let load = Arc::clone(load);
                    match tokio::task::spawn_blocking(move || load()).await {
                        Ok(loaded) => Ok(Arc::new(loaded?)),
                        Err(_) => Err(AppError::Panicked),
                    }
                })
                .await?,
            ),
        };
        Ok(pool.nearest(question, k)?)
    }

    /// A generator for one request: over the remote backends when there are any (passing on
    /// the request's id and trace context, [`trace::forwarded`]), else local (reporting
    /// inter-token latencies to the metrics); either way traced per call.
    /// (`ServerBuilder` only builds states with a runtime, a pool or both.)
    fn generator(&self) -> Result<Arc<dyn Generator>, AppError> {
        let inner: Arc<dyn Generator> = match (&self.remote, &self.runtime) {
            (Some(pool), _) => {
                Arc::new(RemoteGenerator::new(Arc::clone(pool)).with_headers(&trace::forwarded()))
            }
            (None, Some(runtime)) => {
                let metrics = Arc::clone(&self.metrics);
                let on_token = InterToken(Arc::new(move |d: std::time::Duration| {
                    metrics.inter_token(d)
                }));
                Arc::new(runtime.local_generator().with_inter_token(on_token))
            }
            (None, None) => return Err(AppError::NoEngine),
        };
        Ok(Arc::new(trace::Traced(inner)))
    }

    /// Stops admitting generation requests; `/ready` answers 503 from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is draining.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// How a chat reply's thinking is split off: the request's `reasoning_parser` when it sets
    /// one, else the server's.
    fn reasoning_parser(&self, asked: Option<&ReasoningChoice>) -> Option<ReasoningParser> {
        match asked {
            None => self.reasoning.clone(),
            Some(ReasoningChoice::Auto) => Some(self.template_parser.clone()),
            Some(choice) => choice.resolve(None),
        }
    }
}

/// Assembles the server's state: a runtime, the strategies it can run, its limits and keys.
pub struct ServerBuilder {
    runtime: Option<Arc<Runtime>>,
    registry: Registry,
    verifier: Option<SearchVerifier>,
    exemplars: Option<ExampleSource>,
    limits: Limits,
    keys: ApiKeys,
    model_id: String,
    remote: Option<Arc<RemotePool>>,
    reasoning: ReasoningChoice,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("registry", &self.registry)
            .field("limits", &self.limits)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// A server over `runtime` with the built-in strategies, default limits and no API keys.
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self::with_engines(Some(runtime), None)
    }

    /// A server with no local model: every request — plain decoding, `n` choices, strategies,
    /// an LLM verifier — runs on `pool`'s backends.
    pub fn remote_only(pool: Arc<RemotePool>) -> Self {
        Self::with_engines(None, Some(pool))
    }

    fn with_engines(runtime: Option<Arc<Runtime>>, remote: Option<Arc<RemotePool>>) -> Self {
        Self {
            runtime,
            registry: Registry::with_builtins(),
            verifier: None,
            exemplars: None,
            limits: Limits::default(),
            keys: ApiKeys::none(),
            model_id: "ponder-local".into(),
            remote,
            reasoning: ReasoningChoice::Auto,
        }
    }

    /// Replaces the strategy registry.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = registry;
        self
    }

    /// Registers more strategies (a user's plug-ins) on the registry, e.g.
    /// `.register(my_crate::register)`; they are then callable by name over the API.
    pub fn register(mut self, f: impl FnOnce(&mut Registry)) -> Self {
        f(&mut self.registry);
        self
    }

    /// Scores strategies' candidates with `verifier`, shared by every search.
    pub fn verifier(mut self, verifier: Arc<dyn Verifier>) -> Self {
        self.verifier = Some(SearchVerifier::Shared(verifier));
        self
    }

    /// Scores strategies' candidates with a verifier given to each search by `verifier` (the
    /// LLM-as-PRM is built per search, so its state dies with the search).
    pub fn search_verifier(mut self, verifier: SearchVerifier) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Chooses a search request's `shots` worked examples from `pool`.
    pub fn exemplars(mut self, pool: Arc<Exemplars>) -> Self {
        self.exemplars = Some(ExampleSource::Ready(pool));
        self
    }

    /// Chooses them from the pool `load` builds on the first request that asks for examples
    /// (embedding the shipped pool the first time takes minutes on a small CPU, which a server
    /// whose requests rarely ask should not spend starting). A failed load fails that request
    /// and is tried again on the next.
    pub fn exemplars_on_first_use(mut self, load: ExemplarLoader) -> Self {
        self.exemplars = Some(ExampleSource::OnFirstUse {
            load,
            pool: tokio::sync::OnceCell::new(),
        });
        self
    }

    /// Runs every request (plain decoding and strategies) on remote OpenAI-compatible servers
    /// instead of the local engine.
    pub fn remote(mut self, pool: Arc<RemotePool>) -> Self {
        self.remote = Some(pool);
        self
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Requires one of `keys` as a bearer token on every endpoint but `/health`, `/ready` and the
    /// browser pages' static files (whose API calls then send the key).
    pub fn api_keys(mut self, keys: ApiKeys) -> Self {
        self.keys = keys;
        self
    }

    /// The id `/v1/models` lists for plain decoding (besides `ponder` and `ponder/<strategy>`).
    pub fn model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = id.into();
        self
    }

    /// How a chat reply's thinking block is split off its content (`--reasoning-parser`): by
    /// default ([`ReasoningChoice::Auto`]) with the tags the model's chat template writes, else
    /// `<think>` tags; a parser (`Some`) or [`ReasoningChoice::Off`] (`None`: replies stay
    /// whole) otherwise.
    pub fn reasoning_parser(mut self, choice: impl Into<ReasoningChoice>) -> Self {
        self.reasoning = choice.into();
        self
    }

    /// The shared state.
    pub fn build(self) -> Arc<AppState> {
        let model_id = self.model_id;
        // The model's context length (vLLM's `max_model_len`): the local model's, else the
        // backends' when known, else 0 (unknown).
        let context = match (&self.runtime, &self.remote) {
            (Some(runtime), _) => runtime.model.model.config().context_length,
            (None, Some(pool)) => pool.context().unwrap_or(0),
            (None, None) => 0,
        };
        // `auto`'s tags: those of the chat template prompts are rendered with (the backends'
        // when they serve, else the local model's).
        let template = match (&self.remote, &self.runtime) {
            (Some(pool), _) => pool.chat_template_source(),
            (None, Some(runtime)) => runtime.model.chat_template.as_ref().map(|t| t.source()),
            (None, None) => None,
        };
        let template_parser = ReasoningChoice::Auto.resolve(template).unwrap_or_default();
        let reasoning = self.reasoning.resolve(template);
        let metrics = Arc::new(Metrics::new(&model_id, context));
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Arc::new(AppState {
            admission: Arc::new(Admission::new(
                self.limits.max_running,
                self.limits.max_queue,
                self.limits.retry_after_s,
            )),
            runtime: self.runtime,
            remote: self.remote,
            registry: Arc::new(self.registry),
            verifier: self.verifier,
            exemplars: self.exemplars,
            limits: self.limits,
            keys: self.keys,
            metrics,
            draining: AtomicBool::new(false),
            model_id,
            created,
            reasoning,
            template_parser,
        })
    }
}

/// The router over `state`.
pub fn app(state: Arc<AppState>) -> Router {
    let limit = state.limits.max_body_bytes;
    Router::new()
        .route("/v1/chat/completions", post(generate::chat_completions))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/reason", post(generate::reason))
        .route("/v1/strategies", get(handlers::strategies))
        .route("/v1/models", get(handlers::models))
        .route("/health", get(handlers::health))
        .route("/ready", get(handlers::ready))
        .route("/metrics", get(handlers::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .merge(ui::routes())
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), observe))
        .layer(middleware::from_fn(
            move |mut req: Request, next: Next| async move {
                req.extensions_mut().insert(BodyLimit(limit));
                next.run(req).await
            },
        ))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(trace::layer())
        .layer(middleware::from_fn(trace::request_id))
        .with_state(state)
}

/// A handler that panicked answers 500 in OpenAI's shape, and the panic is logged, instead of
/// the connection being dropped without a response.
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".into());
    tracing::error!(panic = %message, "a request handler panicked");
    AppError::Panicked.into_response()
}

/// Checks the bearer key on every endpoint but the probes and the browser pages' static assets
/// (the pages send the key with every API call they make).
async fn authenticate(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let open = matches!(req.uri().path(), "/health" | "/ready") || ui::is_open(req.uri().path());
    let auth = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if !open && !state.keys.allows(auth) {
        // Never the header itself: a wrong key is often a real key for another service.
        tracing::debug!(path = %req.uri().path(), "refused: missing or wrong API key");
        return AppError::Unauthorized.into_response();
    }
    next.run(req).await
}

/// Counts requests by route and status (the access log is `trace::layer`'s; generation
/// handlers time themselves).
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    state.metrics.request(&route, response.status().as_u16());
    response
}

/// Serves `state` on `listener` until `shutdown` resolves, then drains: `/ready` turns 503, new
/// generation requests are refused, and in-flight ones finish (the caller bounds the wait).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let drain = Arc::clone(&state);
    let router = app(state);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!("shutting down: draining in-flight requests");
            drain.start_draining();
        })
        .await
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = term => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use axum::body::{to_bytes, Body};
    use axum::http::StatusCode;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_openais_shape() {
        let app = Router::new()
            .route(
                "/boom",
                get(|| async { panic!("index out of bounds") as &'static str }),
            )
            .layer(CatchPanicLayer::custom(panic_response));
        let request = Request::builder()
            .uri("/boom")
            .body(Body::empty())
            .map_err(|e| e.to_string());
        let response = app
            .oneshot(request.expect("request"))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = to_bytes(response.into_body(), 1 << 16).await.expect("body");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(json["error"]["type"], "server_error", "{json}");
        assert_eq!(json["error"]["code"], "internal_error", "{json}");
    }
}
