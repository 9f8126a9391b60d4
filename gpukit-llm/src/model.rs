//! A decoder-only transformer built from a [`ModelSpec`] — GPT-2, Llama, Mistral, Qwen2, Qwen3 —
//! with weights from an HF safetensors checkpoint or a GGUF file, and its forward pass on
//! gpukit-ops tensors (CPU or CUDA).
//!
//! Weights are stored in the compute dtype chosen at load (f32 on the CPU; bf16 by default on
//! CUDA). GGUF block-quantized weights stay quantized on both devices: decode steps read them
//! with the quantized GEMV (a quarter to an eighth of the dense bytes, which is what bounds a
//! decode step), longer inputs dequantize one matrix at a time into a scratch tensor for the
//! GEMM. A tied, quantized embedding is also kept as blocks for the LM head. GGUF Llama files
//! store Q/K rows permuted for adjacent-pair RoPE
//! (llama.cpp's convention); RoPE is applied in that layout rather than rewriting the weights.
//!
//! The attention reads the preallocated KV cache in place (`[kv_heads, max_len, head_dim]`
//! views, no copies), grouped-query heads without replication.

use std::path::Path;

use gpukit_ops::attention::{AttentionMask, sdpa_kv};
use gpukit_ops::kv_cache::{KvCache, KvLayout};
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::quant::{QuantFormat, dequantize_tensor};
use gpukit_ops::rope::{RopeLayout, rope_inplace};
use gpukit_ops::{BinaryOp, DType, Device, Tensor, UnaryOp};

use crate::checkpoint::Checkpoint;
use crate::gguf::{GgmlType, GgufFile};
use crate::le::{self, Float, f32s};
use crate::spec::{Arch, MlpKind, ModelSpec, NormKind, Positions};
use crate::{Error, Result};

/// A linear layer's weight `[out, in]`: dense in the compute dtype, or a block-quantized
/// tensor of GGUF blocks.
pub(crate) enum Weight {
    Dense(Tensor),
    Quant(Tensor),
}

/// `y = x · Wᵀ + b`.
pub(crate) struct Linear {
    pub(crate) w: Weight,
    pub(crate) b: Option<Tensor>,
}

impl Linear {
    /// `x [.., in]` → `[.., out]`, with `act` fused where the GEMM can fuse it.
    fn forward(&self, x: &Tensor, act: Activation) -> gpukit_ops::Result<Tensor> {
        match &self.w {
            Weight::Dense(w) => ops::linear(x, w, self.b.as_ref(), act),
            Weight::Quant(q) => {
                let (n, k) = (q.shape()[0], q.shape()[1]);
                let rows = x.numel() / k.max(1);
                let mut shape = x.shape().to_vec();
                if let Some(last) = shape.last_mut() {
                    *last = n;
                }
                let y = if rows == 1 {
                    let out = Tensor::empty(&[1, n], x.dtype(), &x.device())?;
                    let scratch = Tensor::empty(&[n], x.dtype(), &x.device())?;
                    self.forward_into(&x.reshape(&[1, k])?, act, &out, &scratch)?;
                    out.reshape(&shape)?
                } else {
                    let w = dequantize_tensor(q, x.dtype())?;
                    ops::linear(x, &w, self.b.as_ref(), act)?
                };
                Ok(y)
            }
        }
    }
}

/// RMSNorm or LayerNorm over the last dimension.
pub(crate) struct Norm {
    pub(crate) w: Tensor,
    pub(crate) b: Option<Tensor>,
    pub(crate) kind: NormKind,
    pub(crate) eps: f32,
}

impl Norm {
    fn forward(&self, x: &Tensor) -> gpukit_ops::Result<Tensor> {
        let mut out = Tensor::empty(x.shape(), x.dtype(), &x.device())?;
        self.forward_into(x, &mut out)?;
        Ok(out)
    }
}

pub(crate) struct Layer {
    pub(crate) attn_norm: Norm,
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) o: Linear,
    pub(crate) q_norm: Option<Norm>,
    pub(crate) k_norm: Option<Norm>,
    pub(crate) mlp_norm: Norm,
    /// SwiGLU's gate (None for GPT-2's MLP).
    pub(crate) gate: Option<Linear>,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
    /// q, k and v stacked `[q + 2·kv, hidden]` (with their biases) when all three are dense:
    /// `q`, `k`, `v` are then row views of it. The decode step runs one GEMV on it.
    pub(crate) qkv: Option<Linear>,
    /// gate and up stacked `[2·ffn, hidden]` when both are dense, unbiased and the rows fit the
    /// SwiGLU GEMV's 16-byte vectors: `gate` and `up` are then row views of it.
    pub(crate) gate_up: Option<Tensor>,
}

