//! Lockstep generation for the early-stopping strategies: every active trace advances by one
//! chunk of tokens per engine call, so a strategy can look at all traces between chunks (who
//! finished first, whose confidence dropped) and stop some while the rest go on.
//!
//! Every trace carries its own id for the whole search: its draws are seeded by (node, id), so
//! two traces forked from the same prompt never sample the same opening, whichever round or
//! position in the batch they run in.

use crate::context::{Branch, Context, StepSpec};
use crate::error::Result;

/// A trace of a lockstep search: its id (unique within the search) and its branch.
pub(crate) type Trace = (u64, Branch);

/// Advances every trace by one chunk (one batched call; trace `id` samples with draw `id`).
/// Returns each trace with whether it is done: ended by the model, at `max_tokens`, or unable
/// to make progress.
pub(crate) async fn advance(
    ctx: &Context,
    active: Vec<Trace>,
    chunk: &StepSpec,
    max_tokens: usize,
) -> Result<Vec<(u64, Branch, bool)>> {
    let ids: Vec<(u64, usize)> = active.iter().map(|(id, b)| (*id, b.tokens)).collect();
    let batch = active.into_iter().map(|(id, b)| (b, id)).collect();
    let advanced = ctx.extend(batch, chunk).await?;
    Ok(advanced
        .into_iter()
        .zip(ids)
        .map(|(b, (id, was))| {
            let done = b.finished || b.tokens >= max_tokens || b.tokens == was;
            (id, b, done)
        })
        .collect())
}
