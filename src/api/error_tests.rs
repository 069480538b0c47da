//! The variant → (status, type, param, code) table of [`AppError`], one row per variant of every
//! error it carries, and the regression that motivated it: the status of a failed generator
//! call was once picked by matching its message's prefix, so a changed message changed the
//! status. Each row's message is built to mislead a text match; the variant alone decides.

use std::path::PathBuf;

use axum::http::StatusCode;
use ponder_strategies::{GeneratorError, StrategyError};
use ponder_verifiers::VerifierError;

use super::{AppError, ValidationError};
use ponder_engine::EngineError;

/// What a client should see: status, `type`, `param`, `code`.
type Seen<'a> = (u16, &'a str, Option<&'a str>, Option<&'a str>);

fn generator(e: GeneratorError) -> AppError {
    AppError::Strategy(StrategyError::Generator(e))
}

/// What a client sees of `e`: status, `type`, `param`, `code`.
fn seen(e: &AppError) -> (u16, String, Option<String>, Option<String>) {
    let body = serde_json::to_value(e.body()).expect("body");
    let detail = &body["error"];
    assert_eq!(
        detail["message"],
        e.message(),
        "the body carries the message"
    );
    let text = |k: &str| detail[k].as_str().map(str::to_string);
    (
        e.status().as_u16(),
        text("type").expect("type"),
        text("param"),
        text("code"),
    )
}

/// Every generator variant, each with a message that says "backend unavailable" somewhere: only
/// `Unavailable` is a 502.
#[test]
fn generator_errors_map_by_variant_not_by_message() {
    let misleading = "backend unavailable: every attempt failed";
    let unavailable = [
        generator(GeneratorError::Unavailable {
            attempts: 3,
            last: "http://a:1: HTTP 503".into(),
        }),
        // The message no longer starts with the old prefix: still the same variant, same status.
        generator(GeneratorError::Unavailable {
            attempts: 0,
            last: String::new(),
        }),
        // The LLM-as-PRM's judge behind the same backends: its outage is one too.
        AppError::Strategy(StrategyError::Verifier(VerifierError::Unavailable {
            verifier: "llm-prm".into(),
            message: "backend unavailable: 3 attempts failed".into(),
        })),
    ];
    for e in unavailable {
        assert_eq!(
            seen(&e),
            (
                502,
                "server_error".into(),
                None,
                Some("backend_unavailable".into())
            ),
            "{e}"
        );
    }
    let failures = [
        GeneratorError::MalformedResponse {
            missing: "choices",
            shown: misleading.into(),
        },
        GeneratorError::Unsupported("open_text"),
        GeneratorError::UnknownSequence(7),
        GeneratorError::Stopped,
        GeneratorError::SequenceCancelled,
        GeneratorError::Engine(Box::new(EngineError::Tokenizer(misleading.into()))),
        GeneratorError::Helper {
            helper: "judge",
            source: misleading.into(),
        },
        GeneratorError::Missing { what: "branch" },
        GeneratorError::CountMismatch {
            what: "verifier scores for solutions",
            expected: 2,
            got: 1,
        },
    ];
    for e in failures {
        let e = generator(e);
        assert_eq!(
            seen(&e),
            (500, "server_error".into(), None, None),
            "{e} must not be read as an outage"
        );
    }
}

