//! Ponder's strategy engine: the [`Strategy`] trait, the [`Generator`] port a strategy drives,
//! the budget [`Meter`], the [`SearchTree`] every strategy records into, and the built-in
//! strategies (best-of-N, self-consistency, beam search and DVTS, A*-decoding, MCTS and
//! AB-MCTS, answer convergence, DeepConf, first-finish and short-m@k, adaptive parallel
//! thinking) and, scaling sequentially, budget forcing and revision.
//!
//! This crate knows nothing of candle, axum or the engine: it sees models only through the
//! [`Generator`] port and scores only through `ponder-verifiers`. [`fake::FakeGenerator`] is a
//! scripted generator for algorithm tests; the service implements the port over the engine.

mod a_star;
mod ab_mcts;
mod adaptive_parallel;
mod answer_convergence;
mod beam_search;
mod best_of_n;
mod budget;
mod budget_forcing;
mod builtins;
mod candidates;
mod context;
mod deepconf;
mod error;
pub mod fake;
mod first_finish;
mod generator;
mod lockstep;
mod mcts;
mod outcome;
mod params;
mod probe;
mod progress;
mod registry;
mod revision;
mod samples;
mod sampling_override;
mod scoring;
mod select;
mod self_consistency;
mod stop;
mod strategy;
mod tree;

pub use a_star::{step_cost, AStar, AStarParams, Heuristic};
pub use ab_mcts::{AbMcts, AbMctsParams, Posterior};
pub use adaptive_parallel::{leader_probability, AdaptiveParallel, AdaptiveParallelParams, Join};
pub use answer_convergence::{AnswerConvergence, AnswerConvergenceParams};
pub use beam_search::{BeamParams, BeamSearch, ConfidenceStop, DvtsParams};
pub use best_of_n::{BestOfN, BestOfNParams};
pub use budget::{Budget, Charge, Meter, Reservation, Usage};
pub use budget_forcing::{BudgetForcing, BudgetForcingParams, THINK_END, THINK_START};
pub use context::{Branch, Context, StepSpec, ANSWER_PROBE, FORCED_ANSWER_TOKENS};
pub use deepconf::{percentile, ConfidenceMeasure, DeepConf, DeepConfMode, DeepConfParams};
pub use error::{GeneratorError, Result, StrategyError};
pub use first_finish::{FirstFinish, FirstFinishParams, ShortMofKParams};
pub use generator::{
    ChatTemplateKwargs, Cost, CostTally, ExtendRequest, Extension, Generator, LogitAdjust, Piece,
    PieceSender, Prompt, PromptLogprobs, Sampling, SeqHandle, StopKind, TokenInfo, Turn,
};
pub use mcts::{puct, LeafValue, Mcts, MctsParams, MctsSelect};
pub use outcome::{Candidate, Outcome, RoutingDecision, SearchFinish, Selection};
pub use params::{in_range, positive, Decoding, ScoreBy, Steps};
pub use progress::{Progress, ProgressSender};
pub use registry::{Registry, StrategyInfo};
pub use revision::{Revision, RevisionParams, RevisionSelect, REVISION_OVERHEAD};
pub use samples::SamplePlan;
pub use sampling_override::SamplingOverride;
pub use select::{select_among, select_best_score, select_by_vote};
pub use self_consistency::{SelfConsistency, SelfConsistencyParams};
pub use stop::Stops;
pub use strategy::{run, Problem, Strategy, DEFAULT_SYSTEM_PROMPT};
pub use tree::{Node, NodeId, NodeStatus, SearchTree};
