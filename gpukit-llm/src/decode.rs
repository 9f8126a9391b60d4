//! The batch-1 decode step as one CUDA graph.
//!
//! [`DecodeStep`] runs one token through a [`Model`] with every tensor preallocated and the
//! token id, its position and the sampling step read from device memory: the embedding, every
//! layer (norms, projections, RoPE, the KV append at the device position, attention over the
//! cache up to that position), the final norm, the LM head, sampling into the token buffer and
//! the advance of that device state. Nothing in a step depends on host values that change from
//! token to token, so on CUDA the step is captured once and then replayed: one graph launch per
//! token instead of about fifteen kernel launches per layer.
//!
//! The first step runs eagerly (it loads the kernels and plans any GEMM) and the capture then
//! records the very same function with the same buffers, so a replay computes bit for bit what
//! the eager step computes (tested). On the CPU every step runs eagerly.
//!
//! Fused where it saves memory traffic or launches: each residual add and RMSNorm run as the
//! prologue of the projection that reads the normalised row (`ops::rms_norm_linear_into`,
//! `ops::rms_norm_swiglu_into`); q, k and v are one GEMV whose epilogue applies RoPE and writes
//! the keys and values into the cache (`ops::rms_norm_linear_rope_kv_into`; with Qwen3's q/k
//! norms, one GEMV then one kernel for the norms, RoPE and the append); gate and up are one GEMV with SiLU·up; with greedy sampling
//! (no penalty) the LM head's blocks each reduce their logits to a first maximum and one small
//! kernel picks the token (`ops::rms_norm_linear_greedy_into`). LayerNorm models (GPT-2) and
//! quantized weights take the separate kernels.

use gpukit_driver::Graph;
use gpukit_kernels::registry::launch::SDPA_DECODE_ROWS;
use gpukit_ops::attention::sdpa_decode_at_workspace_len;
use gpukit_ops::attention::{AttentionMask, AttentionShape, sdpa_decode_at_into};
use gpukit_ops::kv_cache::KvCache;
use gpukit_ops::ops::{self, Activation, PreNorm};
use gpukit_ops::quant::qgemv_into;
use gpukit_ops::rope::{rope_inplace, rope_kv_append};
use gpukit_ops::sampling::{
    SamplingParams, advance_decode_state, sample_tokens_into, sampler_workspace_len,
};
use gpukit_ops::{BinaryOp, DType, Device, Tensor, UnaryOp};

use crate::model::{Layer, Linear, Model, Norm, Session, Weight};
use crate::spec::{MlpKind, NormKind};
use crate::{Error, Result};

fn op_err(e: gpukit_ops::Error) -> Error {
    Error::Format {
        file: "decode step".into(),
        detail: e.to_string(),
    }
}

/// The device state and activations of one decode step (all preallocated).
struct Buffers {
    /// i32 `[1]`: the id the next step consumes; the sampler writes the drawn id here.
    token: Tensor,
    /// i32 `[1]`: the consumed token's position.
    position: Tensor,
    /// i64 `[1]`: the sampling step (the Philox counter).
    step: Tensor,
    /// i32 `[1, window]`: recent ids for the repetition penalty, oldest first.
    recent: Option<Tensor>,
    /// The residual stream, in two buffers: a fused add writes the other one.
    x: [Tensor; 2],
    /// Whether RMSNorms run as the prologue of the projection after them
    /// ([`ops::rms_norm_linear_into`]): the hidden row fits those kernels.
    fuse_norm: bool,
    /// GPT-2's learned position row.
    pos_row: Option<Tensor>,
    /// Normalised activations `[1, hidden]`.
    h: Tensor,
    /// The fused QKV projection's output `[1, (heads + 2·kv_heads)·head_dim]`.
    qkv: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    /// Q/K after their norms (Qwen3).
    qn: Option<(Tensor, Tensor)>,
    attn: Tensor,
    /// A sub-layer's output, added to the residual stream by the next fused norm.
    y: Tensor,
    gate: Tensor,
    up: Tensor,
    act: Tensor,
    /// For quantized projections with a bias or an activation.
    scratch: Tensor,
    logits: Tensor,
    /// f32: the split attention's partial results, then the LM head's per-block maxima.
    workspace: Tensor,
    /// u8: the sampler's workspace.
    sampler_ws: Tensor,
}

