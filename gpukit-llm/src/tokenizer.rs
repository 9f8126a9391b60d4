//! Tokenizers, through the HF `tokenizers` crate (pure-Rust regex): an HF model directory's
//! `tokenizer.json` as is (with BOS/EOS from `tokenizer_config.json`), or the equivalent
//! tokenizer built from a GGUF file's metadata.
//!
//! From GGUF (`tokenizer.ggml.model = "gpt2"`, byte-level BPE): the vocabulary
//! (`tokenizer.ggml.tokens`), the merges, the token types (control tokens — type 3 — and
//! user-defined ones — type 4 — are matched whole in the text), BOS/EOS ids, and the
//! pre-tokenizer named by `tokenizer.ggml.pre`, with the split rules llama.cpp uses for it:
//!
//! | `pre` | split before byte-level BPE |
//! |---|---|
//! | `gpt2`, `default` | GPT-2's pattern |
//! | `smollm` | every digit alone, then GPT-2's pattern |
//! | `llama-bpe` (Llama 3) | Llama 3's pattern (letters with one leading non-letter, 1–3 digits, …) |
//! | `qwen2` | Qwen2's pattern (as Llama 3's with single digits) |

use std::path::Path;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::gguf::GgufHeader;
use crate::{Error, Result};

/// A JSON file of an HF model directory, `None` if absent.
pub(crate) fn read_json(path: &Path) -> Result<Option<serde_json::Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| tk_err(path, "JSON", e))
}

/// A special token's text in `tokenizer_config.json`: a string or `{"content": …}`.
pub(crate) fn special_token(config: &serde_json::Value, key: &str) -> Option<String> {
    let v = config.get(key)?;
    v.as_str()
        .or_else(|| v.get("content").and_then(|c| c.as_str()))
        .map(str::to_string)
}

/// Llama 3's pre-tokenizer pattern (llama.cpp `LLAMA_VOCAB_PRE_TYPE_LLAMA3`).
const LLAMA3_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's pre-tokenizer pattern (llama.cpp `LLAMA_VOCAB_PRE_TYPE_QWEN2`).
const QWEN2_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token type of control tokens (`<|im_start|>`, …).
const TOKEN_CONTROL: i64 = 3;
/// GGUF token type of user-defined tokens.
const TOKEN_USER_DEFINED: i64 = 4;

/// A tokenizer with its special ids.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    /// Whether chat-rendered text gets the special tokens a raw prompt gets: llama.cpp adds
    /// them (GGUF); HF's `apply_chat_template` does not, the template writes them itself.
    specials_in_chat: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

fn tk_err(file: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Format {
        file: file.to_path_buf(),
        detail: format!("{what}: {e}"),
    }
}

