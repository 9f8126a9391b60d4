//! `ModelSpec`: what a decoder-only transformer is made of — sizes, norm, position encoding,
//! attention options, MLP — read from an HF `config.json` (`model_type` / `architectures`) or
//! from GGUF metadata (`general.architecture`).
//!
//! Architectures (HF transformers' definitions):
//! - GPT-2 (Radford et al. 2019): learned absolute positions, LayerNorm, GELU (tanh form,
//!   `gelu_new`), biases everywhere, fused QKV in a `Conv1D` (weights stored `[in, out]`).
//! - Llama 1–3.2 (Touvron et al. 2023): RMSNorm, RoPE (incl. `llama3` scaling), GQA, SwiGLU.
//! - Mistral: Llama with a sliding attention window.
//! - Qwen2 / Qwen2.5: Llama with biases on the Q/K/V projections.
//! - Qwen3: Llama with RMSNorm on each query and key head before RoPE (`q_norm`, `k_norm`).
//!
//! Both the legacy (`rope_theta`, `rope_scaling`) and the transformers-5 (`rope_parameters`)
//! spellings of RoPE settings are read.

use std::path::Path;

use gpukit_ops::rope::{RopeConfig, RopeLayout, RopeScaling};
use serde_json::Value as Json;

use crate::gguf::GgufHeader;
use crate::{Error, Result};

/// Architectures gpukit runs, as `config.json`'s `model_type` names them.
pub const SUPPORTED_ARCHITECTURES: [&str; 5] = ["gpt2", "llama", "mistral", "qwen2", "qwen3"];

/// GGUF `general.architecture` values gpukit runs (Mistral GGUF files say `llama`).
pub const SUPPORTED_GGUF_ARCHITECTURES: [&str; 3] = ["llama", "qwen2", "qwen3"];

/// A model family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// GPT-2.
    Gpt2,
    /// Llama 1–3.2.
    Llama,
    /// Mistral.
    Mistral,
    /// Qwen2 / Qwen2.5.
    Qwen2,
    /// Qwen3 (dense).
    Qwen3,
}

impl Arch {
    /// The `model_type` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gpt2 => "gpt2",
            Arch::Llama => "llama",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    fn from_name(name: &str) -> Option<Arch> {
        Some(match name {
            "gpt2" => Arch::Gpt2,
            "llama" => Arch::Llama,
            "mistral" => Arch::Mistral,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            _ => return None,
        })
    }
}

/// The normalization layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// RMSNorm (Zhang & Sennrich 2019), weight only.
    Rms,
    /// LayerNorm (Ba et al. 2016), weight and bias.
    Layer,
}

/// The MLP block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlpKind {
    /// `down(silu(gate(x)) · up(x))` (Shazeer 2020).
    SwiGlu,
    /// `proj(gelu_tanh(fc(x) + b) ) + b` (GPT-2).
    GeluTanh,
}

/// How positions enter the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Positions {
    /// Rotary embeddings on Q and K.
    Rope {
        /// Rotated dimensions, base and scaling.
        config: RopeConfig,
        /// Which elements rotate together: rotate-half for HF checkpoints, adjacent pairs for
        /// GGUF Llama files (whose Q/K rows llama.cpp permuted).
        layout: RopeLayout,
    },
    /// A learned table of `max_positions` embeddings added to the token embeddings (GPT-2).
    Learned,
}

/// A decoder-only transformer's hyperparameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// The family.
    pub arch: Arch,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// MLP inner size.
    pub ffn: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (divides `n_heads`).
    pub n_kv_heads: usize,
    /// Values per head (may differ from `hidden / n_heads`, as in Qwen3).
    pub head_dim: usize,
    /// Vocabulary size (rows of the embedding).
    pub vocab: usize,
    /// Longest sequence the model supports.
    pub max_positions: usize,
    /// The norm.
    pub norm: NormKind,
    /// The norms' epsilon.
    pub norm_eps: f32,
    /// Position encoding.
    pub positions: Positions,
    /// Per layer: the sliding attention window, or `None` for full attention.
    pub sliding_window: Vec<Option<usize>>,
    /// Biases on the Q/K/V projections.
    pub qkv_bias: bool,
    /// Bias on the output projection.
    pub o_bias: bool,
    /// Biases in the MLP.
    pub mlp_bias: bool,
    /// RMSNorm over each query and key head before RoPE (Qwen3).
    pub qk_norm: bool,
    /// The MLP.
    pub mlp: MlpKind,
    /// The LM head is the token embedding.
    pub tied_embeddings: bool,
}