/// One decode step of a model over a session, replayed as a CUDA graph after its first run.
/// Made by [`Model::decode_step`]; each [`DecodeStep::run`] consumes the current token and
/// returns the next one.
pub struct DecodeStep<'a> {
    model: &'a Model,
    session: &'a mut Session,
    params: SamplingParams,
    b: Buffers,
    /// Capture after the first (eager) step; `false` keeps every step eager.
    use_graph: bool,
    graph: Option<Graph>,
    steps: usize,
}

impl std::fmt::Debug for DecodeStep<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeStep")
            .field("steps", &self.steps)
            .field("graph", &self.graph.is_some())
            .finish()
    }
}

impl Model {
    /// Whether [`Model::decode_step`] runs this model: the decode attention takes at most 16
    /// query heads per KV head.
    pub fn supports_decode_step(&self) -> bool {
        self.spec().n_heads / self.spec().n_kv_heads.max(1) <= SDPA_DECODE_ROWS
    }

    /// A decode step over `session` that first consumes `token` (at the session's position),
    /// sampling with `params` at Philox step `step`; `recent` are the ids the repetition penalty
    /// looks at, oldest first, negative entries empty (the window is its length; pass none to
    /// disable the penalty). `use_graph`: replay a CUDA
    /// graph after the first step (ignored on the CPU).
    ///
    /// # Errors
    /// [`Error::Format`] for a session without room, a token outside the vocabulary or a model
    /// [`Model::supports_decode_step`] rejects; memory errors.
    pub fn decode_step<'a>(
        &'a self,
        session: &'a mut Session,
        token: u32,
        params: &SamplingParams,
        recent: &[i32],
        step: i64,
        use_graph: bool,
    ) -> Result<DecodeStep<'a>> {
        let s = self.spec();
        let bad = |detail: String| Error::Format {
            file: "decode step".into(),
            detail,
        };
        if !self.supports_decode_step() {
            return Err(bad(format!(
                "{} query heads per KV head; the decode step takes at most {SDPA_DECODE_ROWS}",
                s.n_heads / s.n_kv_heads.max(1)
            )));
        }
        if token as usize >= s.vocab {
            return Err(bad(format!("token id {token} outside the vocabulary")));
        }
        let capacity = session.capacity();
        if session.position() >= capacity {
            return Err(bad(format!("the session's {capacity} positions are full")));
        }
        let dev = self.device();
        let dt = self.dtype();
        let t = |shape: &[usize], dtype: DType| Tensor::zeros(shape, dtype, dev).map_err(op_err);
        let ids = |v: &[i32]| Tensor::from_slice(v, &[1, v.len()], dev).map_err(op_err);
        let (h, nh, nkv, hd) = (s.hidden, s.n_heads, s.n_kv_heads, s.head_dim);
        let scratch_len = [h, nh * hd, nkv * hd, s.ffn, s.vocab]
            .into_iter()
            .max()
            .unwrap_or(h);
        let shape = AttentionShape {
            batch: 1,
            q_heads: nh,
            kv_heads: nkv,
            q_len: 1,
            kv_len: capacity,
            head_dim: hd,
        };
        let b = Buffers {
            token: Tensor::from_slice(&[token as i32], &[1], dev).map_err(op_err)?,
            position: Tensor::from_slice(&[session.position() as i32], &[1], dev)
                .map_err(op_err)?,
            step: Tensor::from_slice(&[step], &[1], dev).map_err(op_err)?,
            recent: if recent.is_empty() {
                None
            } else {
                Some(ids(recent)?)
            },
            x: [t(&[1, h], dt)?, t(&[1, h], dt)?],
            fuse_norm: ops::pre_norm_row_fits(h, dt),
            pos_row: match self.position_embedding.is_some() {
                true => Some(t(&[1, h], dt)?),
                false => None,
            },
            h: t(&[1, h], dt)?,
            qkv: t(&[1, (nh + 2 * nkv) * hd], dt)?,
            q: t(&[1, nh * hd], dt)?,
            k: t(&[1, nkv * hd], dt)?,
            v: t(&[1, nkv * hd], dt)?,
            qn: match s.qk_norm {
                true => Some((t(&[1, nh * hd], dt)?, t(&[1, nkv * hd], dt)?)),
                false => None,
            },
            attn: t(&[1, nh * hd], dt)?,
            y: t(&[1, h], dt)?,
            gate: t(&[1, s.ffn], dt)?,
            up: t(&[1, s.ffn], dt)?,
            act: t(&[1, s.ffn], dt)?,
            scratch: t(&[scratch_len], dt)?,
            logits: t(&[1, s.vocab], dt)?,
            workspace: t(
                &[sdpa_decode_at_workspace_len(&shape)
                    .max(ops::rms_norm_linear_greedy_workspace_len(s.vocab, h, dt))
                    .max(1)],
                DType::F32,
            )?,
            sampler_ws: Tensor::empty(&[sampler_workspace_len(1, s.vocab)], DType::U8, dev)
                .map_err(op_err)?,
        };
        Ok(DecodeStep {
            model: self,
            session,
            params: params.clone(),
            b,
            use_graph,
            graph: None,
            steps: 0,
        })
    }
}

