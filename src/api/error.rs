//! The one place errors become HTTP: [`AppError`] maps validation, strategy and engine errors to
//! a status code and OpenAI's error JSON (`{"error": {"message", "type", "param", "code"}}`), so
//! handlers use `?` and clients written for OpenAI read our errors unchanged. Messages name the
//! field and the limit; none carries an API key. A request over a limit is a 400, as OpenAI and
//! vLLM answer, its `code` naming the limit (`limit_exceeded`, `budget_too_small`,
//! `kv_capacity_exceeded`); a backend's refusal (a 4xx) reaches the client as that 4xx with the
//! backend's message.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ponder_strategies::{GeneratorError, StrategyError};
use ponder_verifiers::VerifierError;
use serde::Serialize;
use thiserror::Error;
use utoipa::ToSchema;

use ponder_engine::EngineError;

/// A request rejected by validation: each message names the field and what is allowed.
#[derive(Debug, Error)]
pub enum ValidationError {
    /// A field has a value outside what the API accepts.
    #[error("invalid value for {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A field is over one of this server's configured limits.
    #[error("{field} = {got} is over this server's limit of {limit}")]
    OverLimit {
        /// The offending field.
        field: &'static str,
        /// The limit.
        limit: u64,
        /// What was asked for.
        got: u64,
    },
    /// The model name is neither `ponder` nor `ponder/<strategy>`.
    #[error("the model {0:?} does not exist; GET /v1/models lists the models")]
    UnknownModel(String),
    /// The prompt plus the completion do not fit the model's context.
    #[error("this model's maximum context length is {context} tokens, but the request needs {tokens} ({prompt} in the prompt)")]
    ContextLength {
        /// Prompt tokens.
        prompt: usize,
        /// Prompt plus requested completion tokens.
        tokens: usize,
        /// The model's context length.
        context: usize,
    },
}

impl ValidationError {
    /// Shorthand for [`ValidationError::Invalid`].
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

/// Any error a handler returns.
#[derive(Debug, Error)]
pub enum AppError {
    /// The request failed validation.
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// The body is not valid JSON for the endpoint (or has the wrong shape).
    #[error("could not parse the JSON body: {0}")]
    MalformedJson(String),
    /// The body is not `application/json`.
    #[error("expected a request with Content-Type: application/json")]
    UnsupportedMediaType,
    /// The body is over the size limit.
    #[error("the request body is over this server's limit of {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Missing or wrong bearer API key.
    #[error("incorrect or missing API key; send it as `Authorization: Bearer <key>`")]
    Unauthorized,
    /// The queue is full.
    #[error("the server is at capacity ({queued} requests queued); retry after {retry_after_s} s")]
    Overloaded {
        /// Requests queued or running.
        queued: usize,
        /// Seconds to wait.
        retry_after_s: u64,
    },
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Draining,
    /// A strategy failed or was misconfigured.
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    /// The engine failed.
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    /// The router failed choosing worked examples (the encoder's forward pass).
    #[error("router: {0}")]
    Router(#[from] crate::router::RouterError),
    /// The server has neither a local model nor a backend to run a request on.
    #[error("backend: no local model and no backend")]
    NoEngine,
    /// No route.
    #[error("no such endpoint")]
    NotFound,
    /// The handler panicked (a bug, logged with its message); the connection stays usable.
    #[error("internal error: the server hit a bug answering this request (it is logged)")]
    Panicked,
    /// A response body (or the OpenAPI document) could not be encoded: a bug.
    #[error("internal error: could not encode the response: {0}")]
    Encode(String),
}

/// OpenAI's error body.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// OpenAI's error object.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Human-readable, naming the field and limit.
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `rate_limit_error`, `server_error`…
    #[serde(rename = "type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
    /// The offending request field, if any.
    pub param: Option<String>,
    /// A machine-readable code, if any.
    #[schema(value_type = Option<String>)]
    pub code: Option<&'static str>,
}

impl AppError {
    /// The status, error type, offending field and code.
    fn parts(&self) -> Parts {
        match self {
            Self::Validation(v) => match v {
                ValidationError::Invalid { field, .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some((*field).into()),
                    None,
                ),
                ValidationError::OverLimit { field, .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some((*field).into()),
                    Some("limit_exceeded"),
                ),
                ValidationError::UnknownModel(_) => (
                    StatusCode::NOT_FOUND,
                    INVALID,
                    Some("model".into()),
                    Some("model_not_found"),
                ),
                ValidationError::ContextLength { .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("messages".into()),
                    Some("context_length_exceeded"),
                ),
            },
            Self::MalformedJson(_) => {
                (StatusCode::BAD_REQUEST, INVALID, None, Some("invalid_json"))
            }
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID,
                None,
                Some("unsupported_media_type"),
            ),
            Self::PayloadTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                INVALID,
                None,
                Some("payload_too_large"),
            ),
            Self::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                None,
                Some("invalid_api_key"),
            ),
            Self::Overloaded { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                None,
                Some("queue_full"),
            ),
            Self::Draining => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                None,
                Some("shutting_down"),
            ),
            Self::Strategy(e) => match e {
                StrategyError::UnknownStrategy { .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("strategy".into()),
                    Some("unknown_strategy"),
                ),
                StrategyError::InvalidParameter { field, .. } => {
                    (StatusCode::BAD_REQUEST, INVALID, Some(field.clone()), None)
                }
                StrategyError::BudgetTooSmall { .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("budget_tokens".into()),
                    Some("budget_too_small"),
                ),
                StrategyError::BudgetExhausted { .. } => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("budget_tokens".into()),
                    Some("budget_exhausted"),
                ),
                StrategyError::DeadlineExceeded { .. } => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "server_error",
                    None,
                    Some("deadline_exceeded"),
                ),
                StrategyError::Cancelled => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    None,
                    Some("cancelled"),
                ),
                StrategyError::Generator(GeneratorError::Unavailable { .. })
                | StrategyError::Verifier(VerifierError::Unavailable { .. }) => (
                    StatusCode::BAD_GATEWAY,
                    "server_error",
                    None,
                    Some("backend_unavailable"),
                ),
                StrategyError::Capacity(_) => {
                    (StatusCode::BAD_REQUEST, INVALID, None, Some(KV_CAPACITY))
                }
                StrategyError::Generator(GeneratorError::Engine(e)) => {
                    match e.downcast_ref::<EngineError>() {
                        Some(e) => engine_parts(e),
                        None => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "server_error",
                            None,
                            None,
                        ),
                    }
                }
                StrategyError::Generator(GeneratorError::InvalidPrompt(_)) => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("prompt".into()),
                    None,
                ),
                StrategyError::Generator(GeneratorError::InvalidRequest { field, .. }) => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some((*field).into()),
                    None,
                ),
                StrategyError::Generator(GeneratorError::Refused { status, .. }) => {
                    refused_parts(*status)
                }
                // The server's verifier cannot judge what the requested strategy scores.
                StrategyError::Verifier(VerifierError::InvalidRequest { .. }) => (
                    StatusCode::BAD_REQUEST,
                    INVALID,
                    Some("strategy".into()),
                    None,
                ),
                StrategyError::Generator(_) | StrategyError::Verifier(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    None,
                    None,
                ),
            },
            Self::Engine(e) => engine_parts(e),
            Self::NoEngine => (
                StatusCode::BAD_GATEWAY,
                "server_error",
                None,
                Some("backend_unavailable"),
            ),
            Self::NotFound => (StatusCode::NOT_FOUND, INVALID, None, Some("not_found")),
            Self::Router(_) | Self::Panicked | Self::Encode(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                None,
                Some("internal_error"),
            ),
        }
    }

    /// The HTTP status this error maps to.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    /// What the client reads: this error's text, except that a backend's refusal is the
    /// backend's own message (its OpenAI-shaped `error.message`, else its body as sent; the
    /// backend's address stays in the server's logs).
    pub fn message(&self) -> String {
        match self {
            Self::Strategy(StrategyError::Generator(GeneratorError::Refused {
                status,
                body,
                ..
            })) => format!(
                "the backend refused the request (HTTP {status}): {}",
                backend_message(body)
            ),
            other => other.to_string(),
        }
    }

    /// OpenAI's error body for this error.
    pub fn body(&self) -> ErrorBody {
        let (_, kind, param, code) = self.parts();
        ErrorBody {
            error: ErrorDetail {
                message: self.message(),
                kind,
                param,
                code,
            },
        }
    }
}

