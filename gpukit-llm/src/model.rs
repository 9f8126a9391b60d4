//! A decoder-only transformer built from a [`ModelSpec`] — GPT-2, Llama, Mistral, Qwen2, Qwen3 —
//! with weights from an HF safetensors checkpoint or a GGUF file ([`crate::loader`]), and its
//! forward pass over a prompt (or any run of tokens) on gpukit-ops tensors, on the CPU or CUDA.
//! The decode step ([`crate::decode`]) runs one token at a time on the same weights.
//!
//! The attention reads the preallocated KV cache in place (`[kv_heads, max_len, head_dim]`
//! views, no copies), grouped-query heads without replication.

use gpukit_ops::attention::{AttentionMask, sdpa_kv};
use gpukit_ops::kv_cache::{KvCache, KvLayout};
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::rope::RopeLayout;
use gpukit_ops::{BinaryOp, DType, Device, Tensor};

use crate::layers::{Layer, Linear, Norm, QkvBuffers, Rope};
pub use crate::loader::LoadOptions;
use crate::spec::{MlpKind, ModelSpec};
use crate::{Error, Result};

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

    /// Counts `n` more tokens as seen, after their keys and values were appended at device
    /// positions.
    pub(crate) fn advance(&mut self, n: usize) -> Result<()> {
        self.pos += n;
        for c in &mut self.caches {
            c.set_len(self.pos)?;
        }
        Ok(())
    }
}

impl Model {
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

