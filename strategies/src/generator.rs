//! The `Generator` port: everything a strategy may ask of a model, and nothing more.
//!
//! A sequence is a handle on a token list the generator keeps. `fork` is cheap (the engine
//! shares the parent's KV blocks; nothing is computed); `append` adds forced text (a probe
//! suffix) that is computed lazily with the next `extend`; `extend` samples continuations for a
//! whole batch of sequences in one call, so the engine batches them together. Every call reports
//! what it cost, which the budget meter in [`crate::Context`] charges; a call given up midway
//! (cancelled, past its deadline) is charged what its [`CostTally`] saw computed. Implementations: the
//! engine's `LocalGenerator` in the service crate, and [`crate::fake::FakeGenerator`] for
//! algorithm tests.
//!
//! Plain decoding (a chat or completion request without a strategy) goes through the same port:
//! [`Generator::render_chat`] and [`Generator::open_text`] open the conversation or the raw
//! prompt as the caller sent it ([`Generator::open_tokens`] a prompt sent as token ids),
//! [`LogitAdjust`] carries OpenAI's penalties and biases, and [`Generator::extend_streamed`]
//! sends each token's text as it is generated. Those are provided (refusing, or streaming whole
//! results), so a generator written for strategies only needs none of them.
//!
//! Both ways of rendering a conversation ([`Generator::open`], [`Generator::render_chat`]) take
//! the request's [`ChatTemplateKwargs`] (vLLM's `chat_template_kwargs`, such as Qwen3's
//! `enable_thinking`): a search's prompts are rendered as plain decoding's would be.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{GeneratorError, Result};

/// An opaque handle on one sequence held by a generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeqHandle(pub u64);

/// One earlier message of a conversation (`user` or `assistant`; `system` where a caller put one
/// mid-conversation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who said it: `user`, `assistant` or `system`.
    pub role: String,
    /// What was said.
    pub content: String,
}

impl Turn {
    /// A turn by `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// The conversation as the generator renders it (with its own chat template): the system
/// message, the earlier turns in order, then the user's message the reply answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// Optional system message.
    pub system: Option<String>,
    /// Earlier turns, oldest first, before `user`.
    #[serde(default)]
    pub history: Vec<Turn>,
    /// The user's message.
    pub user: String,
}

impl Prompt {
    /// Every message in order, as the chat template renders them: system, history, the
    /// user's message.
    pub fn turns(&self) -> Vec<Turn> {
        let system = self.system.as_ref().map(|s| Turn::new("system", s));
        system
            .into_iter()
            .chain(self.history.iter().cloned())
            .chain(std::iter::once(Turn::new("user", &self.user)))
            .collect()
    }
}

/// Variables a request hands the model's chat template beside the conversation: vLLM's
/// `chat_template_kwargs` (Qwen3's `enable_thinking`, a template's `tools` or its own switches),
/// read by the template as top-level variables. The template's own variables (`messages`,
/// `add_generation_prompt`, `bos_token`, `eos_token`) are the renderer's and cannot be set here:
/// [`ChatTemplateKwargs::new`] refuses them, naming the request field. A generator with no chat
/// template (one that renders a fixed format) has nothing to hand them to; a template that does
/// not read a variable ignores it, as Jinja does.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ChatTemplateKwargs(serde_json::Map<String, serde_json::Value>);

impl ChatTemplateKwargs {
    /// The variables the renderer sets itself, which a request may not override.
    pub const RESERVED: [&'static str; 4] = [
        "messages",
        "add_generation_prompt",
        "bos_token",
        "eos_token",
    ];

    /// The request field they come from (OpenAI-compatible servers' name).
    pub const FIELD: &'static str = "chat_template_kwargs";

