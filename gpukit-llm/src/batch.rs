//! The forward pass over a batch of sequences through a paged KV cache: the step a serving
//! engine runs (decode tokens of many sequences and chunks of their prompts in one pass).
//!
//! The batch is flat: `tokens` rows, each belonging to a sequence at a position. Every op a row
//! goes through computes that row from its own inputs only, in an order that does not depend on
//! the batch — the projections through `ops::linear_batch_invariant_into`, the norms, RoPE and
//! the elementwise ops row by row, attention through `gpukit_ops::paged` — so a sequence's
//! logits are bit for bit the same alone or beside any other sequences, at any index of the
//! batch, with its prompt in any chunks (the tests check it on the CPU and on CUDA).

use gpukit_ops::ops;
use gpukit_ops::paged::{PagedBatch, paged_attention_into, paged_kv_write_into};
use gpukit_ops::rope::rope_inplace;
use gpukit_ops::{BinaryOp, Tensor, UnaryOp};

use crate::layers::{Linear, Weight};
use crate::model::Model;
use crate::profile::{Part, StepProfiler};
use crate::spec::MlpKind;
use crate::{Error, Result};

/// The paged KV cache's device memory: per layer, keys and values of `num_blocks` blocks of
/// `block_size` positions, `[num_blocks, block_size, kv_heads, head_dim]` in the model's dtype.
/// Which block holds which positions is [`crate::paged::BlockPool`]'s business.
pub struct PagedKvCache {
    layers: Vec<(Tensor, Tensor)>,
    block_size: usize,
    num_blocks: usize,
}

impl std::fmt::Debug for PagedKvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedKvCache")
            .field("num_blocks", &self.num_blocks)
            .field("block_size", &self.block_size)
            .finish()
    }
}

impl PagedKvCache {
    /// Bytes one token position takes across all of `model`'s layers (keys and values).
    pub fn bytes_per_position(model: &Model) -> usize {
        let s = model.spec();
        2 * s.n_layers * s.n_kv_heads * s.head_dim * model.dtype().size_in_bytes()
    }

    /// A cache of `num_blocks` blocks of `block_size` positions for `model`, on its device.
    ///
    /// # Errors
    /// [`Error::Invalid`] for zero blocks or block size; memory errors (the pool's out of
    /// memory names the size).
    pub fn new(model: &Model, num_blocks: usize, block_size: usize) -> Result<PagedKvCache> {
        if num_blocks == 0 || block_size == 0 {
            return Err(Error::Invalid {
                what: "KV cache",
                detail: format!("{num_blocks} blocks of {block_size} positions"),
            });
        }
        let s = model.spec();
        let shape = [num_blocks, block_size, s.n_kv_heads, s.head_dim];
        let layers = (0..s.n_layers)
            .map(|_| {
                let dev = model.device();
                Ok((
                    Tensor::zeros(&shape, model.dtype(), dev)?,
                    Tensor::zeros(&shape, model.dtype(), dev)?,
                ))
            })
            .collect::<gpukit_ops::Result<Vec<_>>>()?;
        Ok(PagedKvCache {
            layers,
            block_size,
            num_blocks,
        })
    }

    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks per layer.
    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }
}

/// One step's batch, on the host: every row's token, sequence, position and cache slot, the
/// sequences' block tables, and the rows whose logits are wanted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepBatch {
    /// Token ids, one per row.
    pub ids: Vec<u32>,
    /// Each row's sequence: an index into `block_tables`.
    pub seq: Vec<u32>,
    /// Each row's position in its sequence.
    pub pos: Vec<u32>,
    /// Each row's slot (`block · block_size + position % block_size`), where its keys and
    /// values are written.
    pub slots: Vec<u32>,
    /// Each sequence's block ids in position order.
    pub block_tables: Vec<Vec<u32>>,
    /// Rows whose logits the step returns, in this order (a sequence's last row of the step,
    /// when it is the last of what the sequence has to compute).
    pub logits_rows: Vec<u32>,
}