/// The most transformer layers a model may declare (published models have well under 200):
/// per-layer tables are sized from the count before anything else is read.
const MAX_LAYERS: usize = 1024;

/// The most parameters a model's sizes may imply (2^44, about 17.6 trillion): beyond it the
/// configuration is malformed, and size arithmetic stays far from overflowing.
const MAX_PARAMETERS: usize = 1 << 44;

/// `n`, the declared layer count, if it is at most [`MAX_LAYERS`].
fn layer_count(n: usize, file: &Path) -> Result<usize> {
    if n > MAX_LAYERS {
        return Err(format_err(
            file,
            format!("{n} layers (at most {MAX_LAYERS} are accepted)"),
        ));
    }
    Ok(n)
}

fn format_err(file: &Path, detail: impl Into<String>) -> Error {
    Error::Format {
        file: file.to_path_buf(),
        detail: detail.into(),
    }
}

/// Reads `config.json`-style numbers with the file named in errors.
struct Fields<'a> {
    json: &'a Json,
    file: &'a Path,
}

impl Fields<'_> {
    fn get(&self, key: &str) -> Option<&Json> {
        self.json.get(key).filter(|v| !v.is_null())
    }

    fn usize(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?.ok_or_else(|| Error::Missing {
            file: self.file.to_path_buf(),
            what: format!("field `{key}`"),
        })
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(|n| Some(n as usize))
                .ok_or_else(|| format_err(self.file, format!("`{key}` = {v} is not a count"))),
        }
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| format_err(self.file, format!("`{key}` = {v} is not a number"))),
        }
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| format_err(self.file, format!("`{key}` = {v} is not a boolean"))),
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Json::as_str)
    }
}

/// The RoPE scaling an HF `rope_scaling` / `rope_parameters` object describes.
fn rope_scaling(p: &Fields<'_>, max_positions: usize) -> Result<RopeScaling> {
    let kind = p
        .str("rope_type")
        .or_else(|| p.str("type"))
        .unwrap_or("default");
    let factor = || p.f64_or("factor", 1.0);
    let original = || -> Result<usize> {
        Ok(p.opt_usize("original_max_position_embeddings")?
            .unwrap_or(max_positions))
    };
    Ok(match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear { factor: factor()? },
        "dynamic" => RopeScaling::DynamicNtk {
            factor: factor()?,
            max_position: max_positions,
        },
        "yarn" => RopeScaling::Yarn {
            factor: factor()?,
            original_max_position: original()?,
            beta_fast: p.f64_or("beta_fast", 32.0)?,
            beta_slow: p.f64_or("beta_slow", 1.0)?,
            attention_factor: p
                .get("attention_factor")
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| format_err(p.file, "`attention_factor` is not a number"))
                })
                .transpose()?,
        },
        "llama3" => RopeScaling::Llama3 {
            factor: factor()?,
            low_freq_factor: p.f64_or("low_freq_factor", 1.0)?,
            high_freq_factor: p.f64_or("high_freq_factor", 4.0)?,
            original_max_position: original()?,
        },
        other => {
            return Err(format_err(
                p.file,
                format!(
                    "rope type \"{other}\" is not supported (supported: default, linear, \
                     dynamic, yarn, llama3)"
                ),
            ));
        }
    })
}

impl ModelSpec {
    /// Reads an HF `config.json` (`file` names it in errors).
    ///
    /// # Errors
    /// [`Error::Format`] for malformed JSON, an architecture not supported (the message lists the
    /// supported ones), settings gpukit does not implement, or inconsistent sizes;
    /// [`Error::Missing`] for absent fields.
    pub fn from_config_json(text: &str, file: &Path) -> Result<ModelSpec> {
        let json: Json = serde_json::from_str(text)
            .map_err(|e| format_err(file, format!("not valid JSON: {e}")))?;
        let f = Fields { json: &json, file };
        let model_type = f.str("model_type").unwrap_or("(none)");
        let arch = Arch::from_name(model_type).ok_or_else(|| {
            let named = f
                .get("architectures")
                .map_or_else(String::new, |a| format!(" ({a})"));
            format_err(
                file,
                format!(
                    "model_type \"{model_type}\"{named} is not supported (supported: {})",
                    SUPPORTED_ARCHITECTURES.join(", ")
                ),
            )
        })?;
        let spec = if arch == Arch::Gpt2 {
            Self::gpt2(&f)?
        } else {
            Self::llama_like(arch, &f)?
        };
        spec.check(file)?;
        Ok(spec)
    }

