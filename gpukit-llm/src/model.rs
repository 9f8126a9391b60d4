//! Llama-architecture models (`general.architecture = "llama"`: RMSNorm, RoPE, grouped-query
//! attention, SwiGLU MLP, tied or separate LM head) read from GGUF, and their forward pass on
//! gpukit-ops tensors.
//!
//! This is the reference path: weights are dequantized to f32 when loaded and every op runs on
//! the device given (the CPU today; the CUDA path — quantized weights kept on the device, bf16
//! compute, the decode step captured as a graph — is the next step). GGUF stores Q/K weights
//! permuted for adjacent-pair RoPE (llama.cpp's convention), so RoPE is applied in that layout.

use std::path::Path;

use gpukit_ops::attention::{AttentionMask, sdpa};
use gpukit_ops::kv_cache::KvCache;
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::quant::QuantFormat;
use gpukit_ops::rope::{RopeConfig, RopeLayout, RopeScaling, rope_inplace};
use gpukit_ops::{BinaryOp, DType, Device, Tensor, UnaryOp};

use crate::gguf::{GgmlType, GgufFile, GgufHeader};
use crate::le::{Float, f32s};
use crate::{Error, Result};

/// Architectures this module runs.
pub const SUPPORTED_ARCHITECTURES: [&str; 1] = ["llama"];

/// A Llama model's hyperparameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Transformer blocks.
    pub n_layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// MLP inner size.
    pub ffn: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Values per head.
    pub head_dim: usize,
    /// Rotated dimensions per head.
    pub rotary_dim: usize,
    /// RoPE base.
    pub rope_base: f64,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Vocabulary size.
    pub vocab: usize,
    /// Trained context length.
    pub context_length: usize,
}

impl LlamaConfig {
    /// Reads the hyperparameters from GGUF metadata (`file` names it in errors).
    ///
    /// # Errors
    /// [`Error::Format`] for an architecture not supported (the message lists those that are) or
    /// inconsistent sizes; [`Error::Missing`] for absent keys.
    pub fn from_gguf(h: &GgufHeader, file: &Path) -> Result<LlamaConfig> {
        let arch = h
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .unwrap_or("(none)");
        if !SUPPORTED_ARCHITECTURES.contains(&arch) {
            return Err(Error::Format {
                file: file.to_path_buf(),
                detail: format!(
                    "architecture \"{arch}\" is not supported (supported: {})",
                    SUPPORTED_ARCHITECTURES.join(", ")
                ),
            });
        }
        let key = |k: &str| format!("{arch}.{k}");
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
        let n_heads = int("attention.head_count")?;
        let n_kv_heads = int("attention.head_count_kv").unwrap_or(n_heads);
        let hidden = int("embedding_length")?;
        if n_heads == 0 || n_kv_heads == 0 || hidden % n_heads != 0 || n_heads % n_kv_heads != 0 {
            return Err(Error::Format {
                file: file.to_path_buf(),
                detail: format!(
                    "{n_heads} heads / {n_kv_heads} KV heads do not divide hidden size {hidden}"
                ),
            });
        }
        let head_dim = hidden / n_heads;
        let vocab = h
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .map(<[_]>::len)
            .ok_or_else(|| missing("tokenizer.ggml.tokens".into()))?;
        Ok(LlamaConfig {
            n_layers: int("block_count")?,
            hidden,
            ffn: int("feed_forward_length")?,
            n_heads,
            n_kv_heads,
            head_dim,
            rotary_dim: int("rope.dimension_count").unwrap_or(head_dim),
            rope_base: h
                .get(&key("rope.freq_base"))
                .and_then(|v| v.as_f64())
                .unwrap_or(10_000.0),
            rms_eps: h
                .get(&key("attention.layer_norm_rms_epsilon"))
                .and_then(|v| v.as_f64())
                .ok_or_else(|| missing(key("attention.layer_norm_rms_epsilon")))?
                as f32,
            vocab,
            context_length: int("context_length").unwrap_or(2048),
        })
    }
}

struct Layer {
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    ffn_norm: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
}

/// A loaded Llama model.
pub struct Llama {
    config: LlamaConfig,
    device: Device,
    embedding: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    /// `None`: tied to the embedding.
    output: Option<Tensor>,
    inv_freq: Tensor,
}

