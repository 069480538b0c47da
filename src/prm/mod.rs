//! Process reward models: verifiers that score every step of a solution, run by the engine.
//!
//! - [`ModelPrm`] (`model_prm.rs`): a reward-head checkpoint (Qwen2.5-Math-PRM's
//!   `Qwen2ForProcessRewardModel`) or a causal LM read at its step tags (Math-Shepherd), run
//!   through the executor's scoring path: read at every step tag, batched with other work,
//!   incremental on the KV of the steps before.
//! - [`LlmPrm`] (`llm.rs`): the generator asked "is this step correct?" through the strategies'
//!   `Generator` port — the embedded default with SmolLM2.
//! - [`VerifierChoice`] (`choice.rs`): the `--verifier` option of `ponder reason` and `ponder
//!   serve`, parsed and built into one of the above.
//! - `head.rs`: what turns a reading into P(good) ([`PrmHead`], [`RewardHead`]); `layout.rs`: a
//!   solution as tokens and tag positions; `cache.rs`: step scores by prefix.
//!
//! The protocol that needs no model (step splitting, formats, Yes/No and two-class
//! probabilities, "no answer") lives in `ponder_verifiers::prm`.

mod cache;
mod choice;
mod head;
mod layout;
mod llm;
mod model_prm;

pub use choice::{SearchVerifier, VerifierChoice};
pub use head::{PrmHead, RewardHead};
pub use llm::{LlmPrm, LlmPrmConfig, UNSURE_SCORE};
pub use model_prm::{token_head, ModelPrm, PrmKind, PrmOptions};
