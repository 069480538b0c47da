//! The small endpoints: liveness and readiness probes, the model and strategy lists, metrics,
//! and the OpenAI-shaped 404 / 405 fallbacks.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::AppError;
use super::AppState;

/// `GET /health`: the process is up.
pub(crate) async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /ready`: 200 when serving, 503 while draining or when the executor has stopped.
pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        )
            .into_response();
    }
    if let Some(pool) = &state.remote {
        if pool.check_health().await == 0 {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "reason": "no backend is healthy"})),
            )
                .into_response();
        }
    }
    let Some(runtime) = &state.runtime else {
        return Json(json!({"status": "ready", "model": state.model_id})).into_response();
    };
    match runtime.counters().await {
        Ok(_) => Json(json!({"status": "ready", "model": state.model_id})).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "reason": e.to_string()})),
        )
            .into_response(),
    }
}

/// `GET /v1/models`: `ponder`, the plain model id, and `ponder/<strategy>` for every strategy.
pub(crate) async fn models(State(state): State<Arc<AppState>>) -> Json<Value> {
    let model = |id: String| json!({"id": id, "object": "model", "created": state.created, "owned_by": "ponder"});
    let mut data = vec![model("ponder".into()), model(state.model_id.clone())];
    data.extend(
        state
            .registry
            .names()
            .into_iter()
            .map(|n| model(format!("ponder/{n}"))),
    );
    Json(json!({"object": "list", "data": data}))
}

/// `GET /v1/strategies`: names, descriptions and default parameters.
pub(crate) async fn strategies(State(state): State<Arc<AppState>>) -> Json<Value> {
    let data: Vec<Value> = state
        .registry
        .list()
        .into_iter()
        .map(|i| json!({"name": i.name, "model": format!("ponder/{}", i.name), "description": i.description, "defaults": i.defaults}))
        .collect();
    Json(json!({"object": "list", "default": state.limits.default_strategy, "data": data}))
}

/// `GET /metrics`: Prometheus (OpenMetrics) text, engine gauges read fresh.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if let Some(runtime) = &state.runtime {
        let counters = runtime.counters().await.ok();
        let kv = runtime.executor.kv_stats().await.ok();
        state.metrics.observe_engine(counters, kv);
    }
    let mut text = state.metrics.encode();
    // The backends' health and latency: their own block, before the final `# EOF`.
    if let Some(pool) = &state.remote {
        text = format!("{}\n", text.trim_end().trim_end_matches("# EOF").trim_end());
        pool.encode_metrics(&mut text);
        text.push_str("# EOF\n");
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Unknown path.
pub(crate) async fn not_found() -> AppError {
    AppError::NotFound
}

/// Known path, wrong method.
pub(crate) async fn method_not_allowed() -> Response {
    let body = AppError::NotFound.body();
    let mut detail = body.error;
    detail.message = "method not allowed on this endpoint".into();
    detail.code = Some("method_not_allowed");
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(super::error::ErrorBody { error: detail }),
    )
        .into_response()
}
