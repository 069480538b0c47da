//! `MathAnswerVerifier`: the rule-based grader as a [`Verifier`].
//!
//! Scores a solution 1 when the answer extracted from its text is equivalent to the gold
//! answer, else 0 — every step gets the overall score. It is the outcome reward of the
//! "verifiable rewards" setting: exact where a PRM is a guess, but only for finished solutions.
//! A solution with no answer (empty, partial, unparsable) scores 0; it is never an error.

use crate::equivalence::Answer;
use crate::error::Result;
use crate::extract::extract_answer;
use crate::verifier::{Scores, Solution, Verifier};

/// Grades solutions against a known gold answer.
///
/// ```
/// use ponder_verifiers::{MathAnswerVerifier, Solution, Verifier};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let verifier = MathAnswerVerifier::new(r"\frac{1}{2}");
/// let steps = vec!["Half of 1 is 0.5.".to_string(), r"So \boxed{0.5}.".to_string()];
/// let solution = Solution { problem: "What is half of 1?", steps: &steps, complete: true , confidence: None};
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// let scores = rt.block_on(verifier.score(solution))?;
/// assert_eq!(scores.overall, 1.0);
/// assert_eq!(scores.steps, vec![1.0, 1.0]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MathAnswerVerifier {
    gold: Answer,
}

impl MathAnswerVerifier {
    /// A verifier for problems whose answer is `gold` (an answer such as `\frac{1}{2}`).
    pub fn new(gold: impl AsRef<str>) -> Self {
        Self {
            gold: Answer::new(gold.as_ref()),
        }
    }

    /// Whether the answer in `text` (a model's output) matches the gold answer.
    pub fn is_correct(&self, text: &str) -> bool {
        extract_answer(text).is_some_and(|a| self.gold.is_equivalent(&Answer::new(&a)))
    }
}

#[async_trait::async_trait]
impl Verifier for MathAnswerVerifier {
    fn name(&self) -> &str {
        "math-answer"
    }

    async fn score(&self, solution: Solution<'_>) -> Result<Scores> {
        let score = if self.is_correct(&solution.text()) {
            1.0
        } else {
            0.0
        };
        Ok(Scores::uniform(solution.steps.len(), score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn score(gold: &str, steps: &[&str]) -> Result<Scores> {
        let steps: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
        MathAnswerVerifier::new(gold)
            .score(Solution {
                problem: "p",
                steps: &steps,
                complete: true,
                confidence: None,
            })
            .await
    }

    #[tokio::test]
    async fn bad_solutions_score_zero_not_error() -> Result<()> {
        assert_eq!(score("3", &[]).await?, Scores::uniform(0, 0.0));
        assert_eq!(
            score("3", &["no answer here"]).await?,
            Scores::uniform(1, 0.0)
        );
        assert_eq!(
            score("3", &[r"\boxed{\frac{}{}"]).await?,
            Scores::uniform(1, 0.0)
        );
        assert_eq!(
            score("3", &["so", r"\boxed{3}"]).await?,
            Scores::uniform(2, 1.0)
        );
        Ok(())
    }
}
