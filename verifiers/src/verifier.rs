//! The `Verifier` trait: score a partial or complete solution, per step and overall.
//!
//! One small trait per extension point (see STYLE.md): [`Verifier::name`] and
//! [`Verifier::score`] are required, [`Verifier::score_batch`] is provided (it loops; a verifier
//! backed by a model overrides it to batch), and so is [`Verifier::cost_bound`] (0: a rule-based
//! verifier computes no model tokens; a model-backed one returns the most tokens a call may
//! compute, which the budget meter reserves before the call and settles with [`Scores::cost`]). [`FnVerifier`] turns a closure into a verifier for
//! quick experiments, and [`Aggregation`] folds per-step scores into one number the way PRM
//! papers do (min, last, product, mean).
//!
//! Invariants every verifier keeps: scores lie in `[0, 1]`, higher is better; `steps` has one
//! entry per step of the solution; a bad solution (empty, no answer, unparsable) scores low, it is
//! never an error.

use crate::error::Result;

/// A solution as a verifier sees it: the problem, the steps so far, whether the solution is
/// finished (a final answer was produced) or still partial, and the model's confidence in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Solution<'a> {
    /// The problem statement.
    pub problem: &'a str,
    /// The reasoning steps, in order. Joined with newlines they form the solution text.
    pub steps: &'a [String],
    /// True when the solution is finished; false for a partial solution inside a search.
    pub complete: bool,
    /// The model's confidence along the solution's tokens
    /// ([`TraceConfidence::summary`](crate::TraceConfidence::summary)), when the generator
    /// reported log-probabilities; `None` otherwise (a verifier must not require it).
    pub confidence: Option<crate::TraceConfidence>,
}

impl Solution<'_> {
    /// The solution's text: its steps joined by newlines.
    pub fn text(&self) -> String {
        self.steps.join("\n")
    }
}

/// Scores for one solution: one per step (in `[0, 1]`, higher is better), an overall score, and
/// what computing them cost.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scores {
    /// One score per step, in the order of [`Solution::steps`].
    pub steps: Vec<f32>,
    /// The score of the solution as a whole.
    pub overall: f32,
    /// Model tokens this call actually computed (prefill and generated; cache hits are free).
    /// At most [`Verifier::cost_bound`] of the same solution; 0 for rule-based verifiers.
    #[serde(default)]
    pub cost: u64,
}

/// The score of a solution that gives no answer (empty, finished without a readable answer).
pub const NO_ANSWER_SCORE: f32 = 0.0;

impl Scores {
    /// The same score for every one of `n_steps` steps and overall, at no cost.
    pub fn uniform(n_steps: usize, score: f32) -> Self {
        Self {
            steps: vec![score; n_steps],
            overall: score,
            cost: 0,
        }
    }

    /// "No answer": [`NO_ANSWER_SCORE`] for every step and overall, at no cost. What model-based
    /// verifiers return for an empty solution or a finished one without a readable answer.
    pub fn no_answer(n_steps: usize) -> Self {
        Self::uniform(n_steps, NO_ANSWER_SCORE)
    }

    /// The same scores, recording that they cost `tokens`.
    pub fn with_cost(mut self, tokens: u64) -> Self {
        self.cost = tokens;
        self
    }
}

