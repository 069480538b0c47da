//! The `ponder` command line.

mod router_cli;
mod verifier_cli;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::sync::Arc;
use std::time::Instant;

use ponder_engine::forward::{LoadOptions, LoadedModel};
use ponder_engine::ComputeDevice;

/// mimalloc keeps freed activation buffers for reuse (glibc's malloc returned the large ones to
/// the kernel and faulted them back in, zeroed, on the next layer).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "ponder", version, about = "Test-time-scaling reasoning server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines on stderr as text or JSON. Levels come from RUST_LOG (e.g. `info,ponder=debug`);
    /// without it `serve` logs at info (start-up and one access line per request), the rest warn.
    #[arg(
        long,
        global = true,
        env = "PONDER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: ponder::telemetry::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a reply to one prompt, streaming it to stdout.
    Generate(GenerateArgs),
    /// Run a benchmark workload and print one JSON object.
    Bench(BenchArgs),
    /// Answer a problem with a test-time-compute strategy under a token budget.
    Reason(ReasonArgs),
    /// Train, evaluate, calibrate, try and benchmark the semantic router.
    Router(router_cli::RouterArgs),
    /// Train and evaluate the learned outcome verifier on harness candidate sets.
    Verifier(verifier_cli::VerifierArgs),
    /// Serve the OpenAI-compatible HTTP API (and /v1/reason, /metrics…) until SIGTERM.
    Serve(ponder::api::cli::ServeArgs),
}