impl DecodeStep<'_> {
    /// Runs one step: consumes the current token, appends its keys and values to the session's
    /// caches and returns the sampled next token (which the following step consumes).
    ///
    /// # Errors
    /// [`Error::Format`] once the session is full; op and capture errors.
    pub fn run(&mut self) -> Result<u32> {
        let pos = self.session.position();
        if pos >= self.session.capacity() {
            return Err(Error::Format {
                file: "decode step".into(),
                detail: format!("the session's {} positions are full", pos),
            });
        }
        match (&self.graph, self.model.device()) {
            (Some(g), Device::Cuda(c)) => g
                .launch(c.stream())
                .map_err(|e| Error::Device(e.to_string()))?,
            (None, Device::Cuda(c)) if self.use_graph && self.steps > 0 => {
                let g = c.capture(|| record(self.model, self.session, &self.params, &self.b));
                let g = g.map_err(op_err)?;
                g.launch(c.stream())
                    .map_err(|e| Error::Device(e.to_string()))?;
                self.graph = Some(g);
            }
            _ => record(self.model, self.session, &self.params, &self.b).map_err(op_err)?,
        }
        self.steps += 1;
        self.session.advance(1).map_err(op_err)?;
        let id = self.b.token.to_vec::<i32>().map_err(op_err)?;
        Ok(id.first().map_or(0, |&i| i.max(0) as u32))
    }

    /// The last step's logits `[1, vocab]` (compute dtype, on the model's device).
    pub fn logits(&self) -> &Tensor {
        &self.b.logits
    }

    /// Whether later steps replay a captured graph.
    pub fn is_captured(&self) -> bool {
        self.graph.is_some()
    }
}

/// The residual stream in two buffers (a fused add writes the other one) and whether a
/// sub-layer's output waits in `y` to be added to it by the next norm.
struct Residual {
    x: [Tensor; 2],
    cur: usize,
    pending: bool,
}

