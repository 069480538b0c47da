//! The small endpoints: liveness and readiness probes, the model and strategy lists, metrics,
//! and the OpenAI-shaped 404 / 405 fallbacks.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::AppError;
use super::responses::{
    DefaultAtBudget, Health, ListObject, ModelCard, ModelList, ModelObject, Status, StrategyCard,
    StrategyList,
};
use super::AppState;

/// `GET /health`: the process is up.
#[utoipa::path(get, path = "/health", tag = "operations",
    summary = "Liveness (no API key needed)",
    responses((status = 200, description = "The process is up", body = Status)))]
pub(crate) async fn health() -> Json<Status> {
    Json(Status::of(Health::Ok))
}

/// `GET /ready`: 200 when serving, 503 while draining or when the executor has stopped.
#[utoipa::path(get, path = "/ready", tag = "operations",
    summary = "Readiness (no API key needed)",
    responses(
        (status = 200, description = "Serving", body = Status),
        (status = 503, description = "Draining, or no backend is healthy, or the executor stopped", body = Status),
    ))]
pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let unavailable = |reason: String| {
        let status = Status {
            reason: Some(reason),
            ..Status::of(Health::Unavailable)
        };
        (StatusCode::SERVICE_UNAVAILABLE, Json(status)).into_response()
    };
    if state.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Status::of(Health::Draining)),
        )
            .into_response();
    }
    if let Some(pool) = &state.remote {
        if pool.check_health().await == 0 {
            return unavailable("no backend is healthy".into());
        }
    }
    let ready = Status {
        model: Some(state.model_id.clone()),
        ..Status::of(Health::Ready)
    };
    let Some(runtime) = &state.runtime else {
        return Json(ready).into_response();
    };
    match runtime.counters().await {
        Ok(_) => Json(ready).into_response(),
        Err(e) => unavailable(e.to_string()),
    }
}

/// `GET /v1/models`: `ponder`, the plain model id, and `ponder/<strategy>` for every strategy.
#[utoipa::path(get, path = "/v1/models", tag = "discovery",
    summary = "Models: ponder, the model id, ponder/<strategy>",
    responses((status = 200, description = "The models this server answers to", body = ModelList)))]
pub(crate) async fn models(State(state): State<Arc<AppState>>) -> Json<ModelList> {
    let data = served_models(&state.model_id, &state.registry.names())
        .into_iter()
        .map(|id| ModelCard {
            created: state.created,
            id,
            object: ModelObject::Model,
            owned_by: "ponder".into(),
        })
        .collect();
    Json(ModelList {
        data,
        object: ListObject::List,
    })
}

/// The model names a request may send: `ponder`, the plain model id, `ponder/<strategy>`.
pub(crate) fn served_models(model_id: &str, strategies: &[String]) -> Vec<String> {
    let mut names = vec!["ponder".to_string(), model_id.to_string()];
    names.extend(strategies.iter().map(|n| format!("ponder/{n}")));
    names
}

/// `GET /v1/strategies`: names, descriptions and default parameters.
#[utoipa::path(get, path = "/v1/strategies", tag = "discovery",
    summary = "Strategies with their default parameters",
    responses((status = 200, description = "The registered strategies", body = StrategyList)))]
pub(crate) async fn strategies(State(state): State<Arc<AppState>>) -> Json<StrategyList> {
    let data = state
        .registry
        .list()
        .into_iter()
        .map(|i| StrategyCard {
            defaults: i.defaults,
            description: i.description,
            model: format!("ponder/{}", i.name),
            name: i.name,
        })
        .collect();
    Json(StrategyList {
        data,
        default: state
            .limits
            .default_search(state.limits.default_budget())
            .strategy,
        default_by_budget: state.limits.measured_defaults.as_deref().map(|d| {
            d.by_budget
                .iter()
                .map(|e| DefaultAtBudget {
                    budget: e.budget,
                    strategy: e.strategy.clone(),
                    params: e.params.clone(),
                    accuracy: e.accuracy,
                })
                .collect()
        }),
        object: ListObject::List,
    })
}

/// `GET /metrics`: Prometheus (OpenMetrics) text, engine gauges read fresh.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    summary = "Prometheus metrics",
    responses((status = 200, description = "OpenMetrics text", body = String,
        content_type = "application/openmetrics-text")))]
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