type Parts = (
    StatusCode,
    &'static str,
    Option<String>,
    Option<&'static str>,
);

const INVALID: &str = "invalid_request_error";
// The request's fan-out (n x max_tokens) needs more KV blocks than the server has.
const KV_CAPACITY: &str = "kv_capacity_exceeded";

/// The message of a backend's error body: OpenAI's `{"error": {"message"}}`, vLLM's and
/// llama.cpp's `{"message"}` or FastAPI's `{"detail"}`; else the body as sent (already cut short
/// and with any API key redacted where the backend pool read it).
fn backend_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.to_string();
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    };
    v.pointer("/error/message")
        .or_else(|| v.get("message"))
        .or_else(|| v.get("detail"))
        .or_else(|| v.get("error"))
        .and_then(text)
        .unwrap_or_else(|| body.to_string())
}

/// The status, error type, offending field and code of a backend's refusal (a 4xx): the
/// request's fault, so the client gets the backend's status and its message. A backend that
/// refuses this server itself (its key, its model name, its route: 401, 403, 404, 405, 407)
/// is this server's misconfiguration, not the client's, and no status the client could act on:
/// a 502.
fn refused_parts(status: u16) -> Parts {
    match StatusCode::from_u16(status) {
        Ok(s) if s.is_client_error() && !matches!(status, 401 | 403 | 404 | 405 | 407) => {
            (s, INVALID, None, Some("backend_refused"))
        }
        _ => (
            StatusCode::BAD_GATEWAY,
            "server_error",
            None,
            Some("backend_refused"),
        ),
    }
}

/// The status, error type, offending field and code of an engine error (raised directly, or
/// behind the generator port).
fn engine_parts(e: &EngineError) -> Parts {
    match e {
        EngineError::PromptTooLong { .. } => (
            StatusCode::BAD_REQUEST,
            INVALID,
            Some("messages".into()),
            Some("context_length_exceeded"),
        ),
        EngineError::InvalidInput { field, .. } => (
            StatusCode::BAD_REQUEST,
            INVALID,
            Some((*field).into()),
            None,
        ),
        EngineError::ExceedsKvPool { .. } => {
            (StatusCode::BAD_REQUEST, INVALID, None, Some(KV_CAPACITY))
        }
        EngineError::ChatTemplate(_) => (
            StatusCode::BAD_REQUEST,
            INVALID,
            Some("messages".into()),
            None,
        ),
        // The model's thread is gone (shutting down, or it failed): /ready says 503 too.
        EngineError::ExecutorStopped => (
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            None,
            Some("executor_stopped"),
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            None,
            None,
        ),
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(%status, error = %self, "request failed");
        }
        let mut response = (status, Json(self.body())).into_response();
        if let Self::Overloaded { retry_after_s, .. } = &self {
            if let Ok(v) = HeaderValue::from_str(&retry_after_s.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if matches!(self, Self::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Result alias for handlers.
pub(crate) type Result<T, E = AppError> = std::result::Result<T, E>;

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
