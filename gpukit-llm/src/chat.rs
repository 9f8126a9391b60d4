//! Chat templates: the Jinja templates of `tokenizer_config.json` (`chat_template`) or GGUF
//! (`tokenizer.chat_template`), rendered with minijinja the way HF transformers renders them
//! (`apply_chat_template`): `trim_blocks` and `lstrip_blocks` on, loop controls, Python string
//! methods (`.strip()`, `.startswith()`, …), `raise_exception(msg)`, and the variables
//! `messages` (a list of `{role, content}`), `add_generation_prompt`, `bos_token`, `eos_token`.

use std::path::Path;

use minijinja::{Environment, ErrorKind, context};

use crate::gguf::GgufHeader;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A compiled chat template with the model's BOS/EOS token strings.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

/// Instructions one render of a chat template may execute: real templates take a few hundred
/// per message, so this is far past any conversation, yet it stops a template that loops
/// without end (in well under a second).
const TEMPLATE_FUEL: u64 = 5_000_000;

/// Bytes a rendered chat prompt may have (64 MiB, far past any model's context).
const MAX_RENDERED_BYTES: usize = 64 << 20;

/// A render's output that refuses to grow past [`MAX_RENDERED_BYTES`].
struct CappedOutput(Vec<u8>);

impl std::io::Write for CappedOutput {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + bytes.len() > MAX_RENDERED_BYTES {
            // minijinja reports this as a write failure without the cause; `render` names it.
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn template_err(detail: impl std::fmt::Display) -> Error {
    Error::Invalid {
        what: "chat template",
        detail: detail.to_string(),
    }
}

impl ChatTemplate {
    /// Compiles `source`.
    ///
    /// # Errors
    /// [`Error::Invalid`] with minijinja's message if the template does not parse.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
            },
        );
        env.add_template_owned("chat", source.to_string())
            .map_err(template_err)?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The template a GGUF file carries (`tokenizer.chat_template`), with the BOS/EOS token
    /// strings of `tokenizer`.
    ///
    /// # Errors
    /// [`Error::Missing`] if the file has no template; [`Error::Invalid`] if it does not parse.
    pub fn from_gguf(h: &GgufHeader, tokenizer: &Tokenizer, file: &Path) -> Result<ChatTemplate> {
        let source = h
            .get("tokenizer.chat_template")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::Missing {
                file: file.to_path_buf(),
                what: "metadata `tokenizer.chat_template`".into(),
            })?;
        let token = |id: Option<u32>| id.and_then(|i| tokenizer.token(i)).unwrap_or_default();
        ChatTemplate::new(
            source,
            &token(tokenizer.bos_id()),
            &token(tokenizer.eos_id()),
        )
    }

    /// The template of an HF model directory: `chat_template.jinja` (transformers 5), else
    /// `tokenizer_config.json`'s `chat_template` (a string, or a list of named templates of which
    /// `default` is taken), with that file's `bos_token` / `eos_token`.
    ///
    /// # Errors
    /// [`Error::Missing`] if the directory has no template; [`Error::Invalid`] if it does not
    /// parse.
    pub fn from_hf_dir(dir: &Path) -> Result<ChatTemplate> {
        let config =
            crate::tokenizer::read_json(&dir.join("tokenizer_config.json"))?.unwrap_or_default();
        let jinja = dir.join("chat_template.jinja");
        let source = if jinja.is_file() {
            std::fs::read_to_string(&jinja).map_err(|source| Error::Io {
                path: jinja.clone(),
                source,
            })?
        } else {
            match config.get("chat_template") {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Array(list)) => list
                    .iter()
                    .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                    .and_then(|t| t.get("template"))
                    .and_then(|t| t.as_str())
                    .map(str::to_string)
                    .unwrap_or_default(),
                _ => String::new(),
            }
        };
        if source.is_empty() {
            return Err(Error::Missing {
                file: dir.to_path_buf(),
                what: "chat template (chat_template.jinja or tokenizer_config.json's \
                       chat_template)"
                    .into(),
            });
        }
        let token = |k: &str| crate::tokenizer::special_token(&config, k).unwrap_or_default();
        ChatTemplate::new(&source, &token("bos_token"), &token("eos_token"))
    }

    /// Renders `messages`, ending with the assistant's turn opened when
    /// `add_generation_prompt`.
    ///
    /// # Errors
    /// [`Error::Invalid`] with minijinja's message (a `raise_exception` in the template, an
    /// undefined method, …), also when the template runs out of its `TEMPLATE_FUEL`
    /// instructions or its output passes `MAX_RENDERED_BYTES`.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let t = self.env.get_template("chat").map_err(template_err)?;
        let mut out = CappedOutput(Vec::new());
        t.render_captured_to(
            context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            },
            &mut out,
        )
        .map_err(|e| {
            if e.kind() == ErrorKind::WriteFailure {
                template_err(format!(
                    "the rendered prompt exceeds {} MiB",
                    MAX_RENDERED_BYTES >> 20
                ))
            } else {
                template_err(e)
            }
        })?;
        String::from_utf8(out.0).map_err(template_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_semantics_trim_strip_methods_and_exceptions() {
        let src = "{% for m in messages %}\n  {% if m.role == 'system' %}\n[{{ m.content.strip() }}]\n  {% else %}\n{{ m.role|upper }}: {{ m['content'] }}{{ eos_token }}\n  {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}ASSISTANT:{% endif %}";
        let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
        let msgs = [
            Message::new("system", "  be brief  "),
            Message::new("user", "hi"),
        ];
        assert_eq!(
            t.render(&msgs, true).unwrap(),
            "[be brief]\nUSER: hi</s>\nASSISTANT:"
        );
        assert_eq!(
            t.render(&msgs, false).unwrap(),
            "[be brief]\nUSER: hi</s>\n"
        );
        let strict = ChatTemplate::new(
            "{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}ok",
            "",
            "",
        )
        .unwrap();
        let e = strict.render(&msgs, false).unwrap_err().to_string();
        assert!(e.contains("user first"), "{e}");
        assert!(ChatTemplate::new("{% if %}", "", "").is_err());
    }

    /// A template that would loop for ever or render without bound stops with an error.
    #[test]
    fn runaway_templates_are_errors() {
        let render = |source: &str| {
            let msgs = [Message::new("user", "hi")];
            ChatTemplate::new(source, "", "")
                .unwrap()
                .render(&msgs, true)
        };
        let e = render(
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("fuel"), "{e}");
        let e = render("{% for a in range(100) %}{{ 'x' * 1000000 }}{% endfor %}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 MiB"), "{e}");
        // Below the cap the same template renders.
        let big = render("{% for a in range(3) %}{{ 'x' * 1000000 }}{% endfor %}").unwrap();
        assert_eq!(big.len(), 3_000_000);
    }
}
