//! `ponder bench serve`: serving throughput of one search workload — Ponder on its own engine
//! against Ponder in front of llama.cpp's `llama-server` and in front of vLLM (where
//! `scripts/setup-vllm.sh` installed it) on the same model and machine, in one run — plus the
//! proxy overhead of plain decoding through Ponder against the same requests sent straight to
//! each engine.
//!
//! Each row starts its own servers (`ponder serve`, `llama-server` with pinned flags), sends one
//! unmeasured warm-up request, runs `clients` closed-loop clients for `duration`, and stops them;
//! rows run one after another, never two servers' engines at once (they would share the cores).
//! A row whose engine is not installed is listed under `skipped` with the reason, never faked.
//! This module owns the workload and the report; it must not change any server's configuration
//! beyond the flags the report records.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

/// What to run.
#[derive(Debug, Clone)]
pub struct ServeBenchOptions {
    /// The `ponder` binary to start servers with.
    pub ponder: PathBuf,
    /// The GGUF both engines load.
    pub model: PathBuf,
    /// llama.cpp's `llama-server` binary (`None`: its rows are skipped).
    pub llama_server: Option<PathBuf>,
    /// vLLM (`None`: its rows are skipped).
    pub vllm: Option<VllmSetup>,
    /// Concurrent closed-loop clients per row.
    pub clients: usize,
    /// How long each row sends requests.
    pub duration: Duration,
    /// The search every client sends (`/v1/reason`).
    pub strategy: String,
    /// Its samples (`params.n`).
    pub n: usize,
    /// Its `budget_tokens`.
    pub budget_tokens: u64,
    /// `max_tokens` of each sample, and of each plain-decoding request.
    pub max_tokens: u64,
    /// `llama-server --threads` (and `--threads-batch`).
    pub threads: usize,
    /// The questions the clients cycle through.
    pub problems: Vec<String>,
    /// Per-request timeout; a request unanswered by then counts as an error.
    pub timeout: Duration,
}

/// Where vLLM is installed: what `scripts/setup-vllm.sh` makes.
#[derive(Debug, Clone)]
pub struct VllmSetup {
    /// The virtual environment's Python (`target/vllm-venv/bin/python`).
    pub python: PathBuf,
    /// The default model converted to safetensors (`target/vllm-model`).
    pub model: PathBuf,
}

/// One row: a workload against one serving setup.
#[derive(Debug, Clone, Serialize)]
pub struct ServeRow {
    /// `ponder`, `ponder_over_llama_server`, `llama_server_plain`, `ponder_over_llama_server_plain`,
    /// `ponder_over_vllm`, `vllm_plain`, `ponder_over_vllm_plain`.
    pub name: String,
    /// `search` (`/v1/reason`) or `plain` (`/v1/chat/completions` without a strategy).
    pub workload: String,
    /// Requests answered 200 within the duration.
    pub completed: usize,
    /// Requests that failed (status other than 200, transport error, timeout).
    pub errors: usize,
    /// Completed requests per minute (problems per minute for searches).
    pub per_minute: f64,
    /// Generated tokens per second (the servers' own `usage`).
    pub generated_tokens_per_s: f64,
    /// Median latency of completed requests, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency of completed requests, milliseconds.
    pub p99_ms: f64,
    /// The command lines the row's servers ran with.
    pub servers: Vec<String>,
}