    /// Takes `vars`, refusing one of [`Self::RESERVED`] as an invalid [`Self::FIELD`].
    pub fn new(
        vars: serde_json::Map<String, serde_json::Value>,
    ) -> std::result::Result<Self, GeneratorError> {
        if let Some(name) = vars.keys().find(|k| Self::RESERVED.contains(&k.as_str())) {
            return Err(GeneratorError::InvalidRequest {
                field: Self::FIELD,
                reason: format!(
                    "`{name}` is set by the server when it renders the chat template; \
                     the variables it sets ({}) cannot be overridden",
                    Self::RESERVED.join(", ")
                ),
            });
        }
        Ok(Self(vars))
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The variables, by name.
    pub fn vars(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.0
    }
}

/// How to sample one continuation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Softmax temperature; 0 means greedy.
    pub temperature: f64,
    /// Nucleus mass (1 = off).
    pub top_p: f64,
    /// Keep only the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Drop tokens below `min_p` times the top probability (0 = off).
    pub min_p: f64,
    /// RNG seed of this continuation.
    pub seed: u64,
    /// Alternatives to report per token (for confidence scores).
    pub top_logprobs: usize,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            top_p: 0.95,
            top_k: 0,
            min_p: 0.0,
            seed: 0,
            top_logprobs: 5,
        }
    }
}

impl Sampling {
    /// Greedy decoding with `top_logprobs` alternatives.
    pub fn greedy(top_logprobs: usize) -> Self {
        Self {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: 0,
            top_logprobs,
        }
    }
}

/// Changes to the logits before sampling, beyond temperature and truncation: OpenAI's
/// penalties and biases (and the common repetition penalty). Strategies leave them off; plain
/// decoding passes what the request asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogitAdjust {
    /// Above 1 discourages tokens already in the context (1 = off).
    pub repetition_penalty: f64,
    /// Subtracted once from the logit of every token generated so far (0 = off).
    pub presence_penalty: f64,
    /// Subtracted from a token's logit once per time it was generated so far (0 = off).
    pub frequency_penalty: f64,
    /// Added to the logits of these token ids of the generator's model (-100 bans a token).
    pub logit_bias: Vec<(u32, f32)>,
}

impl Default for LogitAdjust {
    fn default() -> Self {
        Self {
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
        }
    }
}

impl LogitAdjust {
    /// Whether nothing is adjusted.
    pub fn is_off(&self) -> bool {
        *self == Self::default()
    }

    /// Refuses a `logit_bias` token outside a model vocabulary of `vocab` tokens, naming the
    /// field (the API checks before any work, a generator before sampling).
    pub fn check_vocab(&self, vocab: usize) -> Result<(), GeneratorError> {
        match self.logit_bias.iter().find(|(t, _)| *t as usize >= vocab) {
            Some((t, _)) => Err(GeneratorError::InvalidRequest {
                field: "logit_bias",
                reason: format!("token {t} is not in the model's vocabulary of {vocab} tokens"),
            }),
            None => Ok(()),
        }
    }
}

/// One sequence to continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtendRequest {
    /// The sequence; its tokens grow by what is generated.
    pub seq: SeqHandle,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop right after generating text that contains one of these (the stop is kept).
    pub stop: Vec<String>,
    /// Sampling parameters and seed.
    pub sampling: Sampling,
    /// Penalties and biases (off for strategies).
    #[serde(default)]
    pub logits: LogitAdjust,
}

/// Why one continuation (one [`Extension`] of one sequence) ended: the generator port's view,
/// which tells a stop string ([`Self::Stop`]) from the model's end-of-sequence token
/// ([`Self::Eos`]) because strategies cut steps at stop strings. Not why a whole search ended
/// ([`SearchFinish`](crate::SearchFinish)), nor the engine's per-sequence `SeqFinish` (which
/// cannot tell the two stops apart and adds cancellation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    /// A stop string was generated.
    Stop,
    /// The model ended its answer (end-of-sequence token).
    Eos,
    /// `max_tokens` was reached.
    Length,
}

/// What one call cost, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Tokens sampled.
    pub generated: u64,
    /// Context tokens the model actually computed (new text, or a cache miss).
    pub prefill_computed: u64,
    /// Context tokens served from the KV cache.
    pub prefill_reused: u64,
    /// Positions the engine computed that this search had computed before (its KV was lost:
    /// evicted, preempted, or never kept). Not charged; 0 on a quiet engine is the contract.
    #[serde(default)]
    pub recomputed: u64,
    /// Positions of the search's token tree computed for the first time by this call (new
    /// context plus every sampled token fed back to the model).
    #[serde(default)]
    pub tree: u64,
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, o: Self) {
        self.generated += o.generated;
        self.prefill_computed += o.prefill_computed;
        self.prefill_reused += o.prefill_reused;
        self.recomputed += o.recomputed;
        self.tree += o.tree;
    }
}