#[derive(clap::Args)]
struct ReasonArgs {
    /// The problem.
    #[arg(long)]
    problem: String,
    /// Strategy name (`GET /v1/strategies` on a server lists them with their parameters)
    /// [default: what `ponder serve` runs for a request that names none — the measured default
    /// of --budget (data/router/defaults.json, when measured with this model), else
    /// self_consistency].
    #[arg(long)]
    strategy: Option<String>,
    /// Strategy parameters as a JSON object, e.g. '{"n": 4}' [default: the strategy's own, or
    /// the measured default's as measured].
    #[arg(long)]
    params: Option<String>,
    /// Token budget: generated + computed prefill + verifier tokens.
    #[arg(long, default_value_t = 4096, allow_negative_numbers = true)]
    budget: u64,
    /// Seed: the same seed replays the same search.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop with the best answer so far after this many milliseconds.
    #[arg(long)]
    deadline_ms: Option<u64>,
    /// Print the whole Outcome as one JSON object.
    #[arg(long)]
    json: bool,
    /// Show the question K worked examples first: the nearest (by the router's MiniLM
    /// embedding) of the train split of --exemplars [default: `auto` as many as its
    /// calibration rows were measured with, every other strategy none].
    #[arg(long,
          value_parser = clap::value_parser!(u8).range(0..=ponder::router::MAX_SHOTS as i64))]
    shots: Option<u8>,
    /// The worked examples shown (JSONL with id, problem, solution), by --shots or by `auto`'s
    /// measured count [default: the shipped data/exemplars/gsm8k.json, GSM8K train's worked
    /// solutions].
    #[arg(long)]
    exemplars: Option<PathBuf>,
    /// What scores candidates and steps: none, calc (the exact calculation check), llm-prm
    /// (the model judges its own steps), qwen-prm:DIR (a reward-head PRM checkpoint) or
    /// shepherd-prm:PATH (a token-logit PRM).
    #[arg(long, default_value = "none")]
    verifier: ponder::prm::VerifierChoice,
    /// KV cache memory, e.g. 512MiB.
    #[arg(long, default_value = "512MiB")]
    kv_memory: bytesize::ByteSize,
    /// A .gguf file or safetensors directory [default: the installed SmolLM2].
    #[arg(long, env = "PONDER_MODEL")]
    model: Option<PathBuf>,
    /// Where the model runs: cpu, cuda or cuda:N (cuda needs a build with `--features cuda`).
    #[arg(long, env = "PONDER_DEVICE", default_value = "cpu")]
    device: ComputeDevice,
    /// A tokenizer.json to use instead of the model's own.
    #[arg(long, env = "PONDER_TOKENIZER")]
    tokenizer: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Workload {
    /// N samples from one prompt: the executor vs each sample on its own.
    Nsample,
    /// Two requests sharing a long system prompt.
    PrefixReuse,
    /// Step-level beam search vs best-of-N at the same N.
    Beam,
    /// Accuracy and tokens per strategy and budget on a problem set (Markdown with --markdown).
    Strategies,
    /// Every strategy's generated tokens/s relative to best-of-N at the same N and steps,
    /// without a verifier and with the LLM-as-PRM.
    Search,
    /// Concurrent clients against a running server (`--url`): statuses, latency, RSS, gauges.
    Load,
    /// Serving throughput of one search (`--search`, `--search-n`, `--search-budget`,
    /// `--new-tokens` per sample) on Ponder's engine vs Ponder over `llama-server`, and plain
    /// decoding's proxy overhead: starts the servers itself, one row after another.
    Serve,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// The workload.
    workload: Workload,
    /// Samples.
    #[arg(long, default_value_t = 16)]
    n: usize,
    /// Prompt length in tokens.
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// New tokens per sample.
    #[arg(long, default_value_t = 128)]
    new_tokens: usize,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    block_size: usize,
    /// KV cache memory, e.g. 2GiB or 512MiB.
    #[arg(long, default_value = "1GiB")]
    kv_memory: bytesize::ByteSize,
    /// Most tokens per forward pass (chunked prefill budget).
    #[arg(long, default_value_t = 512)]
    max_step_tokens: usize,
    /// `nsample`: batched runs to measure (interleaved with the naive samples; the median counts).
    /// `search`: rounds of best-of-N then every strategy (each row reports the median round).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// A .gguf file or safetensors directory [default: the installed SmolLM2].
    #[arg(long, env = "PONDER_MODEL")]
    model: Option<PathBuf>,
    /// `beam`: beams kept per step.
    #[arg(long, default_value_t = 2)]
    width: usize,
    /// `beam`: the problem.
    #[arg(
        long,
        default_value = "A farmer has 3 pens with 4 sheep in each pen. How many sheep are there?"
    )]
    problem: String,
    /// `strategies`: JSONL problems with `id`, `problem`, `answer`.
    #[arg(long, default_value = "data/problems.jsonl")]
    problems: PathBuf,
    /// `strategies`, `search`: comma-separated names [default: every built-in; `search`
    /// always runs `best_of_n` too, its baseline].
    #[arg(long, value_delimiter = ',')]
    strategies: Vec<String>,
    /// `strategies`: comma-separated token budgets.
    #[arg(long, value_delimiter = ',', default_value = "512,2048")]
    budgets: Vec<u64>,
    /// `strategies`: run only the first N problems.
    #[arg(long)]
    limit: Option<usize>,
    /// `search`: most tokens per step (whole solutions get `--step-tokens` x `--steps`).
    #[arg(long, default_value_t = 64)]
    step_tokens: usize,
    /// `search`: most steps per solution.
    #[arg(long, default_value_t = 4)]
    steps: usize,
    /// `search`: the token budget of every search.
    #[arg(long, default_value_t = 20_000)]
    budget_tokens: u64,
    /// `strategies`: print a Markdown table instead of JSON.
    #[arg(long)]
    markdown: bool,
    /// `load`: the server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// `load`, `serve`: concurrent clients [default: 32 for `load`, 4 for `serve`].
    #[arg(long)]
    clients: Option<usize>,
    /// `serve`: the strategy every client's search runs.
    #[arg(long, default_value = "self_consistency")]
    search: String,
    /// `serve`: the search's samples (`params.n`).
    #[arg(long, default_value_t = 8)]
    search_n: usize,
    /// `serve`: the search's `budget_tokens`.
    #[arg(long, default_value_t = 1024)]
    search_budget: u64,
    /// `serve`: llama.cpp's `llama-server` [default: the one `scripts/setup-llamacpp.sh` builds
    /// under the target dir; without one its rows are skipped].
    #[arg(long)]
    llama_server: Option<PathBuf>,
    /// `serve`: vLLM's virtual environment [default: the one `scripts/setup-vllm.sh` makes under
    /// the target dir; without one its rows are skipped].
    #[arg(long)]
    vllm_venv: Option<PathBuf>,
    /// `serve`: the model converted for vLLM [default: `scripts/setup-vllm.sh`'s, under the
    /// target dir].
    #[arg(long)]
    vllm_model: Option<PathBuf>,
    /// `serve`: `llama-server --threads`.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// `load`, `serve`: how long to send requests, per row for `serve` (`60s`, `2m` or seconds).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: std::time::Duration,
    /// `load`: the server's pid, to report its RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
    /// `load`: a bearer key for the server.
    #[arg(long, env = "PONDER_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// `load`: the request kinds each client cycles through (comma-separated; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    kinds: Vec<ponder::bench::load::Kind>,
    /// `load`: per-request timeout; a request unanswered by then counts as a transport error.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    request_timeout: std::time::Duration,
}

