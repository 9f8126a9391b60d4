//! The generation loop: a model, its tokenizer and chat template; prefill then decode with the
//! sampler of `gpukit_ops::sampling` (seeded Philox draws: the same seed gives the same text),
//! stopping on EOS, a stop string or the token budget, and handing out text as it is produced
//! in whole UTF-8 characters.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpukit_ops::Device;
use gpukit_ops::sampling::{SamplingParams, sample};

use crate::chat::{ChatTemplate, Message};
use crate::gguf::GgufFile;
use crate::model::Llama;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// How to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Most new tokens.
    pub max_new_tokens: usize,
    /// Temperature, top-k/p, min-p, repetition penalty, seed (the default is greedy).
    pub sampling: SamplingParams,
    /// Previous tokens the repetition penalty looks at.
    pub repetition_window: usize,
    /// Generation ends when the text contains one of these (which is not emitted).
    pub stop: Vec<String>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 256,
            sampling: SamplingParams::default(),
            repetition_window: 64,
            stop: Vec::new(),
        }
    }
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced its end-of-sequence token.
    Eos,
    /// A stop string appeared.
    StopString,
    /// `max_new_tokens` were produced.
    MaxTokens,
}

/// What a generation did.
#[derive(Clone, Debug)]
pub struct GenerateStats {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens produced.
    pub new_tokens: usize,
    /// Time of the prompt's forward pass (to the first token's logits).
    pub prefill: Duration,
    /// Time of the rest.
    pub decode: Duration,
    /// Why it ended.
    pub stop: StopReason,
}

impl GenerateStats {
    /// Decode speed in tokens per second.
    pub fn decode_tokens_per_s(&self) -> f64 {
        let s = self.decode.as_secs_f64();
        if s > 0.0 {
            self.new_tokens.saturating_sub(1) as f64 / s
        } else {
            0.0
        }
    }
}

/// Turns token ids into text pieces made of whole UTF-8 characters: a token that ends inside a
/// multi-byte character is held back until the character is complete.
struct TextStream<'a> {
    tokenizer: &'a Tokenizer,
    ids: Vec<u32>,
    emitted: usize,
}

impl<'a> TextStream<'a> {
    fn new(tokenizer: &'a Tokenizer) -> Self {
        TextStream {
            tokenizer,
            ids: Vec::new(),
            emitted: 0,
        }
    }

    /// The full text so far.
    fn text(&self) -> Result<String> {
        self.tokenizer.decode(&self.ids)
    }

    /// Adds a token; returns the new complete text, if any.
    fn push(&mut self, id: u32) -> Result<Option<String>> {
        self.ids.push(id);
        let text = self.text()?;
        if text.ends_with('\u{FFFD}') || text.len() <= self.emitted {
            return Ok(None);
        }
        let piece = text[self.emitted..].to_string();
        self.emitted = text.len();
        Ok(Some(piece))
    }
}

/// A model ready to generate.
pub struct Engine {
    model: Llama,
    tokenizer: Tokenizer,
    chat: Option<ChatTemplate>,
    path: PathBuf,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("path", &self.path).finish()
    }
}

impl Engine {
    /// Loads a GGUF model file onto `device`.
    ///
    /// # Errors
    /// Errors of the GGUF reader, the tokenizer and the model loader, each naming the file.
    pub fn load(path: &Path, device: &Device) -> Result<Engine> {
        if path.extension().is_none_or(|e| e != "gguf") {
            return Err(Error::Format {
                file: path.to_path_buf(),
                detail: "only GGUF model files can be run so far (safetensors models need \
                         config.json support, which is not written yet)"
                    .into(),
            });
        }
        let f = GgufFile::open(path)?;
        let tokenizer = Tokenizer::from_gguf(f.header(), path)?;
        let chat = ChatTemplate::from_gguf(f.header(), &tokenizer, path).ok();
        let model = Llama::from_gguf(&f, device)?;
        Ok(Engine {
            model,
            tokenizer,
            chat,
            path: path.to_path_buf(),
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The prompt of a conversation through the model's chat template, the assistant's turn
    /// opened.
    ///
    /// # Errors
    /// [`Error::Missing`] if the model has no chat template; template errors.
    pub fn chat_prompt(&self, messages: &[Message]) -> Result<String> {
        let chat = self.chat.as_ref().ok_or_else(|| Error::Missing {
            file: self.path.clone(),
            what: "chat template (run without --chat to complete raw text)".into(),
        })?;
        chat.render(messages, true)
    }

    /// Generates a continuation of `prompt` (text, special tokens allowed), calling `on_text`
    /// with each new piece of text as soon as it is complete.
    ///
    /// # Errors
    /// Tokenizer and forward-pass errors; an empty prompt; a prompt longer than the model's
    /// context.
    pub fn generate(
        &self,
        prompt: &str,
        opts: &GenerateOptions,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<GenerateStats> {
        opts.sampling.validate().map_err(|e| Error::Format {
            file: "generation options".into(),
            detail: e.to_string(),
        })?;
        let ids = self.tokenizer.encode(prompt)?;
        let ctx = self.model.config().context_length;
        if ids.is_empty() || ids.len() >= ctx {
            return Err(Error::Format {
                file: "prompt".into(),
                detail: format!(
                    "{} tokens; a prompt needs 1 to {} (the model's context)",
                    ids.len(),
                    ctx - 1
                ),
            });
        }
        let budget = opts.max_new_tokens.min(ctx - ids.len());
        let mut session = self.model.session(ids.len() + budget)?;
        let eos = self.tokenizer.eos_id();
        let t0 = Instant::now();
        let mut logits = self.model.forward(&mut session, &ids)?;
        let prefill = t0.elapsed();
        let t1 = Instant::now();
        let mut history: Vec<u32> = ids.clone();
        let mut stream = TextStream::new(&self.tokenizer);
        let mut held = String::new();
        let longest_stop = opts.stop.iter().map(String::len).max().unwrap_or(0);
        let mut stop = StopReason::MaxTokens;
        let mut produced = 0;
        for step in 0..budget {
            let recent = &history[history.len().saturating_sub(opts.repetition_window)..];
            let id = sample(&logits, recent, &opts.sampling, step as u64).unwrap_or(0);
            if Some(id) == eos {
                stop = StopReason::Eos;
                break;
            }
            produced += 1;
            history.push(id);
            if let Some(piece) = stream.push(id)? {
                held.push_str(&piece);
                if let Some(at) = opts.stop.iter().filter_map(|s| held.find(s.as_str())).min() {
                    on_text(&held[..at]);
                    held.clear();
                    stop = StopReason::StopString;
                    break;
                }
                // Keep back what could still be the start of a stop string.
                let keep = longest_stop.saturating_sub(1).min(held.len());
                let mut cut = held.len() - keep;
                while !held.is_char_boundary(cut) {
                    cut -= 1;
                }
                on_text(&held[..cut]);
                held.drain(..cut);
            }
            if step + 1 < budget {
                logits = self.model.forward(&mut session, &[id])?;
            }
        }
        if stop != StopReason::StopString {
            let rest = stream.text()?;
            held.push_str(&rest[stream.emitted.min(rest.len())..]);
            on_text(&held);
        }
        Ok(GenerateStats {
            prompt_tokens: ids.len(),
            new_tokens: produced,
            prefill,
            decode: t1.elapsed(),
            stop,
        })
    }
}
