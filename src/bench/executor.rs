//! Executor workloads, each measured against a baseline run in the same process.
//!
//! - `nsample`: N samples of T new tokens from one P-token prompt, through the continuous-
//!   batching scheduler (prompt prefilled once, branches forked) and naively (each sample alone:
//!   own prefill, no sharing, one after another).
//! - `prefix-reuse`: two requests sharing a long system prompt; how much of the second's prompt
//!   is computed.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use ponder_engine::batching::{Event, GroupRequest, Scheduler, SchedulerConfig};
use ponder_engine::forward::SamplingParams;
use ponder_engine::forward::{LoadedModel, Model, PagedKvStore};
use ponder_engine::{EngineError, Result};
use ponder_strategies::Turn;

/// Options shared by the workloads.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Samples.
    pub n: usize,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// New tokens per sample.
    pub new_tokens: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// KV memory in bytes.
    pub kv_memory: u64,
    /// Scheduler step budget.
    pub max_step_tokens: usize,
    /// `nsample`: how many times the batched run is measured (fresh cache each time,
    /// interleaved with the naive samples); the report takes the median run.
    pub repeat: usize,
}

/// The `nsample` result.
#[derive(Debug, Serialize)]
pub struct NSampleReport {
    /// Workload name.
    pub workload: &'static str,
    /// Samples.
    pub n: usize,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// New tokens per sample.
    pub new_tokens: usize,
    /// Wall time through the scheduler (the median of the batched runs).
    pub wall_s: f64,
    /// Wall time of the naive baseline.
    pub naive_wall_s: f64,
    /// `wall_s / naive_wall_s`.
    pub wall_ratio: f64,
    /// Generated tokens per second through the scheduler (all samples).
    pub tokens_per_s: f64,
    /// Decode tokens per second of one sequence alone (naive run, prefill excluded).
    pub single_stream_tokens_per_s: f64,
    /// `tokens_per_s / single_stream_tokens_per_s` (the batched run's prefill counts, the
    /// single stream's does not).
    pub aggregate_speedup: f64,
    /// The batched run's prefill: seconds to its first tokens.
    pub prefill_s: f64,
    /// Tokens per second of the batched run's decode phase (after the prefill's tokens).
    pub decode_tokens_per_s: f64,
    /// `decode_tokens_per_s / single_stream_tokens_per_s`: decode phase against decode phase.
    pub decode_speedup: f64,
    /// Prompt tokens run through the model by the scheduler.
    pub prefill_tokens_computed: u64,
    /// Prompt tokens served from cached blocks.
    pub prefill_tokens_reused: u64,
    /// Most KV blocks referenced at once.
    pub peak_kv_blocks: u64,
    /// Shared prompt blocks plus each branch's own tail.
    pub ideal_kv_blocks: u64,
    /// Forward passes the scheduler ran.
    pub forward_passes: u64,
    /// Naive prefill seconds per sample.
    pub naive_prefill_s: f64,
    /// Every batched run, in the order they ran (the fields above are the median's).
    pub batched_runs: Vec<BatchedRun>,
}

/// One measured run of the batched (shared-prefix) side of `nsample`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchedRun {
    /// Wall time through the scheduler.
    pub wall_s: f64,
    /// Generated tokens per second (all samples, prefill included in the time).
    pub tokens_per_s: f64,
    /// Seconds to the first tokens.
    pub prefill_s: f64,
    /// Tokens per second after the first tokens.
    pub decode_tokens_per_s: f64,
    #[serde(skip)]
    counters: ponder_engine::SchedulerCounters,
}

/// The `prefix-reuse` result.
#[derive(Debug, Serialize)]
pub struct PrefixReuseReport {
    /// Workload name.
    pub workload: &'static str,
    /// Tokens of the shared system prompt (rendered).
    pub system_prompt_tokens: usize,
    /// First request's prompt tokens and how many it computed.
    pub first_prompt_tokens: usize,
    /// Prefill tokens computed for the first request.
    pub first_prefill_computed: u64,
    /// Second request's prompt tokens.
    pub second_prompt_tokens: usize,
    /// Prefill tokens computed for the second request.
    pub second_prefill_computed: u64,
    /// Prefill tokens of the second request served from cache.
    pub second_prefill_reused: u64,
    /// Tokens per block.
    pub block_size: usize,
}