/// Scores partial or complete solutions.
///
/// Required: [`name`](Verifier::name) and [`score`](Verifier::score).
/// Provided: [`score_batch`](Verifier::score_batch), which scores one solution after another;
/// override it when the verifier can batch (a reward model scores many candidates in one forward
/// pass). [`cost_bound`](Verifier::cost_bound), 0 by default; a verifier that runs a model
/// overrides it so that the budget meter can reserve the call's worst case.
///
/// # Example: a custom verifier
///
/// A verifier that prefers short steps, written the way a user would in their own crate:
///
/// ```
/// use ponder_verifiers::{Result, Scores, Solution, Verifier};
///
/// /// Scores each step by how short it is: 1.0 for an empty step, falling towards 0.
/// struct PreferShortSteps {
///     /// A step of this many characters scores 0.5.
///     half_at: usize,
/// }
///
/// #[async_trait::async_trait]
/// impl Verifier for PreferShortSteps {
///     fn name(&self) -> &str {
///         "prefer-short-steps"
///     }
///
///     async fn score(&self, solution: Solution<'_>) -> Result<Scores> {
///         let half = self.half_at.max(1) as f32;
///         let steps: Vec<f32> = solution
///             .steps
///             .iter()
///             .map(|s| half / (half + s.chars().count() as f32))
///             .collect();
///         let overall = ponder_verifiers::Aggregation::Min.apply(&steps).unwrap_or(0.0);
///         Ok(Scores { steps, overall, cost: 0 })
///     }
/// }
///
/// # fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
/// let steps = vec!["2 + 2 = 4".to_string(), "so the answer is \\boxed{4}".to_string()];
/// let solution = Solution { problem: "What is 2 + 2?", steps: &steps, complete: true , confidence: None};
/// let verifier = PreferShortSteps { half_at: 20 };
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let scores = runtime.block_on(verifier.score(solution))?;
/// assert_eq!(scores.steps.len(), 2);
/// assert!(scores.steps[0] > scores.steps[1]);
/// assert_eq!(scores.overall, scores.steps[1]);
/// // The provided batch method scores each solution in turn.
/// let batch = runtime.block_on(verifier.score_batch(&[solution, solution]))?;
/// assert_eq!(batch, vec![scores.clone(), scores]);
/// # Ok(())
/// # }
/// ```
#[async_trait::async_trait]
pub trait Verifier: Send + Sync {
    /// A short stable name, used in traces and metrics.
    fn name(&self) -> &str;