impl Model {
    /// Runs a batch of rows through the model, reading and writing keys and values through
    /// `cache`, and returns the logits of `batch.logits_rows`: `[logits_rows, vocab]` in the
    /// compute dtype, on the model's device (no rows when a step only fills the cache with
    /// parts of prompts). Each row attends to its sequence's positions up to
    /// its own, which must be in the cache or among the batch's rows.
    ///
    /// # Errors
    /// [`Error::Invalid`] for an inconsistent batch (lengths that differ, an id outside the
    /// vocabulary, a position past the model's, a slot or block outside the cache, a sequence
    /// or logits row out of range); op errors.
    pub fn forward_paged(&self, cache: &PagedKvCache, batch: &StepBatch) -> Result<Tensor> {
        check_batch(self, cache, batch)?;
        Ok(self.forward_paged_pass(cache, batch, &mut Pass { prof: None })?)
    }

    /// [`forward_paged`](Self::forward_paged) with marks between its kernels: `prof` must have
    /// been [started](StepProfiler::start); each projection is filed under [`Part::Linear`], the
    /// cache writes and attention under [`Part::Attention`], the rest under [`Part::Other`].
    ///
    /// # Errors
    /// As [`forward_paged`](Self::forward_paged); driver errors recording the marks.
    pub fn forward_paged_profiled(
        &self,
        cache: &PagedKvCache,
        batch: &StepBatch,
        prof: &mut StepProfiler,
    ) -> Result<Tensor> {
        check_batch(self, cache, batch)?;
        let logits = self.forward_paged_pass(cache, batch, &mut Pass { prof: Some(prof) })?;
        Ok(logits)
    }

    fn forward_paged_pass(
        &self,
        cache: &PagedKvCache,
        b: &StepBatch,
        pass: &mut Pass<'_>,
    ) -> gpukit_ops::Result<Tensor> {
        let s = &self.spec;
        let (t, dev, dt) = (b.ids.len(), &self.device, self.dtype);
        let (nh, nkv, hd) = (s.n_heads, s.n_kv_heads, s.head_dim);
        let i32s = |v: &[u32]| -> gpukit_ops::Result<Tensor> {
            let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            Tensor::from_slice(&v, &[v.len()], dev)
        };
        let ids = i32s(&b.ids)?;
        let positions = i32s(&b.pos)?;
        let slots = i32s(&b.slots)?;
        let token_seq = i32s(&b.seq)?;
        let max_blocks = b
            .block_tables
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut tables = vec![-1i32; b.block_tables.len() * max_blocks];
        for (row, table) in tables.chunks_exact_mut(max_blocks).zip(&b.block_tables) {
            for (slot, &id) in row.iter_mut().zip(table) {
                *slot = id as i32;
            }
        }
        let block_tables = Tensor::from_slice(&tables, &[b.block_tables.len(), max_blocks], dev)?;
        let paged = PagedBatch {
            block_tables: &block_tables,
            token_seq: &token_seq,
            token_pos: &positions,
        };
        let scale = 1.0 / (hd as f32).sqrt();
        let mut x = ops::embedding(&self.embedding, &ids)?;
        if let Some(p) = &self.position_embedding {
            x = ops::binary(BinaryOp::Add, &x, &ops::embedding(p, &positions)?)?;
        }
        for ((layer, (kc, vc)), window) in
            self.layers.iter().zip(&cache.layers).zip(&s.sliding_window)
        {
            let w = &layer.w;
            let h = w.attn_norm.forward(&x)?;
            let q = pass.linear(&w.q, &h)?.reshape(&[t, nh, hd])?;
            let mut k = pass.linear(&w.k, &h)?.reshape(&[t, nkv, hd])?;
            let v = pass.linear(&w.v, &h)?.reshape(&[t, nkv, hd])?;
            let q = match (&w.q_norm, &w.k_norm) {
                (Some(qn), Some(kn)) => {
                    k = kn.forward(&k)?;
                    qn.forward(&q)?
                }
                _ => q,
            };
            if let Some((inv_freq, rope_scale, layout)) = self.rope() {
                rope_inplace(&q, &positions, inv_freq, rope_scale, layout)?;
                rope_inplace(&k, &positions, inv_freq, rope_scale, layout)?;
            }
            pass.mark(Part::Other)?;
            paged_kv_write_into(&k, &v, kc, vc, &slots)?;
            let o = Tensor::empty(&[t, nh, hd], dt, dev)?;
            paged_attention_into(&q, kc, vc, &paged, scale, *window, &o)?;
            pass.mark(Part::Attention)?;
            let o = pass.linear(&w.o, &o.reshape(&[t, nh * hd])?)?;
            x = ops::binary(BinaryOp::Add, &x, &o)?;
            let h = w.mlp_norm.forward(&x)?;
            let a = match (&w.gate, s.mlp) {
                (Some(gate), MlpKind::SwiGlu) => {
                    let g = ops::unary(UnaryOp::Silu, &pass.linear(gate, &h)?)?;
                    ops::binary(BinaryOp::Mul, &g, &pass.linear(&w.up, &h)?)?
                }
                _ => ops::unary(UnaryOp::GeluTanh, &pass.linear(&w.up, &h)?)?,
            };
            x = ops::binary(BinaryOp::Add, &x, &pass.linear(&w.down, &a)?)?;
        }
        if b.logits_rows.is_empty() {
            return Tensor::empty(&[0, s.vocab], dt, dev);
        }
        let rows = i32s(&b.logits_rows)?;
        let h = self.norm.forward(&ops::index_select(&x, 0, &rows)?)?;
        match &self.head {
            Some(head) => pass.linear(head, &h),
            None => pass.linear(
                &Linear {
                    w: Weight::Dense(self.embedding.clone()),
                    b: None,
                },
                &h,
            ),
        }
    }
}