    /// RoPE's tables, where the model has rotary positions.
    pub(crate) fn rope(&self) -> Rope<'_> {
        self.rope.as_ref().map(|(f, s, l)| (f, *s, *l))
    }

    /// Bytes of the weights as stored on the device.
    pub fn weight_bytes(&self) -> usize {
        let t = Tensor::nbytes;
        let lin = |l: &Linear| t(l.w.tensor()) + l.b.as_ref().map_or(0, t);
        let norm = |n: &Norm| t(&n.w) + n.b.as_ref().map_or(0, t);
        self.layers
            .iter()
            .map(|l| l.w.weight_bytes())
            .sum::<usize>()
            + t(&self.embedding)
            + self.position_embedding.as_ref().map_or(0, t)
            + norm(&self.norm)
            + self.head.as_ref().map_or(0, lin)
    }

    /// A new conversation with room for `max_len` tokens.
    ///
    /// # Errors
    /// [`Error::Invalid`] if `max_len` exceeds the model's positions; memory errors.
    pub fn session(&self, max_len: usize) -> Result<Session> {
        let s = &self.spec;
        if max_len > s.max_positions {
            return Err(Error::Invalid {
                what: "session",
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
            .collect::<gpukit_ops::Result<Vec<_>>>()?;
        Ok(Session { caches, pos: 0 })
    }

    /// Runs `tokens` (the prompt, or the next token) through the model after what `session`
    /// holds and returns the logits of the last one: `[1, vocab]` in the compute dtype, on the
    /// model's device. On an error the session is left as it was.
    ///
    /// # Errors
    /// [`Error::Invalid`] for no tokens, an id outside the vocabulary or a session without
    /// room; op errors.
    pub fn forward(&self, session: &mut Session, tokens: &[u32]) -> Result<Tensor> {
        let s = &self.spec;
        let t = tokens.len();
        let room = session.capacity() - session.pos;
        let bad = |detail: String| Error::Invalid {
            what: "forward pass",
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
        match self.forward_pass(session, tokens) {
            Ok(logits) => {
                session.pos += t;
                Ok(logits)
            }
            Err(e) => {
                // Leave the session as it was: forget what the failed pass appended.
                for cache in &mut session.caches {
                    if cache.len() > session.pos {
                        cache.truncate(session.pos)?;
                    }
                }
                Err(e.into())
            }
        }
    }

    /// The forward pass of [`Model::forward`], layer by layer: embedding, then per layer the
    /// norm, q/k/v with their norms and RoPE into the cache, attention over the cache, the
    /// output projection and residual add, the norm, the MLP and residual add; the final norm
    /// and the LM head on the last row.
    fn forward_pass(&self, session: &mut Session, tokens: &[u32]) -> gpukit_ops::Result<Tensor> {
        let s = &self.spec;
        let (t, dev, dt) = (tokens.len(), &self.device, self.dtype);
        let (nh, nkv, hd) = (s.n_heads, s.n_kv_heads, s.head_dim);
        let ids: Vec<i32> = tokens.iter().map(|&i| i as i32).collect();
        let ids = Tensor::from_slice(&ids, &[t], dev)?;
        let pos: Vec<i32> = (session.pos..session.pos + t).map(|p| p as i32).collect();
        let positions = Tensor::from_slice(&pos, &[t], dev)?;
        let start = positions.narrow(0, 0, 1)?;
        let scale = 1.0 / (hd as f32).sqrt();
        let empty = |cols: usize| Tensor::empty(&[t, cols], dt, dev);
        // A quantized projection of one row applies its bias and activation from here.
        let scratch = Tensor::empty(&[s.ffn.max(s.vocab).max(s.hidden)], dt, dev)?;
        let qkv = QkvBuffers {
            q: empty(nh * hd)?,
            k: empty(nkv * hd)?,
            v: empty(nkv * hd)?,
            normed: match s.qk_norm {
                true => Some((empty(nh * hd)?, empty(nkv * hd)?)),
                false => None,
            },
        };
        let mut x = ops::embedding(&self.embedding, &ids)?;
        if let Some(p) = &self.position_embedding {
            x = ops::binary(BinaryOp::Add, &x, &ops::embedding(p, &positions)?)?;
        }
        let len = session.pos + t;
        for ((layer, cache), window) in self
            .layers
            .iter()
            .zip(session.caches.iter_mut())
            .zip(&s.sliding_window)
        {
            let h = layer.w.attn_norm.forward(&x)?;
            let heads = (nh, nkv, hd);
            let rope = self.rope();
            layer
                .w
                .qkv_separate_into(&h, &qkv, heads, &positions, &start, rope, cache, &scratch)?;
            cache.set_len(len)?;
            let mask = AttentionMask {
                causal: true,
                sliding_window: *window,
                alibi: false,
            };
            // [t, heads, d] → [1, heads, t, d] views; the cache is read in place.
            let q4 = qkv.q.reshape(&[t, nh, hd])?.transpose(0, 1)?.unsqueeze(0)?;
            let k4 = cache.keys()?.unsqueeze(0)?;
            let v4 = cache.values()?.unsqueeze(0)?;
            let o = sdpa_kv(&q4, &k4, &v4, cache.layout(), scale, mask)?
                .reshape(&[nh, t, hd])?
                .transpose(0, 1)?
                .reshape(&[t, nh * hd])?;
            x = ops::binary(BinaryOp::Add, &x, &layer.w.o.forward(&o, Activation::None)?)?;
            let h = layer.w.mlp_norm.forward(&x)?;
            let a = match (&layer.w.gate, s.mlp) {
                (Some(_), MlpKind::SwiGlu) => {
                    let (gate, up, act) = (empty(s.ffn)?, empty(s.ffn)?, empty(s.ffn)?);
                    layer
                        .w
                        .swiglu_separate_into(&h, &gate, &up, &act, &scratch)?
                        .clone()
                }
                _ => layer.w.up.forward(&h, Activation::GeluTanh)?,
            };
            x = ops::binary(
                BinaryOp::Add,
                &x,
                &layer.w.down.forward(&a, Activation::None)?,
            )?;
        }
        let h = self.norm.forward(&x.narrow(0, t - 1, 1)?)?;
        match &self.head {
            Some(head) => head.forward(&h, Activation::None),
            None => ops::linear(&h, &self.embedding, None, Activation::None),
        }
    }

    /// [`Model::forward`] with the logits as f32 values on the host.
    ///
    /// # Errors
    /// As [`Model::forward`].
    pub fn forward_logits(&self, session: &mut Session, tokens: &[u32]) -> Result<Vec<f32>> {
        let logits = self.forward(session, tokens)?;
        let logits = ops::to_dtype(&logits, DType::F32)?;
        Ok(logits.to_vec::<f32>()?)
    }
}
