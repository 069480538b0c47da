//! Draws shared by the items whose strategies begin with the same samples
//! (`ponder-eval run --share-draws`).
//!
//! `self_consistency`, `best_of_n` and `weighted_best_of_n` begin with N whole samples of the
//! prompt (their [`SamplePlan`]); sample k is seeded by its index, so at equal plans, budget,
//! seed and worked examples the three draw the same candidates and differ only in how they
//! choose among them: a vote, the best score, a score-weighted vote. With shared draws, the
//! first item of such a group runs `best_of_n` once and every item of the group takes its own
//! strategy's choice ([`Strategy::select`]) of those candidates — the rows separate runs write
//! (the smoke eval checks it) for a third of the generation.
//!
//! It must not share where the rows could differ: a verifier that bills its calls (a vote does
//! not score, so it would not pay them), a draw that did not complete (an interrupted strategy
//! chooses among what it had recorded), plans that are not equal. Such items run on their own.
//! Rows keep their meaning but for `wall_ms`: an item that took a finished draw waited for
//! nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ponder::reason::ReasonRequest;
use ponder_strategies::{BestOfNParams, Outcome, Registry, SearchFinish, Strategy};
use tokio::sync::OnceCell;

/// The strategy whose run is shared: it records every candidate with its score.
const DRAWER: &str = "best_of_n";
/// Draws kept for items still to come. A grid runs strategy by strategy ([`crate::grid`]), so
/// the items of one group are as many items apart as the run has problems: this is the largest
/// number of problems per budget and seed whose draws are all shared.
const KEPT_DRAWS: usize = 2048;

/// What identifies a draw: the same problem, budget, seed and examples, and the drawer's
/// parameters with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct DrawKey {
    pub problem: String,
    pub budget: u64,
    pub seed: u64,
    pub shots: Vec<String>,
    pub drawer_params: String,
}

/// An item that can take its candidates from a shared draw.
pub(crate) struct Sharer {
    /// The drawer's parameters (every field given).
    pub drawer_params: serde_json::Value,
    /// The item's own strategy, which chooses among the candidates.
    pub strategy: Box<dyn Strategy>,
    /// Whether the strategy keeps the candidates' scores (`self_consistency` records none).
    pub keeps_scores: bool,
}

impl Sharer {
    /// The drawer's run of the item's request.
    pub(crate) fn drawer_request(&self, req: &ReasonRequest) -> ReasonRequest {
        ReasonRequest {
            strategy: DRAWER.into(),
            params: self.drawer_params.clone(),
            ..req.clone()
        }
    }
}

/// The draws of a run, each made once and kept while items of its group may still come.
#[derive(Debug, Default)]
pub struct SharedDraws {
    draws: Mutex<Draws>,
    made: AtomicUsize,
    taken: AtomicUsize,
}

#[derive(Debug, Default)]
struct Draws {
    cells: HashMap<DrawKey, Arc<OnceCell<Option<Outcome>>>>,
    order: VecDeque<DrawKey>,
}

impl SharedDraws {
    /// Draws made so far.
    pub fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }

    /// Items so far whose row came from a shared draw (the item that made it among them).
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }

    /// The draw for `key`: made by `draw` if no item of the group made it yet (items that come
    /// meanwhile wait for it). `None` when the draw failed or did not complete: the item then
    /// runs on its own.
    pub(crate) async fn get<F>(&self, key: DrawKey, draw: F) -> Option<Outcome>
    where
        F: std::future::Future<Output = Option<Outcome>>,
    {
        let cell = {
            let mut draws = self.draws.lock().unwrap_or_else(PoisonError::into_inner);
            let draws = &mut *draws;
            match draws.cells.get(&key) {
                Some(cell) => Arc::clone(cell),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    draws.cells.insert(key.clone(), Arc::clone(&cell));
                    draws.order.push_back(key);
                    while draws.order.len() > KEPT_DRAWS {
                        if let Some(old) = draws.order.pop_front() {
                            draws.cells.remove(&old);
                        }
                    }
                    cell
                }
            }
        };
        let drawn = cell
            .get_or_init(|| async {
                let drawn = draw.await;
                if drawn.is_some() {
                    self.made.fetch_add(1, Ordering::Relaxed);
                }
                drawn
            })
            .await
            .clone();
        if drawn.is_some() {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        drawn
    }
}