/// A forward pass's optional profiler.
struct Pass<'p> {
    prof: Option<&'p mut StepProfiler>,
}

impl Pass<'_> {
    /// Files the work since the last mark under `part`.
    fn mark(&mut self, part: Part) -> gpukit_ops::Result<()> {
        match self.prof.as_deref_mut() {
            Some(p) => p.split(part),
            None => Ok(()),
        }
    }

    /// `x [rows, in] · Wᵀ + b` through the batch-invariant linear.
    fn linear(&mut self, l: &Linear, x: &Tensor) -> gpukit_ops::Result<Tensor> {
        self.mark(Part::Other)?;
        let rows = x.shape()[0];
        let out = Tensor::empty(&[rows, l.out_features()], x.dtype(), &x.device())?;
        ops::linear_batch_invariant_into(x, l.w.tensor(), l.b.as_ref(), &out)?;
        self.mark(Part::Linear)?;
        Ok(out)
    }
}

/// Checks a batch against the model and the cache before anything runs (the kernels would
/// catch a bad slot or block too, but only at the next synchronisation and with less to say).
fn check_batch(model: &Model, cache: &PagedKvCache, b: &StepBatch) -> Result<()> {
    let bad = |detail: String| Error::Invalid {
        what: "batch",
        detail,
    };
    let t = b.ids.len();
    if t == 0 || b.seq.len() != t || b.pos.len() != t || b.slots.len() != t {
        return Err(bad(format!(
            "{t} ids, {} sequences, {} positions, {} slots: one of each per row, at least one row",
            b.seq.len(),
            b.pos.len(),
            b.slots.len()
        )));
    }
    let s = model.spec();
    let slots = cache.num_blocks * cache.block_size;
    for r in 0..t {
        let (id, seq, pos, slot) = (b.ids[r], b.seq[r] as usize, b.pos[r] as usize, b.slots[r]);
        if id as usize >= s.vocab {
            return Err(bad(format!(
                "token id {id} outside the vocabulary of {}",
                s.vocab
            )));
        }
        if pos >= s.max_positions {
            return Err(bad(format!(
                "position {pos} past the model's {} positions",
                s.max_positions
            )));
        }
        let table = b.block_tables.get(seq).ok_or_else(|| {
            bad(format!(
                "row {r} names sequence {seq} of {}",
                b.block_tables.len()
            ))
        })?;
        let block = table.get(pos / cache.block_size).copied();
        let expected = block.map(|blk| blk as usize * cache.block_size + pos % cache.block_size);
        if slot as usize >= slots || expected != Some(slot as usize) {
            return Err(bad(format!(
                "row {r} (sequence {seq}, position {pos}) writes slot {slot}, which is not \
                 its block table's slot for that position"
            )));
        }
    }
    if let Some(&blk) = b
        .block_tables
        .iter()
        .flatten()
        .find(|&&blk| blk as usize >= cache.num_blocks)
    {
        return Err(bad(format!(
            "block {blk} in a cache of {} blocks",
            cache.num_blocks
        )));
    }
    if let Some(&r) = b.logits_rows.iter().find(|&&r| r as usize >= t) {
        return Err(bad(format!("logits row {r} of {t} rows")));
    }
    Ok(())
}
