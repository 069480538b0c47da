//! Messages → prompt text, by rendering the model's own Jinja chat template with minijinja.
//!
//! The template comes from the GGUF's `tokenizer.chat_template` (or a tokenizer_config.json),
//! so the prompt is exactly the format the model was trained on. Python-isms common in HF
//! templates (`.strip()`, `.startswith()`, `raise_exception`) are supported.

use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};

use super::error::{EngineError, Result};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role.
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_string(),
            content: content.to_string(),
        }
    }
}

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const TEMPLATE_NAME: &str = "chat";

impl ChatTemplate {
    /// Compiles `source`; `bos_token` / `eos_token` are exposed to it as variables.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
            },
        );
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| EngineError::ChatTemplate(e.to_string()))?;
        Ok(Self {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| EngineError::ChatTemplate(e.to_string()))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| EngineError::ChatTemplate(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IM_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    #[test]
    fn renders_chatml_with_generation_prompt() -> Result<()> {
        let t = ChatTemplate::new(IM_TEMPLATE, "", "<|im_end|>")?;
        let out = t.render(&[ChatMessage::new("user", " hi ")], true)?;
        assert_eq!(
            out,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        Ok(())
    }

    #[test]
    fn python_string_methods_and_raise_exception_work() -> Result<()> {
        let src = "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}{{ messages[0].content.strip().upper() }}";
        let t = ChatTemplate::new(src, "", "")?;
        assert_eq!(t.render(&[ChatMessage::new("user", "  ok ")], false)?, "OK");
        let err = t
            .render(&[ChatMessage::new("system", "x")], false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("first must be user"), "{err}");
        Ok(())
    }

    #[test]
    fn syntax_errors_are_reported_not_panicked() {
        assert!(matches!(
            ChatTemplate::new("{% for %}", "", ""),
            Err(EngineError::ChatTemplate(_))
        ));
    }
}