impl Layer {
    /// Stacks the projections that read the same input ([`Layer::qkv`], [`Layer::gate_up`])
    /// and moves every projection to `device`. The loader stages the parts it means to stack
    /// in host memory, so they are stacked there and uploaded once: stacking parts already on
    /// the device would leave their freed blocks as holes in the pool's segments (hundreds of
    /// MiB reserved and never used, for a 0.5B model).
    fn fuse(mut self, device: &Device) -> gpukit_ops::Result<Layer> {
        self.qkv =
            stack_rows(&mut [&mut self.q, &mut self.k, &mut self.v], device)?.map(|(w, b)| {
                Linear {
                    w: Weight::Dense(w),
                    b,
                }
            });
        if let Some(gate) = &mut self.gate {
            let fits = matches!(&gate.w, Weight::Dense(w)
                if w.shape()[1] * w.dtype().size_in_bytes() % 16 == 0);
            if fits && gate.b.is_none() && self.up.b.is_none() {
                self.gate_up = stack_rows(&mut [gate, &mut self.up], device)?.map(|(w, _)| w);
            }
        }
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.up]
            .into_iter()
            .chain(self.gate.as_mut())
        {
            l.move_to(device)?;
        }
        Ok(self)
    }
}

impl Linear {
    /// Moves the weight and bias to `device` (nothing when they are there).
    fn move_to(&mut self, device: &Device) -> gpukit_ops::Result<()> {
        match &mut self.w {
            Weight::Dense(w) | Weight::Quant(w) => *w = w.to_device(device)?,
        }
        if let Some(b) = &mut self.b {
            *b = b.to_device(device)?;
        }
        Ok(())
    }
}

/// Stacks dense linear layers of the same input width and dtype into one `[Σ out, in]` weight
/// (biases into one `[Σ out]`, when all have one) and makes each part a row view of it, so the
/// memory is not doubled. The stacking happens where the parts are; the result is then moved
/// to `device`. `None`, parts untouched, when they do not all qualify.
fn stack_rows(
    parts: &mut [&mut Linear],
    device: &Device,
) -> gpukit_ops::Result<Option<(Tensor, Option<Tensor>)>> {
    let dense: Vec<&Tensor> = parts
        .iter()
        .filter_map(|p| match &p.w {
            Weight::Dense(w) => Some(w),
            Weight::Quant(_) => None,
        })
        .collect();
    let Some(first) = dense.first() else {
        return Ok(None);
    };
    let biased = parts.iter().filter(|p| p.b.is_some()).count();
    if dense.len() != parts.len()
        || dense.iter().any(|w| {
            w.rank() != 2 || w.shape()[1] != first.shape()[1] || w.dtype() != first.dtype()
        })
        || (biased != 0 && biased != parts.len())
    {
        return Ok(None);
    }
    let rows: Vec<usize> = dense.iter().map(|w| w.shape()[0]).collect();
    let total: usize = rows.iter().sum();
    let dev = first.device();
    let w = Tensor::empty(&[total, first.shape()[1]], first.dtype(), &dev)?;
    let b = match biased {
        0 => None,
        _ => Some(Tensor::empty(&[total], first.dtype(), &dev)?),
    };
    let mut at = 0;
    for (p, &n) in parts.iter().zip(&rows) {
        if let Weight::Dense(old) = &p.w {
            ops::copy_into(old, &mut w.narrow(0, at, n)?)?;
        }
        if let (Some(b), Some(old)) = (&b, &p.b) {
            ops::copy_into(old, &mut b.narrow(0, at, n)?)?;
        }
        at += n;
    }
    let w = w.to_device(device)?;
    let b = b.map(|b| b.to_device(device)).transpose()?;
    let mut at = 0;
    for (p, n) in parts.iter_mut().zip(rows) {
        p.w = Weight::Dense(w.narrow(0, at, n)?);
        if let (Some(b), Some(_)) = (&b, &p.b) {
            p.b = Some(b.narrow(0, at, n)?);
        }
        at += n;
    }
    Ok(Some((w, b)))
}