/// What a call has had the engine compute so far, updated while it runs, so that a caller who
/// gives up on the call (cancellation, deadline) can charge the work already done.
#[derive(Debug, Default)]
pub struct CostTally(std::sync::Mutex<Cost>);

impl CostTally {
    /// Adds `cost` to the tally.
    pub fn add(&self, cost: Cost) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) += cost;
    }

    /// The work tallied so far.
    pub fn get(&self) -> Cost {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One generated token's probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// The token's own text (empty where the generator does not know it).
    #[serde(default)]
    pub text: String,
    /// Log-probability of the sampled token (under the unmodified distribution).
    pub logprob: f32,
    /// The most likely alternatives as (text, logprob), most likely first.
    pub top: Vec<(String, f32)>,
}

/// A prompt's log-probabilities ([`Generator::prompt_logprobs`]): each token after the first
/// given the ones before it.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptLogprobs {
    /// The first token's text (it has no log-probability: nothing precedes it).
    pub first: String,
    /// Every later token's text, log-probability and most likely alternatives, in order.
    pub rest: Vec<TokenInfo>,
    /// What reading them cost (prefill the cache did not hold).
    pub cost: Cost,
}

/// A piece of one continuation, sent while it is generated
/// ([`Generator::extend_streamed`]). The pieces of one request, in order, concatenate to its
/// [`Extension::text`] and [`Extension::tokens`]; the last one carries its finish.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Which request of the batch.
    pub index: usize,
    /// Text completed by these tokens (empty while a multi-byte character is incomplete).
    pub text: String,
    /// The tokens' probabilities (one per token generated; a generator that returns whole
    /// completions sends them all in one piece).
    pub tokens: Vec<TokenInfo>,
    /// Set on the request's last piece: why it ended.
    pub finish: Option<StopKind>,
}

/// Where [`Generator::extend_streamed`] sends its pieces.
pub type PieceSender = tokio::sync::mpsc::UnboundedSender<Piece>;

/// The result of continuing one sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extension {
    /// The text generated.
    pub text: String,
    /// Per generated token, its probabilities (same length as the tokens generated).
    pub tokens: Vec<TokenInfo>,
    /// Why it ended.
    pub stop: StopKind,
    /// What this continuation cost.
    pub cost: Cost,
}

/// A model as strategies see it.
///
/// Required: everything but [`Generator::prefill_bound_batch`]. Probes and scoring helpers are
/// built on top in [`crate::Context`].
#[async_trait]
pub trait Generator: Send + Sync {
    /// Opens a sequence holding the prompt, rendered in this model's chat format with the
    /// request's `template` variables. Returns the handle and the prompt's length in tokens.
    /// Nothing is computed until the first `extend`.
    async fn open(
        &self,
        prompt: &Prompt,
        template: &ChatTemplateKwargs,
    ) -> Result<(SeqHandle, usize)>;
    /// A new sequence with the same tokens as `seq` (copy-on-write: shares its KV).
    fn fork(&self, seq: SeqHandle) -> Result<SeqHandle>;
    /// Appends forced text to `seq`; returns how many tokens it added. Computed (and charged
    /// as prefill) by the next `extend`.
    fn append(&self, seq: SeqHandle, text: &str) -> Result<usize>;
    /// Most context tokens the next `extend` of `seq` may have to compute (tokens not yet in
    /// the cache, plus any partial block the engine recomputes). The meter reserves this.
    fn prefill_bound(&self, seq: SeqHandle) -> Result<usize>;
    /// Most context tokens one `extend` of all `seqs` together may compute. Provided: the sum
    /// of [`Generator::prefill_bound`]; generators that compute a prefix shared by several
    /// sequences of one batch only once (the engine does) override it, or a batch of N forks
    /// would reserve its prompt N times.
    fn prefill_bound_batch(&self, seqs: &[SeqHandle]) -> Result<usize> {
        seqs.iter().map(|s| self.prefill_bound(*s)).sum()
    }
    /// Continues every request's sequence, all in one batch; results in request order.
    async fn extend(&self, batch: &[ExtendRequest]) -> Result<Vec<Extension>>;
    /// [`Generator::extend`], adding to `tally` what the engine computes as the call runs, so
    /// that a caller who drops the call midway can charge the work done until then. Provided:
    /// tallies the results' costs once the call returns (a generator that cannot be stopped
    /// midway); the engine overrides it to tally every token and prefill as it happens.
    async fn extend_tallied(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
    ) -> Result<Vec<Extension>> {
        let out = self.extend(batch).await?;
        for e in &out {
            tally.add(e.cost);
        }
        Ok(out)
    }
    /// Forgets a sequence (its KV stays cached for reuse until evicted).
    fn release(&self, seq: SeqHandle);

