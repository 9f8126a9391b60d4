//! The parts a decoder layer is made of — [`Linear`] (dense or block-quantized weights) and
//! [`Norm`] (RMSNorm or LayerNorm) — and [`Layer`], one decoder layer's weights with its
//! [`LayerPlan`]: how the decode step forms the attention input and the MLP, chosen once when
//! the model is loaded.
//!
//! Every computation here has one form that writes preallocated outputs (`*_into`, what the
//! decode step records into its CUDA graph); the allocating forms the forward pass uses
//! allocate the outputs and call it.

use gpukit_ops::kv_cache::KvCache;
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::quant::{dequantize_tensor, qgemv_into};
use gpukit_ops::rope::{RopeLayout, rope_inplace};
use gpukit_ops::{BinaryOp, Device, Result, Tensor, UnaryOp};

use crate::spec::{MlpKind, NormKind};

/// A linear layer's weight `[out, in]`: dense in the compute dtype, or a block-quantized tensor
/// of GGUF blocks.
pub(crate) enum Weight {
    Dense(Tensor),
    Quant(Tensor),
}

impl Weight {
    /// The weight tensor, whichever kind.
    pub(crate) fn tensor(&self) -> &Tensor {
        let (Weight::Dense(w) | Weight::Quant(w)) = self;
        w
    }
}

/// `y = x · Wᵀ + b`.
pub(crate) struct Linear {
    pub(crate) w: Weight,
    pub(crate) b: Option<Tensor>,
}

impl Linear {
    /// Output features (the weight's rows).
    pub(crate) fn out_features(&self) -> usize {
        self.w.tensor().shape()[0]
    }

    /// `x [.., in]` → `act(x · Wᵀ + b)` `[.., out]`: [`Linear::forward_into`] into a new
    /// tensor.
    pub(crate) fn forward(&self, x: &Tensor, act: Activation) -> Result<Tensor> {
        let n = self.out_features();
        let mut shape = x.shape().to_vec();
        if let Some(last) = shape.last_mut() {
            *last = n;
        }
        let out = Tensor::empty(&shape, x.dtype(), &x.device())?;
        let scratch = match self.w {
            Weight::Quant(_) => Tensor::empty(&[n], x.dtype(), &x.device())?,
            Weight::Dense(_) => out.clone(),
        };
        self.forward_into(x, act, &out, &scratch)?;
        Ok(out)
    }

    /// `out [.., out] = act(x [.., in] · Wᵀ + b)`. A dense weight runs `ops::linear_into` (the
    /// GEMV for up to 8 rows without an activation, cuBLASLt otherwise). A quantized weight
    /// runs the quantized GEMV on its blocks for one row of x, with the bias and activation
    /// applied from `scratch` (at least `out` elements of the dtype) afterwards, so nothing is
    /// allocated; for more rows the matrix is dequantized into a temporary for the GEMM.
    pub(crate) fn forward_into(
        &self,
        x: &Tensor,
        act: Activation,
        out: &Tensor,
        scratch: &Tensor,
    ) -> Result<()> {
        let q = match &self.w {
            Weight::Dense(w) => return ops::linear_into(x, w, self.b.as_ref(), act, out),
            Weight::Quant(q) => q,
        };
        let (n, k) = (q.shape()[0], q.shape()[1]);
        let rows = x.numel() / k.max(1);
        if rows != 1 {
            let w = dequantize_tensor(q, x.dtype())?;
            return ops::linear_into(x, &w, self.b.as_ref(), act, out);
        }
        let (x, out) = (x.reshape(&[1, k])?, out.reshape(&[1, n])?);
        if self.b.is_none() && act == Activation::None {
            return qgemv_into(&x, q, &out);
        }
        let tmp = scratch.narrow(0, 0, n)?.reshape(&[1, n])?;
        qgemv_into(&x, q, &tmp)?;
        let unary = match act {
            Activation::None => None,
            Activation::Relu => Some(UnaryOp::Relu),
            Activation::GeluTanh => Some(UnaryOp::GeluTanh),
        };
        match (&self.b, unary) {
            (Some(bias), None) => ops::binary_into(BinaryOp::Add, &tmp, bias, &out),
            (None, Some(op)) => ops::unary_into(op, &tmp, &out),
            (Some(bias), Some(op)) => {
                ops::binary_into(BinaryOp::Add, &tmp, bias, &out)?;
                ops::unary_into(op, &out, &tmp)?;
                ops::copy_into(&tmp, &out)
            }
            (None, None) => Ok(()),
        }
    }

