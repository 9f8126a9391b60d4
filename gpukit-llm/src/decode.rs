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
//! Each layer's kernels follow its plan (`layers::LayerPlan`), chosen when the
//! model was loaded: each residual add and RMSNorm run as the prologue of the projection that
//! reads the normalised row; q, k and v are one GEMV whose epilogue applies RoPE and writes the
//! keys and values into the cache (with Qwen3's q/k norms, one GEMV then one kernel for the
//! norms, RoPE and the append); gate and up are one GEMV with SiLU·up. The LM head's plan
//! (`Head`) depends on the sampling: with greedy sampling (no penalty) its blocks each reduce
//! their logits to a first maximum and one small kernel picks the token. LayerNorm models
//! (GPT-2) and quantized weights take the separate kernels.

use gpukit_driver::Graph;
use gpukit_kernels::shared::SDPA_DECODE_ROWS;
use gpukit_ops::attention::{
    AttentionMask, AttentionShape, sdpa_decode_at_into, sdpa_decode_at_workspace_len,
};
use gpukit_ops::kv_cache::KvCache;
use gpukit_ops::ops::{self, Activation, PreNorm};
use gpukit_ops::rope::rope_kv_append;
use gpukit_ops::sampling::{
    SamplingParams, advance_decode_state, sample_tokens_into, sampler_workspace_len,
};
use gpukit_ops::{BinaryOp, DType, Device, Tensor};

use crate::layers::{AttnInput, Layer, Linear, Mlp, Norm, QkvBuffers, Weight};
use crate::model::{Model, Session};
use crate::spec::NormKind;
use crate::{Error, Result};

/// Whether decode steps run eagerly or replay a CUDA graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Every step launches its kernels.
    Eager,
    /// The first step runs eagerly, the second is captured, and every later step replays it
    /// (one launch per token). Ignored on the CPU.
    Graph,
}

/// How a [`DecodeStep`] draws its tokens and runs.
#[derive(Clone, Copy, Debug)]
pub struct DecodeOptions<'a> {
    /// The sampling parameters of every draw.
    pub sampling: &'a SamplingParams,
    /// The ids the repetition penalty looks at, oldest first, negative entries empty; its
    /// length is the window (empty disables the penalty).
    pub recent: &'a [i32],
    /// The Philox step of the first draw; each step draws at the next.
    pub first_step: i64,
    /// Eager steps or graph replays.
    pub replay: Replay,
}