/// `60s`, `2m`, `500ms` or plain seconds.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        other => return Err(format!("unknown unit {other:?} in {s:?}; use ms, s or m")),
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// The user message.
    #[arg(long)]
    prompt: String,
    /// An optional system message.
    #[arg(long)]
    system: Option<String>,
    /// Send the prompt as is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.7)]
    temperature: f64,
    /// Keep the k most likely tokens (0: off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Nucleus sampling mass (1: off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// Min-p threshold relative to the best token (0: off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f64,
    /// Repetition penalty (1: off).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f64,
    /// RNG seed: the same seed replays the same text.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A .gguf file or a safetensors checkpoint directory [default: the installed SmolLM2].
    #[arg(long, env = "PONDER_MODEL")]
    model: Option<PathBuf>,
    /// A tokenizer.json to use instead of the model's own.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Where the model runs: cpu, cuda or cuda:N (cuda needs a build with `--features cuda`).
    #[arg(long, env = "PONDER_DEVICE", default_value = "cpu")]
    device: ComputeDevice,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let level = match cli.command {
        Command::Serve(_) => "info",
        _ => "warn",
    };
    ponder::telemetry::init(cli.log_format, level);
    match cli.command {
        Command::Generate(args) => run_generate(args),
        Command::Bench(args) => run_bench(args),
        Command::Reason(args) => run_reason(args),
        Command::Router(args) => router_cli::run(args),
        Command::Verifier(args) => verifier_cli::run(args),
        Command::Serve(args) => ponder::api::cli::run(args).map_err(|e| anyhow::anyhow!(e)),
    }
}

/// Plain decoding of one prompt through the generator port, the path the server's plain
/// requests take (opened once, continued by one streamed extension), printing pieces as they
/// come and a usage line on stderr.
fn run_generate(args: GenerateArgs) -> anyhow::Result<()> {
    use ponder_strategies::{
        ChatTemplateKwargs, CostTally, ExtendRequest, Generator, LogitAdjust, Piece, Prompt,
        Sampling, StopKind,
    };
    if !args.raw && args.prompt.trim().is_empty() {
        anyhow::bail!("invalid prompt: is empty");
    }
    if args.max_tokens == 0 {
        anyhow::bail!("invalid max_tokens: must be at least 1");
    }
    let model_path = args.model.unwrap_or_else(ponder::models::default_llm_path);
    let opts = ponder_engine::RuntimeOptions {
        device: Some(args.device),
        tokenizer: args.tokenizer,
        ..ponder_engine::RuntimeOptions::for_model(model_path.clone())
    };
    let runtime = ponder_engine::Runtime::start(&opts)
        .with_context(|| format!("loading {}", model_path.display()))?;
    let generator = runtime.generator();
    let context = runtime.model.model.config().context_length;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let started = Instant::now();
        let (seq, prompt_tokens) = if args.raw {
            generator.open_text(&args.prompt).await?
        } else {
            let prompt = Prompt {
                system: args.system.clone(),
                history: Vec::new(),
                user: args.prompt.clone(),
            };
            generator
                .open(&prompt, &ChatTemplateKwargs::default())
                .await?
        };
        let request = ExtendRequest {
            seq,
            max_tokens: args.max_tokens.min(context.saturating_sub(prompt_tokens)),
            stop: Vec::new(),
            sampling: Sampling {
                temperature: args.temperature,
                top_p: args.top_p,
                top_k: args.top_k,
                min_p: args.min_p,
                seed: args.seed,
                top_logprobs: 0,
            },
            logits: LogitAdjust {
                repetition_penalty: args.repetition_penalty,
                ..LogitAdjust::default()
            },
        };
        let (pieces, mut received) = tokio::sync::mpsc::unbounded_channel::<Piece>();
        let printer = tokio::spawn(async move {
            let mut first_token_s = None;
            while let Some(piece) = received.recv().await {
                if !piece.tokens.is_empty() {
                    first_token_s.get_or_insert_with(|| started.elapsed().as_secs_f64());
                }
                // A closed stdout (e.g. `| head`) must not abort generation.
                let mut stdout = std::io::stdout();
                let _ = stdout.write_all(piece.text.as_bytes());
                let _ = stdout.flush();
            }
            let _ = writeln!(std::io::stdout());
            first_token_s
        });
        let tally = CostTally::default();
        let done = generator
            .extend_streamed(std::slice::from_ref(&request), &tally, &pieces)
            .await;
        drop(pieces);
        generator.release(seq);
        let first_token_s = printer.await?;
        let extension = done?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("the generator returned no continuation"))?;
        let total = started.elapsed().as_secs_f64();
        let prefill = first_token_s.unwrap_or(total);
        let decode = total - prefill;
        let generated = extension.tokens.len();
        let tokens_per_s = if decode > 0.0 {
            generated.saturating_sub(1) as f64 / decode
        } else {
            0.0
        };
        let finish = match extension.stop {
            StopKind::Eos | StopKind::Stop => "stop",
            StopKind::Length => "length",
        };
        eprintln!(
            "[usage] prompt_tokens={prompt_tokens} generated_tokens={generated} finish={finish} prefill={prefill:.2}s decode={decode:.2}s tokens/s={tokens_per_s:.1}"
        );
        Ok(())
    })
}

fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    if matches!(args.workload, Workload::Load) {
        let opts = ponder::bench::load::LoadTestOptions {
            pid: args.pid,
            api_key: args.api_key,
            kinds: args.kinds,
            timeout: args.request_timeout,
            ..ponder::bench::load::LoadTestOptions::new(
                args.url.trim_end_matches('/'),
                args.clients.unwrap_or(32).max(1),
                args.duration,
            )
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let report = rt
            .block_on(ponder::bench::load::run(&opts))
            .map_err(anyhow::Error::msg)?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let model_path = args
        .model
        .clone()
        .unwrap_or_else(ponder::models::default_llm_path);
    if matches!(args.workload, Workload::Serve) {
        return run_serve_bench(args, model_path);
    }
    if matches!(
        args.workload,
        Workload::Beam | Workload::Strategies | Workload::Search
    ) {
        return run_strategy_bench(args, model_path);
    }
    let model = LoadedModel::load(&LoadOptions::cpu(model_path.clone()))
        .with_context(|| format!("loading {}", model_path.display()))?;
    let opts = ponder::bench::BenchOptions {
        n: args.n,
        prompt_tokens: args.prompt_tokens,
        new_tokens: args.new_tokens,
        block_size: args.block_size,
        kv_memory: args.kv_memory.as_u64(),
        max_step_tokens: args.max_step_tokens,
        repeat: args.repeat,
    };
    let json = match args.workload {
        Workload::Nsample => serde_json::to_string_pretty(&ponder::bench::nsample(&model, &opts)?)?,
        _ => serde_json::to_string_pretty(&ponder::bench::prefix_reuse(&model, &opts)?)?,
    };
    println!("{json}");
    Ok(())
}

fn run_serve_bench(args: BenchArgs, model: PathBuf) -> anyhow::Result<()> {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let llama_server = args
        .llama_server
        .clone()
        .or_else(|| Some(target.join("llama-server/bin/llama-server")).filter(|p| p.is_file()));
    let vllm = ponder::bench::serve::VllmSetup {
        python: args
            .vllm_venv
            .clone()
            .unwrap_or_else(|| target.join("vllm-venv"))
            .join("bin/python"),
        model: args
            .vllm_model
            .clone()
            .unwrap_or_else(|| target.join("vllm-model")),
    };
    let vllm =
        (vllm.python.is_file() && vllm.model.join("model.safetensors").is_file()).then_some(vllm);
    let problems = ponder::bench::load_problems(&args.problems)?
        .into_iter()
        .map(|p| p.problem)
        .collect();
    let opts = ponder::bench::serve::ServeBenchOptions {
        ponder: std::env::current_exe().context("the ponder binary")?,
        model,
        llama_server,
        vllm,
        clients: args.clients.unwrap_or(4).max(1),
        duration: args.duration,
        strategy: args.search,
        n: args.search_n.max(1),
        budget_tokens: args.search_budget,
        max_tokens: args.new_tokens as u64,
        threads: args.threads.max(1),
        problems,
        timeout: args.request_timeout,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(ponder::bench::serve::run(&opts))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn run_strategy_bench(args: BenchArgs, model: PathBuf) -> anyhow::Result<()> {
    let opts = ponder_engine::RuntimeOptions {
        model,
        kv_memory: args.kv_memory.as_u64(),
        block_size: args.block_size,
        max_step_tokens: args.max_step_tokens,
        device: Some(ComputeDevice::Cpu),
        tokenizer: None,
    };
    let runtime = ponder_engine::Runtime::start(&opts)
        .with_context(|| format!("loading {}", opts.model.display()))?;
    if matches!(args.workload, Workload::Beam) {
        let report = ponder::bench::beam_vs_best_of_n(
            &runtime,
            &args.problem,
            args.n,
            args.width,
            args.new_tokens,
        )?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if matches!(args.workload, Workload::Search) {
        let served = ponder::models::FittedModel::of_file(&opts.model)
            .with_context(|| format!("reading the model {}", opts.model.display()))?;
        let opts = ponder::bench::SearchBenchOptions {
            problem: args.problem.clone(),
            n: args.n,
            max_step_tokens: args.step_tokens,
            max_steps: args.steps,
            budget_tokens: args.budget_tokens,
            seed: 7,
            repeat: args.repeat,
            strategies: args.strategies.clone(),
        };
        let report = ponder::bench::search_bench(&runtime, &served, &opts)?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut problems = ponder::bench::load_problems(&args.problems)?;
    problems.truncate(args.limit.unwrap_or(problems.len()));
    let strategies = if args.strategies.is_empty() {
        ponder_strategies::Registry::with_builtins().names()
    } else {
        args.strategies
    };
    let table = ponder::bench::TableOptions {
        strategies,
        budgets: args.budgets,
        seed: 0,
    };
    let rows = ponder::bench::strategy_table(&runtime, &problems, &table)?;
    if args.markdown {
        print!("{}", ponder::bench::markdown_table(&rows));
    } else {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}

/// `ponder reason`'s strategy when none is named, where no measured default applies (the
/// server's built-in default too).
const BUILT_IN_STRATEGY: &str = "self_consistency";

/// `ponder reason` without --strategy: the shipped measured default of `budget`, applied as
/// `ponder serve` applies it — only when it was measured with the model at `model` and every
/// entry runs here; else none (the built-in default runs), and stderr says why.
fn measured_default(
    model: &std::path::Path,
    budget: u64,
) -> anyhow::Result<Option<ponder::router::MeasuredDefault>> {
    let path = ponder::router::default_defaults_path();
    if !path.exists() {
        return Ok(None);
    }
    let defaults = match ponder::router::MeasuredDefaults::load(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("the built-in default strategy runs: {e}");
            return Ok(None);
        }
    };
    let served = ponder::models::FittedModel::of_file(model)
        .with_context(|| format!("reading the model {}", model.display()))?;
    let has_auto = ponder::router::default_router_path().exists();
    let why = defaults.foreign_to(&served).or_else(|| {
        defaults
            .check_runs(&ponder_strategies::Registry::with_builtins(), has_auto)
            .err()
    });
    if let Some(why) = why {
        eprintln!("the built-in default strategy runs: {why}");
        return Ok(None);
    }
    Ok(defaults.for_budget(budget).cloned())
}

fn run_reason(args: ReasonArgs) -> anyhow::Result<()> {
    let model = args
        .model
        .clone()
        .unwrap_or_else(ponder::models::default_llm_path);
    // Without --strategy: the measured default of the budget, as the server runs it.
    let measured = match &args.strategy {
        Some(_) => None,
        None => measured_default(&model, args.budget)?,
    };
    let strategy = match (&args.strategy, &measured) {
        (Some(s), _) => s.clone(),
        (None, Some(entry)) => entry.strategy.clone(),
        (None, None) => BUILT_IN_STRATEGY.to_string(),
    };
    let params: serde_json::Value = match (&args.params, &measured) {
        (Some(p), _) => serde_json::from_str(p)
            .with_context(|| format!("--params is not a JSON object: {p}"))?,
        (None, Some(entry)) => entry.params.clone(),
        (None, None) => serde_json::Value::Object(serde_json::Map::new()),
    };
    // `auto` needs the router (encoder + router file), loaded only when asked for.
    let router = if strategy == "auto" {
        let path = ponder::router::default_router_path();
        let served = ponder::models::FittedModel::of_file(&model)
            .with_context(|| format!("reading the model {}", model.display()))?;
        let router = ponder::router::Router::load(&path, &ponder::models::default_embedder_dir())?
            .serving(&served);
        Some(Arc::new(router))
    } else {
        None
    };
    let registry = match &router {
        Some(router) => ponder::router::registry_with_auto(Arc::clone(router)),
        None => ponder_strategies::Registry::with_builtins(),
    };
    let k = match (args.shots, &measured) {
        // The examples the measured default was measured with, as the server shows them.
        (None, Some(ponder::router::MeasuredDefault { shots: Some(k), .. })) => *k,
        _ => ponder::router::default_shots(
            &strategy,
            args.shots.map(usize::from),
            router.as_ref().map_or(0, |r| r.auto_shots()),
        ),
    };
    let shots = match k {
        0 if args.exemplars.is_some() => anyhow::bail!(
            "--exemplars: `{strategy}` is shown no worked examples; set --shots (1..={})",
            ponder::router::MAX_SHOTS
        ),
        0 => Vec::new(),
        k => {
            let path = args
                .exemplars
                .clone()
                .unwrap_or_else(ponder::router::default_exemplars_path);
            let embedder = match &router {
                Some(router) => router.shared_embedder(),
                None => {
                    let dir = ponder::models::default_embedder_dir();
                    Arc::new(ponder::router::Embedder::load(&dir).with_context(|| {
                        format!("loading the encoder for --shots from {}", dir.display())
                    })?)
                }
            };
            ponder::router::Exemplars::load_any(&path, embedder)?.nearest(&args.problem, k)?
        }
    };
    let request = ponder::reason::ReasonRequest {
        problem: args.problem,
        history: Vec::new(),
        shots,
        strategy,
        params,
        budget_tokens: args.budget,
        deadline_ms: args.deadline_ms,
        seed: args.seed,
    };
    // A bad strategy, parameter or budget is refused before the model loads.
    let valid = request.validate(&registry, ponder::reason::MAX_BUDGET_TOKENS)?;
    let opts = ponder_engine::RuntimeOptions {
        model,
        kv_memory: args.kv_memory.as_u64(),
        device: Some(args.device),
        tokenizer: args.tokenizer,
        ..ponder_engine::RuntimeOptions::for_model(ponder::models::default_llm_path())
    };
    let runtime = ponder_engine::Runtime::start(&opts)
        .with_context(|| format!("loading {}", opts.model.display()))?;
    let served = ponder::models::FittedModel::of_file(&opts.model)
        .with_context(|| format!("reading the model {}", opts.model.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        let generator = runtime.generator();
        let verifier = args
            .verifier
            .build(generator.clone(), &served)
            .await
            .map_err(anyhow::Error::msg)?;
        let cancel = tokio_util::sync::CancellationToken::new();
        anyhow::Ok(ponder::reason::run_valid(valid, generator, verifier, cancel, None).await?)
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&outcome)?);
        return Ok(());
    }
    if !outcome.shots.is_empty() {
        println!("worked examples shown: {}", outcome.shots.join(", "));
    }
    println!("answer: {}", outcome.answer.as_deref().unwrap_or("(none)"));
    let u = &outcome.usage;
    println!(
        "usage: generated={} prefill_computed={} prefill_reused={} verifier_calls={} probe_tokens={} tree_tokens={} recomputed_tokens={} spent={}/{} wall_ms={} finish={:?}",
        u.generated_tokens,
        u.prefill_tokens_computed,
        u.prefill_tokens_reused,
        u.verifier_calls,
        u.probe_tokens,
        u.tree_tokens,
        u.recomputed_tokens,
        u.spent(),
        request.budget_tokens,
        u.wall_ms,
        outcome.finish_reason
    );
    print!("{}", outcome.tree.render(60));
    Ok(())
}