    /// Moves the weight and bias to `device` (nothing when they are there).
    fn move_to(&mut self, device: &Device) -> Result<()> {
        match &mut self.w {
            Weight::Dense(w) | Weight::Quant(w) => *w = w.to_device(device)?,
        }
        if let Some(b) = &mut self.b {
            *b = b.to_device(device)?;
        }
        Ok(())
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
    /// The norm of `x` into a new tensor.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let out = Tensor::empty(x.shape(), x.dtype(), &x.device())?;
        self.forward_into(x, &out)?;
        Ok(out)
    }

    /// The norm of `x` into `out` (same shape).
    pub(crate) fn forward_into(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        match self.kind {
            NormKind::Rms => ops::rms_norm_into(x, &self.w, self.eps, out),
            NormKind::Layer => ops::layer_norm_into(x, &self.w, self.b.as_ref(), self.eps, out),
        }
    }
}

/// How the decode step forms a layer's attention input: the queries into its query buffer, the
/// keys and values into the layer's KV cache at the device position.
pub(crate) enum AttnInput {
    /// One kernel, `ops::rms_norm_linear_rope_kv_into`: the residual add and RMSNorm as the
    /// prologue of the GEMV over the stacked q, k and v rows, RoPE and the KV append as its
    /// epilogue. Dense weights, RMSNorm, no q/k norms, a hidden row the pre-norm kernels take.
    NormQkvRopeKv {
        /// `[q + 2·kv, hidden]`, q, k and v stacked.
        qkv: Tensor,
        /// Their stacked biases (Qwen2).
        bias: Option<Tensor>,
    },
    /// The norm (in the GEMV's prologue where `fused_norm`), one GEMV over the stacked q, k and
    /// v, then `rope_kv_append`: Qwen3's per-head q/k RMSNorms, RoPE, the append. Dense weights
    /// whose other parts the first form does not take (q/k norms, LayerNorm, wide rows).
    QkvRopeKv {
        /// q, k and v stacked.
        qkv: Linear,
        /// The RMSNorm runs as the GEMV's prologue (`ops::rms_norm_linear_into`).
        fused_norm: bool,
    },
    /// The norm, then q, k and v through their own projections, the q/k norms, RoPE and the
    /// append one by one ([`LayerWeights::qkv_separate_into`], as in the forward pass): quantized
    /// weights, which are not stacked.
    Separate,
}

/// How the decode step forms a layer's MLP activation (what the down projection reads).
pub(crate) enum Mlp {
    /// `ops::rms_norm_swiglu_into`: the residual add and RMSNorm as the prologue of the GEMV
    /// over the stacked gate and up rows, silu(gate)·up as its epilogue.
    NormSwiglu {
        /// `[2·ffn, hidden]`, gate rows first.
        gate_up: Tensor,
    },
    /// The norm, then `ops::linear_swiglu_into` over the stacked gate and up rows.
    Swiglu {
        /// `[2·ffn, hidden]`, gate rows first.
        gate_up: Tensor,
    },
    /// The norm, gate and up through their own projections, SiLU, the product
    /// ([`LayerWeights::swiglu_separate_into`], as in the forward pass): quantized weights.
    SwigluSeparate,
    /// The norm, the up projection with GELU (tanh) fused (GPT-2).
    Gelu,
}

/// The fusions of a layer's decode step.
pub(crate) struct LayerPlan {
    pub(crate) attn: AttnInput,
    pub(crate) mlp: Mlp,
}

/// One decoder layer: its weights and the fusions of its decode step.
pub(crate) struct Layer {
    pub(crate) w: LayerWeights,
    pub(crate) plan: LayerPlan,
}

/// A decoder layer's weights. Where [`LayerPlan`] stacks q, k and v (or gate and up), these are
/// row views of the stacked weight.
pub(crate) struct LayerWeights {
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
}