/// How the decode step turns the last hidden row into the next token.
enum Head {
    /// `ops::rms_norm_linear_greedy_into`: the final RMSNorm as the LM head GEMV's prologue, and
    /// each block's first maximum of its logits; one small kernel picks the token. Greedy
    /// sampling without a penalty, a dense unbiased head and a hidden row the kernel takes.
    NormGreedy,
    /// The final norm (the head GEMV's prologue where `fused_norm`), the logits, the sampler.
    Sampled {
        /// The RMSNorm runs as the head GEMV's prologue.
        fused_norm: bool,
    },
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
    /// GPT-2's learned position row.
    pos_row: Option<Tensor>,
    /// Normalised activations `[1, hidden]`.
    h: Tensor,
    /// The stacked QKV projection's output `[1, (heads + 2·kv_heads)·head_dim]`.
    qkv_out: Tensor,
    /// The queries `[1, heads·head_dim]` (and, for separate projections, k, v and the q/k
    /// norms' outputs).
    qkv: QkvBuffers,
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
    head: Head,
    b: Buffers,
    replay: Replay,
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
    /// drawing as `opts` says.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a session without room, a token outside the vocabulary or a model
    /// [`Model::supports_decode_step`] rejects; memory errors.
    pub fn decode_step<'a>(
        &'a self,
        session: &'a mut Session,
        token: u32,
        opts: DecodeOptions<'_>,
    ) -> Result<DecodeStep<'a>> {
        let s = self.spec();
        let bad = |detail: String| Error::Invalid {
            what: "decode step",
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
        let t = |shape: &[usize], dtype: DType| Tensor::zeros(shape, dtype, dev);
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
        let fused_norm = ops::pre_norm_row_fits(h, dt) && self.norm.kind == NormKind::Rms;
        let greedy_head = match &self.head {
            Some(head) => matches!(head.w, Weight::Dense(_)) && head.b.is_none(),
            None => true,
        };
        let head = if greedy_head
            && fused_norm
            && opts.sampling.is_plain_greedy(!opts.recent.is_empty())
        {
            Head::NormGreedy
        } else {
            Head::Sampled { fused_norm }
        };
        let b = Buffers {
            token: Tensor::from_slice(&[token as i32], &[1], dev)?,
            position: Tensor::from_slice(&[session.position() as i32], &[1], dev)?,
            step: Tensor::from_slice(&[opts.first_step], &[1], dev)?,
            recent: match opts.recent.is_empty() {
                true => None,
                false => Some(Tensor::from_slice(
                    opts.recent,
                    &[1, opts.recent.len()],
                    dev,
                )?),
            },
            x: [t(&[1, h], dt)?, t(&[1, h], dt)?],
            pos_row: match self.position_embedding.is_some() {
                true => Some(t(&[1, h], dt)?),
                false => None,
            },
            h: t(&[1, h], dt)?,
            qkv_out: t(&[1, (nh + 2 * nkv) * hd], dt)?,
            qkv: QkvBuffers {
                q: t(&[1, nh * hd], dt)?,
                k: t(&[1, nkv * hd], dt)?,
                v: t(&[1, nkv * hd], dt)?,
                normed: match s.qk_norm {
                    true => Some((t(&[1, nh * hd], dt)?, t(&[1, nkv * hd], dt)?)),
                    false => None,
                },
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
            sampler_ws: Tensor::empty(&[sampler_workspace_len(1, s.vocab)], DType::U8, dev)?,
        };
        Ok(DecodeStep {
            model: self,
            session,
            params: opts.sampling.clone(),
            head,
            b,
            replay: opts.replay,
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
    /// [`Error::Invalid`] once the session is full; op, capture and launch errors.
    pub fn run(&mut self) -> Result<u32> {
        let pos = self.session.position();
        if pos >= self.session.capacity() {
            return Err(Error::Invalid {
                what: "decode step",
                detail: format!("the session's {pos} positions are full"),
            });
        }
        let (m, p, h, b) = (self.model, &self.params, &self.head, &self.b);
        match (&self.graph, m.device()) {
            (Some(g), Device::Cuda(c)) => g.launch(c.stream())?,
            (None, Device::Cuda(c)) if self.replay == Replay::Graph && self.steps > 0 => {
                let session = &mut *self.session;
                let g = c.capture(|| record(m, session, p, h, b))?;
                g.launch(c.stream())?;
                self.graph = Some(g);
            }
            _ => record(m, self.session, p, h, b)?,
        }
        self.steps += 1;
        self.session.advance(1)?;
        let id = self.b.token.to_vec::<i32>()?;
        Ok(id.first().map_or(0, |&i| i.max(0) as u32))
    }

    /// The last step's logits `[1, vocab]` (compute dtype, on the model's device). With
    /// greedy sampling fused into the LM head they are written too.
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
struct Residual<'b> {
    x: &'b [Tensor; 2],
    cur: usize,
    pending: bool,
}

impl<'b> Residual<'b> {
    /// The next norm as the prologue of a fused projection (adding the pending output `y`).
    fn pre_norm<'a>(&self, norm: &'a Norm, y: &'a Tensor) -> PreNorm<'a>
    where
        'b: 'a,
    {
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

    /// The norm on its own: the stream (plus the pending output `y`) normalised into `h`.
    fn norm_into(&mut self, norm: &Norm, y: &Tensor, h: &Tensor) -> gpukit_ops::Result<()> {
        let (from, to) = (&self.x[self.cur], &self.x[self.cur ^ 1]);
        match (self.pending, norm.kind) {
            (false, _) => norm.forward_into(from, h)?,
            (true, NormKind::Rms) => ops::add_rms_norm_into(y, from, &norm.w, norm.eps, h, to)?,
            (true, NormKind::Layer) => {
                ops::binary_into(BinaryOp::Add, from, y, to)?;
                norm.forward_into(to, h)?;
            }
        }
        self.added();
        Ok(())
    }

    /// `out = lin(norm(stream))`: one kernel (the norm as the GEMV's prologue) where
    /// `fused_norm`, else the norm into `b.h` and then the projection.
    fn norm_linear(
        &mut self,
        norm: &Norm,
        lin: &Linear,
        fused_norm: bool,
        b: &Buffers,
        out: &Tensor,
    ) -> gpukit_ops::Result<()> {
        match &lin.w {
            Weight::Dense(w) if fused_norm => {
                ops::rms_norm_linear_into(&self.pre_norm(norm, &b.y), w, lin.b.as_ref(), out)?;
                self.added();
                Ok(())
            }
            _ => {
                self.norm_into(norm, &b.y, &b.h)?;
                lin.forward_into(&b.h, Activation::None, out, &b.scratch)
            }
        }
    }
}

/// The step itself: the same launches, with the same arguments, eagerly and under capture.
fn record(
    m: &Model,
    session: &mut Session,
    params: &SamplingParams,
    head: &Head,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let s = m.spec();
    let mut r = Residual {
        x: &b.x,
        cur: 0,
        pending: false,
    };
    embed(m, b)?;
    for ((layer, cache), window) in m
        .layers
        .iter()
        .zip(session.caches_mut())
        .zip(&s.sliding_window)
    {
        attention_input(&mut r, m, layer, cache, b)?;
        attention(m, cache, *window, b)?;
        layer
            .w
            .o
            .forward_into(&b.attn, Activation::None, &b.y, &b.scratch)?;
        r.pending = true;
        let act = mlp(&mut r, layer, b)?;
        layer
            .w
            .down
            .forward_into(act, Activation::None, &b.y, &b.scratch)?;
        r.pending = true;
    }
    next_token(&mut r, m, params, head, b)?;
    advance_decode_state(&b.position, &b.step, b.recent.as_ref(), &b.token)
}

/// The token's embedding (and GPT-2's learned position) into the residual stream `b.x[0]`.
fn embed(m: &Model, b: &Buffers) -> gpukit_ops::Result<()> {
    match (&m.position_embedding, &b.pos_row) {
        (Some(table), Some(row)) => {
            ops::index_select_into(&m.embedding, 0, &b.token, &b.x[1])?;
            ops::index_select_into(table, 0, &b.position, row)?;
            ops::binary_into(BinaryOp::Add, &b.x[1], row, &b.x[0])
        }
        _ => ops::index_select_into(&m.embedding, 0, &b.token, &b.x[0]),
    }
}

/// The layer's attention input as its plan forms it: the queries into `b.qkv.q`, the keys and
/// values into the cache at the device position.
fn attention_input(
    r: &mut Residual,
    m: &Model,
    layer: &Layer,
    cache: &mut KvCache,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let s = m.spec();
    let (nh, nkv, hd) = (s.n_heads, s.n_kv_heads, s.head_dim);
    let q3 = b.qkv.q.reshape(&[1, nh, hd])?;
    match &layer.plan.attn {
        AttnInput::NormQkvRopeKv { qkv, bias } => {
            let x = r.pre_norm(&layer.w.attn_norm, &b.y);
            ops::rms_norm_linear_rope_kv_into(
                &x,
                qkv,
                bias.as_ref(),
                &q3,
                cache,
                &b.position,
                m.rope(),
            )?;
            r.added();
            Ok(())
        }
        AttnInput::QkvRopeKv { qkv, fused_norm } => {
            r.norm_linear(&layer.w.attn_norm, qkv, *fused_norm, b, &b.qkv_out)?;
            let qk_norms = match (&layer.w.q_norm, &layer.w.k_norm) {
                (Some(q), Some(k)) => Some((&q.w, &k.w, q.eps)),
                _ => None,
            };
            rope_kv_append(&b.qkv_out, &q3, cache, &b.position, m.rope(), qk_norms)
        }
        AttnInput::Separate => {
            r.norm_into(&layer.w.attn_norm, &b.y, &b.h)?;
            let heads = (nh, nkv, hd);
            let (pos, rope) = (&b.position, m.rope());
            layer
                .w
                .qkv_separate_into(&b.h, &b.qkv, heads, pos, pos, rope, cache, &b.scratch)
        }
    }
}

/// Attention of the token's queries over the cache up to the device position, into `b.attn`.
fn attention(
    m: &Model,
    cache: &KvCache,
    window: Option<usize>,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let s = m.spec();
    let (nh, hd) = (s.n_heads, s.head_dim);
    let mask = AttentionMask {
        causal: true,
        sliding_window: window,
        alibi: false,
    };
    // [1, heads, d] → [1, heads, 1, d] views; the caches whole, [1, kv_heads, capacity, d].
    let heads = |t: &Tensor| -> gpukit_ops::Result<Tensor> {
        t.reshape(&[1, nh, hd])?.transpose(0, 1)?.unsqueeze(0)
    };
    sdpa_decode_at_into(
        &heads(&b.qkv.q)?,
        &cache.key_storage().unsqueeze(0)?,
        &cache.value_storage().unsqueeze(0)?,
        cache.layout(),
        &b.position,
        1.0 / (hd as f32).sqrt(),
        mask,
        &heads(&b.attn)?,
        &b.workspace,
    )
}

/// The layer's MLP activation as its plan forms it; returns the buffer holding it.
fn mlp<'b>(r: &mut Residual, layer: &Layer, b: &'b Buffers) -> gpukit_ops::Result<&'b Tensor> {
    match &layer.plan.mlp {
        Mlp::NormSwiglu { gate_up } => {
            ops::rms_norm_swiglu_into(&r.pre_norm(&layer.w.mlp_norm, &b.y), gate_up, &b.act)?;
            r.added();
            Ok(&b.act)
        }
        Mlp::Swiglu { gate_up } => {
            r.norm_into(&layer.w.mlp_norm, &b.y, &b.h)?;
            ops::linear_swiglu_into(&b.h, gate_up, &b.act)?;
            Ok(&b.act)
        }
        Mlp::SwigluSeparate => {
            r.norm_into(&layer.w.mlp_norm, &b.y, &b.h)?;
            layer
                .w
                .swiglu_separate_into(&b.h, &b.gate, &b.up, &b.act, &b.scratch)
        }
        Mlp::Gelu => {
            r.norm_into(&layer.w.mlp_norm, &b.y, &b.h)?;
            layer
                .w
                .up
                .forward_into(&b.h, Activation::GeluTanh, &b.up, &b.scratch)?;
            Ok(&b.up)
        }
    }
}

/// The final norm, the LM head and the draw into `b.token`, as [`Head`] says.
fn next_token(
    r: &mut Residual,
    m: &Model,
    params: &SamplingParams,
    head: &Head,
    b: &Buffers,
) -> gpukit_ops::Result<()> {
    let tied = Linear {
        w: Weight::Dense(m.embedding.clone()),
        b: None,
    };
    let lm_head = m.head.as_ref().unwrap_or(&tied);
    match head {
        Head::NormGreedy => {
            let x = r.pre_norm(&m.norm, &b.y);
            let w = lm_head.w.tensor();
            ops::rms_norm_linear_greedy_into(&x, w, &b.logits, &b.workspace, &b.token)
        }
        Head::Sampled { fused_norm } => {
            r.norm_linear(&m.norm, lm_head, *fused_norm, b, &b.logits)?;
            sample_tokens_into(
                &b.logits,
                b.recent.as_ref(),
                params,
                &b.step,
                &b.sampler_ws,
                &b.token,
            )
        }
    }
}
