//! `ponder serve`: its arguments and the function the binary calls — load the model, start the
//! executor, bind, serve until SIGTERM, drain with a hard timeout. API keys come from
//! `PONDER_API_KEYS` (comma-separated) or `--api-key-file` (one per line) and are required when
//! binding to a non-loopback address; they are never logged. Every flag can also be set by an
//! environment variable (`PONDER_` + the flag's name in capitals, listed in `--help`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{serve, shutdown_signal, ApiKeys, Limits, ServerBuilder};
use crate::backends::{BackendFormat, BackendKeys, RemoteOptions, RemotePool};
use ponder_engine::{Runtime, RuntimeOptions};
use ponder_verifiers::ReasoningChoice;

/// Arguments of `ponder serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(long, env = "PONDER_HOST", default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to bind (0 picks a free one; the chosen address is printed).
    #[arg(long, env = "PONDER_PORT", default_value_t = 8080)]
    pub port: u16,
    /// A .gguf file or safetensors directory [default: the installed SmolLM2].
    #[arg(long, env = "PONDER_MODEL")]
    pub model: Option<PathBuf>,
    /// KV cache memory, e.g. 512MiB.
    #[arg(long, env = "PONDER_KV_MEMORY", default_value = "512MiB")]
    pub kv_memory: bytesize::ByteSize,
    /// Where the model runs: cpu, cuda or cuda:N (cuda needs a build with `--features cuda`).
    #[arg(long, env = "PONDER_DEVICE", default_value = "cpu")]
    pub device: ponder_engine::ComputeDevice,
    /// A tokenizer.json to use instead of the model's own (e.g. for a SentencePiece GGUF).
    #[arg(long, env = "PONDER_TOKENIZER")]
    pub tokenizer: Option<PathBuf>,
    /// A file of bearer API keys, one per line (also: PONDER_API_KEYS, comma-separated).
    #[arg(long, env = "PONDER_API_KEY_FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Generation requests running at once.
    #[arg(long, env = "PONDER_MAX_RUNNING", default_value_t = 8)]
    pub max_running: usize,
    /// Generation requests waiting for a slot; more get 429 with Retry-After.
    #[arg(long, env = "PONDER_MAX_QUEUE", default_value_t = 64)]
    pub max_queue: usize,
    /// Largest request body in bytes.
    #[arg(long, env = "PONDER_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Most choices (`n`) per request.
    #[arg(long, env = "PONDER_MAX_N", default_value_t = 16)]
    pub max_n: usize,
    /// Largest `max_tokens` a request may ask for.
    #[arg(long, env = "PONDER_MAX_COMPLETION_TOKENS", default_value_t = 4096)]
    pub max_completion_tokens: usize,
    /// Largest `budget_tokens`.
    #[arg(long, env = "PONDER_MAX_BUDGET_TOKENS", default_value_t = 200_000)]
    pub max_budget_tokens: u64,
    /// Completion tokens when a request sets no `max_tokens`.
    #[arg(long, env = "PONDER_DEFAULT_MAX_TOKENS", default_value_t = 256)]
    pub default_max_tokens: usize,
    /// How a chat reply's thinking block is split off its content and returned as `reasoning`
    /// and `reasoning_content`: `auto` (the thinking tags the model's chat template writes —
    /// `<think>`…`</think>` for Qwen3 and DeepSeek-R1 — else `<think>`…`</think>`), `think`
    /// (`<think>`…`</think>`; also named `deepseek_r1` and `qwen3`) or `none` (replies stay
    /// whole). A request may choose another with `reasoning_parser`. A block the chat template
    /// opens in the prompt is read from the prompt; a model that writes no block is unaffected.
    #[arg(long, env = "PONDER_REASONING_PARSER", default_value = "auto",
          value_parser = ReasoningChoice::named)]
    pub reasoning_parser: ReasoningChoice,
    /// Run every request on this OpenAI-compatible completion server — vLLM, SGLang,
    /// llama.cpp's server, another Ponder (repeatable: several are load-balanced with prefix
    /// affinity and failover). The local model is then not loaded.
    #[arg(long = "backend", env = "PONDER_BACKENDS", value_delimiter = ',')]
    pub backends: Vec<String>,
    /// The `model` name sent to the backends.
    #[arg(long, env = "PONDER_BACKEND_MODEL", default_value = "ponder")]
    pub backend_model: String,
    /// The backend model's chat template and tokenizer: a .gguf, a tokenizer.json or a
    /// tokenizer_config.json (the other file is read from beside it) [default: ChatML prompts,
    /// token counts from the backend's /tokenize].
    #[arg(long, env = "PONDER_BACKEND_TOKENIZER")]
    pub backend_tokenizer: Option<PathBuf>,
    /// The backend model's context length in tokens [default: from --backend-tokenizer's GGUF].
    #[arg(long, env = "PONDER_BACKEND_CONTEXT")]
    pub backend_context: Option<usize>,
    /// A file of backend API keys: lines `KEY` (every backend) or `URL KEY` (that backend);
    /// also PONDER_BACKEND_KEYS (entries separated by commas). Never logged.
    #[arg(long, env = "PONDER_BACKEND_KEY_FILE")]
    pub backend_key_file: Option<PathBuf>,
    /// A PEM file of CA certificates to trust for https:// backends (besides the Mozilla roots).
    #[arg(long, env = "PONDER_BACKEND_CA")]
    pub backend_ca: Option<PathBuf>,
    /// Seconds connecting to a backend may take before the call fails over.
    #[arg(long, env = "PONDER_BACKEND_CONNECT_TIMEOUT", default_value_t = 10)]
    pub backend_connect_timeout: u64,
    /// Seconds a backend may send nothing on an open call before it fails over (each byte
    /// received restarts the wait; no cap on a whole call).
    #[arg(long, env = "PONDER_BACKEND_IDLE_TIMEOUT", default_value_t = 300)]
    pub backend_idle_timeout: u64,
    /// What scores strategies' candidates and steps: none, calc (the exact calculation check),
    /// llm-prm (the model judges its own steps), qwen-prm:DIR (a reward-head PRM checkpoint) or
    /// shepherd-prm:PATH (token-logit).
    #[arg(long, env = "PONDER_VERIFIER", default_value = "none")]
    pub verifier: crate::prm::VerifierChoice,
    /// The semantic router file that makes `strategy: "auto"` available [default: the shipped
    /// data/router/router.json with the installed MiniLM encoder; skipped with a warning when
    /// they are missing]. `none` turns `auto` off; a path given here must load.
    #[arg(long, env = "PONDER_ROUTER")]
    pub router: Option<PathBuf>,
    /// What a search that names no strategy runs at each budget, as validation measured it
    /// [default: the shipped data/router/defaults.json when present]. Applied only when it was
    /// measured with the served model and every strategy it names runs here; else the built-in
    /// default (self-consistency) runs, and the log says why. `none` turns it off; a path given
    /// here must load.
    #[arg(long, env = "PONDER_DEFAULTS")]
    pub defaults: Option<PathBuf>,
    /// Worked examples (a JSONL file of problems with `id`, `problem`, `solution`) the router
    /// shows before a search's question that asks for `shots`: only the train split is
    /// ever shown [default: the shipped data/exemplars/gsm8k.json; skipped with a warning when
    /// it or the encoder is missing]. `none` turns them off; a path given here must load.
    #[arg(long, env = "PONDER_EXEMPLARS")]
    pub exemplars: Option<PathBuf>,
    /// Worked examples shown to a search (`/v1/reason`, or a chat or completion with a
    /// strategy) that sets no `shots` (0..=8) [default: `auto` as many as its calibration
    /// rows were measured with, every other strategy none].
    #[arg(long, env = "PONDER_SHOTS",
          value_parser = clap::value_parser!(u8).range(0..=crate::router::MAX_SHOTS as i64))]
    pub shots: Option<u8>,
    /// Seconds in-flight requests get to finish after SIGTERM.
    #[arg(long, env = "PONDER_SHUTDOWN_TIMEOUT_S", default_value_t = 30)]
    pub shutdown_timeout_s: u64,
}