impl Residual {
    /// The next norm as the prologue of a fused projection (adding the pending output).
    fn pre_norm<'a>(&'a self, norm: &'a Norm, y: &'a Tensor) -> PreNorm<'a> {
        PreNorm {
            residual: &self.x[self.cur],
            pending: self.pending.then(|| (y, &self.x[self.cur ^ 1])),
            weight: &norm.w,
            eps: norm.eps,
        }
    }

    /// After a norm consumed the pending output: the sum is the stream now.
    fn added(&mut self) {
        if self.pending {
            self.cur ^= 1;
            self.pending = false;
        }
    }

    /// The norm on its own: the stream (plus the pending output) normalised into `h`.
    fn norm_into(&mut self, norm: &Norm, y: &Tensor, h: &mut Tensor) -> gpukit_ops::Result<()> {
        let (from, to) = (&self.x[self.cur], &self.x[self.cur ^ 1]);
        match (self.pending, norm.kind) {
            (false, _) => norm.forward_into(from, h)?,
            (true, NormKind::Rms) => {
                ops::add_rms_norm_into(y, from, &norm.w, norm.eps, h, &mut to.clone())?;
            }
            (true, NormKind::Layer) => {
                ops::binary_into(BinaryOp::Add, from, y, &mut to.clone())?;
                norm.forward_into(to, h)?;
            }
        }
        self.added();
        Ok(())
    }
}

/// `out = lin(norm(stream))`: one kernel (the norm as the GEMV's prologue) for an RMSNorm in
/// front of a dense weight when `b.fuse_norm`; otherwise the norm into `b.h`, then the
/// projection.
fn norm_linear(
    r: &mut Residual,
    norm: &Norm,
    lin: &Linear,
    b: &Buffers,
    out: &Tensor,
) -> gpukit_ops::Result<()> {
    match &lin.w {
        Weight::Dense(w) if b.fuse_norm && norm.kind == NormKind::Rms => {
            ops::rms_norm_linear_into(
                &r.pre_norm(norm, &b.y),
                w,
                lin.b.as_ref(),
                &mut out.clone(),
            )?;
            r.added();
            Ok(())
        }
        _ => {
            r.norm_into(norm, &b.y, &mut b.h.clone())?;
            lin.forward_into(&b.h, Activation::None, out, &b.scratch)
        }
    }
}