/// A loaded model.
pub struct Model {
    pub(crate) spec: ModelSpec,
    pub(crate) device: Device,
    pub(crate) dtype: DType,
    pub(crate) embedding: Tensor,
    /// GPT-2's learned positions `[max_positions, hidden]`.
    pub(crate) position_embedding: Option<Tensor>,
    pub(crate) layers: Vec<Layer>,
    pub(crate) norm: Norm,
    /// `None`: tied to the embedding.
    pub(crate) head: Option<Linear>,
    /// RoPE: f32 `[rotary_dim / 2]` on the device, the cos/sin scale and the layout.
    pub(crate) rope: Option<(Tensor, f32, RopeLayout)>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("spec", &self.spec)
            .field("dtype", &self.dtype)
            .finish()
    }
}

/// One conversation's state: the KV caches and the next position.
#[derive(Debug)]
pub struct Session {
    caches: Vec<KvCache>,
    pos: usize,
}

impl Session {
    /// Tokens seen so far (the next token's position).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The most tokens the session holds.
    pub fn capacity(&self) -> usize {
        self.caches.first().map_or(0, KvCache::max_len)
    }

    pub(crate) fn caches_mut(&mut self) -> &mut [KvCache] {
        &mut self.caches
    }

    /// Counts `n` more tokens as seen, after a decode step appended them at device positions.
    pub(crate) fn advance(&mut self, n: usize) -> gpukit_ops::Result<()> {
        self.pos += n;
        for c in &mut self.caches {
            c.set_len(self.pos)?;
        }
        Ok(())
    }
}

/// Where the weights come from.
#[derive(Clone, Copy)]
enum Source<'a> {
    Gguf(&'a GgufFile),
    /// A safetensors checkpoint; `prefix` is GPT-2's optional `transformer.`.
    SafeTensors {
        ck: &'a Checkpoint,
        file: &'a Path,
        prefix: &'static str,
    },
}

fn op_err(e: gpukit_ops::Error) -> Error {
    Error::Format {
        file: "forward pass".into(),
        detail: e.to_string(),
    }
}

fn quant_format(t: GgmlType) -> Option<QuantFormat> {
    Some(match t {
        GgmlType::Q8_0 => QuantFormat::Q8_0,
        GgmlType::Q4_0 => QuantFormat::Q4_0,
        GgmlType::Q4_1 => QuantFormat::Q4_1,
        GgmlType::Q4K => QuantFormat::Q4K,
        GgmlType::Q5K => QuantFormat::Q5K,
        GgmlType::Q6K => QuantFormat::Q6K,
        _ => return None,
    })
}

/// Loads tensors by role for one model.
struct Loader<'a> {
    src: Source<'a>,
    spec: &'a ModelSpec,
    dtype: DType,
    dequantize: bool,
    device: &'a Device,
}

