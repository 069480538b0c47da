//! Request tracing: every request gets an id (the client's `x-request-id` when it sends a sane
//! one, else a fresh one) that is returned in the response's `x-request-id` header and recorded
//! on the request's span; tower-http's `TraceLayer` opens that span and logs one access line per
//! response at `info` (method, route, status, latency). Everything the request causes runs in
//! child spans: the search (`search`), each `extend` of the generator port (`extend`), and on
//! the executor thread each sequence (`sequence`, see `engine::executor`), so one id ties an HTTP
//! request to its search, its model calls and its executor sequences (the way vLLM and TGI
//! thread a request id through their logs). The id and the client's W3C trace context
//! (`traceparent`, `tracestate`) go on to the backends: the middleware holds them in a
//! task-local for the handler's life, and [`super::AppState`]'s generator for the request
//! sends them with every backend call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response};
use axum::middleware::Next;
use ponder_strategies::{
    ChatTemplateKwargs, CostTally, ExtendRequest, Extension, Generator, PieceSender, Prompt,
    Result as StrategyResult, SeqHandle, Turn,
};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{MakeSpan, OnResponse, TraceLayer};
use tracing::{Instrument, Span};

/// The header carrying a request's id, both ways.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-sent id kept (longer ones are replaced by a fresh id).
const MAX_ID_LEN: usize = 128;

tokio::task_local! {
    /// The headers of the request being handled that go on to the backends.
    static FORWARDED: HeaderMap;
}

/// The headers a backend call made for the request being handled carries: its id and the
/// client's trace context (none outside a request).
pub(crate) fn forwarded() -> HeaderMap {
    FORWARDED.try_with(HeaderMap::clone).unwrap_or_default()
}

/// A request's id, in its extensions.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) HeaderValue);

/// A fresh id: 128 random bits in hex.
fn fresh_id() -> HeaderValue {
    use rand::Rng;
    let bits: u128 = rand::rng().random();
    // Hex digits are always a valid header value.
    HeaderValue::from_str(&format!("{bits:032x}")).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// The client's id when it is short and printable, else a fresh one.
fn id_of(req: &Request) -> HeaderValue {
    match req.headers().get(&REQUEST_ID) {
        Some(v)
            if !v.is_empty()
                && v.len() <= MAX_ID_LEN
                && v.as_bytes().iter().all(|b| b.is_ascii_graphic()) =>
        {
            v.clone()
        }
        _ => fresh_id(),
    }
}

/// Middleware (outside `TraceLayer`): assigns the id and returns it in the response header.
pub(crate) async fn request_id(mut req: Request, next: Next) -> axum::response::Response {
    let id = id_of(&req);
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut forward = HeaderMap::new();
    forward.insert(REQUEST_ID, id.clone());
    for name in ["traceparent", "tracestate"] {
        if let Some(v) = req.headers().get(name) {
            forward.insert(name, v.clone());
        }
    }
    let mut response = FORWARDED.scope(forward, next.run(req)).await;
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

/// Opens the `request` span with the id, method and route.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &axum::http::Request<B>) -> Span {
        let id = req
            .extensions()
            .get::<RequestId>()
            .and_then(|id| id.0.to_str().ok())
            .unwrap_or("-");
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map_or_else(|| req.uri().path(), |p| p.as_str());
        tracing::info_span!(
            "request",
            request_id = %id,
            method = %req.method(),
            route = %route,
        )
    }
}

/// The access log line: one `info` event per response, inside the request's span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AccessLog;

impl<B> OnResponse<B> for AccessLog {
    fn on_response(self, response: &Response<B>, latency: Duration, _span: &Span) {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = latency.as_secs_f64() * 1e3,
            "access"
        );
    }
}

/// The `TraceLayer` of the router.
pub(crate) fn layer(
) -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>, RequestSpan, (), AccessLog> {
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan)
        .on_request(())
        .on_response(AccessLog)
}

/// The generator port with a `debug` span around each call that reaches the model, so the
/// executor's sequence spans (and any backend logs) hang under the request's.
pub(crate) struct Traced(pub(crate) Arc<dyn Generator>);

#[async_trait]
impl Generator for Traced {
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> StrategyResult<(SeqHandle, usize)> {
        self.0.open(prompt, template).await
    }

    fn fork(&self, seq: SeqHandle) -> StrategyResult<SeqHandle> {
        self.0.fork(seq)
    }

    fn append(&self, seq: SeqHandle, text: &str) -> StrategyResult<usize> {
        self.0.append(seq, text)
    }

    fn prefill_bound(&self, seq: SeqHandle) -> StrategyResult<usize> {
        self.0.prefill_bound(seq)
    }

    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> StrategyResult<usize> {
        self.0.prefill_bound_batch(seqs)
    }

    async fn extend(&self, batch: &[ExtendRequest]) -> StrategyResult<Vec<Extension>> {
        traced_extend(batch.len(), self.0.extend(batch)).await
    }

    async fn extend_tallied(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
    ) -> StrategyResult<Vec<Extension>> {
        traced_extend(batch.len(), self.0.extend_tallied(batch, tally)).await
    }

    async fn extend_streamed(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
        pieces: &PieceSender,
    ) -> StrategyResult<Vec<Extension>> {
        traced_extend(batch.len(), self.0.extend_streamed(batch, tally, pieces)).await
    }

    fn release(&self, seq: SeqHandle) {
        self.0.release(seq)
    }

    fn render_chat(&self, turns: &[Turn], template: &ChatTemplateKwargs) -> StrategyResult<String> {
        self.0.render_chat(turns, template)
    }

    async fn open_text(&self, text: &str) -> StrategyResult<(SeqHandle, usize)> {
        self.0.open_text(text).await
    }

    async fn open_tokens(&self, tokens: &[u32]) -> StrategyResult<(SeqHandle, usize)> {
        self.0.open_tokens(tokens).await
    }

    async fn prompt_logprobs(
        &self,
        seq: SeqHandle,
        top: usize,
    ) -> StrategyResult<ponder_strategies::PromptLogprobs> {
        self.0
            .prompt_logprobs(seq, top)
            .instrument(tracing::debug_span!("prompt_logprobs", top))
            .await
    }

    fn context_length(&self) -> Option<usize> {
        self.0.context_length()
    }

    fn vocab_size(&self) -> Option<usize> {
        self.0.vocab_size()
    }
}

/// `call` (one extend of `seqs` sequences) in a `debug` span, logging what it generated.
async fn traced_extend(
    seqs: usize,
    call: impl std::future::Future<Output = StrategyResult<Vec<Extension>>>,
) -> StrategyResult<Vec<Extension>> {
    let span = tracing::debug_span!("extend", seqs);
    async {
        let out = call.await;
        if let Ok(ext) = &out {
            let generated: u64 = ext.iter().map(|e| e.cost.generated).sum();
            tracing::debug!(generated, "extended");
        }
        out
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    fn with_header(v: &str) -> Request {
        let mut req = Request::new(Body::empty());
        if let Ok(v) = HeaderValue::from_str(v) {
            req.headers_mut().insert(REQUEST_ID, v);
        }
        req
    }

    #[test]
    fn a_sane_client_id_is_kept_and_anything_else_replaced() {
        assert_eq!(id_of(&with_header("abc-123")), "abc-123");
        let long = "x".repeat(MAX_ID_LEN + 1);
        for bad in ["", "has space", long.as_str()] {
            let id = id_of(&with_header(bad));
            assert_ne!(id, bad);
            assert_eq!(id.len(), 32, "{id:?}");
        }
        assert_ne!(fresh_id(), fresh_id());
    }
}