/// The step itself: the same launches, with the same arguments, eagerly and under capture.
fn record(
    m: &Model,
    session: &mut Session,
    params: &SamplingParams,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let s = m.spec();
    let (nh, hd) = (s.n_heads, s.head_dim);
    let mut r = Residual {
        x: b.x.clone(),
        cur: 0,
        pending: false,
    };
    // Embedding (and GPT-2's learned position) into the residual stream.
    match (&m.position_embedding, &b.pos_row) {
        (Some(table), Some(row)) => {
            ops::index_select_into(&m.embedding, 0, &b.token, &mut r.x[1])?;
            ops::index_select_into(table, 0, &b.position, &mut row.clone())?;
            ops::binary_into(BinaryOp::Add, &r.x[1].clone(), row, &mut r.x[0])?;
        }
        _ => ops::index_select_into(&m.embedding, 0, &b.token, &mut r.x[0])?,
    }
    let mask = |window: Option<usize>| AttentionMask {
        causal: true,
        sliding_window: window,
        alibi: false,
    };
    let scale = 1.0 / (hd as f32).sqrt();
    let rope = m.rope.as_ref().map(|(f, s, l)| (f, *s, *l));
    let rms = |n: &Norm| n.kind == NormKind::Rms;
    for ((layer, cache), window) in m
        .layers
        .iter()
        .zip(session.caches_mut())
        .zip(&s.sliding_window)
    {
        let qk_norm = match (&layer.q_norm, &layer.k_norm) {
            (Some(qn), Some(kn)) => Some((qn, kn)),
            _ => None,
        };
        match &layer.qkv {
            // The pre-norm QKV GEMV with RoPE and the KV append as its epilogue.
            Some(Linear {
                w: Weight::Dense(w),
                b: bias,
            }) if qk_norm.is_none() && b.fuse_norm && rms(&layer.attn_norm) => {
                ops::rms_norm_linear_rope_kv_into(
                    &r.pre_norm(&layer.attn_norm, &b.y),
                    w,
                    bias.as_ref(),
                    &mut b.q.reshape(&[1, nh, hd])?,
                    cache,
                    &b.position,
                    rope,
                )?;
                r.added();
            }
            // One GEMV for q, k and v, then one kernel for the q/k norms, RoPE and the append.
            Some(qkv) if qk_norm.is_none_or(|(q, k)| rms(q) && rms(k)) => {
                norm_linear(&mut r, &layer.attn_norm, qkv, b, &b.qkv)?;
                rope_kv_append(
                    &b.qkv,
                    &mut b.q.reshape(&[1, nh, hd])?,
                    cache,
                    &b.position,
                    rope,
                    qk_norm.map(|(q, k)| (&q.w, &k.w, q.eps)),
                )?;
            }
            _ => {
                r.norm_into(&layer.attn_norm, &b.y, &mut b.h.clone())?;
                unfused_attention_input(layer, m, cache, b)?;
            }
        }
        // [1, heads, d] → [1, heads, 1, d] views; the caches whole, [1, kv_heads, capacity, d].
        let q4 = b.q.reshape(&[1, nh, hd])?.transpose(0, 1)?.unsqueeze(0)?;
        let o4 = b
            .attn
            .reshape(&[1, nh, hd])?
            .transpose(0, 1)?
            .unsqueeze(0)?;
        sdpa_decode_at_into(
            &q4,
            &cache.key_storage().unsqueeze(0)?,
            &cache.value_storage().unsqueeze(0)?,
            cache.layout(),
            &b.position,
            scale,
            mask(*window),
            &o4,
            &b.workspace,
        )?;
        layer
            .o
            .forward_into(&b.attn, Activation::None, &b.y, &b.scratch)?;
        r.pending = true;
        let act = match (&layer.gate, s.mlp, &layer.gate_up) {
            (Some(_), MlpKind::SwiGlu, Some(w)) if b.fuse_norm && rms(&layer.mlp_norm) => {
                let x = r.pre_norm(&layer.mlp_norm, &b.y);
                ops::rms_norm_swiglu_into(&x, w, &mut b.act.clone())?;
                r.added();
                &b.act
            }
            (Some(_), MlpKind::SwiGlu, Some(w)) => {
                r.norm_into(&layer.mlp_norm, &b.y, &mut b.h.clone())?;
                ops::linear_swiglu_into(&b.h, w, &mut b.act.clone())?;
                &b.act
            }
            (Some(gate), MlpKind::SwiGlu, None) => {
                r.norm_into(&layer.mlp_norm, &b.y, &mut b.h.clone())?;
                gate.forward_into(&b.h, Activation::None, &b.gate, &b.scratch)?;
                layer
                    .up
                    .forward_into(&b.h, Activation::None, &b.up, &b.scratch)?;
                ops::unary_into(UnaryOp::Silu, &b.gate, &mut b.act.clone())?;
                ops::binary_into(BinaryOp::Mul, &b.act, &b.up, &mut b.gate.clone())?;
                &b.gate
            }
            _ => {
                r.norm_into(&layer.mlp_norm, &b.y, &mut b.h.clone())?;
                layer
                    .up
                    .forward_into(&b.h, Activation::GeluTanh, &b.up, &b.scratch)?;
                &b.up
            }
        };
        layer
            .down
            .forward_into(act, Activation::None, &b.y, &b.scratch)?;
        r.pending = true;
    }
    // The final norm, the LM head and the sampler; greedy without a penalty reads the head's
    // per-block maxima instead of the logits.
    let tied = Linear {
        w: Weight::Dense(m.embedding.clone()),
        b: None,
    };
    let head = m.head.as_ref().unwrap_or(&tied);
    let greedy = params.is_plain_greedy(b.recent.is_some())
        && b.fuse_norm
        && rms(&m.norm)
        && head.b.is_none();
    match &head.w {
        Weight::Dense(w) if greedy => {
            let x = r.pre_norm(&m.norm, &b.y);
            ops::rms_norm_linear_greedy_into(&x, w, &mut b.logits.clone(), &b.workspace, &b.token)?;
        }
        _ => {
            norm_linear(&mut r, &m.norm, head, b, &b.logits)?;
            sample_tokens_into(
                &b.logits,
                b.recent.as_ref(),
                params,
                &b.step,
                &b.sampler_ws,
                &b.token,
            )?;
        }
    }
    advance_decode_state(&b.position, &b.step, b.recent.as_ref(), &b.token)
}