/// Errors of `ponder serve` (the binary reports them).
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

fn keys(args: &ServeArgs) -> Result<ApiKeys, ServeError> {
    let mut text = std::env::var("PONDER_API_KEYS").unwrap_or_default();
    if let Some(path) = &args.api_key_file {
        let file = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --api-key-file {}: {e}", path.display()))?;
        text.push('\n');
        text.push_str(&file);
    }
    Ok(ApiKeys::parse(&text))
}

/// The router behind `auto`: the one named by `--router` (which must load), else the shipped
/// default when it and its encoder are installed.
fn router(args: &ServeArgs) -> Result<Option<crate::router::Router>, ServeError> {
    let embedder = crate::models::default_embedder_dir();
    match &args.router {
        Some(path) if path.as_os_str() == "none" => Ok(None),
        Some(path) => Ok(Some(crate::router::Router::load(path, &embedder)?)),
        None => match crate::router::Router::load(&crate::router::default_router_path(), &embedder)
        {
            Ok(router) => Ok(Some(router)),
            Err(e) => {
                tracing::warn!(error = %e, "strategy `auto` is off: the default router did not load");
                Ok(None)
            }
        },
    }
}

/// Where the server's worked examples come from: the file named by `--exemplars`, which must
/// load (now); else the shipped pool, loaded before the server listens when its defaults use it
/// (`--shots`, or `auto` measured with examples), on the first request that asks otherwise, and
/// skipped with a warning when it is not installed. A first start embeds the shipped pool
/// (minutes on a small CPU, cached after): a server that answered meanwhile would hold its
/// first requests for as long. They embed with the router's encoder when there is a router.
fn exemplars(
    builder: ServerBuilder,
    args: &ServeArgs,
    router: Option<&crate::router::Router>,
) -> Result<(ServerBuilder, bool), ServeError> {
    use crate::router::{default_exemplars_path, Embedder, Exemplars};
    let shared = router.map(crate::router::Router::shared_embedder);
    let embedder = move || -> crate::router::Result<Arc<Embedder>> {
        match &shared {
            Some(e) => Ok(Arc::clone(e)),
            None => Ok(Arc::new(Embedder::load(
                &crate::models::default_embedder_dir(),
            )?)),
        }
    };
    let path = match &args.exemplars {
        Some(path) if path.as_os_str() == "none" => {
            if args.shots.is_some_and(|k| k > 0) {
                return Err("--shots needs worked examples (--exemplars is none)".into());
            }
            return Ok((builder, false));
        }
        Some(path) => path.clone(),
        None => default_exemplars_path(),
    };
    let auto_uses_them = router.is_some_and(|r| r.auto_shots() > 0);
    let installed = Exemplars::available(&path) && crate::models::default_embedder_dir().exists();
    if args.exemplars.is_some()
        || args.shots.is_some_and(|k| k > 0)
        || (auto_uses_them && installed)
    {
        let pool = Exemplars::load_any(&path, embedder()?)?;
        tracing::info!(examples = pool.len(), path = %path.display(), "worked examples (`shots`)");
        return Ok((builder.exemplars(Arc::new(pool)), true));
    }
    if !installed {
        tracing::warn!(path = %path.display(), "`shots` is off: the shipped worked examples or the encoder are not installed");
        return Ok((builder, false));
    }
    tracing::info!(path = %path.display(), "worked examples (`shots`) load on first use");
    let lazy =
        builder.exemplars_on_first_use(Arc::new(move || Exemplars::load_any(&path, embedder()?)));
    Ok((lazy, true))
}