impl std::fmt::Debug for Llama {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llama")
            .field("config", &self.config)
            .finish()
    }
}

/// One conversation's state: the KV caches and the next position.
#[derive(Debug)]
pub struct Session {
    caches: Vec<KvCache>,
    pos: usize,
}

/// A GGUF tensor dequantized to f32 `shape` (row-major) on `device`.
fn load_f32(f: &GgufFile, name: &str, shape: &[usize], device: &Device) -> Result<Tensor> {
    let (info, bytes) = f.tensor(name)?;
    let bad = |detail: String| Error::Format {
        file: f.path().to_path_buf(),
        detail: format!("tensor `{name}`: {detail}"),
    };
    if info.shape() != shape {
        return Err(bad(format!(
            "shape {:?}, the config needs {shape:?}",
            info.shape()
        )));
    }
    let out = match info.ggml_type {
        GgmlType::F32 => f32s(Float::F32, bytes),
        GgmlType::F16 => f32s(Float::F16, bytes),
        GgmlType::BF16 => f32s(Float::BF16, bytes),
        t => {
            let format = match t {
                GgmlType::Q8_0 => QuantFormat::Q8_0,
                GgmlType::Q4_0 => QuantFormat::Q4_0,
                GgmlType::Q4_1 => QuantFormat::Q4_1,
                GgmlType::Q4K => QuantFormat::Q4K,
                GgmlType::Q5K => QuantFormat::Q5K,
                GgmlType::Q6K => QuantFormat::Q6K,
                other => return Err(bad(format!("type {} cannot be loaded yet", other.name()))),
            };
            let mut out = vec![0f32; info.numel() as usize];
            gpukit_ops::quant::dequantize(format, bytes, &mut out)
                .map_err(|e| bad(e.to_string()))?;
            out
        }
    };
    Tensor::from_slice(&out, shape, device).map_err(|e| bad(format!("upload: {e}")))
}

fn op_err(e: gpukit_ops::Error) -> Error {
    Error::Format {
        file: "forward pass".into(),
        detail: e.to_string(),
    }
}

