//! What a search returns: the answer, every candidate with its scores, the usage, why it
//! stopped, and the tree. Also [`Selection`], a strategy's choice among its candidates.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};

use ponder_verifiers::TraceConfidence;

use crate::budget::Usage;
use crate::tree::{NodeId, SearchTree};

/// A finished (or best-effort) solution a strategy considered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Candidate {
    /// The tree node where this solution ends.
    #[cfg_attr(feature = "openapi", schema(value_type = usize))]
    pub node: NodeId,
    /// The whole solution text.
    pub text: String,
    /// The extracted final answer, if any.
    pub answer: Option<String>,
    /// The score the strategy selects by (verifier, confidence…), if any.
    pub score: Option<f32>,
    /// Tokens generated along this solution's path.
    pub tokens: usize,
    /// Mean token confidence along the path (DeepConf), if known.
    pub confidence: Option<f32>,
    /// The trace's confidence summary (mean, lowest group, bottom 10%, tail;
    /// [`TraceConfidence::summary`]), if the generator reported log-probabilities: what
    /// outcome verifiers read.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub trace_confidence: Option<TraceConfidence>,
    /// Whether the model ended it (as opposed to a cap or a stop).
    pub finished: bool,
}

/// A strategy's choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The chosen answer (after voting, the group's representative).
    pub answer: Option<String>,
    /// Index into the candidates of the solution shown as the response text.
    pub candidate: Option<usize>,
    /// Vote share of the chosen answer, when chosen by a vote.
    pub support: Option<f64>,
}

/// Why a whole search ended (the `finish_reason` of an [`Outcome`]: `completed`, `budget`,
/// `deadline`, `cancelled`). Not why one continuation ended (the generator port's
/// [`StopKind`](crate::StopKind)) nor why one engine sequence ended (the engine's `SeqFinish`);
/// the OpenAPI component keeps its published name, `FinishReason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = FinishReason))]
#[serde(rename_all = "snake_case")]
pub enum SearchFinish {
    /// The strategy finished by its own rule.
    Completed,
    /// The budget ran out; the answer is the best so far.
    Budget,
    /// The deadline passed; the answer is the best so far.
    Deadline,
    /// The caller cancelled; the answer is the best so far.
    Cancelled,
}

/// What a routing strategy decided for one search (`auto`'s is `ponder::router::Decision`),
/// recorded with [`crate::Context::set_router`] and kept on the [`Outcome`] as that type: the
/// code that made it reads it back typed ([`Outcome::routing`]); the API and the harness write
/// it out as JSON ([`RoutingDecision::to_json`]).
pub trait RoutingDecision: Any + fmt::Debug + Send + Sync {
    /// The decision as the API's `router` object.
    fn to_json(&self) -> serde_json::Value;
}

fn routing_as_json<S: Serializer>(
    router: &Option<Arc<dyn RoutingDecision>>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    router.as_ref().map(|r| r.to_json()).serialize(serializer)
}

/// The result of a search.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Outcome {
    /// Strategy that ran.
    pub strategy: String,
    /// The final answer.
    pub answer: Option<String>,
    /// The text of the chosen solution.
    pub text: Option<String>,
    /// Index of the chosen solution in `candidates`.
    pub selected: Option<usize>,
    /// Vote share of the answer, when chosen by vote.
    pub support: Option<f64>,
    /// Every candidate considered, in the order found.
    pub candidates: Vec<Candidate>,
    /// What the search spent.
    pub usage: Usage,
    /// Why it ended.
    pub finish_reason: SearchFinish,
    /// The search tree.
    pub tree: SearchTree,
    /// What the router predicted and chose (category, difficulty, strategy, parameters,
    /// thinking on/off), when a routing strategy (`auto`) ran: its own type, read back with
    /// [`Outcome::routing`]; JSON only where the outcome is written out.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "routing_as_json"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub router: Option<Arc<dyn RoutingDecision>>,
    /// Ids of the worked examples shown before the question (a request's `shots`), most
    /// similar first; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shots: Vec<String>,
}

impl Outcome {
    /// The routing decision recorded for this search, if one of type `T` was.
    pub fn routing<T: RoutingDecision>(&self) -> Option<&T> {
        let decision: &dyn Any = self.router.as_deref()?;
        decision.downcast_ref()
    }
}