/// What the caller got wrong, found behind the port (plain decoding opens and validates through
/// the generator), is the caller's error, as when the API finds it: a 400 naming the field.
#[test]
fn caller_errors_behind_the_port_are_400s_naming_the_field() {
    let too_long = || EngineError::PromptTooLong {
        tokens: 9000,
        context: 8192,
    };
    let rows: Vec<(GeneratorError, Seen)> = vec![
        (
            GeneratorError::InvalidPrompt("the prompt is empty".into()),
            (400, "invalid_request_error", Some("prompt"), None),
        ),
        (
            GeneratorError::InvalidRequest {
                field: "logit_bias",
                reason: "token 99999 is not in the model's vocabulary".into(),
            },
            (400, "invalid_request_error", Some("logit_bias"), None),
        ),
        (
            GeneratorError::Engine(Box::new(too_long())),
            (
                400,
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
        ),
    ];
    for (e, want) in rows {
        let e = generator(e);
        let (status, kind, param, code) = seen(&e);
        assert_eq!(
            (status, kind.as_str(), param.as_deref(), code.as_deref()),
            want,
            "{e}"
        );
    }
    // The same engine error raised directly maps the same way.
    assert_eq!(
        seen(&AppError::Engine(too_long())),
        seen(&generator(GeneratorError::Engine(Box::new(too_long()))))
    );
}

#[test]
fn strategy_errors_map_by_variant() {
    let verifier = VerifierError::Cancelled {
        verifier: "prm".into(),
    };
    let capacity = EngineError::ExceedsKvPool {
        what: "request",
        needed: 9,
        total: 4,
    };
    let rows: Vec<(StrategyError, Seen)> = vec![
        (
            StrategyError::BudgetExhausted {
                budget: 1,
                spent: 1,
                needed: 2,
            },
            (
                400,
                "invalid_request_error",
                Some("budget_tokens"),
                Some("budget_exhausted"),
            ),
        ),
        (
            StrategyError::BudgetTooSmall {
                budget: 1,
                spent: 1,
                prompt_tokens: 2,
            },
            (
                400,
                "invalid_request_error",
                Some("budget_tokens"),
                Some("budget_too_small"),
            ),
        ),
        (
            StrategyError::DeadlineExceeded { deadline_ms: 5 },
            (504, "server_error", None, Some("deadline_exceeded")),
        ),
        (
            StrategyError::Cancelled,
            (503, "server_error", None, Some("cancelled")),
        ),
        (
            StrategyError::UnknownStrategy {
                name: "x".into(),
                valid: vec!["best_of_n".into()],
            },
            (
                400,
                "invalid_request_error",
                Some("strategy"),
                Some("unknown_strategy"),
            ),
        ),
        (
            StrategyError::invalid("beam_search", "beam_width", "must be positive"),
            (400, "invalid_request_error", Some("beam_width"), None),
        ),
        (
            StrategyError::Capacity(Box::new(capacity)),
            (
                400,
                "invalid_request_error",
                None,
                Some("kv_capacity_exceeded"),
            ),
        ),
        (
            StrategyError::Verifier(verifier),
            (500, "server_error", None, None),
        ),
        (
            StrategyError::Verifier(VerifierError::InvalidRequest {
                verifier: "learned".into(),
                reason: "it judges finished candidates only".into(),
            }),
            (400, "invalid_request_error", Some("strategy"), None),
        ),
    ];
    for (e, want) in rows {
        let e = AppError::Strategy(e);
        let (status, kind, param, code) = seen(&e);
        assert_eq!(
            (status, kind.as_str(), param.as_deref(), code.as_deref()),
            want,
            "{e}"
        );
    }
}

#[test]
fn engine_and_request_errors_map_by_variant() {
    let path = PathBuf::from("m.gguf");
    let rows: Vec<(AppError, Seen)> = vec![
        (
            ValidationError::invalid("temperature", "must be in [0, 2]").into(),
            (400, "invalid_request_error", Some("temperature"), None),
        ),
        (
            ValidationError::OverLimit {
                field: "n",
                limit: 8,
                got: 9,
            }
            .into(),
            (
                400,
                "invalid_request_error",
                Some("n"),
                Some("limit_exceeded"),
            ),
        ),
        (
            ValidationError::UnknownModel("gpt".into()).into(),
            (
                404,
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
        ),
        (
            ValidationError::ContextLength {
                prompt: 9,
                tokens: 12,
                context: 10,
            }
            .into(),
            (
                400,
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
        ),
        (
            EngineError::PromptTooLong {
                tokens: 12,
                context: 10,
            }
            .into(),
            (
                400,
                "invalid_request_error",
                Some("messages"),
                Some("context_length_exceeded"),
            ),
        ),
        (
            EngineError::InvalidInput {
                field: "logit_bias",
                reason: "out of range".into(),
            }
            .into(),
            (400, "invalid_request_error", Some("logit_bias"), None),
        ),
        (
            EngineError::ExceedsKvPool {
                what: "request",
                needed: 9,
                total: 4,
            }
            .into(),
            (
                400,
                "invalid_request_error",
                None,
                Some("kv_capacity_exceeded"),
            ),
        ),
        (
            EngineError::ChatTemplate(minijinja::Error::new(
                minijinja::ErrorKind::SyntaxError,
                "unexpected end of input",
            ))
            .into(),
            (400, "invalid_request_error", Some("messages"), None),
        ),
        (
            EngineError::MissingField {
                path,
                what: "blk.0".into(),
            }
            .into(),
            (500, "server_error", None, None),
        ),
        (
            EngineError::ExecutorStopped.into(),
            (503, "server_error", None, Some("executor_stopped")),
        ),
        (
            AppError::MalformedJson("eof".into()),
            (400, "invalid_request_error", None, Some("invalid_json")),
        ),
        (
            AppError::UnsupportedMediaType,
            (
                415,
                "invalid_request_error",
                None,
                Some("unsupported_media_type"),
            ),
        ),
        (
            AppError::PayloadTooLarge { limit: 1 },
            (
                413,
                "invalid_request_error",
                None,
                Some("payload_too_large"),
            ),
        ),
        (
            AppError::Unauthorized,
            (401, "authentication_error", None, Some("invalid_api_key")),
        ),
        (
            AppError::Overloaded {
                queued: 3,
                retry_after_s: 1,
            },
            (429, "rate_limit_error", None, Some("queue_full")),
        ),
        (
            AppError::Draining,
            (503, "server_error", None, Some("shutting_down")),
        ),
        (
            AppError::NoEngine,
            (502, "server_error", None, Some("backend_unavailable")),
        ),
        (
            AppError::NotFound,
            (404, "invalid_request_error", None, Some("not_found")),
        ),
        (
            AppError::Panicked,
            (500, "server_error", None, Some("internal_error")),
        ),
        (
            AppError::Encode("x".into()),
            (500, "server_error", None, Some("internal_error")),
        ),
        (
            AppError::Router(crate::router::RouterError::EmptyQuery),
            (500, "server_error", None, Some("internal_error")),
        ),
    ];
    for (e, want) in rows {
        let (status, kind, param, code) = seen(&e);
        assert_eq!(
            (status, kind.as_str(), param.as_deref(), code.as_deref()),
            want,
            "{e}"
        );
    }
    assert_eq!(AppError::Draining.status(), StatusCode::SERVICE_UNAVAILABLE);
}

/// A backend's 4xx is the client's 4xx, with the backend's message (not its address); a
/// backend refusing this server itself (its key, its model, its route) is a 502: nothing the
/// client could fix. Before, every refusal was a 500.
#[test]
fn a_backends_refusal_reaches_the_client_as_its_4xx_with_its_message() {
    let refused = |status: u16, body: &str| {
        generator(GeneratorError::Refused {
            backend: "http://10.0.0.7:8000".into(),
            status,
            body: body.into(),
        })
    };
    let vllm = concat!(
        r#"{"object":"error","message":"max_tokens must be at least 1, got 0.","#,
        r#""type":"BadRequestError","param":null,"code":400}"#
    );
    let openai = r#"{"error":{"message":"seed is out of range","type":"invalid_request_error"}}"#;
    for (status, body, message) in [
        (400, vllm, "max_tokens must be at least 1, got 0."),
        (400, openai, "seed is out of range"),
        (413, "payload too big", "payload too big"),
        (422, r#"{"detail":"bad field"}"#, "bad field"),
    ] {
        let e = refused(status, body);
        assert_eq!(
            seen(&e),
            (
                status,
                "invalid_request_error".into(),
                None,
                Some("backend_refused".into())
            ),
            "{e}"
        );
        let shown = e.message();
        assert!(shown.ends_with(message), "{shown}");
        assert!(
            !shown.contains("10.0.0.7"),
            "the backend's address stays in the logs"
        );
    }
    for status in [401, 403, 404] {
        assert_eq!(
            seen(&refused(status, "no")),
            (
                502,
                "server_error".into(),
                None,
                Some("backend_refused".into())
            ),
            "{status}"
        );
    }
}