    fn gpt2(f: &Fields<'_>) -> Result<ModelSpec> {
        let hidden = f.usize("n_embd")?;
        let n_heads = f.usize("n_head")?;
        let act = f.str("activation_function").unwrap_or("gelu_new");
        if !matches!(act, "gelu_new" | "gelu_pytorch_tanh") {
            return Err(format_err(
                f.file,
                format!("GPT-2 activation \"{act}\" is not supported (gelu_new is)"),
            ));
        }
        if f.bool_or("scale_attn_by_inverse_layer_idx", false)? {
            return Err(format_err(
                f.file,
                "scale_attn_by_inverse_layer_idx is not supported",
            ));
        }
        if !f.bool_or("scale_attn_weights", true)? {
            return Err(format_err(
                f.file,
                "scale_attn_weights = false is not supported",
            ));
        }
        let n_layers = layer_count(f.usize("n_layer")?, f.file)?;
        let ffn = match f.opt_usize("n_inner")? {
            Some(n) => n,
            None => hidden
                .checked_mul(4)
                .ok_or_else(|| format_err(f.file, format!("n_embd {hidden} is too large")))?,
        };
        Ok(ModelSpec {
            arch: Arch::Gpt2,
            n_layers,
            hidden,
            ffn,
            n_heads,
            n_kv_heads: n_heads,
            head_dim: hidden / n_heads.max(1),
            vocab: f.usize("vocab_size")?,
            max_positions: f.usize("n_positions")?,
            norm: NormKind::Layer,
            norm_eps: f.f64_or("layer_norm_epsilon", 1e-5)? as f32,
            positions: Positions::Learned,
            sliding_window: vec![None; n_layers],
            qkv_bias: true,
            o_bias: true,
            mlp_bias: true,
            qk_norm: false,
            mlp: MlpKind::GeluTanh,
            tied_embeddings: f.bool_or("tie_word_embeddings", true)?,
        })
    }

