//! A user-defined strategy, plugged in by name — the complete example DESIGN.md promises.
//!
//! `confident_greedy` decodes one greedy solution; if the model was confident along it (mean
//! token logprob above a threshold) that is the answer, otherwise it spends the rest of the
//! budget on `n` sampled solutions and a majority vote that includes the greedy one. It uses
//! only the public API of `ponder-strategies`: a params struct, a `Strategy` impl over the
//! `Context`, and `Registry::register`. The service resolves strategies by name from the same
//! registry, so once registered it is callable wherever a built-in is.
//!
//! Run it: `cargo run --release --example custom_strategy -- "What is 17 + 25?"`.

use async_trait::async_trait;
use ponder_strategies::{
    positive, select_by_vote, Context, Decoding, Registry, Result, Sampling, Selection, StepSpec,
    Strategy,
};
use serde::{Deserialize, Serialize};

/// Parameters of `confident_greedy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfidentGreedyParams {
    /// Accept the greedy solution if its mean token logprob is at least this.
    pub min_mean_logprob: f64,
    /// Sampled solutions to add when it is not.
    pub n: usize,
    /// Most tokens per solution.
    pub max_tokens: usize,
    /// Sampling of the fallback solutions.
    pub decoding: Decoding,
}

impl Default for ConfidentGreedyParams {
    fn default() -> Self {
        Self {
            min_mean_logprob: -0.3,
            n: 4,
            max_tokens: 512,
            decoding: Decoding::default(),
        }
    }
}

/// Greedy first; sample and vote only when the model was unsure.
#[derive(Debug)]
pub struct ConfidentGreedy {
    params: ConfidentGreedyParams,
}

#[async_trait]
impl Strategy for ConfidentGreedy {
    fn name(&self) -> &str {
        "confident_greedy"
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        let p = &self.params;
        let root = ctx.open().await?;
        let greedy = StepSpec {
            max_tokens: p.max_tokens,
            stop: Vec::new(),
            sampling: Sampling::greedy(p.decoding.top_logprobs),
        };
        let first = ctx.fork(&root)?;
        let done = ctx.extend(vec![(first, 0)], &greedy).await?;
        for b in &done {
            let index = ctx.add_candidate(b, Some(b.mean_logprob() as f32));
            if b.finished && b.mean_logprob() >= p.min_mean_logprob {
                return Ok(Selection {
                    answer: ctx.candidates()[index].answer.clone(),
                    candidate: Some(index),
                    support: None,
                });
            }
        }
        // Unsure: n more samples from the cached prompt, then a vote over everything.
        let more = (1..=p.n)
            .map(|k| Ok((ctx.fork(&root)?, k as u64)))
            .collect::<Result<Vec<_>>>()?;
        for b in ctx.extend(more, &p.decoding.whole(p.max_tokens)).await? {
            ctx.add_candidate(&b, Some(b.mean_logprob() as f32));
        }
        Ok(select_by_vote(&ctx.candidates(), false))
    }
}

/// Adds `confident_greedy` to `registry`.
pub fn register(registry: &mut Registry) {
    registry.register(
        "confident_greedy",
        "greedy if confident, else sample and vote",
        |p: ConfidentGreedyParams| {
            positive("confident_greedy", "n", p.n)?;
            positive("confident_greedy", "max_tokens", p.max_tokens)?;
            p.decoding.validate("confident_greedy")?;
            Ok(Box::new(ConfidentGreedy { params: p }) as Box<dyn Strategy>)
        },
    );
}

#[allow(dead_code)] // the integration tests include this file for `register`
fn main() -> anyhow::Result<()> {
    let problem = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is 17 + 25?".to_string());
    let mut registry = Registry::with_builtins();
    register(&mut registry);
    let runtime = ponder_engine::Runtime::start(&ponder_engine::RuntimeOptions::for_model(
        ponder::models::default_llm_path(),
    ))?;
    let request = ponder::reason::ReasonRequest {
        problem,
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "confident_greedy".into(),
        params: serde_json::json!({"n": 3, "max_tokens": 256}),
        budget_tokens: 4096,
        deadline_ms: None,
        seed: 0,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let outcome = rt.block_on(ponder::reason::reason(
        &registry,
        runtime.generator(),
        None,
        &request,
        cancel,
    ))?;
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "answer": outcome.answer,
            "candidates": outcome.candidates.len(),
            "usage": outcome.usage,
            "finish_reason": outcome.finish_reason,
        }))?
    );
    Ok(())
}
