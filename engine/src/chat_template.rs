//! Messages → prompt text, by rendering the model's own Jinja chat template with minijinja.
//!
//! The template comes from the GGUF's `tokenizer.chat_template` (or a tokenizer_config.json),
//! so the prompt is exactly the format the model was trained on. Python-isms common in HF
//! templates (`.strip()`, `.startswith()`, `raise_exception`) are supported. A request's
//! [`ChatTemplateKwargs`] (vLLM's `chat_template_kwargs`, e.g. Qwen3's `enable_thinking`) are
//! top-level variables beside `messages`, `add_generation_prompt`, `bos_token` and
//! `eos_token`, which they cannot override (the type refuses those names).

use minijinja::{context, Environment, Error as JinjaError, ErrorKind, Value};
use ponder_strategies::{ChatTemplateKwargs, Turn};

use super::error::{EngineError, Result};

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
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
            .map_err(EngineError::ChatTemplate)?;
        Ok(Self {
            env,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(&self, messages: &[Turn], add_generation_prompt: bool) -> Result<String> {
        self.render_with(
            messages,
            add_generation_prompt,
            &ChatTemplateKwargs::default(),
        )
    }

    /// [`ChatTemplate::render`] with a request's template variables beside the messages.
    pub fn render_with(
        &self,
        messages: &[Turn],
        add_generation_prompt: bool,
        vars: &ChatTemplateKwargs,
    ) -> Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(EngineError::ChatTemplate)?;
        // The renderer's own variables come first: in a merged context the first map that
        // has a name wins (and `ChatTemplateKwargs` refuses those names anyway).
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
                ..Value::from_serialize(vars.vars())
            })
            .map_err(EngineError::ChatTemplate)
    }

    /// The template's source text (what the reasoning parser reads its tags from).
    pub fn source(&self) -> &str {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IM_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    #[test]
    fn renders_chatml_with_generation_prompt() -> Result<()> {
        let t = ChatTemplate::new(IM_TEMPLATE, "", "<|im_end|>")?;
        let out = t.render(&[Turn::new("user", " hi ")], true)?;
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
        assert_eq!(t.render(&[Turn::new("user", "  ok ")], false)?, "OK");
        let err = t
            .render(&[Turn::new("system", "x")], false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("first must be user"), "{err}");
        Ok(())
    }

    #[test]
    fn template_variables_reach_the_template_beside_the_messages() -> Result<()> {
        let src = "{{ messages[0].content }}{% if enable_thinking is defined and enable_thinking is false %}|off{% endif %}|{{ bos_token }}";
        let t = ChatTemplate::new(src, "<s>", "</s>")?;
        let msgs = [Turn::new("user", "q")];
        let vars = |v: serde_json::Value| match v {
            serde_json::Value::Object(m) => ChatTemplateKwargs::new(m).ok(),
            _ => None,
        };
        let off = vars(serde_json::json!({"enable_thinking": false})).unwrap_or_default();
        let on = vars(serde_json::json!({"enable_thinking": true})).unwrap_or_default();
        assert_eq!(t.render_with(&msgs, true, &off)?, "q|off|<s>");
        assert_eq!(t.render_with(&msgs, true, &on)?, "q|<s>");
        assert_eq!(t.render(&msgs, true)?, "q|<s>");
        // The renderer's variables cannot be replaced through them.
        assert!(vars(serde_json::json!({"bos_token": "x"})).is_none());
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
