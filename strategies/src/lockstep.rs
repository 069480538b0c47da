//! Lockstep generation for the early-stopping strategies: every active branch advances by one
//! chunk of tokens per engine call, so a strategy can look at all branches between chunks
//! (who finished first, whose confidence dropped) and stop some while the rest go on.

use crate::context::{Branch, Context, StepSpec};
use crate::error::Result;

/// Advances every branch by one chunk (one batched call; branch `i` samples with draw `i`).
/// Returns each branch with whether it is done: ended by the model, at `max_tokens`, or
/// unable to make progress.
pub(crate) async fn advance(
    ctx: &Context,
    active: Vec<Branch>,
    chunk: &StepSpec,
    max_tokens: usize,
) -> Result<Vec<(Branch, bool)>> {
    let before: Vec<usize> = active.iter().map(|b| b.tokens).collect();
    let batch = active
        .into_iter()
        .enumerate()
        .map(|(i, b)| (b, i as u64))
        .collect();
    let advanced = ctx.extend(batch, chunk).await?;
    Ok(advanced
        .into_iter()
        .zip(before)
        .map(|(b, was)| {
            let done = b.finished || b.tokens >= max_tokens || b.tokens == was;
            (b, done)
        })
        .collect())
}