impl Loader<'_> {
    fn file(&self) -> &Path {
        match &self.src {
            Source::Gguf(f) => f.path(),
            Source::SafeTensors { file, .. } => file,
        }
    }

    fn bad(&self, name: &str, detail: impl std::fmt::Display) -> Error {
        Error::Format {
            file: self.file().to_path_buf(),
            detail: format!("tensor `{name}`: {detail}"),
        }
    }

    /// f32 values of `name` as a compute-dtype tensor on the device.
    fn upload(&self, name: &str, values: &[f32], shape: &[usize]) -> Result<Tensor> {
        match le::upload(values, shape, self.dtype, self.device) {
            Some(r) => r.map_err(|e| self.bad(name, e)),
            None => Err(self.bad(name, format!("cannot load as {}", self.dtype))),
        }
    }

    fn has(&self, name: &str) -> bool {
        match &self.src {
            Source::Gguf(f) => f.header().tensor(name).is_some(),
            Source::SafeTensors { ck, prefix, .. } => ck.contains(&format!("{prefix}{name}")),
        }
    }

    fn check_shape(&self, name: &str, got: &[usize], want: &[usize]) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(self.bad(name, format!("shape {got:?}, the config needs {want:?}")))
        }
    }

    /// The f32 values of `name`, checked to have `shape` (row-major).
    fn host_f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        match &self.src {
            Source::Gguf(f) => {
                let (info, bytes) = f.tensor(name)?;
                self.check_shape(name, &info.shape(), shape)?;
                Ok(match info.ggml_type {
                    GgmlType::F32 => f32s(Float::F32, bytes),
                    GgmlType::F16 => f32s(Float::F16, bytes),
                    GgmlType::BF16 => f32s(Float::BF16, bytes),
                    t => {
                        let format = quant_format(t).ok_or_else(|| {
                            self.bad(name, format!("type {} cannot be loaded yet", t.name()))
                        })?;
                        let mut out = vec![0f32; info.numel() as usize];
                        gpukit_ops::quant::dequantize(format, bytes, &mut out)
                            .map_err(|e| self.bad(name, e))?;
                        out
                    }
                })
            }
            Source::SafeTensors { ck, prefix, .. } => {
                let full = format!("{prefix}{name}");
                let t = ck.load(&full, DType::F32, &Device::Cpu)?;
                self.check_shape(name, t.shape(), shape)?;
                t.to_vec::<f32>().map_err(|e| self.bad(name, e))
            }
        }
    }

    /// `name` as a dense compute-dtype tensor of `shape` on the device.
    fn dense(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        if let Source::SafeTensors { ck, prefix, .. } = &self.src {
            // Straight from the mapped bytes (bf16 → bf16 without a detour through f32).
            let t = ck.load(&format!("{prefix}{name}"), self.dtype, self.device)?;
            self.check_shape(name, t.shape(), shape)?;
            return Ok(t);
        }
        let v = self.host_f32(name, shape)?;
        self.upload(name, &v, shape)
    }

    /// Whether [`Loader::linear`] keeps tensor `name` as quantized blocks.
    fn stays_quantized(&self, name: &str) -> Result<bool> {
        Ok(match &self.src {
            Source::Gguf(f) if !self.dequantize => {
                quant_format(f.tensor(name)?.0.ggml_type).is_some()
            }
            _ => false,
        })
    }

    /// A linear layer `[out, in]` named `w` (and `b` when `bias`): GGUF blocks stay quantized
    /// unless [`LoadOptions::dequantize`] asks otherwise.
    fn linear(&self, w: &str, b: Option<&str>, out: usize, inp: usize) -> Result<Linear> {
        let weight = match &self.src {
            Source::Gguf(f) if !self.dequantize => {
                let (info, bytes) = f.tensor(w)?;
                self.check_shape(w, &info.shape(), &[out, inp])?;
                match quant_format(info.ggml_type) {
                    Some(format) => Weight::Quant(
                        Tensor::from_blocks(bytes, format, &[out, inp], self.device)
                            .map_err(|e| self.bad(w, e))?,
                    ),
                    None => Weight::Dense(self.dense(w, &[out, inp])?),
                }
            }
            _ => Weight::Dense(self.dense(w, &[out, inp])?),
        };
        let b = match b {
            Some(b) => Some(self.dense(b, &[out])?),
            None => None,
        };
        Ok(Linear { w: weight, b })
    }

    fn norm(&self, w: &str, b: Option<&str>, n: usize) -> Result<Norm> {
        Ok(Norm {
            w: self.dense(w, &[n])?,
            b: match b {
                Some(b) => Some(self.dense(b, &[n])?),
                None => None,
            },
            kind: self.spec.norm,
            eps: self.spec.norm_eps,
        })
    }

    /// GPT-2's `Conv1D` weight (`[in, out]`) transposed to `[out, in]`, split along `out` into
    /// `parts` equal linear layers, with its bias split alike.
    fn conv1d(&self, name: &str, inp: usize, out: usize, parts: usize) -> Result<Vec<Linear>> {
        let w = self.host_f32(&format!("{name}.weight"), &[inp, out])?;
        let b = self.host_f32(&format!("{name}.bias"), &[out])?;
        let part = out / parts;
        (0..parts)
            .map(|p| {
                let mut wt = vec![0f32; part * inp];
                for (o, row) in wt.chunks_exact_mut(inp).enumerate() {
                    for (i, x) in row.iter_mut().enumerate() {
                        *x = w[i * out + p * part + o];
                    }
                }
                let up = |v: &[f32], shape: &[usize]| self.upload(name, v, shape);
                Ok(Linear {
                    w: Weight::Dense(up(&wt, &[part, inp])?),
                    b: Some(up(&b[p * part..(p + 1) * part], &[part])?),
                })
            })
            .collect()
    }

    fn layer(&self, i: usize) -> Result<Layer> {
        let s = self.spec;
        let (h, q, kv) = (s.hidden, s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim);
        if s.arch == Arch::Gpt2 {
            let p = |t: &str| format!("h.{i}.{t}");
            let mut qkv = self.conv1d(&p("attn.c_attn"), h, 3 * h, 3)?.into_iter();
            let mut next = || {
                qkv.next()
                    .ok_or_else(|| self.bad(&p("attn.c_attn"), "split"))
            };
            let (wq, wk, wv) = (next()?, next()?, next()?);
            let mut o = self.conv1d(&p("attn.c_proj"), h, h, 1)?;
            let mut up = self.conv1d(&p("mlp.c_fc"), h, s.ffn, 1)?;
            let mut down = self.conv1d(&p("mlp.c_proj"), s.ffn, h, 1)?;
            let one = |v: &mut Vec<Linear>, n: &str| v.pop().ok_or_else(|| self.bad(n, "split"));
            return Layer {
                attn_norm: self.norm(&p("ln_1.weight"), Some(&p("ln_1.bias")), h)?,
                q: wq,
                k: wk,
                v: wv,
                o: one(&mut o, "c_proj")?,
                q_norm: None,
                k_norm: None,
                mlp_norm: self.norm(&p("ln_2.weight"), Some(&p("ln_2.bias")), h)?,
                gate: None,
                up: one(&mut up, "c_fc")?,
                down: one(&mut down, "c_proj")?,
                qkv: None,
                gate_up: None,
            }
            .fuse(self.device)
            .map_err(|e| self.bad(&p("attn"), e));
        }
        let gguf = matches!(self.src, Source::Gguf(_));
        // (HF name, GGUF name) of each role in layer i.
        let name = |hf: &str, gg: &str, suffix: &str| {
            if gguf {
                format!("blk.{i}.{gg}.{suffix}")
            } else {
                format!("model.layers.{i}.{hf}.{suffix}")
            }
        };
        let lin = |hf: &str, gg: &str, bias: bool, out: usize, inp: usize| {
            let b = bias.then(|| name(hf, gg, "bias"));
            self.linear(&name(hf, gg, "weight"), b.as_deref(), out, inp)
        };
        // The projections `fuse` stacks load into host memory first (dense ones; quantized
        // blocks are never stacked and go straight to the device).
        let host = Loader {
            device: &Device::Cpu,
            ..*self
        };
        let staged = |hf: &str, gg: &str, bias: bool, out: usize, inp: usize| {
            let w = name(hf, gg, "weight");
            let l = if self.stays_quantized(&w)? {
                self
            } else {
                &host
            };
            let b = bias.then(|| name(hf, gg, "bias"));
            l.linear(&w, b.as_deref(), out, inp)
        };
        let qk_norm = |hf: &str, gg: &str| -> Result<Option<Norm>> {
            if s.qk_norm {
                self.norm(&name(hf, gg, "weight"), None, s.head_dim)
                    .map(Some)
            } else {
                Ok(None)
            }
        };
        Layer {
            attn_norm: self.norm(&name("input_layernorm", "attn_norm", "weight"), None, h)?,
            q: staged("self_attn.q_proj", "attn_q", s.qkv_bias, q, h)?,
            k: staged("self_attn.k_proj", "attn_k", s.qkv_bias, kv, h)?,
            v: staged("self_attn.v_proj", "attn_v", s.qkv_bias, kv, h)?,
            o: lin("self_attn.o_proj", "attn_output", s.o_bias, h, q)?,
            q_norm: qk_norm("self_attn.q_norm", "attn_q_norm")?,
            k_norm: qk_norm("self_attn.k_norm", "attn_k_norm")?,
            mlp_norm: self.norm(
                &name("post_attention_layernorm", "ffn_norm", "weight"),
                None,
                h,
            )?,
            gate: Some(staged("mlp.gate_proj", "ffn_gate", s.mlp_bias, s.ffn, h)?),
            up: staged("mlp.up_proj", "ffn_up", s.mlp_bias, s.ffn, h)?,
            down: lin("mlp.down_proj", "ffn_down", s.mlp_bias, h, s.ffn)?,
            qkv: None,
            gate_up: None,
        }
        .fuse(self.device)
        .map_err(|e| self.bad(&name("self_attn", "attn", "weight"), e))
    }

    fn model(self, on_layer: &mut dyn FnMut(usize, usize)) -> Result<Model> {
        let s = self.spec;
        let h = s.hidden;
        let gguf = matches!(self.src, Source::Gguf(_));
        let gpt2 = s.arch == Arch::Gpt2;
        let (embed, pos, norm_w, norm_b, head) = match (gguf, gpt2) {
            (true, _) => (
                "token_embd.weight",
                None,
                "output_norm.weight",
                None,
                "output.weight",
            ),
            (false, true) => (
                "wte.weight",
                Some("wpe.weight"),
                "ln_f.weight",
                Some("ln_f.bias"),
                "lm_head.weight",
            ),
            (false, false) => (
                "model.embed_tokens.weight",
                None,
                "model.norm.weight",
                None,
                "lm_head.weight",
            ),
        };
        let mut layers = Vec::with_capacity(s.n_layers);
        for i in 0..s.n_layers {
            on_layer(i, s.n_layers);
            layers.push(self.layer(i)?);
        }
        let rope = match &s.positions {
            Positions::Rope { config, layout } => {
                let table = config.table(s.max_positions).map_err(op_err)?;
                let mut inv_freq = table.inv_freq;
                // Llama 3 GGUF files carry the `llama3` scaling as per-frequency divisors.
                if gguf && self.has("rope_freqs.weight") {
                    let factors = self.host_f32("rope_freqs.weight", &[inv_freq.len()])?;
                    for (f, d) in inv_freq.iter_mut().zip(factors) {
                        *f /= d;
                    }
                }
                let t = Tensor::from_slice(&inv_freq, &[inv_freq.len()], self.device)
                    .map_err(op_err)?;
                Some((t, table.attention_scale, *layout))
            }
            Positions::Learned => None,
        };
        // A tied head in the file (some checkpoints store both) is the same matrix. A tied head
        // whose GGUF blocks stay quantized is read as such (the dense copy serves the lookup):
        // the head is the largest matrix a decode step reads, and the blocks are a fraction of
        // its dense bytes.
        let head = if !s.tied_embeddings {
            Some(self.linear(head, None, s.vocab, h)?)
        } else if self.stays_quantized(embed)? {
            Some(self.linear(embed, None, s.vocab, h)?)
        } else {
            None
        };
        Ok(Model {
            embedding: self.dense(embed, &[s.vocab, h])?,
            position_embedding: match pos {
                Some(p) => Some(self.dense(p, &[s.max_positions, h])?),
                None => None,
            },
            norm: self.norm(norm_w, norm_b, h)?,
            head,
            rope,
            layers,
            spec: s.clone(),
            device: self.device.clone(),
            dtype: self.dtype,
        })
    }
}