impl Tokenizer {
    /// Builds the tokenizer a GGUF file describes (`file` names it in errors).
    ///
    /// # Errors
    /// [`Error::Missing`] for absent tokenizer metadata; [`Error::Format`] for a tokenizer
    /// model or pre-tokenizer not supported here (the message lists the supported ones) or
    /// inconsistent metadata.
    pub fn from_gguf(h: &GgufHeader, file: &Path) -> Result<Tokenizer> {
        let missing = |key: &str| Error::Missing {
            file: file.to_path_buf(),
            what: format!("metadata `{key}`"),
        };
        let strings = |key: &str| -> Result<Vec<String>> {
            let a = h
                .get(key)
                .and_then(|v| v.as_array())
                .ok_or_else(|| missing(key))?;
            a.iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| Error::Format {
                        file: file.to_path_buf(),
                        detail: format!("`{key}` holds a non-string"),
                    })
                })
                .collect()
        };
        let model = h
            .get("tokenizer.ggml.model")
            .and_then(|v| v.as_str())
            .ok_or_else(|| missing("tokenizer.ggml.model"))?;
        if model != "gpt2" {
            return Err(tk_err(
                file,
                "tokenizer",
                format!(
                    "tokenizer.ggml.model \"{model}\" is not supported yet (supported: \"gpt2\", \
                     byte-level BPE)"
                ),
            ));
        }
        let tokens = strings("tokenizer.ggml.tokens")?;
        let merges: Vec<(String, String)> = strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| tk_err(file, "tokenizer.ggml.merges", format!("merge `{m}`")))
            })
            .collect::<Result<_>>()?;
        let types: Vec<i64> = match h.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .as_array()
                .unwrap_or(&[])
                .iter()
                .map(|t| match t {
                    crate::gguf::Value::I32(x) => i64::from(*x),
                    other => other.as_u64().map_or(0, |x| x as i64),
                })
                .collect(),
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(tk_err(
                file,
                "tokenizer.ggml.token_type",
                format!("{} types for {} tokens", types.len(), tokens.len()),
            ));
        }
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| tk_err(file, "BPE", e))?;
        let pre = h
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        let split = |pattern: &str| -> Result<PreTokenizerWrapper> {
            Ok(Split::new(
                SplitPattern::Regex(pattern.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| tk_err(file, "pre-tokenizer", e))?
            .into())
        };
        let byte_level = |use_regex: bool| -> PreTokenizerWrapper {
            ByteLevel::new(false, true, use_regex).into()
        };
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "gpt2" | "default" => byte_level(true),
            "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level(true)]).into(),
            "llama-bpe" => Sequence::new(vec![split(LLAMA3_PATTERN)?, byte_level(false)]).into(),
            "qwen2" => Sequence::new(vec![split(QWEN2_PATTERN)?, byte_level(false)]).into(),
            other => {
                return Err(tk_err(
                    file,
                    "tokenizer",
                    format!(
                        "pre-tokenizer \"{other}\" is not supported (supported: gpt2, default, \
                         smollm, llama-bpe, qwen2)"
                    ),
                ));
            }
        };
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == TOKEN_CONTROL || **t == TOKEN_USER_DEFINED)
            .map(|(s, _)| AddedToken::from(s.clone(), true))
            .collect();
        inner.add_special_tokens(&specials);
        let id = |key: &str| {
            h.get(key)
                .and_then(|v| v.as_u64())
                .and_then(|v| u32::try_from(v).ok())
        };
        let add_bos = h
            .get("tokenizer.ggml.add_bos_token")
            .is_some_and(|v| *v == crate::gguf::Value::Bool(true));
        Ok(Tokenizer {
            inner,
            bos: id("tokenizer.ggml.bos_token_id"),
            eos: id("tokenizer.ggml.eos_token_id"),
            add_bos,
            specials_in_chat: true,
        })
    }

    /// Loads an HF model directory's `tokenizer.json`, with the BOS/EOS tokens its
    /// `tokenizer_config.json` names (`bos_token`, `eos_token`: a string or `{"content": …}`).
    /// Raw prompts get what the tokenizer's post-processor adds (e.g. Llama 3's BOS).
    ///
    /// # Errors
    /// [`Error::Missing`] without `tokenizer.json`; [`Error::Format`] for files that do not
    /// parse.
    pub fn from_hf_dir(dir: &Path) -> Result<Tokenizer> {
        let file = dir.join("tokenizer.json");
        if !file.is_file() {
            return Err(Error::Missing {
                file: dir.to_path_buf(),
                what: "tokenizer.json".into(),
            });
        }
        let inner =
            tokenizers::Tokenizer::from_file(&file).map_err(|e| tk_err(&file, "tokenizer", e))?;
        let config = read_json(&dir.join("tokenizer_config.json"))?;
        let id = |key: &str| {
            config
                .as_ref()
                .and_then(|c| special_token(c, key))
                .and_then(|t| inner.token_to_id(&t))
        };
        let (bos, eos) = (id("bos_token"), id("eos_token"));
        Ok(Tokenizer {
            inner,
            bos,
            eos,
            add_bos: false,
            specials_in_chat: false,
        })
    }

    /// Token ids of a raw prompt; special tokens written in it (`<|im_start|>`) become their
    /// ids; the model's own special tokens (a BOS) are added as it asks.
    ///
    /// # Errors
    /// [`Error::Format`] if the tokenizer fails.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_with(text, true)
    }

    /// Token ids of text a chat template rendered: as [`Tokenizer::encode`] for GGUF models
    /// (llama.cpp's behaviour), without added special tokens for HF ones (the template wrote
    /// them, as in HF's `apply_chat_template`).
    ///
    /// # Errors
    /// [`Error::Format`] if the tokenizer fails.
    pub fn encode_rendered(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_with(text, self.specials_in_chat)
    }

    fn encode_with(&self, text: &str, specials: bool) -> Result<Vec<u32>> {
        // A GGUF tokenizer has no post-processor: its BOS is added here.
        let post = specials && !self.add_bos;
        let enc = self
            .inner
            .encode(text, post)
            .map_err(|e| tk_err(Path::new("tokenizer"), "encode", e))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if specials
            && self.add_bos
            && let Some(b) = self.bos
        {
            ids.push(b);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// The text of `ids` (special tokens included).
    ///
    /// # Errors
    /// [`Error::Format`] if the tokenizer fails.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| tk_err(Path::new("tokenizer"), "decode", e))
    }

    /// The token string of `id` (in the vocabulary's byte-level spelling).
    pub fn token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Vocabulary size, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The beginning-of-sequence id, if the model has one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence id, if the model has one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }
}