/// A prompt of exactly `len` tokens of ordinary text.
fn prompt_of_len(model: &LoadedModel, len: usize) -> Result<Vec<u32>> {
    let text =
        "Ponder answers reasoning questions by spending test-time compute wisely: it samples many \
                branches, scores them with verifiers and stops when the evidence is in. ";
    let unit = model.tokenizer.encode(text)?;
    if unit.is_empty() || len == 0 {
        return Err(EngineError::InvalidInput {
            field: "prompt_tokens",
            reason: "must be at least 1".into(),
        });
    }
    Ok(unit.iter().copied().cycle().take(len).collect())
}

fn scheduler(model: &Arc<Model>, opts: &BenchOptions) -> Result<Scheduler> {
    let store = PagedKvStore::with_memory(model.config(), opts.kv_memory, opts.block_size)?;
    Ok(Scheduler::new(
        Arc::clone(model),
        store,
        SchedulerConfig {
            max_step_tokens: opts.max_step_tokens,
            ..SchedulerConfig::default()
        },
    ))
}

fn samples(n: usize) -> Vec<SamplingParams> {
    (0..n)
        .map(|i| SamplingParams {
            temperature: 0.8,
            seed: 1000 + i as u64,
            ..SamplingParams::default()
        })
        .collect()
}

/// Runs `nsample`.
///
/// The batched side is measured `repeat` times, each with a fresh scheduler and cache (so every
/// run prefills the prompt), interleaved with the naive samples: run `r` goes before the `r`-th
/// share of them. A few seconds of batched work and a minute of naive work then see the same
/// host, and the report takes the median batched run, listing all of them.
pub fn nsample(loaded: &LoadedModel, opts: &BenchOptions) -> Result<NSampleReport> {
    let model = &loaded.model;
    let prompt = prompt_of_len(loaded, opts.prompt_tokens)?;
    let request = |samples: Vec<SamplingParams>| GroupRequest {
        prompt: prompt.clone(),
        samples,
        max_new_tokens: opts.new_tokens,
        stop_tokens: Vec::new(),
        stop_condition: None, // every sample generates exactly new_tokens
        priority: 0,
        keep: false,
        resume: None,
    };
    let repeat = opts.repeat.max(1);
    // `ceil(n / ceil(n / repeat)) <= repeat` shares: the loop below takes every one of them.
    let per_share = opts.n.div_ceil(repeat).max(1);
    let naive_samples = samples(opts.n);
    let mut shares = naive_samples.chunks(per_share);

    let mut batched_runs = Vec::with_capacity(repeat);
    let mut naive = NaiveTotals::default();
    for run in 0..repeat {
        // Ponder: one group, prompt prefilled once, N branches decoded together.
        let batched = BatchedRun::from(TimedRun::new(
            &mut scheduler(model, opts)?,
            request(samples(opts.n)),
        )?);
        tracing::info!(
            run,
            wall_s = batched.wall_s,
            tokens_per_s = batched.tokens_per_s,
            "nsample: batched run done"
        );
        batched_runs.push(batched);
        // Naive: each sample alone with its own store (own prefill), one after another.
        for sample in shares.next().unwrap_or_default() {
            naive.add(&TimedRun::new(
                &mut scheduler(model, opts)?,
                request(vec![sample.clone()]),
            )?);
        }
    }
    let mut by_wall: Vec<&BatchedRun> = batched_runs.iter().collect();
    by_wall.sort_by(|a, b| a.wall_s.total_cmp(&b.wall_s));
    let median = by_wall
        .get(by_wall.len() / 2)
        .map(|&run| run.clone())
        .unwrap_or_default();

    let bs = opts.block_size as u64;
    let (p, t, n) = (
        opts.prompt_tokens as u64,
        opts.new_tokens as u64,
        opts.n as u64,
    );
    let single = if naive.decode_s > 0.0 {
        naive.decode_tokens as f64 / naive.decode_s
    } else {
        0.0
    };
    let ratio = |x: f64| if single > 0.0 { x / single } else { 0.0 };
    let counters = median.counters;
    Ok(NSampleReport {
        workload: "nsample",
        n: opts.n,
        prompt_tokens: opts.prompt_tokens,
        new_tokens: opts.new_tokens,
        wall_s: median.wall_s,
        naive_wall_s: naive.wall_s,
        wall_ratio: median.wall_s / naive.wall_s,
        tokens_per_s: median.tokens_per_s,
        single_stream_tokens_per_s: single,
        aggregate_speedup: ratio(median.tokens_per_s),
        prefill_s: median.prefill_s,
        decode_tokens_per_s: median.decode_tokens_per_s,
        decode_speedup: ratio(median.decode_tokens_per_s),
        prefill_tokens_computed: counters.prefill_tokens_computed,
        prefill_tokens_reused: counters.prefill_tokens_reused,
        peak_kv_blocks: counters.peak_blocks_used,
        ideal_kv_blocks: p / bs + n * (p % bs + t).div_ceil(bs),
        forward_passes: counters.forward_passes,
        naive_prefill_s: naive.prefill_s / opts.n as f64,
        batched_runs,
    })
}

