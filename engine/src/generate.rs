//! Single-sequence text generation over the contiguous reference KV store: prompt → text.
//!
//! Validates the request (non-empty prompt that fits the context, sane sampling), prefills the
//! prompt in one forward pass, then decodes token by token. This is the reference loop that
//! parity tests and the scheduler's tests compare against; `ponder generate` and the service
//! run through the scheduler instead.

use std::time::Instant;

use serde::Serialize;

use super::error::{EngineError, Result};
use super::kv::{ContiguousKvStore, KvStore};
use super::loader::LoadedModel;
use super::model::{LogitsFor, SeqChunk};
use super::sampling::{SampledToken, Sampler, SamplingParams};
use super::scheduler::SeqFinish;
use super::tokenizer::TextTokenizer;

/// What a finished generation produced and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// The generated text (end-of-sequence token excluded).
    pub text: String,
    /// Generated tokens with their logprobs.
    pub tokens: Vec<SampledToken>,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Why it stopped ([`SeqFinish::Stop`] or [`SeqFinish::Length`]; nothing cancels it).
    pub finish_reason: SeqFinish,
    /// Seconds spent on the prompt.
    pub prefill_secs: f64,
    /// Seconds spent generating.
    pub decode_secs: f64,
}

impl Generation {
    /// Generated tokens per second of decoding.
    pub fn tokens_per_sec(&self) -> f64 {
        if self.decode_secs > 0.0 {
            self.tokens.len() as f64 / self.decode_secs
        } else {
            0.0
        }
    }
}

/// Turns a stream of token ids into text pieces, holding back the bytes of an unfinished UTF-8
/// character until the token that completes it arrives.
#[derive(Debug, Default)]
pub struct TextStream {
    tokens: Vec<u32>,
    emitted: usize,
}

impl TextStream {
    /// Adds a token; returns the new text it completes, if any.
    pub fn push(&mut self, tokenizer: &TextTokenizer, token: u32) -> Result<Option<String>> {
        self.tokens.push(token);
        let text = tokenizer.decode(&self.tokens)?;
        if text.ends_with('\u{FFFD}') || text.len() <= self.emitted {
            return Ok(None);
        }
        let new = text.get(self.emitted..).unwrap_or_default().to_string();
        self.emitted = text.len();
        Ok(Some(new))
    }
}

/// Tokenizes `prompt` (already chat-formatted if desired) and checks it fits.
pub fn encode_prompt(model: &LoadedModel, prompt: &str) -> Result<Vec<u32>> {
    if prompt.trim().is_empty() {
        return Err(EngineError::InvalidInput {
            field: "prompt",
            reason: "is empty".into(),
        });
    }
    let mut ids = Vec::new();
    // Prepend bos when the model asks for it, unless the (templated) prompt already starts with it.
    if let (true, Some(bos)) = (model.tokenizer.add_bos(), model.tokenizer.bos()) {
        let bos_text = model.tokenizer.token(bos).unwrap_or_default();
        if !prompt.starts_with(&bos_text) {
            ids.push(bos);
        }
    }
    ids.extend(model.tokenizer.encode(prompt)?);
    let context = model.model.config().context_length;
    if ids.len() >= context {
        return Err(EngineError::PromptTooLong {
            tokens: ids.len(),
            context,
        });
    }
    Ok(ids)
}

/// Generates up to `max_tokens` after `prompt`, calling `on_text` with each new piece of text.
pub fn generate(
    model: &LoadedModel,
    prompt: &str,
    max_tokens: usize,
    params: SamplingParams,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    if max_tokens == 0 {
        return Err(EngineError::InvalidInput {
            field: "max_tokens",
            reason: "must be at least 1".into(),
        });
    }
    let prompt_ids = encode_prompt(model, prompt)?;
    let mut sampler = Sampler::new(params)?.generated_from(prompt_ids.len());
    let context = model.model.config().context_length;
    let budget = max_tokens.min(context - prompt_ids.len());
    let mut kv = ContiguousKvStore::new(model.model.config().num_layers);
    let seq = 0;
    let mut context_ids = prompt_ids.clone();
    let mut stream = TextStream::default();
    let mut tokens = Vec::new();
    let mut text = String::new();

    let t0 = Instant::now();
    let mut next_input = prompt_ids.clone();
    let mut prefill_secs = 0.0;
    let mut finish_reason = SeqFinish::Length;
    while tokens.len() < budget {
        let start_pos = kv.seq_len(seq);
        let chunk = SeqChunk {
            seq,
            tokens: &next_input,
            start_pos,
        };
        let logits = model
            .model
            .forward(&[chunk], &mut kv, LogitsFor::LastPosition)?;
        let logits: Vec<f32> = logits
            .first()
            .ok_or(EngineError::MissingOutput {
                what: "logits",
                seq: None,
            })?
            .to_vec1()?;
        if tokens.is_empty() {
            prefill_secs = t0.elapsed().as_secs_f64();
        }
        let sampled = sampler.sample(&logits, &context_ids)?;
        if model.tokenizer.eos().contains(&sampled.token) {
            finish_reason = SeqFinish::Stop;
            break;
        }
        context_ids.push(sampled.token);
        next_input = vec![sampled.token];
        if let Some(piece) = stream.push(&model.tokenizer, sampled.token)? {
            on_text(&piece);
            text.push_str(&piece);
        }
        tokens.push(sampled);
    }
    let decode_secs = t0.elapsed().as_secs_f64() - prefill_secs;
    Ok(Generation {
        text,
        tokens,
        prompt_tokens: prompt_ids.len(),
        finish_reason,
        prefill_secs,
        decode_secs,
    })
}
