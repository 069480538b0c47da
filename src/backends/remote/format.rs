//! The backend model's prompt format and token counts: how a [`Prompt`] becomes the text a
//! backend continues, and how many of *its* tokens a text is.
//!
//! A backend model is prompted in its own chat format, from the source the user names with
//! `--backend-tokenizer`: a GGUF (its `tokenizer.chat_template` and `tokenizer.ggml.*`), a
//! `tokenizer.json` (with the `tokenizer_config.json` beside it for the template), or a
//! `tokenizer_config.json` (with the `tokenizer.json` beside it). The template is rendered by
//! the engine's [`ChatTemplate`] (minijinja, the same code the local model uses) and counted by
//! the engine's [`TextTokenizer`] (byte-level BPE rebuilt from GGUF metadata, checked against
//! llama.cpp), so a count here is the backend's count. Without a source, prompts are ChatML
//! (SmolLM2, Qwen2.5) and counts come from the backend's own `/tokenize` endpoint (llama.cpp
//! server, vLLM; llama-cpp-python's `/extras/tokenize`), or, where it has none, are bounded by
//! the text's bytes (every token covers at least one byte) until the backend's `usage` reports
//! the real figure.

use std::path::{Path, PathBuf};

use ponder_strategies::{ChatTemplateKwargs, Prompt, Turn};

use ponder_engine::forward::{ChatTemplate, GgufFile, TextTokenizer};
use ponder_engine::EngineError;

/// The chat-format and tokenizer source named by `--backend-tokenizer`.
#[derive(Debug)]
pub struct BackendFormat {
    template: Option<ChatTemplate>,
    tokenizer: Option<TextTokenizer>,
    /// The model's context length, when the source says (GGUF metadata).
    context: Option<usize>,
    source: PathBuf,
}

/// Why a `--backend-tokenizer` source could not be used.
#[derive(Debug, thiserror::Error)]
#[error("--backend-tokenizer {path}: {reason}")]
pub struct FormatError {
    path: PathBuf,
    reason: String,
}

