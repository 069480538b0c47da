//! A solution as token ids for an engine-run PRM: the format's prefix, then per step its
//! separator, body and tag, each tokenised on its own, and the position of every step's tag.
//!
//! Tokenising the pieces apart (rather than the rendered text at once) makes a step's tokens
//! independent of the steps after it, so the layout of steps `1..k` is a prefix of the layout of
//! steps `1..n`: that is what lets step `k` be scored on the cached tokens of its predecessors
//! and give exactly what scoring the whole solution gives. Each prefix also gets a 64-bit
//! fingerprint, the key of the PRM's step-score cache.

use std::hash::{DefaultHasher, Hasher};

use ponder_verifiers::{PrmFormat, Solution};

use ponder_engine::forward::TextTokenizer;
use ponder_engine::Result;

/// Token ids of a problem and its steps, and where each step is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepLayout {
    /// Prefix and every step that fits the context.
    pub(crate) tokens: Vec<u32>,
    /// Per step that fits: the position of the last token of its tag.
    pub(crate) tags: Vec<usize>,
    /// Per step that fits: a fingerprint of `tokens[..=tags[k]]`.
    pub(crate) keys: Vec<u64>,
}

impl StepLayout {
    /// Lays `solution` out in `format`, keeping only the steps whose tag ends within `context`
    /// tokens (the others cannot be read and score as no answer).
    pub(crate) fn build(
        tokenizer: &TextTokenizer,
        format: &PrmFormat,
        solution: &Solution<'_>,
        context: usize,
    ) -> Result<Self> {
        let encode = |text: &str| -> Result<Vec<u32>> {
            if text.is_empty() {
                Ok(Vec::new())
            } else {
                tokenizer.encode(text)
            }
        };
        let mut tokens = encode(&format.prefix_for(solution.problem))?;
        if let Some(bos) = tokenizer.bos().filter(|_| tokenizer.add_bos()) {
            tokens.insert(0, bos);
        }
        let mut hasher = DefaultHasher::new();
        hasher.write_usize(tokens.len());
        for &t in &tokens {
            hasher.write_u32(t);
        }
        let (mut tags, mut keys) = (Vec::new(), Vec::new());
        for piece in format.pieces(solution.steps) {
            let mut step = encode(piece.separator)?;
            step.extend(encode(piece.body)?);
            let tag = encode(piece.step_tag)?;
            // A format without a tag is read at the step's last token.
            step.extend(&tag);
            if step.is_empty() || tokens.len() + step.len() > context {
                break;
            }
            for &t in &step {
                hasher.write_u32(t);
            }
            tokens.extend(step);
            tags.push(tokens.len() - 1);
            keys.push(hasher.finish());
        }
        if tags.is_empty() {
            tokens.clear();
        } else {
            tokens.truncate(tags[tags.len() - 1] + 1);
        }
        Ok(Self { tokens, tags, keys })
    }

    /// The tokens up to and including step `k`'s tag.
    pub(crate) fn through(&self, k: usize) -> &[u32] {
        let end = self.tags.get(k).map_or(0, |&t| t + 1);
        &self.tokens[..end]
    }
}
