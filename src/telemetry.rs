//! Logging set-up for the binaries: `tracing` events to stderr as text or as JSON (one object
//! per line, with the span chain, so a log pipeline can index `request_id`), filtered by
//! `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax, e.g. `info,ponder=debug`) or, without
//! it, by the command's default level (`info` for `serve`: start-up and access lines).
//!
//! Built with the `otlp` feature, spans are also exported over OTLP/HTTP (opentelemetry-otlp's
//! batch exporter, through tracing-opentelemetry) when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; the exporter reads the other standard `OTEL_*`
//! variables itself. Spans still open at exit are not flushed.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's `json` formatter, spans included).
    Json,
}

/// Installs the global subscriber; `default_level` applies when `RUST_LOG` is unset or invalid.
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(otlp_layer());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // A second initialisation (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => registry.with(fmt).try_init(),
        LogFormat::Json => registry
            .with(fmt.json().with_current_span(true).with_span_list(true))
            .try_init(),
    };
}

/// The subscriber the OTLP layer sits on.
type Base = tracing_subscriber::layer::Layered<EnvFilter, tracing_subscriber::Registry>;

/// The OTLP exporter's layer, when built in and configured.
#[cfg(feature = "otlp")]
fn otlp_layer() -> Option<Box<dyn tracing_subscriber::Layer<Base> + Send + Sync>> {
    use opentelemetry::trace::TracerProvider as _;
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if !configured {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("OTLP export is off: {e}");
            return None;
        }
    };
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("ponder")
                .build(),
        )
        .build();
    let tracer = provider.tracer("ponder");
    opentelemetry::global::set_tracer_provider(provider);
    Some(Box::new(tracing_opentelemetry::layer().with_tracer(tracer)))
}

/// Without the `otlp` feature there is no exporter.
#[cfg(not(feature = "otlp"))]
fn otlp_layer() -> Option<Box<dyn tracing_subscriber::Layer<Base> + Send + Sync>> {
    None
}