    /// `turns` in this model's chat format with the request's `template` variables, ending
    /// where the assistant replies: how plain decoding renders a chat request (a strategy's
    /// prompt goes through [`Generator::open`]). Provided: refused, for a generator that
    /// serves strategies only.
    fn render_chat(&self, turns: &[Turn], template: &ChatTemplateKwargs) -> Result<String> {
        let _ = (turns, template);
        Err(GeneratorError::Unsupported("render_chat").into())
    }
    /// Opens a sequence on text as given (a raw completion prompt, or a conversation rendered
    /// by [`Generator::render_chat`]); returns the handle and its length in this model's
    /// tokens. Provided: refused, for a generator that serves strategies only.
    async fn open_text(&self, text: &str) -> Result<(SeqHandle, usize)> {
        let _ = text;
        Err(GeneratorError::Unsupported("open_text").into())
    }
    /// Opens a sequence on token ids of this generator's model, as given (a completion prompt
    /// sent as token ids); returns the handle and its length. Provided: refused as a caller
    /// error naming `prompt`, for a generator whose token ids the caller cannot know.
    async fn open_tokens(&self, tokens: &[u32]) -> Result<(SeqHandle, usize)> {
        let _ = tokens;
        Err(GeneratorError::InvalidRequest {
            field: "prompt",
            reason: "this server's generator takes prompts as text only, not token ids".into(),
        }
        .into())
    }
    /// The log-probability of each token of `seq` after the first, given the tokens before
    /// it, with its `top` most likely alternatives (a prompt's logprobs: `echo` with
    /// `logprobs` on `/v1/completions`, what lm-evaluation-harness's loglikelihood tasks read).
    /// `seq` is not changed. Provided: refused, for a generator that cannot score a text.
    async fn prompt_logprobs(&self, seq: SeqHandle, top: usize) -> Result<PromptLogprobs> {
        let _ = (seq, top);
        Err(GeneratorError::Unsupported("prompt_logprobs").into())
    }
    /// The model's context window in tokens, where known.
    fn context_length(&self) -> Option<usize> {
        None
    }
    /// The model's vocabulary size (what [`LogitAdjust::logit_bias`] ids index), where known.
    fn vocab_size(&self) -> Option<usize> {
        None
    }
    /// [`Generator::extend_tallied`], sending each request's text to `pieces` as it is
    /// generated (for streaming replies). Provided: one piece per request, whole, once the call
    /// returns (a generator that returns whole completions).
    async fn extend_streamed(
        &self,
        batch: &[ExtendRequest],
        tally: &CostTally,
        pieces: &PieceSender,
    ) -> Result<Vec<Extension>> {
        let out = self.extend_tallied(batch, tally).await?;
        for (index, e) in out.iter().enumerate() {
            // A receiver that went away wants no more pieces; the results still return.
            let _ = pieces.send(Piece {
                index,
                text: e.text.clone(),
                tokens: e.tokens.clone(),
                finish: Some(e.stop),
            });
        }
        Ok(out)
    }
}