impl LayerWeights {
    /// Stacks the projections that read the same input and chooses the layer's decode-step
    /// fusions, then moves every projection to `device`. `pre_norm_fits`: the hidden row fits
    /// the pre-norm kernels (`ops::pre_norm_row_fits`).
    ///
    /// The loader stages the parts it means to stack in host memory, so they are stacked there
    /// and uploaded once: stacking parts already on the device would leave their freed blocks as
    /// holes in the pool's segments (hundreds of MiB reserved and never used, for a 0.5B model).
    pub(crate) fn plan(
        mut self,
        mlp: MlpKind,
        pre_norm_fits: bool,
        device: &Device,
    ) -> Result<Layer> {
        let rms = |n: &Norm| n.kind == NormKind::Rms;
        let qk_norms = match (&self.q_norm, &self.k_norm) {
            (Some(q), Some(k)) => Some(rms(q) && rms(k)),
            _ => None,
        };
        let fused_norm = pre_norm_fits && rms(&self.attn_norm);
        let qkv = stack_rows(&mut [&mut self.q, &mut self.k, &mut self.v], device)?;
        let attn = match qkv {
            Some((qkv, bias)) if qk_norms.is_none() && fused_norm => {
                AttnInput::NormQkvRopeKv { qkv, bias }
            }
            Some((qkv, bias)) if qk_norms != Some(false) => AttnInput::QkvRopeKv {
                qkv: Linear {
                    w: Weight::Dense(qkv),
                    b: bias,
                },
                fused_norm,
            },
            _ => AttnInput::Separate,
        };
        let mut gate_up = None;
        if let Some(gate) = &mut self.gate {
            let fits = matches!(&gate.w, Weight::Dense(w)
                if w.shape()[1] * w.dtype().size_in_bytes() % 16 == 0);
            if fits && gate.b.is_none() && self.up.b.is_none() {
                gate_up = stack_rows(&mut [gate, &mut self.up], device)?.map(|(w, _)| w);
            }
        }
        let mlp = match (self.gate.is_some() && mlp == MlpKind::SwiGlu, gate_up) {
            (true, Some(gate_up)) if pre_norm_fits && rms(&self.mlp_norm) => {
                Mlp::NormSwiglu { gate_up }
            }
            (true, Some(gate_up)) => Mlp::Swiglu { gate_up },
            (true, None) => Mlp::SwigluSeparate,
            (false, _) => Mlp::Gelu,
        };
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.up]
            .into_iter()
            .chain(self.gate.as_mut())
        {
            l.move_to(device)?;
        }
        Ok(Layer {
            w: self,
            plan: LayerPlan { attn, mlp },
        })
    }
}

/// Buffers of [`Layer::qkv_separate_into`] for `t` tokens: the projections' outputs, and the
/// q/k norms' outputs (models with q/k norms).
pub(crate) struct QkvBuffers {
    /// `[t, heads · head_dim]`: the queries, normed and rotated on return.
    pub(crate) q: Tensor,
    /// `[t, kv_heads · head_dim]`.
    pub(crate) k: Tensor,
    /// `[t, kv_heads · head_dim]`.
    pub(crate) v: Tensor,
    /// `[t, heads · head_dim]` and `[t, kv_heads · head_dim]`, for the q/k norms.
    pub(crate) normed: Option<(Tensor, Tensor)>,
}

/// RoPE's tables and layout: f32 inverse frequencies `[rotary_dim / 2]`, the cos/sin scale.
pub(crate) type Rope<'a> = Option<(&'a Tensor, f32, RopeLayout)>;

