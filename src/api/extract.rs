//! [`ApiJson`]: the JSON body extractor every POST endpoint uses, so that a wrong content type,
//! an oversized body and malformed JSON become OpenAI-shaped 415 / 413 / 400 errors (axum's own
//! `Json` rejections are plain text).
#![deny(clippy::indexing_slicing)]

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use super::error::AppError;

/// A JSON body of type `T`.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub T);

/// Whether the request says its body is JSON (`application/json`, any parameters, or `+json`).
fn is_json(req: &Request) -> bool {
    let Some(ct) = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(&req) {
            return Err(AppError::UnsupportedMediaType);
        }
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                AppError::PayloadTooLarge { limit }
            } else {
                AppError::MalformedJson(e.body_text())
            }
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = T::deserialize(&mut de).map_err(|e| AppError::MalformedJson(e.to_string()))?;
        de.end()
            .map_err(|e| AppError::MalformedJson(e.to_string()))?;
        Ok(Self(value))
    }
}

/// The body limit in force, put in request extensions by the router so rejections can name it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);
