//! Registers every built-in strategy under its name.

use crate::a_star::{AStar, AStarParams};
use crate::ab_mcts::{AbMcts, AbMctsParams};
use crate::adaptive_parallel::{AdaptiveParallel, AdaptiveParallelParams};
use crate::answer_convergence::{AnswerConvergence, AnswerConvergenceParams};
use crate::beam_search::{BeamParams, BeamSearch, DvtsParams};
use crate::best_of_n::{BestOfN, BestOfNParams};
use crate::budget_forcing::{BudgetForcing, BudgetForcingParams};
use crate::deepconf::{DeepConf, DeepConfParams};
use crate::first_finish::{FirstFinish, FirstFinishParams, ShortMofKParams};
use crate::mcts::{Mcts, MctsParams};
use crate::registry::Registry;
use crate::revision::{Revision, RevisionParams};
use crate::self_consistency::{SelfConsistency, SelfConsistencyParams};
use crate::strategy::Strategy;

fn boxed<S: Strategy + 'static>(s: crate::Result<S>) -> crate::Result<Box<dyn Strategy>> {
    s.map(|s| Box::new(s) as Box<dyn Strategy>)
}

impl Registry {
    /// A registry holding every built-in strategy.
    pub fn with_builtins() -> Self {
        let mut r = Registry::new();
        r.register(
            "best_of_n",
            "N solutions, keep the best-scored (PRM, ORM or confidence)",
            |p: BestOfNParams| boxed(BestOfN::new(p, false)),
        );
        r.register(
            "weighted_best_of_n",
            "N solutions, answer with the largest summed score",
            |p: BestOfNParams| boxed(BestOfN::new(p, true)),
        );
        r.register(
            "self_consistency",
            "N solutions, majority vote over equivalent answers",
            |p: SelfConsistencyParams| boxed(SelfConsistency::new(p)),
        );
        r.register(
            "beam_search",
            "step-level beam search guided by the PRM",
            |p: BeamParams| boxed(BeamSearch::beam(p)),
        );
        r.register(
            "dvts",
            "diverse verifier tree search: N/M greedy PRM subtrees",
            |p: DvtsParams| boxed(BeamSearch::dvts(p)),
        );
        r.register(
            "a_star",
            "A*-decoding: best-first over partial solutions by PRM cost",
            |p: AStarParams| boxed(AStar::new(p)),
        );
        r.register(
            "mcts",
            "Monte-Carlo tree search over steps with PUCT and PRM values",
            |p: MctsParams| boxed(Mcts::new(p)),
        );
        r.register(
            "ab_mcts",
            "adaptive-branching MCTS: Thompson sampling between wider and deeper",
            |p: AbMctsParams| boxed(AbMcts::new(p)),
        );
        r.register(
            "answer_convergence",
            "one trace, probe the answer at step ends, stop when it settles",
            |p: AnswerConvergenceParams| boxed(AnswerConvergence::new(p)),
        );
        r.register(
            "deepconf",
            "confidence-filtered traces with online early stopping, weighted vote",
            |p: DeepConfParams| boxed(DeepConf::new(p)),
        );
        r.register(
            "first_finish",
            "k traces, return the first to finish",
            |p: FirstFinishParams| boxed(FirstFinish::first(p)),
        );
        r.register(
            "short_m_of_k",
            "k traces, vote among the first m to finish",
            |p: ShortMofKParams| boxed(FirstFinish::short_m_of_k(p)),
        );
        r.register(
            "adaptive_parallel",
            "widen while answers disagree, prune low confidence, join by vote or synthesis",
            |p: AdaptiveParallelParams| boxed(AdaptiveParallel::new(p)),
        );
        r.register(
            "budget_forcing",
            "one trace thinks between a minimum (\"Wait\") and a maximum, then answers (s1)",
            |p: BudgetForcingParams| boxed(BudgetForcing::new(p)),
        );
        r.register(
            "revision",
            "chains of attempts, each revising the chain's last ones; vote across the chains",
            |p: RevisionParams| boxed(Revision::new(p)),
        );
        r
    }
}