    fn llama_like(arch: Arch, f: &Fields<'_>) -> Result<ModelSpec> {
        let act = f.str("hidden_act").unwrap_or("silu");
        if act != "silu" {
            return Err(format_err(
                f.file,
                format!(
                    "hidden_act \"{act}\" is not supported for {} (silu is)",
                    arch.name()
                ),
            ));
        }
        let hidden = f.usize("hidden_size")?;
        let n_heads = f.usize("num_attention_heads")?;
        let n_layers = layer_count(f.usize("num_hidden_layers")?, f.file)?;
        let head_dim = f.opt_usize("head_dim")?.unwrap_or(hidden / n_heads.max(1));
        let max_positions = f.opt_usize("max_position_embeddings")?.unwrap_or(2048);
        // transformers 5 keeps every RoPE setting in `rope_parameters`; older configs have
        // `rope_theta` beside an optional `rope_scaling` object.
        let (base, scaling, partial) = match f.get("rope_parameters") {
            Some(p) => {
                let p = Fields {
                    json: p,
                    file: f.file,
                };
                (
                    p.f64_or("rope_theta", 10_000.0)?,
                    rope_scaling(&p, max_positions)?,
                    p.f64_or(
                        "partial_rotary_factor",
                        f.f64_or("partial_rotary_factor", 1.0)?,
                    )?,
                )
            }
            None => {
                let scaling = match f.get("rope_scaling") {
                    Some(s) => rope_scaling(
                        &Fields {
                            json: s,
                            file: f.file,
                        },
                        max_positions,
                    )?,
                    None => RopeScaling::None,
                };
                (
                    f.f64_or("rope_theta", 10_000.0)?,
                    scaling,
                    f.f64_or("partial_rotary_factor", 1.0)?,
                )
            }
        };
        // Sliding windows: Mistral's applies to every layer; Qwen's only when
        // `use_sliding_window`, to the layers `layer_types` marks (or from `max_window_layers`).
        let window = f.opt_usize("sliding_window")?;
        let sliding_window = match arch {
            Arch::Mistral => vec![window; n_layers],
            Arch::Qwen2 | Arch::Qwen3 if f.bool_or("use_sliding_window", false)? => {
                match f.get("layer_types").and_then(Json::as_array) {
                    Some(types) => {
                        if types.len() != n_layers {
                            return Err(format_err(
                                f.file,
                                format!("{} layer_types for {n_layers} layers", types.len()),
                            ));
                        }
                        types
                            .iter()
                            .map(|t| window.filter(|_| t.as_str() == Some("sliding_attention")))
                            .collect()
                    }
                    None => {
                        let full = f.opt_usize("max_window_layers")?.unwrap_or(n_layers);
                        (0..n_layers)
                            .map(|i| window.filter(|_| i >= full))
                            .collect()
                    }
                }
            }
            _ => vec![None; n_layers],
        };
        let attention_bias = f.bool_or("attention_bias", false)?;
        Ok(ModelSpec {
            arch,
            n_layers,
            hidden,
            ffn: f.usize("intermediate_size")?,
            n_heads,
            n_kv_heads: f.opt_usize("num_key_value_heads")?.unwrap_or(n_heads),
            head_dim,
            vocab: f.usize("vocab_size")?,
            max_positions,
            norm: NormKind::Rms,
            norm_eps: f.f64_or("rms_norm_eps", 1e-6)? as f32,
            positions: Positions::Rope {
                config: RopeConfig {
                    rotary_dim: (head_dim as f64 * partial) as usize,
                    base,
                    scaling,
                },
                layout: RopeLayout::RotateHalf,
            },
            sliding_window,
            qkv_bias: arch == Arch::Qwen2 || attention_bias,
            o_bias: attention_bias,
            mlp_bias: f.bool_or("mlp_bias", false)?,
            qk_norm: arch == Arch::Qwen3,
            mlp: MlpKind::SwiGlu,
            tied_embeddings: f.bool_or("tie_word_embeddings", false)?,
        })
    }