/// How `strategy` with `params` shares a draw, if it can: one of the three strategies above,
/// whose sample plan equals the drawer's with the same parameters.
pub(crate) fn sharer(
    registry: &Registry,
    strategy: &str,
    params: &serde_json::Value,
) -> Option<Sharer> {
    let keeps_scores = match strategy {
        "best_of_n" | "weighted_best_of_n" => true,
        "self_consistency" => false,
        _ => return None,
    };
    let mut drawer_params = match params {
        serde_json::Value::Null => serde_json::Map::new(),
        serde_json::Value::Object(map) => map.clone(),
        _ => return None,
    };
    // A vote's own switch; the drawer always asks an unmarked solution for its answer, so the
    // plans below are equal only where the vote does too.
    if !keeps_scores {
        drawer_params.remove("force_answer");
    }
    let drawer: BestOfNParams =
        serde_json::from_value(serde_json::Value::Object(drawer_params)).ok()?;
    let drawer_params = serde_json::to_value(drawer).ok()?;
    let own = registry.build(strategy, params.clone()).ok()?;
    let plan = registry
        .build(DRAWER, drawer_params.clone())
        .ok()?
        .sample_plan()?;
    (own.sample_plan()? == plan).then_some(Sharer {
        drawer_params,
        strategy: own,
        keeps_scores,
    })
}

/// The drawer's outcome if it can be shared: it completed.
pub(crate) fn shareable(outcome: Outcome) -> Option<Outcome> {
    (outcome.finish_reason == SearchFinish::Completed).then_some(outcome)
}

/// The outcome `sharer`'s strategy would have had: the drawn candidates (without scores for a
/// strategy that records none), its choice among them, the draw's spend.
pub(crate) fn outcome_for(sharer: &Sharer, drawn: &Outcome) -> Outcome {
    let candidates: Vec<_> = drawn
        .candidates
        .iter()
        .cloned()
        .map(|mut c| {
            if !sharer.keeps_scores {
                c.score = None;
            }
            c
        })
        .collect();
    let selection = sharer.strategy.select(&candidates);
    let text = selection
        .candidate
        .and_then(|i| candidates.get(i))
        .map(|c| c.text.clone());
    Outcome {
        strategy: sharer.strategy.name().to_string(),
        answer: selection.answer,
        text,
        selected: selection.candidate,
        support: selection.support,
        candidates,
        usage: drawn.usage,
        finish_reason: drawn.finish_reason,
        tree: drawn.tree.clone(),
        router: None,
        shots: drawn.shots.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry::with_builtins()
    }

    #[test]
    fn the_three_share_only_at_equal_plans() {
        let r = registry();
        let n4 = serde_json::json!({"n": 4, "max_tokens": 256});
        for s in ["self_consistency", "best_of_n", "weighted_best_of_n"] {
            let sharer = sharer(&r, s, &n4).expect(s);
            assert_eq!(sharer.drawer_params["n"], 4);
            assert_eq!(sharer.keeps_scores, s != "self_consistency");
        }
        // The same drawer for all three: one key.
        let key = |s| sharer(&r, s, &n4).map(|x| x.drawer_params.to_string());
        assert_eq!(key("self_consistency"), key("best_of_n"));
        assert_eq!(key("best_of_n"), key("weighted_best_of_n"));
        // Defaults differ (a vote draws 8, best-of-N 4): no sharing.
        assert!(sharer(&r, "self_consistency", &serde_json::Value::Null).is_none());
        // A vote that does not force answers draws other candidates.
        let unforced = serde_json::json!({"n": 4, "force_answer": false});
        assert!(sharer(&r, "self_consistency", &unforced).is_none());
        // Other strategies, and parameters a strategy refuses, run on their own.
        assert!(sharer(&r, "deepconf", &n4).is_none());
        assert!(sharer(&r, "best_of_n", &serde_json::json!({"n": 0})).is_none());
    }
}