    /// Scores one solution.
    async fn score(&self, solution: Solution<'_>) -> Result<Scores>;

    /// The most model tokens [`score`](Verifier::score) of `solution` may compute, so a caller
    /// with a budget can reserve them first. The returned [`Scores::cost`] never exceeds it.
    ///
    /// Provided: 0 (a rule-based verifier computes nothing).
    fn cost_bound(&self, solution: &Solution<'_>) -> u64 {
        let _ = solution;
        0
    }

    /// Whether it judges partial solutions — a tree search's prefixes, scored step by step
    /// while the search goes on — as well as finished candidates. An outcome verifier fitted
    /// on finished candidates alone says `false`, and a search that would score prefixes with
    /// it is refused with [`VerifierError::InvalidRequest`](crate::VerifierError) rather than
    /// given scores out of its distribution.
    ///
    /// Provided: `true` (a PRM scores steps).
    fn scores_partial(&self) -> bool {
        true
    }

    /// Scores many solutions; the result has one entry per solution, in order.
    ///
    /// Provided: calls [`score`](Verifier::score) on each solution in turn.
    async fn score_batch(&self, solutions: &[Solution<'_>]) -> Result<Vec<Scores>> {
        let mut out = Vec::with_capacity(solutions.len());
        for solution in solutions {
            out.push(self.score(*solution).await?);
        }
        Ok(out)
    }
}

/// A verifier made from a closure: `FnVerifier::new("name", |sol: &Solution| -> Scores)`.
///
/// ```
/// use ponder_verifiers::{FnVerifier, Scores, Solution, Verifier};
///
/// let finished = FnVerifier::new("finished", |sol: &Solution<'_>| {
///     Scores::uniform(sol.steps.len(), if sol.complete { 1.0 } else { 0.0 })
/// });
/// assert_eq!(finished.name(), "finished");
/// ```
pub struct FnVerifier<F> {
    name: String,
    f: F,
}

impl<F> FnVerifier<F>
where
    F: Fn(&Solution<'_>) -> Scores + Send + Sync,
{
    /// Wraps `f` as a verifier called `name`.
    pub fn new(name: impl Into<String>, f: F) -> Self {
        Self {
            name: name.into(),
            f,
        }
    }
}

impl<F> std::fmt::Debug for FnVerifier<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnVerifier")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl<F> Verifier for FnVerifier<F>
where
    F: Fn(&Solution<'_>) -> Scores + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    async fn score(&self, solution: Solution<'_>) -> Result<Scores> {
        Ok((self.f)(&solution))
    }
}

/// How per-step scores fold into one score, as in the PRM literature: `Min` (the weakest step,
/// Lightman et al. 2023), `Last` (the final step's score, as in Snell et al. 2024), `Product`
/// (the probability that every step is right), `Mean`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// The lowest step score.
    #[default]
    Min,
    /// The last step's score.
    Last,
    /// The product of step scores.
    Product,
    /// The arithmetic mean of step scores.
    Mean,
}

impl Aggregation {
    /// Folds `step_scores`; `None` when there are no steps.
    ///
    /// NaN scores are treated as 0 (the worst score), so one bad number cannot make a branch
    /// look good.
    pub fn apply(&self, step_scores: &[f32]) -> Option<f32> {
        let clean = |s: f32| if s.is_nan() { 0.0 } else { s };
        let last = step_scores.last()?;
        Some(match self {
            Aggregation::Min => step_scores
                .iter()
                .map(|&s| clean(s))
                .fold(f32::INFINITY, f32::min),
            Aggregation::Last => clean(*last),
            Aggregation::Product => step_scores.iter().map(|&s| clean(s)).product(),
            Aggregation::Mean => {
                step_scores.iter().map(|&s| clean(s)).sum::<f32>() / step_scores.len() as f32
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_of_no_steps_is_none() {
        for agg in [
            Aggregation::Min,
            Aggregation::Last,
            Aggregation::Product,
            Aggregation::Mean,
        ] {
            assert_eq!(agg.apply(&[]), None);
        }
    }

    #[test]
    fn aggregations_fold_as_documented() {
        let s = [0.5, 0.25, 1.0];
        assert_eq!(Aggregation::Min.apply(&s), Some(0.25));
        assert_eq!(Aggregation::Last.apply(&s), Some(1.0));
        assert_eq!(Aggregation::Product.apply(&s), Some(0.125));
        assert_eq!(Aggregation::Mean.apply(&s), Some(1.75 / 3.0));
        assert_eq!(Aggregation::Min.apply(&[0.9, f32::NAN]), Some(0.0));
    }

    #[test]
    fn aggregation_serialises_snake_case() -> std::result::Result<(), serde_json::Error> {
        assert_eq!(serde_json::to_string(&Aggregation::Product)?, "\"product\"");
        let back: Aggregation = serde_json::from_str("\"last\"")?;
        assert_eq!(back, Aggregation::Last);
        Ok(())
    }

    #[tokio::test]
    async fn fn_verifier_calls_its_closure() -> Result<()> {
        let v = FnVerifier::new("count", |sol: &Solution<'_>| {
            Scores::uniform(sol.steps.len(), sol.steps.len() as f32 / 10.0)
        });
        let steps = vec!["a".to_string(), "b".to_string()];
        let sol = Solution {
            problem: "p",
            steps: &steps,
            complete: false,
            confidence: None,
        };
        let scores = v.score(sol).await?;
        assert_eq!(scores, Scores::uniform(2, 0.2));
        let dynv: &dyn Verifier = &v;
        assert_eq!(dynv.score_batch(&[sol, sol]).await?.len(), 2);
        assert_eq!(
            dynv.cost_bound(&sol),
            0,
            "a closure computes no model tokens"
        );
        Ok(())
    }

    #[test]
    fn scores_without_a_cost_field_deserialise_with_cost_zero(
    ) -> std::result::Result<(), serde_json::Error> {
        let old: Scores = serde_json::from_str(r#"{"steps":[0.5],"overall":0.5}"#)?;
        assert_eq!(old, Scores::uniform(1, 0.5));
        let costly = Scores::no_answer(2).with_cost(7);
        assert_eq!(costly.steps, vec![NO_ANSWER_SCORE; 2]);
        let back: Scores = serde_json::from_str(&serde_json::to_string(&costly)?)?;
        assert_eq!(back.cost, 7);
        Ok(())
    }
}