/// The measured defaults a search that names no strategy runs (`--defaults`, which must load;
/// else the shipped file when present), when they apply to this server: measured with the
/// served model, every strategy they name registered here (`auto` only with a router) and
/// built from its measured parameters. Worked examples they were measured with are dropped,
/// with a warning, on a server without a pool to choose them from.
fn measured_defaults(
    args: &ServeArgs,
    served: &crate::models::FittedModel,
    has_router: bool,
    has_pool: bool,
) -> Result<Option<Arc<crate::router::MeasuredDefaults>>, ServeError> {
    use crate::router::{default_defaults_path, MeasuredDefaults};
    let (path, explicit) = match &args.defaults {
        Some(path) if path.as_os_str() == "none" => return Ok(None),
        Some(path) => (path.clone(), true),
        None => (default_defaults_path(), false),
    };
    if !explicit && !path.exists() {
        return Ok(None);
    }
    let mut defaults = match MeasuredDefaults::load(&path) {
        Ok(d) => d,
        Err(e) if !explicit => {
            tracing::warn!(
                error = %e,
                "the built-in default strategy runs: the shipped defaults did not load"
            );
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(why) = defaults.foreign_to(served) {
        tracing::warn!("the built-in default strategy runs: {why}");
        return Ok(None);
    }
    if let Err(e) = defaults.check_runs(&ponder_strategies::Registry::with_builtins(), has_router) {
        let why = format!("{}: {e}", path.display());
        if explicit {
            return Err(why.into());
        }
        tracing::warn!("the built-in default strategy runs: {why}");
        return Ok(None);
    }
    if !has_pool {
        for entry in &mut defaults.by_budget {
            if entry.shots.is_some_and(|k| k > 0) {
                tracing::warn!(
                    budget = entry.budget,
                    "the default was measured with worked examples; this server has none to show"
                );
                entry.shots = Some(0);
            }
        }
    }
    for entry in &defaults.by_budget {
        tracing::info!(
            budget = entry.budget,
            strategy = %entry.strategy,
            accuracy = entry.accuracy,
            "measured default (a search that names no strategy)"
        );
    }
    Ok(Some(Arc::new(defaults)))
}

/// Worked examples `auto` is shown when neither the request nor `--shots` sets a count: as
/// many as its calibration rows were measured with, when the server has a pool to choose them
/// from (without one it runs its rows without them, and says so).
fn auto_shots(router: Option<&crate::router::Router>, has_pool: bool) -> usize {
    let measured = router.map_or(0, crate::router::Router::auto_shots);
    if measured > 0 && !has_pool {
        tracing::warn!(
            measured,
            "`auto`'s rows were measured with worked examples, but this server has none to show"
        );
        return 0;
    }
    measured
}

/// The backend pool of `--backend` and its flags, if any backend is named.
fn remote_pool(args: &ServeArgs) -> Result<Option<Arc<RemotePool>>, ServeError> {
    if args.backends.is_empty() {
        return Ok(None);
    }
    let mut keys = BackendKeys::parse(&std::env::var("PONDER_BACKEND_KEYS").unwrap_or_default());
    if let Some(path) = &args.backend_key_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --backend-key-file {}: {e}", path.display()))?;
        keys = keys.merge(BackendKeys::parse(&text));
    }
    let format = match &args.backend_tokenizer {
        Some(path) => Some(Arc::new(BackendFormat::load(path)?)),
        None => None,
    };
    let opts = RemoteOptions {
        model: args.backend_model.clone(),
        keys,
        ca: args.backend_ca.clone(),
        format,
        context: args.backend_context,
        connect_timeout: Duration::from_secs(args.backend_connect_timeout.max(1)),
        idle_timeout: Duration::from_secs(args.backend_idle_timeout.max(1)),
        ..RemoteOptions::new(args.backends.clone())
    };
    Ok(Some(Arc::new(RemotePool::new(opts)?)))
}

/// Runs `ponder serve`.
pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    let keys = keys(&args)?;
    if !args.host.is_loopback() && !keys.is_enabled() {
        return Err(format!(
            "binding to {} (not loopback) requires API keys: set PONDER_API_KEYS or --api-key-file",
            args.host
        )
        .into());
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(crate::models::default_llm_path);
    let remote = remote_pool(&args)?;
    // With backends, every request runs there: the local model is not loaded.
    let runtime = match &remote {
        Some(_) => None,
        None => {
            let opts = RuntimeOptions {
                model: model.clone(),
                kv_memory: args.kv_memory.as_u64(),
                device: Some(args.device),
                tokenizer: args.tokenizer.clone(),
                ..RuntimeOptions::for_model(crate::models::default_llm_path())
            };
            tracing::info!(model = %model.display(), "loading the model");
            Some(Arc::new(Runtime::start(&opts)?))
        }
    };
    // The model the server runs, which the router's calibration table must have been
    // measured with (else `auto` runs its model-agnostic policy and says so).
    let served = match &remote {
        Some(_) => crate::models::FittedModel {
            name: args.backend_model.clone(),
            sha256: None,
        },
        None => crate::models::FittedModel::of_file(&model)
            .map_err(|e| format!("cannot read the model {}: {e}", model.display()))?,
    };
    let router = router(&args)?.map(|r| r.serving(&served));
    let limits = Limits {
        max_body_bytes: args.max_body_bytes,
        max_n: args.max_n,
        max_completion_tokens: args.max_completion_tokens,
        max_budget_tokens: args.max_budget_tokens,
        max_running: args.max_running,
        max_queue: args.max_queue,
        default_max_tokens: args.default_max_tokens,
        default_shots: args.shots.map(usize::from),
        ..Limits::default()
    };
    let model_id = match &remote {
        Some(_) => args.backend_model.clone(),
        None => model.file_stem().map_or_else(
            || "ponder-local".to_string(),
            |s| s.to_string_lossy().into_owned(),
        ),
    };
    let mut builder = match (&runtime, &remote) {
        (Some(runtime), _) => ServerBuilder::new(Arc::clone(runtime)),
        (None, Some(pool)) => ServerBuilder::remote_only(Arc::clone(pool)),
        (None, None) => return Err("no model and no backend".into()),
    }
    .api_keys(keys)
    .model_id(model_id)
    .reasoning_parser(args.reasoning_parser.clone());
    if let Some(pool) = &remote {
        tracing::info!(
            backends = args.backends.len(),
            "every request runs on the backends"
        );
        builder = builder.remote(Arc::clone(pool));
    }
    let (with_exemplars, has_pool) = exemplars(builder, &args, router.as_ref())?;
    builder = with_exemplars.limits(Limits {
        auto_shots: auto_shots(router.as_ref(), has_pool),
        measured_defaults: measured_defaults(&args, &served, router.is_some(), has_pool)?,
        ..limits
    });
    if let Some(router) = router {
        builder = builder.register(|r| crate::router::register_auto(r, Arc::new(router)));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(verifier) = args.verifier.search_verifier(&served)? {
        tracing::info!(verifier = %args.verifier, "strategies' candidates are scored by a verifier");
        builder = builder.search_verifier(verifier);
    }
    let state = builder.build();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.host, args.port)).await?;
        let addr = listener.local_addr()?;
        println!("ponder listening on http://{addr}");
        let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            shutdown_signal().await;
            let _ = stopping_tx.send(());
        };
        let hard_stop = async move {
            if stopping_rx.await.is_ok() {
                tokio::time::sleep(Duration::from_secs(args.shutdown_timeout_s)).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            r = serve(listener, state, shutdown) => r?,
            _ = hard_stop => tracing::warn!("shutdown timeout passed; dropping in-flight requests"),
        }
        Ok::<(), ServeError>(())
    })
}