fn format_error(path: &Path, reason: impl ToString) -> FormatError {
    FormatError {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The chat template of a Hugging Face `tokenizer_config.json` (`None` when it has none).
fn hf_template(path: &Path) -> Result<Option<ChatTemplate>, FormatError> {
    let text = std::fs::read_to_string(path).map_err(|e| format_error(path, e))?;
    let cfg: serde_json::Value = serde_json::from_str(&text).map_err(|e| format_error(path, e))?;
    let token = |k: &str| match cfg.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v
            .get("content")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => String::new(),
    };
    match cfg.get("chat_template").and_then(serde_json::Value::as_str) {
        Some(src) => ChatTemplate::new(src, &token("bos_token"), &token("eos_token"))
            .map(Some)
            .map_err(|e| format_error(path, e)),
        None => Ok(None),
    }
}

impl BackendFormat {
    /// Reads `path`: a `.gguf`, a `tokenizer.json` or a `tokenizer_config.json` (see the module
    /// doc for which sibling file each brings in).
    pub fn load(path: &Path) -> Result<Self, FormatError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let sibling = |n: &str| path.with_file_name(n);
        if name.ends_with(".gguf") {
            let gguf = GgufFile::open(path).map_err(|e| format_error(path, e))?;
            let tokenizer = TextTokenizer::from_gguf(&gguf).map_err(|e| format_error(path, e))?;
            let text = |id: Option<u32>| id.and_then(|i| tokenizer.token(i)).unwrap_or_default();
            let template = match gguf.metadata_str("tokenizer.chat_template") {
                Some(src) => Some(
                    ChatTemplate::new(
                        src,
                        &text(tokenizer.bos()),
                        &text(tokenizer.eos().first().copied()),
                    )
                    .map_err(|e| format_error(path, e))?,
                ),
                None => None,
            };
            let context = gguf.config().ok().map(|c| c.context_length);
            return Ok(Self {
                template,
                tokenizer: Some(tokenizer),
                context,
                source: path.to_path_buf(),
            });
        }
        let (tokenizer_json, config_json) = if name == "tokenizer_config.json" {
            (sibling("tokenizer.json"), path.to_path_buf())
        } else {
            (path.to_path_buf(), sibling("tokenizer_config.json"))
        };
        let tokenizer = if tokenizer_json.is_file() {
            Some(
                TextTokenizer::from_file(&tokenizer_json, &[])
                    .map_err(|e| format_error(path, e))?,
            )
        } else {
            None
        };
        let template = if config_json.is_file() {
            hf_template(&config_json)?
        } else {
            None
        };
        if tokenizer.is_none() && template.is_none() {
            return Err(format_error(
                path,
                "neither a tokenizer.json nor a tokenizer_config.json with a chat_template is there",
            ));
        }
        Ok(Self {
            template,
            tokenizer,
            context: None,
            source: path.to_path_buf(),
        })
    }

    /// The file it was read from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The chat template's source text, when the source has one.
    pub fn template_source(&self) -> Option<&str> {
        self.template.as_ref().map(ChatTemplate::source)
    }

    /// The model's context length, when the source records it.
    pub fn context(&self) -> Option<usize> {
        self.context
    }

    /// Tokens of `text` as the backend counts a prompt (BOS prepended when the model asks for
    /// it and the text does not start with it, as llama.cpp and vLLM do); `None` without a
    /// tokenizer.
    pub fn count(&self, text: &str) -> Option<usize> {
        let t = self.tokenizer.as_ref()?;
        let ids = t.encode(text).ok()?;
        let bos = match (t.add_bos(), t.bos()) {
            (true, Some(b)) => !text.starts_with(&t.token(b).unwrap_or_default()),
            _ => false,
        };
        Some(ids.len() + usize::from(bos))
    }

    /// Tokens of `text` appended to a sequence (no BOS); `None` without a tokenizer.
    pub fn count_appended(&self, text: &str) -> Option<usize> {
        self.tokenizer
            .as_ref()?
            .encode(text)
            .ok()
            .map(|ids| ids.len())
    }

    /// `prompt` in the model's chat format, ending where the assistant speaks; ChatML when the
    /// source has no template.
    pub fn render(&self, prompt: &Prompt) -> Result<String, EngineError> {
        self.render_messages(&prompt.turns(), &ChatTemplateKwargs::default())
    }

    /// `messages` in the model's chat format with a request's template variables, ending where
    /// the assistant speaks (ChatML, which reads no variables, when the source has no
    /// template).
    pub fn render_messages(
        &self,
        messages: &[Turn],
        vars: &ChatTemplateKwargs,
    ) -> Result<String, EngineError> {
        match &self.template {
            Some(t) => t.render_with(messages, true, vars),
            None => Ok(chatml_messages(messages)),
        }
    }
}

/// Renders a prompt in ChatML (SmolLM2, Qwen2.5): what their chat templates produce.
pub fn chatml(prompt: &Prompt) -> String {
    chatml_messages(&prompt.turns())
}

/// [`chatml`] over a message list.
pub(super) fn chatml_messages(messages: &[Turn]) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str(&format!(
            "<|im_start|>{}\n{}<|im_end|>\n",
            m.role, m.content
        ));
    }
    s.push_str("<|im_start|>assistant\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_carries_the_whole_conversation_in_order() {
        let p = Prompt {
            system: Some("S".into()),
            history: vec![Turn::new("user", "U1"), Turn::new("assistant", "A1")],
            user: "U2".into(),
        };
        assert_eq!(
            chatml(&p),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n\
             <|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_source_without_tokenizer_or_template_is_refused_naming_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer_config.json");
        std::fs::write(&path, "{}").unwrap();
        let err = BackendFormat::load(&path).unwrap_err().to_string();
        assert!(err.starts_with("--backend-tokenizer"), "{err}");
    }

    #[test]
    fn a_tokenizer_config_template_renders_the_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer_config.json");
        // Llama-3's header format, shortened.
        let cfg = serde_json::json!({
            "bos_token": "<|begin_of_text|>",
            "eos_token": {"content": "<|eot_id|>"},
            "chat_template": "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
        });
        std::fs::write(&path, cfg.to_string()).unwrap();
        let f = BackendFormat::load(&path).unwrap();
        let p = Prompt {
            system: None,
            history: vec![Turn::new("user", "a"), Turn::new("assistant", "b")],
            user: "c".into(),
        };
        assert_eq!(
            f.render(&p).unwrap(),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\nb<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nc<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        assert_eq!(f.count("anything"), None, "no tokenizer.json beside it");
    }
}