/// One request run to completion through a fresh scheduler, timed.
struct TimedRun {
    /// Seconds from submission to idle.
    wall_s: f64,
    /// Seconds to the step that produced the first tokens (the prefill).
    prefill_s: f64,
    /// Tokens that step produced (one per sample).
    prefill_tokens: usize,
    /// Tokens produced in all.
    generated: usize,
    counters: ponder_engine::SchedulerCounters,
}

impl TimedRun {
    fn new(sched: &mut Scheduler, request: GroupRequest) -> Result<Self> {
        let t0 = Instant::now();
        sched.submit(request)?;
        let (mut generated, mut first) = (0, None);
        while !sched.is_idle() {
            let tokens = sched
                .step()?
                .iter()
                .filter(|e| matches!(e, Event::Token { .. }))
                .count();
            if first.is_none() && tokens > 0 {
                first = Some((t0.elapsed().as_secs_f64(), tokens));
            }
            generated += tokens;
        }
        let wall_s = t0.elapsed().as_secs_f64();
        let (prefill_s, prefill_tokens) = first.unwrap_or((wall_s, 0));
        Ok(Self {
            wall_s,
            prefill_s,
            prefill_tokens,
            generated,
            counters: sched.counters(),
        })
    }

    fn decode_s(&self) -> f64 {
        self.wall_s - self.prefill_s
    }

    /// Tokens after the prefill's.
    fn decode_tokens(&self) -> usize {
        self.generated - self.prefill_tokens
    }
}

impl From<TimedRun> for BatchedRun {
    fn from(run: TimedRun) -> Self {
        let decode_s = run.decode_s();
        BatchedRun {
            wall_s: run.wall_s,
            tokens_per_s: run.generated as f64 / run.wall_s,
            prefill_s: run.prefill_s,
            decode_tokens_per_s: if decode_s > 0.0 {
                run.decode_tokens() as f64 / decode_s
            } else {
                0.0
            },
            counters: run.counters,
        }
    }
}

/// The naive side's sums over its samples.
#[derive(Default)]
struct NaiveTotals {
    wall_s: f64,
    prefill_s: f64,
    decode_s: f64,
    decode_tokens: usize,
}

impl NaiveTotals {
    fn add(&mut self, run: &TimedRun) {
        self.wall_s += run.wall_s;
        self.prefill_s += run.prefill_s;
        self.decode_s += run.decode_s();
        self.decode_tokens += run.decode_tokens();
    }
}

/// Runs `prefix-reuse`: the same long system prompt, two different questions, one after the other.
pub fn prefix_reuse(loaded: &LoadedModel, opts: &BenchOptions) -> Result<PrefixReuseReport> {
    let system: String = std::iter::repeat_n(
        "You are a careful mathematician. Think step by step, check each step, and put the final answer in \\boxed{}. ",
        12,
    )
    .collect();
    let render = |q: &str| -> Result<Vec<u32>> {
        loaded
            .tokenizer
            .encode(&loaded.render_chat(&[Turn::new("system", &system), Turn::new("user", q)])?)
    };
    let system_prompt_tokens = loaded
        .tokenizer
        .encode(&loaded.render_chat(&[Turn::new("system", &system)])?)?
        .len();
    let model = &loaded.model;
    let first = render("What is 17 * 23?")?;
    let second = render("How many primes are below 30?")?;
    let mut sched = scheduler(model, opts)?;
    let one = |prompt: &Vec<u32>| GroupRequest {
        prompt: prompt.clone(),
        samples: vec![SamplingParams::greedy()],
        max_new_tokens: 4,
        stop_tokens: Vec::new(),
        stop_condition: None,
        priority: 0,
        keep: false,
        resume: None,
    };
    sched.submit(one(&first))?;
    sched.run_to_completion()?;
    let after_first = sched.counters();
    sched.submit(one(&second))?;
    sched.run_to_completion()?;
    let after_second = sched.counters();
    Ok(PrefixReuseReport {
        workload: "prefix-reuse",
        system_prompt_tokens,
        first_prompt_tokens: first.len(),
        first_prefill_computed: after_first.prefill_tokens_computed,
        second_prompt_tokens: second.len(),
        second_prefill_computed: after_second.prefill_tokens_computed
            - after_first.prefill_tokens_computed,
        second_prefill_reused: after_second.prefill_tokens_reused
            - after_first.prefill_tokens_reused,
        block_size: opts.block_size,
    })
}