/// q, k and v through their own projections, norms, RoPE and KV append into `b.q` and the
/// cache (layers whose projections could not be stacked: quantized weights).
fn unfused_attention_input(
    layer: &Layer,
    m: &Model,
    cache: &mut KvCache,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let s = m.spec();
    let (nh, nkv, hd) = (s.n_heads, s.n_kv_heads, s.head_dim);
    let h = &b.h;
    layer
        .q
        .forward_into(h, Activation::None, &b.q, &b.scratch)?;
    layer
        .k
        .forward_into(h, Activation::None, &b.k, &b.scratch)?;
    layer
        .v
        .forward_into(h, Activation::None, &b.v, &b.scratch)?;
    let (q3, k3) = (b.q.reshape(&[1, nh, hd])?, b.k.reshape(&[1, nkv, hd])?);
    let k3 = match (&layer.q_norm, &layer.k_norm, &b.qn) {
        (Some(qn), Some(kn), Some((qo, ko))) => {
            let ko = ko.reshape(&[1, nkv, hd])?;
            qn.forward_into(&q3, &mut qo.reshape(&[1, nh, hd])?)?;
            kn.forward_into(&k3, &mut ko.clone())?;
            ops::copy_into(&qo.reshape(&[1, nh, hd])?, &mut q3.clone())?;
            ko
        }
        _ => k3,
    };
    if let Some((inv_freq, mscale, layout)) = &m.rope {
        rope_inplace(&mut q3.clone(), &b.position, inv_freq, *mscale, *layout)?;
        rope_inplace(&mut k3.clone(), &b.position, inv_freq, *mscale, *layout)?;
    }
    cache.append_at(&k3, &b.v.reshape(&[1, nkv, hd])?, &b.position)
}

impl Linear {
    /// `out [1, out] = x [1, in] · Wᵀ (+ b)`, then `act`, without allocating: `scratch` (at
    /// least `out` elements of the dtype) holds a quantized product before its bias or
    /// activation.
    pub(crate) fn forward_into(
        &self,
        x: &Tensor,
        act: Activation,
        out: &Tensor,
        scratch: &Tensor,
    ) -> gpukit_ops::Result<()> {
        let mut out = out.clone();
        let q = match &self.w {
            Weight::Dense(w) => return ops::linear_into(x, w, self.b.as_ref(), act, &mut out),
            Weight::Quant(q) => q,
        };
        if self.b.is_none() && act == Activation::None {
            return qgemv_into(x, q, &mut out);
        }
        let n = q.shape()[0];
        let mut tmp = scratch.narrow(0, 0, n)?.reshape(&[1, n])?;
        qgemv_into(x, q, &mut tmp)?;
        let unary = match act {
            Activation::None => None,
            Activation::Relu => Some(UnaryOp::Relu),
            Activation::GeluTanh => Some(UnaryOp::GeluTanh),
        };
        match (&self.b, unary) {
            (Some(bias), None) => ops::binary_into(BinaryOp::Add, &tmp, bias, &mut out),
            (None, Some(op)) => ops::unary_into(op, &tmp, &mut out),
            (Some(bias), Some(op)) => {
                ops::binary_into(BinaryOp::Add, &tmp, bias, &mut out)?;
                ops::unary_into(op, &out, &mut tmp)?;
                ops::copy_into(&tmp, &mut out)
            }
            (None, None) => Ok(()),
        }
    }
}

impl Norm {
    /// The norm of `x` into `out` (same shape), without allocating.
    pub(crate) fn forward_into(&self, x: &Tensor, out: &mut Tensor) -> gpukit_ops::Result<()> {
        match self.kind {
            NormKind::Rms => ops::rms_norm_into(x, &self.w, self.eps, out),
            NormKind::Layer => ops::layer_norm_into(x, &self.w, self.b.as_ref(), self.eps, out),
        }
    }
}
