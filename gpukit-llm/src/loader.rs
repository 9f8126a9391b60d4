//! Loading a [`Model`]: its weights by role from a GGUF file or an HF safetensors checkpoint,
//! checked against the [`ModelSpec`], converted to the compute dtype and placed on the device.
//!
//! Weights are stored in the compute dtype chosen at load (f32 on the CPU; bf16 by default on
//! CUDA). GGUF block-quantized weights stay quantized on both devices: decode steps read them
//! with the quantized GEMV (a quarter to an eighth of the dense bytes, which is what bounds a
//! decode step), longer inputs dequantize one matrix at a time into a scratch tensor for the
//! GEMM. A tied, quantized embedding is also kept as blocks for the LM head. GGUF Llama files
//! store Q/K rows permuted for adjacent-pair RoPE (llama.cpp's convention); RoPE is applied in
//! that layout rather than rewriting the weights. Each layer's decode-step fusions are chosen
//! here, once (`LayerWeights::plan`).

use std::path::Path;

use gpukit_ops::ops;
use gpukit_ops::quant::QuantFormat;
use gpukit_ops::{DType, Device, Tensor};

use crate::checkpoint::Checkpoint;
use crate::gguf::{GgmlType, GgufFile};
use crate::layers::{Layer, LayerWeights, Linear, Norm, Weight};
use crate::le::{self, Float, f32s};
use crate::model::Model;
use crate::spec::{Arch, ModelSpec, Positions};
use crate::{Error, Result};

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
    /// Whether the hidden row fits the pre-norm kernels the decode step fuses norms into.
    fn pre_norm_fits(&self) -> bool {
        ops::pre_norm_row_fits(self.spec.hidden, self.dtype)
    }

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

    /// An op or memory error making tensor `name`, with the file and the tensor named.
    fn tensor_err(&self, name: &str, source: gpukit_ops::Error) -> Error {
        Error::Tensor {
            file: self.file().to_path_buf(),
            name: name.to_string(),
            source: Box::new(source),
        }
    }

    /// f32 values of `name` as a compute-dtype tensor on the device.
    fn upload(&self, name: &str, values: &[f32], shape: &[usize]) -> Result<Tensor> {
        match le::upload(values, shape, self.dtype, self.device) {
            Some(r) => r.map_err(|e| self.tensor_err(name, e)),
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
                            .map_err(|e| self.tensor_err(name, e))?;
                        out
                    }
                })
            }
            Source::SafeTensors { ck, prefix, .. } => {
                let full = format!("{prefix}{name}");
                let t = ck.load(&full, DType::F32, &Device::Cpu)?;
                self.check_shape(name, t.shape(), shape)?;
                t.to_vec::<f32>().map_err(|e| self.tensor_err(name, e))
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
                            .map_err(|e| self.tensor_err(w, e))?,
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
            return LayerWeights {
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
            }
            .plan(s.mlp, self.pre_norm_fits(), self.device)
            .map_err(|e| self.tensor_err(&p("attn"), e));
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
        LayerWeights {
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
        }
        .plan(s.mlp, self.pre_norm_fits(), self.device)
        .map_err(|e| self.tensor_err(&name("self_attn", "attn", "weight"), e))
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
                let table = config.table(s.max_positions)?;
                let mut inv_freq = table.inv_freq;
                // Llama 3 GGUF files carry the `llama3` scaling as per-frequency divisors.
                if gguf && self.has("rope_freqs.weight") {
                    let factors = self.host_f32("rope_freqs.weight", &[inv_freq.len()])?;
                    for (f, d) in inv_freq.iter_mut().zip(factors) {
                        *f /= d;
                    }
                }
                let t = Tensor::from_slice(&inv_freq, &[inv_freq.len()], self.device)?;
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
            Err(Error::Invalid {
                what: "load options",
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
}