impl LayerWeights {
    /// The attention input from its own projections, for `t` tokens of normed hidden rows `h`
    /// `[t, hidden]`: q, k, v = h · Wᵀ into `b`, Qwen3's per-head q/k RMSNorms, RoPE at
    /// `positions` (i32 `[t]` on the device), and the keys and values into `cache` at the
    /// device position `start` (i32 `[1]`; the cache's length is the caller's to set). The
    /// queries end in `b.q`. `scratch`: as [`Linear::forward_into`]'s.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn qkv_separate_into(
        &self,
        h: &Tensor,
        b: &QkvBuffers,
        heads: (usize, usize, usize),
        positions: &Tensor,
        start: &Tensor,
        rope: Rope<'_>,
        cache: &mut KvCache,
        scratch: &Tensor,
    ) -> Result<()> {
        let (nh, nkv, hd) = heads;
        let t = h.numel() / h.shape().last().copied().unwrap_or(1).max(1);
        self.q.forward_into(h, Activation::None, &b.q, scratch)?;
        self.k.forward_into(h, Activation::None, &b.k, scratch)?;
        self.v.forward_into(h, Activation::None, &b.v, scratch)?;
        let q = b.q.reshape(&[t, nh, hd])?;
        let mut k = b.k.reshape(&[t, nkv, hd])?;
        if let (Some(qn), Some(kn), Some((qo, ko))) = (&self.q_norm, &self.k_norm, &b.normed) {
            let (qo, ko) = (qo.reshape(&[t, nh, hd])?, ko.reshape(&[t, nkv, hd])?);
            qn.forward_into(&q, &qo)?;
            kn.forward_into(&k, &ko)?;
            ops::copy_into(&qo, &q)?;
            k = ko;
        }
        if let Some((inv_freq, scale, layout)) = rope {
            rope_inplace(&q, positions, inv_freq, scale, layout)?;
            rope_inplace(&k, positions, inv_freq, scale, layout)?;
        }
        cache.append_at(&k, &b.v.reshape(&[t, nkv, hd])?, start)
    }

    /// SwiGLU from the gate and up projections' own weights, for normed hidden rows `h`
    /// `[t, hidden]`: gate(h) into `gate`, up(h) into `up`, silu(gate) into `act`, and
    /// silu(gate)·up back into `gate`, which it returns (`[t, ffn]` each). `scratch`: as
    /// [`Linear::forward_into`]'s.
    pub(crate) fn swiglu_separate_into<'a>(
        &self,
        h: &Tensor,
        gate: &'a Tensor,
        up: &Tensor,
        act: &Tensor,
        scratch: &Tensor,
    ) -> Result<&'a Tensor> {
        let Some(gate_proj) = &self.gate else {
            return Err(gpukit_ops::Error::Shape {
                op: "swiglu",
                detail: "the layer has no gate projection".into(),
            });
        };
        gate_proj.forward_into(h, Activation::None, gate, scratch)?;
        self.up.forward_into(h, Activation::None, up, scratch)?;
        ops::unary_into(UnaryOp::Silu, gate, act)?;
        ops::binary_into(BinaryOp::Mul, act, up, gate)?;
        Ok(gate)
    }

    /// Bytes of the layer's weights as stored on the device.
    pub(crate) fn weight_bytes(&self) -> usize {
        let t = Tensor::nbytes;
        let lin = |l: &Linear| t(l.w.tensor()) + l.b.as_ref().map_or(0, t);
        let norm = |n: &Norm| t(&n.w) + n.b.as_ref().map_or(0, t);
        [&self.q, &self.k, &self.v, &self.o, &self.up, &self.down]
            .into_iter()
            .chain(self.gate.as_ref())
            .map(lin)
            .sum::<usize>()
            + norm(&self.attn_norm)
            + norm(&self.mlp_norm)
            + self.q_norm.as_ref().map_or(0, norm)
            + self.k_norm.as_ref().map_or(0, norm)
    }
}

/// Stacks dense linear layers of the same input width and dtype into one `[Σ out, in]` weight
/// (biases into one `[Σ out]`, when all have one) and makes each part a row view of it, so the
/// memory is not doubled. The stacking happens where the parts are; the result is then moved
/// to `device`. `None`, parts untouched, when they do not all qualify.
fn stack_rows(
    parts: &mut [&mut Linear],
    device: &Device,
) -> Result<Option<(Tensor, Option<Tensor>)>> {
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
            ops::copy_into(old, &w.narrow(0, at, n)?)?;
        }
        if let (Some(b), Some(old)) = (&b, &p.b) {
            ops::copy_into(old, &b.narrow(0, at, n)?)?;
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

#[cfg(test)]
mod tests {
    use gpukit_ops::DType;

    use super::*;

    fn dense(rows: usize, cols: usize, seed: u64, bias: bool) -> Linear {
        let cpu = Device::Cpu;
        Linear {
            w: Weight::Dense(
                Tensor::rand(&[rows, cols], -1.0, 1.0, DType::F32, seed, &cpu).unwrap(),
            ),
            b: bias.then(|| Tensor::rand(&[rows], -1.0, 1.0, DType::F32, seed + 1, &cpu).unwrap()),
        }
    }

    /// Stacked parts are row views of the stack and compute what they computed alone; parts
    /// that do not all qualify are left alone.
    #[test]
    fn stacked_rows_are_views_that_compute_the_same() {
        let cpu = Device::Cpu;
        let x = Tensor::rand(&[3, 16], -1.0, 1.0, DType::F32, 7, &cpu).unwrap();
        let (mut q, mut k) = (dense(8, 16, 1, true), dense(4, 16, 3, true));
        let want = [
            q.forward(&x, Activation::None)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            k.forward(&x, Activation::None)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
        ];
        let (w, b) = stack_rows(&mut [&mut q, &mut k], &cpu).unwrap().unwrap();
        assert_eq!(
            (w.shape(), b.map(|b| b.shape().to_vec())),
            (&[12, 16][..], Some(vec![12]))
        );
        for (l, want) in [&q, &k].into_iter().zip(want) {
            let got = l
                .forward(&x, Activation::None)
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            assert_eq!(got, want);
        }
        let (mut a, mut c) = (dense(8, 16, 1, true), dense(4, 16, 3, false));
        assert!(stack_rows(&mut [&mut a, &mut c], &cpu).unwrap().is_none());
    }
}