impl Llama {
    /// Loads a Llama model from a GGUF file onto `device`.
    ///
    /// # Errors
    /// As [`LlamaConfig::from_gguf`]; [`Error::Missing`] for an absent tensor; [`Error::Format`]
    /// for a tensor whose shape does not match the config or whose type cannot be loaded.
    pub fn from_gguf(f: &GgufFile, device: &Device) -> Result<Llama> {
        let c = LlamaConfig::from_gguf(f.header(), f.path())?;
        let load = |name: &str, shape: &[usize]| load_f32(f, name, shape, device);
        let (h, q, kv) = (c.hidden, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim);
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let p = |t: &str| format!("blk.{i}.{t}.weight");
            layers.push(Layer {
                attn_norm: load(&p("attn_norm"), &[h])?,
                wq: load(&p("attn_q"), &[q, h])?,
                wk: load(&p("attn_k"), &[kv, h])?,
                wv: load(&p("attn_v"), &[kv, h])?,
                wo: load(&p("attn_output"), &[h, q])?,
                ffn_norm: load(&p("ffn_norm"), &[h])?,
                w_gate: load(&p("ffn_gate"), &[c.ffn, h])?,
                w_up: load(&p("ffn_up"), &[c.ffn, h])?,
                w_down: load(&p("ffn_down"), &[h, c.ffn])?,
            });
        }
        let output = if f.header().tensor("output.weight").is_some() {
            Some(load("output.weight", &[c.vocab, h])?)
        } else {
            None
        };
        let table = RopeConfig {
            rotary_dim: c.rotary_dim,
            base: c.rope_base,
            scaling: RopeScaling::None,
        }
        .table(c.context_length)
        .map_err(op_err)?;
        Ok(Llama {
            embedding: load("token_embd.weight", &[c.vocab, h])?,
            norm: load("output_norm.weight", &[h])?,
            inv_freq: Tensor::from_slice(&table.inv_freq, &[table.inv_freq.len()], device)
                .map_err(op_err)?,
            layers,
            output,
            device: device.clone(),
            config: c,
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// A new conversation with room for `max_len` tokens.
    ///
    /// # Errors
    /// Memory errors.
    pub fn session(&self, max_len: usize) -> Result<Session> {
        let c = &self.config;
        let caches = (0..c.n_layers)
            .map(|_| KvCache::new(c.n_kv_heads, max_len, c.head_dim, DType::F32, &self.device))
            .collect::<gpukit_ops::Result<Vec<_>>>()
            .map_err(op_err)?;
        Ok(Session { caches, pos: 0 })
    }

    /// Runs `tokens` (the prompt, or the next token) through the model after what `session`
    /// holds and returns the logits of the last one.
    ///
    /// # Errors
    /// [`Error::Format`] for an id outside the vocabulary or a full session; op errors.
    pub fn forward(&self, session: &mut Session, tokens: &[u32]) -> Result<Vec<f32>> {
        let c = &self.config;
        let t = tokens.len();
        if t == 0 {
            return Err(Error::Format {
                file: "forward pass".into(),
                detail: "no tokens to run".into(),
            });
        }
        let dev = &self.device;
        let ids: Vec<i32> = tokens.iter().map(|&i| i as i32).collect();
        let ids = Tensor::from_slice(&ids, &[t], dev).map_err(op_err)?;
        let pos: Vec<i32> = (session.pos..session.pos + t).map(|p| p as i32).collect();
        let positions = Tensor::from_slice(&pos, &[t], dev).map_err(op_err)?;
        let scale = 1.0 / (c.head_dim as f32).sqrt();
        let mask = AttentionMask {
            causal: true,
            ..Default::default()
        };
        let lin = |x: &Tensor, w: &Tensor| ops::linear(x, w, None, Activation::None);
        let mut run = || -> gpukit_ops::Result<Vec<f32>> {
            let mut x = ops::embedding(&self.embedding, &ids)?;
            for (layer, cache) in self.layers.iter().zip(session.caches.iter_mut()) {
                let h = ops::rms_norm(&x, &layer.attn_norm, c.rms_eps)?;
                let mut q = lin(&h, &layer.wq)?.reshape(&[t, c.n_heads, c.head_dim])?;
                let mut k = lin(&h, &layer.wk)?.reshape(&[t, c.n_kv_heads, c.head_dim])?;
                let v = lin(&h, &layer.wv)?.reshape(&[t, c.n_kv_heads, c.head_dim])?;
                rope_inplace(
                    &mut q,
                    &positions,
                    &self.inv_freq,
                    1.0,
                    RopeLayout::AdjacentPairs,
                )?;
                rope_inplace(
                    &mut k,
                    &positions,
                    &self.inv_freq,
                    1.0,
                    RopeLayout::AdjacentPairs,
                )?;
                cache.append(&k, &v)?;
                let len = cache.len();
                let heads_first = |x: Tensor, heads: usize, n: usize| {
                    x.contiguous()?.reshape(&[1, heads, n, c.head_dim])
                };
                let q4 = heads_first(q.transpose(0, 1)?, c.n_heads, t)?;
                let k4 = heads_first(cache.keys()?, c.n_kv_heads, len)?;
                let v4 = heads_first(cache.values()?, c.n_kv_heads, len)?;
                let o = sdpa(&q4, &k4, &v4, scale, mask)?
                    .reshape(&[c.n_heads, t, c.head_dim])?
                    .transpose(0, 1)?
                    .contiguous()?
                    .reshape(&[t, c.n_heads * c.head_dim])?;
                x = ops::binary(BinaryOp::Add, &x, &lin(&o, &layer.wo)?)?;
                let h = ops::rms_norm(&x, &layer.ffn_norm, c.rms_eps)?;
                let gate = ops::unary(UnaryOp::Silu, &lin(&h, &layer.w_gate)?)?;
                let act = ops::binary(BinaryOp::Mul, &gate, &lin(&h, &layer.w_up)?)?;
                x = ops::binary(BinaryOp::Add, &x, &lin(&act, &layer.w_down)?)?;
            }
            let last = x.narrow(0, t - 1, 1)?;
            let h = ops::rms_norm(&last, &self.norm, c.rms_eps)?;
            let logits = lin(&h, self.output.as_ref().unwrap_or(&self.embedding))?;
            logits.to_vec::<f32>()
        };
        let logits = run().map_err(op_err)?;
        session.pos += t;
        Ok(logits)
    }
}