/// The whole run: the workload, every row that ran, the rows that could not, and the ratios.
#[derive(Debug, Clone, Serialize)]
pub struct ServeReport {
    /// Concurrent clients per row.
    pub clients: usize,
    /// Seconds each row sent requests.
    pub duration_s: f64,
    /// The search: strategy, samples, budget, tokens per sample.
    pub search: Value,
    /// Rows in the order they ran.
    pub rows: Vec<ServeRow>,
    /// Rows not run, with why.
    pub skipped: Vec<String>,
    /// Ponder on its own engine over Ponder in front of `llama-server`, problems per minute.
    pub in_process_over_llama_server: Option<f64>,
    /// Ponder on its own engine over Ponder in front of vLLM, problems per minute.
    pub in_process_over_vllm: Option<f64>,
    /// Plain decoding: p50 latency through Ponder over straight to `llama-server` (the two
    /// prompts differ — Ponder renders its own chat format — so answers' lengths may too).
    pub proxy_p50_overhead: Option<f64>,
    /// Plain decoding: generated tokens/s through Ponder over straight to `llama-server`
    /// (below 1 where the proxy's own CPU use slows the engine on a shared machine).
    pub proxy_tokens_per_s_ratio: Option<f64>,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeBenchError {
    /// A server did not start.
    #[error("{what} did not start: {reason}")]
    Start {
        /// Which server.
        what: String,
        /// What happened.
        reason: String,
    },
    /// The options cannot make a workload.
    #[error("{0}")]
    Options(String),
}

/// A child server killed when dropped.
struct Server {
    child: Child,
    url: String,
    command: String,
    /// Started as the leader of its own process group, which is stopped whole (a server whose
    /// engine runs in child processes: vLLM).
    group: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.group {
            stop_group(&mut self.child);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asks `leader`'s process group to shut down (SIGTERM: vLLM's API server then stops its engine
/// core), waits up to 30 s for the leader, then kills whatever of the group is left.
#[cfg(unix)]
fn stop_group(leader: &mut Child) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    let Ok(pid) = i32::try_from(leader.id()) else {
        return;
    };
    let group = Pid::from_raw(pid);
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && matches!(leader.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = killpg(group, Signal::SIGKILL);
}

#[cfg(not(unix))]
fn stop_group(_leader: &mut Child) {}

fn start_error(what: &str, reason: impl ToString) -> ServeBenchError {
    ServeBenchError::Start {
        what: what.to_string(),
        reason: reason.to_string(),
    }
}

/// `ponder serve` with `args`, once it prints the address it listens on.
fn start_ponder(opts: &ServeBenchOptions, args: &[String]) -> Result<Server, ServeBenchError> {
    let mut all: Vec<String> = ["serve", "--port", "0", "--exemplars", "none"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    all.extend(args.iter().cloned());
    let mut child = Command::new(&opts.ponder)
        .args(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| start_error("ponder serve", e))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| start_error("ponder serve", "no stdout"))?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
        .map_err(|e| start_error("ponder serve", e))?;
    let Some(url) = line.trim().strip_prefix("ponder listening on ") else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(start_error("ponder serve", format!("it printed {line:?}")));
    };
    Ok(Server {
        url: url.to_string(),
        command: format!("ponder {}", all.join(" ")),
        child,
        group: false,
    })
}

/// `llama-server` with the pinned flags: `slots` parallel slots of 1,024 tokens, `threads`
/// threads, metrics on, once `/health` answers.
async fn start_llama_server(
    binary: &Path,
    model: &Path,
    slots: usize,
    threads: usize,
) -> Result<Server, ServeBenchError> {
    let port = free_port("llama-server")?;
    let args: Vec<String> = vec![
        "--model".into(),
        model.display().to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--threads".into(),
        threads.to_string(),
        "--threads-batch".into(),
        threads.to_string(),
        "--parallel".into(),
        slots.to_string(),
        "--ctx-size".into(),
        (1024 * slots).to_string(),
        "--metrics".into(),
        "--no-webui".into(),
    ];
    let child = Command::new(binary)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| start_error("llama-server", e))?;
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        command: format!("llama-server {}", args.join(" ")),
        group: false,
    };
    wait_healthy(&mut server, "llama-server", Duration::from_secs(120)).await?;
    Ok(server)
}

/// A port free on the loopback interface now, for the server `what`.
fn free_port(what: &str) -> Result<u16, ServeBenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| start_error(what, e))
}