/// How to load a model.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// The compute dtype (default: f32 on the CPU, bf16 on CUDA).
    pub dtype: Option<DType>,
    /// Dequantize GGUF block weights to the compute dtype at load (more memory and slower
    /// decode steps; the prompt's GEMMs skip the per-pass dequantization).
    pub dequantize: bool,
}

impl LoadOptions {
    fn dtype_for(&self, device: &Device) -> Result<DType> {
        let dtype = self.dtype.unwrap_or(match device {
            Device::Cpu => DType::F32,
            Device::Cuda(_) => DType::BF16,
        });
        if matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            Ok(dtype)
        } else {
            Err(Error::Format {
                file: "load options".into(),
                detail: format!("compute dtype {dtype}: use f32, f16 or bf16"),
            })
        }
    }
}

impl Model {
    /// Loads a GGUF model onto `device`; `on_layer(i, n)` is called before each layer loads.
    ///
    /// # Errors
    /// As [`ModelSpec::from_gguf`]; [`Error::Missing`] for an absent tensor; [`Error::Format`]
    /// for a tensor whose shape does not match the spec or whose type cannot be loaded.
    pub fn from_gguf(
        f: &GgufFile,
        device: &Device,
        opts: LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Model> {
        let spec = ModelSpec::from_gguf(f.header(), f.path())?;
        Loader {
            src: Source::Gguf(f),
            spec: &spec,
            dtype: opts.dtype_for(device)?,
            dequantize: opts.dequantize,
            device,
        }
        .model(on_layer)
    }

    /// Loads the model of an HF directory (`config.json` + safetensors) onto `device`, without
    /// its tokenizer (what [`crate::engine::Engine::load`] adds).
    ///
    /// # Errors
    /// [`Error::Io`] for an unreadable `config.json`; as [`ModelSpec::from_config_json`],
    /// [`Checkpoint::open`] and [`Model::from_safetensors`].
    pub fn from_hf_dir(
        dir: &Path,
        device: &Device,
        opts: LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Model> {
        let config = dir.join("config.json");
        let text = std::fs::read_to_string(&config).map_err(|source| Error::Io {
            path: config.clone(),
            source,
        })?;
        let spec = ModelSpec::from_config_json(&text, &config)?;
        Model::from_safetensors(spec, &Checkpoint::open(dir)?, dir, device, opts, on_layer)
    }

    /// Loads an HF checkpoint (`spec` from its `config.json`; `file` names the checkpoint in
    /// errors) onto `device`.
    ///
    /// # Errors
    /// As [`Model::from_gguf`].
    pub fn from_safetensors(
        spec: ModelSpec,
        ck: &Checkpoint,
        file: &Path,
        device: &Device,
        opts: LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Model> {
        // GPT2LMHeadModel saves `transformer.`-prefixed names, GPT2Model bare ones.
        let prefix = if spec.arch == Arch::Gpt2 && ck.contains("transformer.wte.weight") {
            "transformer."
        } else {
            ""
        };
        Loader {
            src: Source::SafeTensors { ck, file, prefix },
            spec: &spec,
            dtype: opts.dtype_for(device)?,
            dequantize: opts.dequantize,
            device,
        }
        .model(on_layer)
    }

    /// The hyperparameters.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The compute dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Where it runs.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Bytes of the weights as stored on the device.
    pub fn weight_bytes(&self) -> usize {
        let t = Tensor::nbytes;
        let lin = |l: &Linear| {
            let (Weight::Dense(w) | Weight::Quant(w)) = &l.w;
            t(w) + l.b.as_ref().map_or(0, t)
        };
        let norm = |n: &Norm| t(&n.w) + n.b.as_ref().map_or(0, t);
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                [&l.q, &l.k, &l.v, &l.o, &l.up, &l.down]
                    .into_iter()
                    .chain(l.gate.as_ref())
                    .map(lin)
                    .sum::<usize>()
                    + norm(&l.attn_norm)
                    + norm(&l.mlp_norm)
                    + l.q_norm.as_ref().map_or(0, norm)
                    + l.k_norm.as_ref().map_or(0, norm)
            })
            .sum();
        layers
            + t(&self.embedding)
            + self.position_embedding.as_ref().map_or(0, t)
            + norm(&self.norm)
            + self.head.as_ref().map_or(0, lin)
    }

    /// A new conversation with room for `max_len` tokens.
    ///
    /// # Errors
    /// [`Error::Format`] if `max_len` exceeds the model's positions; memory errors.
    pub fn session(&self, max_len: usize) -> Result<Session> {
        let s = &self.spec;
        if max_len > s.max_positions {
            return Err(Error::Format {
                file: "session".into(),
                detail: format!(
                    "{max_len} positions requested; the model has {}",
                    s.max_positions
                ),
            });
        }
        let caches = (0..s.n_layers)
            .map(|_| {
                KvCache::new(
                    s.n_kv_heads,
                    max_len,
                    s.head_dim,
                    self.dtype,
                    KvLayout::preferred(&self.device),
                    &self.device,
                )
            })
            .collect::<gpukit_ops::Result<Vec<_>>>()
            .map_err(op_err)?;
        Ok(Session { caches, pos: 0 })
    }

    /// Runs `tokens` (the prompt, or the next token) through the model after what `session`
    /// holds and returns the logits of the last one: `[1, vocab]` in the compute dtype, on the
    /// model's device.
    ///
    /// # Errors
    /// [`Error::Format`] for no tokens, an id outside the vocabulary or a session without room;
    /// op errors.
    pub fn forward(&self, session: &mut Session, tokens: &[u32]) -> Result<Tensor> {
        let s = &self.spec;
        let t = tokens.len();
        let room = session.capacity() - session.pos;
        let bad = |detail: String| Error::Format {
            file: "forward pass".into(),
            detail,
        };
        if t == 0 || t > room {
            return Err(bad(format!(
                "{t} tokens for a session with room for {room} more (1 or more needed)"
            )));
        }
        if let Some(&id) = tokens.iter().find(|&&i| i as usize >= s.vocab) {
            return Err(bad(format!(
                "token id {id} outside the vocabulary of {}",
                s.vocab
            )));
        }
        let dev = &self.device;
        let ids: Vec<i32> = tokens.iter().map(|&i| i as i32).collect();
        let ids = Tensor::from_slice(&ids, &[t], dev).map_err(op_err)?;
        let pos: Vec<i32> = (session.pos..session.pos + t).map(|p| p as i32).collect();
        let positions = Tensor::from_slice(&pos, &[t], dev).map_err(op_err)?;
        let scale = 1.0 / (s.head_dim as f32).sqrt();
        let rope = |x: &mut Tensor| -> gpukit_ops::Result<()> {
            match &self.rope {
                Some((inv_freq, mscale, layout)) => {
                    rope_inplace(x, &positions, inv_freq, *mscale, *layout)
                }
                None => Ok(()),
            }
        };
        let mut run = || -> gpukit_ops::Result<Tensor> {
            let mut x = ops::embedding(&self.embedding, &ids)?;
            if let Some(p) = &self.position_embedding {
                x = ops::binary(BinaryOp::Add, &x, &ops::embedding(p, &positions)?)?;
            }
            for ((layer, cache), window) in self
                .layers
                .iter()
                .zip(session.caches.iter_mut())
                .zip(&s.sliding_window)
            {
                let h = layer.attn_norm.forward(&x)?;
                let heads = |l: &Linear, n: usize| {
                    l.forward(&h, Activation::None)?
                        .reshape(&[t, n, s.head_dim])
                };
                let mut q = heads(&layer.q, s.n_heads)?;
                let mut k = heads(&layer.k, s.n_kv_heads)?;
                let v = heads(&layer.v, s.n_kv_heads)?;
                if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
                    q = qn.forward(&q)?;
                    k = kn.forward(&k)?;
                }
                rope(&mut q)?;
                rope(&mut k)?;
                cache.append(&k, &v)?;
                let mask = AttentionMask {
                    causal: true,
                    sliding_window: *window,
                    alibi: false,
                };
                // [t, heads, d] → [1, heads, t, d] views; the cache is read in place.
                let q4 = q.transpose(0, 1)?.unsqueeze(0)?;
                let k4 = cache.keys()?.unsqueeze(0)?;
                let v4 = cache.values()?.unsqueeze(0)?;
                let o = sdpa_kv(&q4, &k4, &v4, cache.layout(), scale, mask)?
                    .reshape(&[s.n_heads, t, s.head_dim])?
                    .transpose(0, 1)?
                    .reshape(&[t, s.n_heads * s.head_dim])?;
                x = ops::binary(BinaryOp::Add, &x, &layer.o.forward(&o, Activation::None)?)?;
                let h = layer.mlp_norm.forward(&x)?;
                let y = match (&layer.gate, s.mlp) {
                    (Some(gate), MlpKind::SwiGlu) => {
                        let g = ops::unary(UnaryOp::Silu, &gate.forward(&h, Activation::None)?)?;
                        let a = ops::binary(
                            BinaryOp::Mul,
                            &g,
                            &layer.up.forward(&h, Activation::None)?,
                        )?;
                        layer.down.forward(&a, Activation::None)?
                    }
                    _ => {
                        let a = layer.up.forward(&h, Activation::GeluTanh)?;
                        layer.down.forward(&a, Activation::None)?
                    }
                };
                x = ops::binary(BinaryOp::Add, &x, &y)?;
            }
            let last = x.narrow(0, t - 1, 1)?;
            let h = self.norm.forward(&last)?;
            match &self.head {
                Some(head) => head.forward(&h, Activation::None),
                None => ops::linear(&h, &self.embedding, None, Activation::None),
            }
        };
        match run() {
            Ok(logits) => {
                session.pos += t;
                Ok(logits)
            }
            Err(e) => {
                // Leave the session as it was: drop what the failed pass appended.
                for cache in &mut session.caches {
                    if cache.len() > session.pos {
                        cache.truncate(session.pos).map_err(op_err)?;
                    }
                }
                Err(op_err(e))
            }
        }
    }

    /// [`Model::forward`] with the logits as f32 values on the host.
    ///
    /// # Errors
    /// As [`Model::forward`].
    pub fn forward_logits(&self, session: &mut Session, tokens: &[u32]) -> Result<Vec<f32>> {
        let logits = self.forward(session, tokens)?;
        let logits = ops::to_dtype(&logits, DType::F32).map_err(op_err)?;
        logits.to_vec::<f32>().map_err(op_err)
    }
}
