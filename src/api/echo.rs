//! `/v1/completions`' `echo` for plain decoding: the prompt's text, and with `logprobs` its
//! logprobs, read on the opened prompt before the completion is generated (the generation
//! endpoints put it first, streamed or not). A generator that cannot score a prompt (a remote
//! backend) makes it a 400 naming `echo`; nothing here generates.

use std::sync::Arc;

use ponder_strategies::{Generator, GeneratorError, PromptLogprobs, SeqHandle, StrategyError};

use super::error::{Result, ValidationError};
use super::validate::{PromptIn, ValidGeneration};

/// What `echo` puts before a completion: the prompt's text and, with `logprobs`, its logprobs.
pub(super) struct Echo {
    pub(super) text: String,
    pub(super) logprobs: Option<PromptLogprobs>,
}

/// The request's [`Echo`] (`None` without `echo`): the prompt scored on the opened `root`
/// when the request asks for logprobs or sent token ids (their text comes from the scoring).
/// A generator that cannot score a prompt (a remote backend) is refused naming `echo`.
pub(super) async fn echo_of(
    generator: &Arc<dyn Generator>,
    valid: &ValidGeneration,
    root: SeqHandle,
) -> Result<Option<Echo>> {
    if !valid.echo {
        return Ok(None);
    }
    if let (PromptIn::Text(t), false) = (&valid.prompt, valid.logprobs) {
        return Ok(Some(Echo {
            text: t.clone(),
            logprobs: None,
        }));
    }
    let scored = match generator
        .prompt_logprobs(root, valid.sampling.top_logprobs)
        .await
    {
        Ok(lp) => lp,
        Err(StrategyError::Generator(GeneratorError::Unsupported(_))) => {
            return Err(ValidationError::invalid(
                "echo",
                "needs the prompt scored (for its logprobs or its token ids' text), which this \
                 server's engine (a remote backend) does not offer",
            )
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let text = match &valid.prompt {
        PromptIn::Text(t) => t.clone(),
        _ => std::iter::once(scored.first.as_str())
            .chain(scored.rest.iter().map(|t| t.text.as_str()))
            .collect(),
    };
    Ok(Some(Echo {
        text,
        logprobs: valid.logprobs.then_some(scored),
    }))
}