/// Waits until `server` answers `/health`, failing if it exits first or `timeout` passes.
async fn wait_healthy(
    server: &mut Server,
    what: &str,
    timeout: Duration,
) -> Result<(), ServeBenchError> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + timeout;
    loop {
        let up = http
            .get(format!("{}/health", server.url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if up {
            return Ok(());
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(start_error(
                what,
                format!("it exited while starting ({status})"),
            ));
        }
        if Instant::now() > deadline {
            return Err(start_error(
                what,
                format!("no /health in {} s", timeout.as_secs()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The name vLLM serves the model under: what the workload's plain requests ask for.
const VLLM_MODEL_NAME: &str = "ponder";
/// vLLM's context (`--max-model-len`), what Ponder in front is told (`--backend-context`).
const VLLM_CONTEXT: usize = 4096;

/// vLLM's OpenAI server (as `scripts/vllm-check.sh` starts it: CPU, float32, seed 0, 2 GiB of
/// KV cache), once `/health` answers; its start compiles the model (minutes on 2 cores).
async fn start_vllm(setup: &VllmSetup) -> Result<Server, ServeBenchError> {
    let port = free_port("vLLM")?;
    let args: Vec<String> = vec![
        "-m".into(),
        "vllm.entrypoints.openai.api_server".into(),
        "--model".into(),
        setup.model.display().to_string(),
        "--served-model-name".into(),
        VLLM_MODEL_NAME.into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--dtype".into(),
        "float32".into(),
        "--max-model-len".into(),
        VLLM_CONTEXT.to_string(),
        "--seed".into(),
        "0".into(),
    ];
    let mut command = Command::new(&setup.python);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command
        .args(&args)
        .env("VLLM_TARGET_DEVICE", "cpu")
        .env("VLLM_CPU_KVCACHE_SPACE", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| start_error("vLLM", e))?;
    let mut server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        command: format!(
            "VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=2 python {}",
            args.join(" ")
        ),
        group: true,
    };
    wait_healthy(&mut server, "vLLM", Duration::from_secs(900)).await?;
    Ok(server)
}

/// The rows of one engine behind Ponder: the search through Ponder in front of it, then plain
/// decoding straight to it and through Ponder.
async fn engine_rows(
    opts: &ServeBenchOptions,
    engine: &Server,
    engine_name: &str,
    front_args: &[String],
) -> Result<Vec<ServeRow>, ServeBenchError> {
    let front = start_ponder(opts, front_args)?;
    let servers = vec![front.command.clone(), engine.command.clone()];
    Ok(vec![
        drive(
            opts,
            &front.url,
            Workload::Search,
            &format!("ponder_over_{engine_name}"),
            servers.clone(),
        )
        .await,
        drive(
            opts,
            &engine.url,
            Workload::Plain,
            &format!("{engine_name}_plain"),
            vec![engine.command.clone()],
        )
        .await,
        drive(
            opts,
            &front.url,
            Workload::Plain,
            &format!("ponder_over_{engine_name}_plain"),
            servers,
        )
        .await,
    ])
}

/// A request of the workload: the URL path, the body, and where the generated tokens are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// `/v1/reason` with the search.
    Search,
    /// `/v1/chat/completions`, plain decoding.
    Plain,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::Search => "search",
            Self::Plain => "plain",
        }
    }

    fn request(self, opts: &ServeBenchOptions, problem: &str, seed: u64) -> (&'static str, Value) {
        match self {
            Self::Search => (
                "/v1/reason",
                json!({"problem": problem, "strategy": opts.strategy,
                       "params": {"n": opts.n, "max_tokens": opts.max_tokens},
                       "budget_tokens": opts.budget_tokens, "seed": seed}),
            ),
            Self::Plain => (
                "/v1/chat/completions",
                json!({"model": VLLM_MODEL_NAME, "messages": [{"role": "user", "content": problem}],
                       "max_tokens": opts.max_tokens, "temperature": 0.7, "seed": seed}),
            ),
        }
    }

    /// Generated tokens of a 200 answer (`/v1/reason`'s `usage.generated_tokens`, a chat
    /// completion's `usage.completion_tokens`).
    fn generated(self, answer: &Value) -> u64 {
        let key = match self {
            Self::Search => "/usage/generated_tokens",
            Self::Plain => "/usage/completion_tokens",
        };
        answer.pointer(key).and_then(Value::as_u64).unwrap_or(0)
    }
}

#[derive(Default)]
struct Tally {
    latencies_ms: Vec<f64>,
    generated: u64,
    errors: usize,
}

/// `clients` closed loops against `url` for the duration (after one warm-up request).
async fn drive(
    opts: &ServeBenchOptions,
    url: &str,
    workload: Workload,
    name: &str,
    servers: Vec<String>,
) -> ServeRow {
    let http = reqwest::Client::builder()
        .timeout(opts.timeout)
        .build()
        .unwrap_or_default();
    let send = |problem: &str, seed: u64| {
        let (path, body) = workload.request(opts, problem, seed);
        let request = http.post(format!("{url}{path}")).json(&body);
        async move {
            let started = Instant::now();
            let answer = match request.send().await {
                Ok(r) if r.status().is_success() => r.json::<Value>().await.ok(),
                _ => None,
            };
            (started.elapsed(), answer)
        }
    };
    let warm = opts
        .problems
        .first()
        .map_or("What is 2 + 2?", String::as_str);
    let _ = send(warm, 0).await;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let stop = started + opts.duration;
    let loops = (0..opts.clients).map(|client| {
        let tally = Arc::clone(&tally);
        let send = &send;
        async move {
            let mut i = client;
            while Instant::now() < stop {
                let problem = &opts.problems[i % opts.problems.len()];
                let (took, answer) = send(problem, i as u64).await;
                // A request that ends after the duration is not counted: the rate is of the
                // window.
                if Instant::now() > stop {
                    break;
                }
                let mut t = tally
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match answer {
                    Some(a) => {
                        t.latencies_ms.push(took.as_secs_f64() * 1e3);
                        t.generated += workload.generated(&a);
                    }
                    None => t.errors += 1,
                }
                i += opts.clients;
            }
        }
    });
    futures_util::future::join_all(loops).await;
    let seconds = opts.duration.as_secs_f64().max(1e-9);
    let mut t = std::mem::take(
        &mut *tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    t.latencies_ms.sort_by(f64::total_cmp);
    ServeRow {
        name: name.to_string(),
        workload: workload.name().to_string(),
        completed: t.latencies_ms.len(),
        errors: t.errors,
        per_minute: t.latencies_ms.len() as f64 * 60.0 / seconds,
        generated_tokens_per_s: t.generated as f64 / seconds,
        p50_ms: super::load::percentile(&t.latencies_ms, 0.5),
        p99_ms: super::load::percentile(&t.latencies_ms, 0.99),
        servers,
    }
}

/// Runs every row it can, in order: Ponder on its own engine; then for `llama-server` and for
/// vLLM, each where installed: Ponder over it (search), plain decoding straight to it and
/// through Ponder.
pub async fn run(opts: &ServeBenchOptions) -> Result<ServeReport, ServeBenchError> {
    if opts.problems.is_empty() || opts.clients == 0 {
        return Err(ServeBenchError::Options(
            "the benchmark needs at least one problem and one client".into(),
        ));
    }
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let model = opts.model.display().to_string();
    let clients = opts.clients.to_string();
    // Ponder admits every client's search at once (none waits in its queue).
    let ponder_limits = [
        "--max-running".to_string(),
        clients.clone(),
        "--max-n".to_string(),
        opts.n.max(1).to_string(),
        "--max-completion-tokens".to_string(),
        opts.max_tokens.to_string(),
        "--max-budget-tokens".to_string(),
        opts.budget_tokens.to_string(),
    ];
    {
        let mut args = vec!["--model".to_string(), model.clone()];
        args.extend(ponder_limits.iter().cloned());
        let ponder = start_ponder(opts, &args)?;
        let servers = vec![ponder.command.clone()];
        rows.push(drive(opts, &ponder.url, Workload::Search, "ponder", servers).await);
    }
    match &opts.llama_server {
        None => skipped.push(
            "llama-server rows: no llama-server binary (bash scripts/setup-llamacpp.sh builds one)"
                .to_string(),
        ),
        Some(binary) => {
            // A slot per sample of every client's search: every request runs at once, as the
            // in-process engine batches them.
            let slots = opts.clients * opts.n.max(1);
            let llama = start_llama_server(binary, &opts.model, slots, opts.threads).await?;
            let mut args = vec!["--backend".to_string(), llama.url.clone()];
            args.extend(ponder_limits.iter().cloned());
            rows.extend(engine_rows(opts, &llama, "llama_server", &args).await?);
        }
    }
    match &opts.vllm {
        None => skipped.push(
            "vllm rows: vLLM is not installed (bash scripts/setup-vllm.sh installs it)".to_string(),
        ),
        Some(setup) => {
            let vllm = start_vllm(setup).await?;
            let mut args = vec![
                "--backend".to_string(),
                format!("{}/v1", vllm.url),
                "--backend-model".to_string(),
                VLLM_MODEL_NAME.to_string(),
                "--backend-tokenizer".to_string(),
                setup
                    .model
                    .join("tokenizer_config.json")
                    .display()
                    .to_string(),
                "--backend-context".to_string(),
                VLLM_CONTEXT.to_string(),
            ];
            args.extend(ponder_limits.iter().cloned());
            rows.extend(engine_rows(opts, &vllm, "vllm", &args).await?);
        }
    }
    let row = |name: &str| rows.iter().find(|r| r.name == name);
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    let in_process_over = |front: &str| match (row("ponder"), row(front)) {
        (Some(a), Some(b)) => ratio(a.per_minute, b.per_minute),
        _ => None,
    };
    let in_process_over_llama_server = in_process_over("ponder_over_llama_server");
    let in_process_over_vllm = in_process_over("ponder_over_vllm");
    let plain = (
        row("ponder_over_llama_server_plain"),
        row("llama_server_plain"),
    );
    let proxy_p50_overhead = match plain {
        (Some(a), Some(b)) => ratio(a.p50_ms, b.p50_ms),
        _ => None,
    };
    let proxy_tokens_per_s_ratio = match plain {
        (Some(a), Some(b)) => ratio(a.generated_tokens_per_s, b.generated_tokens_per_s),
        _ => None,
    };
    Ok(ServeReport {
        clients: opts.clients,
        duration_s: opts.duration.as_secs_f64(),
        search: json!({"strategy": opts.strategy, "n": opts.n,
                       "budget_tokens": opts.budget_tokens, "max_tokens": opts.max_tokens}),
        rows,
        skipped,
        in_process_over_llama_server,
        in_process_over_vllm,
        proxy_p50_overhead,
        proxy_tokens_per_s_ratio,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_request_carries_the_workload_and_a_plain_one_no_strategy() {
        let opts = ServeBenchOptions {
            ponder: PathBuf::from("ponder"),
            model: PathBuf::from("m.gguf"),
            llama_server: None,
            vllm: None,
            clients: 2,
            duration: Duration::from_secs(1),
            strategy: "self_consistency".into(),
            n: 8,
            budget_tokens: 1024,
            max_tokens: 128,
            threads: 2,
            problems: vec!["q".into()],
            timeout: Duration::from_secs(1),
        };
        let (path, body) = Workload::Search.request(&opts, "q", 3);
        assert_eq!(path, "/v1/reason");
        assert_eq!(body["params"]["n"], 8);
        assert_eq!(body["budget_tokens"], 1024);
        let (path, body) = Workload::Plain.request(&opts, "q", 3);
        assert_eq!(path, "/v1/chat/completions");
        assert!(body.get("strategy").is_none());
        assert_eq!(
            Workload::Plain.generated(&json!({"usage": {"completion_tokens": 7}})),
            7
        );
        assert_eq!(
            Workload::Search.generated(&json!({"usage": {"generated_tokens": 9}})),
            9
        );
    }
}
