//! The README's plug-in example (`examples/custom_strategy.rs`), compiled into the tests and
//! run by name on the real engine, exactly as a user's crate would register it.

use crate::custom_strategy;

use ponder::reason::{reason, ReasonRequest};
use ponder_strategies::Registry;
use tokio_util::sync::CancellationToken;

#[test]
fn a_user_strategy_registered_by_name_runs_on_the_engine() {
    let mut registry = Registry::with_builtins();
    assert!(!registry.contains("confident_greedy"));
    custom_strategy::register(&mut registry);
    assert!(registry.names().contains(&"confident_greedy".to_string()));
    let info = registry
        .list()
        .into_iter()
        .find(|i| i.name == "confident_greedy")
        .expect("listed");
    assert_eq!(info.defaults["n"], 4, "defaults are listed for the API");

    let opts = ponder_engine::RuntimeOptions {
        model: crate::util::smollm2_path(),
        ..ponder_engine::RuntimeOptions::for_model(ponder::models::default_llm_path())
    };
    let runtime = ponder_engine::Runtime::start(&opts).expect("runtime");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    // An impossible confidence bar forces the sample-and-vote path.
    let req = ReasonRequest {
        problem: "What is 2+3?".into(),
        history: Vec::new(),
        shots: Vec::new(),
        strategy: "confident_greedy".into(),
        params: serde_json::json!({"min_mean_logprob": 0.0, "n": 2, "max_tokens": 48}),
        budget_tokens: 2000,
        deadline_ms: None,
        seed: 1,
    };
    let out = rt
        .block_on(reason(
            &registry,
            runtime.generator(),
            None,
            &req,
            CancellationToken::new(),
        ))
        .expect("runs");
    assert_eq!(out.strategy, "confident_greedy");
    assert_eq!(out.candidates.len(), 3, "greedy plus two samples");
    assert!(out.usage.spent() <= 2000);
    // Its parameters are validated like a built-in's.
    let bad = registry
        .build("confident_greedy", serde_json::json!({"n": 0}))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(bad.contains("n"), "{bad}");
}