    /// Reads GGUF metadata (`file` names it in errors); the tensor list tells tied from separate
    /// LM heads and finds optional biases and Q/K norms.
    ///
    /// # Errors
    /// As [`ModelSpec::from_config_json`].
    pub fn from_gguf(h: &GgufHeader, file: &Path) -> Result<ModelSpec> {
        let name = h
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .unwrap_or("(none)");
        let arch = match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            _ => {
                return Err(format_err(
                    file,
                    format!(
                        "GGUF architecture \"{name}\" is not supported (supported: {})",
                        SUPPORTED_GGUF_ARCHITECTURES.join(", ")
                    ),
                ));
            }
        };
        let key = |k: &str| format!("{name}.{k}");
        let missing = |k: String| Error::Missing {
            file: file.to_path_buf(),
            what: format!("metadata `{k}`"),
        };
        let int = |k: &str| -> Result<usize> {
            h.get(&key(k))
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
                .ok_or_else(|| missing(key(k)))
        };
        let float = |k: &str| h.get(&key(k)).and_then(|v| v.as_f64());
        let n_heads = int("attention.head_count")?;
        let hidden = int("embedding_length")?;
        let head_dim = int("attention.key_length").unwrap_or(hidden / n_heads.max(1));
        let n_layers = layer_count(int("block_count")?, file)?;
        let vocab = h
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .map(<[_]>::len)
            .ok_or_else(|| missing("tokenizer.ggml.tokens".into()))?;
        let max_positions = int("context_length").unwrap_or(2048);
        let scaling = match h.get(&key("rope.scaling.type")).and_then(|v| v.as_str()) {
            None | Some("none") => RopeScaling::None,
            Some("linear") => RopeScaling::Linear {
                factor: float("rope.scaling.factor").unwrap_or(1.0),
            },
            Some("yarn") => RopeScaling::Yarn {
                factor: float("rope.scaling.factor").unwrap_or(1.0),
                original_max_position: int("rope.scaling.original_context_length")
                    .unwrap_or(max_positions),
                beta_fast: 32.0,
                beta_slow: 1.0,
                attention_factor: None,
            },
            Some(other) => {
                return Err(format_err(
                    file,
                    format!("rope scaling \"{other}\" is not supported (none, linear, yarn are)"),
                ));
            }
        };
        let spec = ModelSpec {
            arch,
            n_layers,
            hidden,
            ffn: int("feed_forward_length")?,
            n_heads,
            n_kv_heads: int("attention.head_count_kv").unwrap_or(n_heads),
            head_dim,
            vocab,
            max_positions,
            norm: NormKind::Rms,
            norm_eps: float("attention.layer_norm_rms_epsilon")
                .ok_or_else(|| missing(key("attention.layer_norm_rms_epsilon")))?
                as f32,
            positions: Positions::Rope {
                config: RopeConfig {
                    rotary_dim: int("rope.dimension_count").unwrap_or(head_dim),
                    base: float("rope.freq_base").unwrap_or(10_000.0),
                    scaling,
                },
                // llama.cpp permutes Llama's Q/K rows for adjacent-pair RoPE; Qwen files keep
                // HF's order and rotate halves ("NEOX" style).
                layout: if arch == Arch::Llama {
                    RopeLayout::AdjacentPairs
                } else {
                    RopeLayout::RotateHalf
                },
            },
            sliding_window: vec![None; n_layers],
            qkv_bias: h.tensor("blk.0.attn_q.bias").is_some(),
            o_bias: h.tensor("blk.0.attn_output.bias").is_some(),
            mlp_bias: false,
            qk_norm: h.tensor("blk.0.attn_q_norm.weight").is_some(),
            mlp: MlpKind::SwiGlu,
            tied_embeddings: h.tensor("output.weight").is_none(),
        };
        spec.check(file)?;
        Ok(spec)
    }

    /// Sizes that must agree.
    fn check(&self, file: &Path) -> Result<()> {
        let bad = |d: String| Err(format_err(file, d));
        if self.n_layers == 0 || self.hidden == 0 || self.vocab == 0 || self.ffn == 0 {
            return bad(format!(
                "layers {}, hidden {}, ffn {}, vocab {} must all be positive",
                self.n_layers, self.hidden, self.ffn, self.vocab
            ));
        }
        if self.n_heads == 0
            || self.n_kv_heads == 0
            || self.head_dim == 0
            || !self.n_heads.is_multiple_of(self.n_kv_heads)
        {
            return bad(format!(
                "{} heads / {} KV heads of {} values do not group",
                self.n_heads, self.n_kv_heads, self.head_dim
            ));
        }
        if self.arch == Arch::Gpt2 && self.n_heads * self.head_dim != self.hidden {
            return bad(format!(
                "{} heads do not divide hidden size {}",
                self.n_heads, self.hidden
            ));
        }
        if let Positions::Rope { config, .. } = &self.positions
            && (config.rotary_dim == 0
                || config.rotary_dim > self.head_dim
                || !config.rotary_dim.is_multiple_of(2))
        {
            return bad(format!(
                "{} rotary dimensions for heads of {}",
                config.rotary_dim, self.head_dim
            ));
        }
        if self.sliding_window.contains(&Some(0)) {
            return bad("a sliding window of 0 positions".into());
        }
        // Positions are i32 on the device; a prompt needs one and generation another.
        if !(2..=i32::MAX as usize).contains(&self.max_positions) {
            return bad(format!(
                "a context of {} positions (2 to {} are accepted)",
                self.max_positions,
                i32::MAX
            ));
        }
        if self
            .checked_parameter_count()
            .is_none_or(|n| n > MAX_PARAMETERS)
        {
            return bad(format!(
                "sizes (layers {}, hidden {}, ffn {}, {} heads of {}, vocab {}) imply more than \
                 2^44 parameters",
                self.n_layers, self.hidden, self.ffn, self.n_heads, self.head_dim, self.vocab
            ));
        }
        Ok(())
    }

    /// Parameters (weights and biases, the LM head counted once when tied).
    pub fn parameter_count(&self) -> usize {
        // A checked spec's count fits (at most 2^44).
        self.checked_parameter_count().unwrap_or(usize::MAX)
    }

    /// [`ModelSpec::parameter_count`], `None` where the sizes overflow.
    fn checked_parameter_count(&self) -> Option<usize> {
        let (h, q, kv) = (
            self.hidden,
            self.n_heads.checked_mul(self.head_dim)?,
            self.n_kv_heads.checked_mul(self.head_dim)?,
        );
        let sum =
            |xs: &[Option<usize>]| xs.iter().try_fold(0usize, |acc, x| acc.checked_add((*x)?));
        let mul = |a: usize, b: usize| a.checked_mul(b);
        let flag = |on: bool, x: Option<usize>| if on { x } else { Some(0) };
        let norm = mul(h, if self.norm == NormKind::Layer { 2 } else { 1 })?;
        let qkv = sum(&[Some(q), mul(kv, 2)])?;
        let attn = sum(&[
            mul(h, qkv),
            mul(q, h),
            flag(self.qkv_bias, Some(qkv)),
            flag(self.o_bias, Some(h)),
            flag(self.qk_norm, mul(self.head_dim, 2)),
        ])?;
        let mlp = sum(&[
            mul(h, self.ffn)?.checked_mul(match self.mlp {
                MlpKind::SwiGlu => 3,
                MlpKind::GeluTanh => 2,
            }),
            flag(self.mlp_bias, self.ffn.checked_add(h)),
        ])?;
        let layer = sum(&[mul(norm, 2), Some(attn), Some(mlp)])?;
        sum(&[
            mul(self.n_layers, layer),
            mul(self.vocab, h),
            flag(
                self.positions == Positions::Learned,
                mul(self.max_positions, h),
            ),
            Some(norm),
            flag(!self.tied_embeddings, mul(self.vocab, h)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Result<ModelSpec> {
        ModelSpec::from_config_json(json, Path::new("config.json"))
    }

    #[test]
    fn llama32_1b_legacy_config() {
        let s = spec(
            r#"{"model_type":"llama","hidden_size":2048,"intermediate_size":8192,
            "num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,
            "head_dim":64,"rms_norm_eps":1e-5,"rope_theta":500000.0,"vocab_size":128256,
            "max_position_embeddings":131072,"tie_word_embeddings":true,"hidden_act":"silu",
            "rope_scaling":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
            "original_max_position_embeddings":8192,"rope_type":"llama3"}}"#,
        )
        .unwrap();
        assert_eq!(
            (s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim),
            (16, 32, 8, 64)
        );
        assert!(s.tied_embeddings && !s.qkv_bias && !s.qk_norm);
        let Positions::Rope { config, layout } = s.positions else {
            panic!("rope expected")
        };
        assert_eq!(layout, RopeLayout::RotateHalf);
        assert_eq!(config.base, 500000.0);
        assert_eq!(
            config.scaling,
            RopeScaling::Llama3 {
                factor: 32.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position: 8192
            }
        );
        // Llama-3.2-1B has 1.236e9 parameters.
        assert_eq!(s.parameter_count(), 1_235_814_400);
    }

    #[test]
    fn transformers5_rope_parameters_and_qwen_options() {
        let s = spec(
            r#"{"model_type":"qwen3","hidden_size":1024,"intermediate_size":3072,
            "num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,
            "head_dim":128,"rms_norm_eps":1e-6,"vocab_size":151936,"tie_word_embeddings":true,
            "rope_parameters":{"rope_type":"default","rope_theta":1000000.0},
            "use_sliding_window":false,"sliding_window":null}"#,
        )
        .unwrap();
        assert!(s.qk_norm && !s.qkv_bias);
        assert_eq!(s.head_dim, 128);
        assert!(s.sliding_window.iter().all(Option::is_none));
        let Positions::Rope { config, .. } = s.positions else {
            panic!("rope expected")
        };
        assert_eq!((config.base, config.rotary_dim), (1e6, 128));
        let q = spec(
            r#"{"model_type":"qwen2","hidden_size":896,"intermediate_size":4864,
            "num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,
            "vocab_size":151936,"use_sliding_window":true,"sliding_window":4096,
            "layer_types":["full_attention","sliding_attention","full_attention",
            "full_attention","full_attention","full_attention","full_attention",
            "full_attention","full_attention","full_attention","full_attention",
            "full_attention","full_attention","full_attention","full_attention",
            "full_attention","full_attention","full_attention","full_attention",
            "full_attention","full_attention","full_attention","full_attention",
            "full_attention"]}"#,
        )
        .unwrap();
        assert!(q.qkv_bias && !q.o_bias);
        assert_eq!(q.sliding_window[1], Some(4096));
        assert_eq!(q.sliding_window[0], None);
        // Qwen2.5-0.5B: 494 M parameters with the tied head.
        let mut tied = q.clone();
        tied.tied_embeddings = true;
        assert_eq!(tied.parameter_count(), 494_032_768);
    }

    #[test]
    fn gpt2_and_mistral() {
        let g = spec(
            r#"{"model_type":"gpt2","n_embd":768,"n_head":12,"n_layer":12,"n_positions":1024,
            "vocab_size":50257,"layer_norm_epsilon":1e-5,"activation_function":"gelu_new"}"#,
        )
        .unwrap();
        assert_eq!((g.ffn, g.head_dim, g.norm), (3072, 64, NormKind::Layer));
        assert!(g.tied_embeddings && g.qkv_bias && g.o_bias && g.mlp_bias);
        assert_eq!(g.positions, Positions::Learned);
        // GPT-2 small: 124,439,808 parameters.
        assert_eq!(g.parameter_count(), 124_439_808);
        let m = spec(
            r#"{"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,
            "num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":8,
            "vocab_size":32000,"sliding_window":4096}"#,
        )
        .unwrap();
        assert_eq!(m.sliding_window, vec![Some(4096), Some(4096)]);
    }

    #[test]
    fn clear_errors() {
        let e = spec(r#"{"model_type":"bert","architectures":["BertModel"]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bert") && e.contains("supported: gpt2, llama"),
            "{e}"
        );
        let e = spec(r#"{"model_type":"llama","hidden_size":64}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("intermediate_size") || e.contains("num_attention_heads"),
            "{e}"
        );
        let e = spec(
            r#"{"model_type":"llama","hidden_size":64,"intermediate_size":128,
            "num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,
            "vocab_size":10}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("do not group"), "{e}");
        let e = spec(
            r#"{"model_type":"llama","hidden_size":64,"intermediate_size":128,
            "num_hidden_layers":1,"num_attention_heads":4,"vocab_size":10,
            "rope_scaling":{"rope_type":"longrope"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("longrope"), "{e}");
        assert!(spec("{not json").unwrap_err().to_string().contains("JSON"));
    }

    /// Sizes that would overflow or exhaust memory are refused before anything is sized from
    /// them.
    #[test]
    fn absurd_sizes_are_errors() {
        let llama = |extra: &str| {
            spec(&format!(
                r#"{{"model_type":"llama","hidden_size":64,"intermediate_size":128,
                "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10{extra}}}"#
            ))
        };
        llama("").unwrap();
        let e = |extra: &str| llama(extra).unwrap_err().to_string();
        // The layer count is checked before per-layer tables are built from it.
        let msg = e(r#","num_hidden_layers":18446744073709551615"#);
        assert!(msg.contains("at most 1024"), "{msg}");
        let msg = e(r#","num_hidden_layers":1000000000000,"model_type":"mistral""#);
        assert!(msg.contains("at most 1024"), "{msg}");
        for ctx in ["0", "1", "1000000000000"] {
            let msg = e(&format!(r#","max_position_embeddings":{ctx}"#));
            assert!(msg.contains("context"), "{ctx}: {msg}");
        }
        let msg = e(
            r#","num_attention_heads":4294967296,"num_key_value_heads":4294967296,
            "head_dim":4294967296"#,
        );
        assert!(msg.contains("parameters"), "{msg}");
        let msg = e(r#","vocab_size":1000000000000000"#);
        assert!(msg.contains("parameters"), "{msg}");
        let gpt2 = spec(
            r#"{"model_type":"gpt2","n_embd":4611686018427387904,"n_head":1,"n_layer":1,
            "vocab_size":10,"n_positions":16}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(gpt2.contains("n_embd"), "{gpt2}");
    }
}
