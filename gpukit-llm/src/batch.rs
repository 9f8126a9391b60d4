//! The forward pass over a batch of sequences through a paged KV cache: the step a serving
//! engine runs (decode tokens of many sequences and chunks of their prompts in one pass).
//!
//! The batch is flat: `tokens` rows, each belonging to a sequence at a position. Every op a row
//! goes through computes that row from its own inputs only, in an order that does not depend on
//! the batch — the projections through `ops::linear_batch_invariant_into`, the norms, RoPE and
//! the elementwise ops row by row, attention through `gpukit_ops::paged` — so a sequence's
//! logits are bit for bit the same alone or beside any other sequences, at any index of the
//! batch, with its prompt in any chunks (the tests check it on the CPU and on CUDA).

use std::collections::{HashMap, HashSet};

use gpukit_driver::Graph;
use gpukit_kernels::shared::PAGED_PART_KEYS;
use gpukit_ops::ops;
use gpukit_ops::paged::{
    PagedBatch, paged_attention_with_workspace_into, paged_attention_workspace_len,
    paged_kv_write_into,
};
use gpukit_ops::rope::rope_inplace;
use gpukit_ops::{BinaryOp, DType, Device, Tensor, UnaryOp};

use crate::layers::{Linear, Weight};
use crate::model::Model;
use crate::profile::{Part, StepProfiler};
use crate::spec::MlpKind;
use crate::{Error, Result};

/// The paged KV cache's device memory: per layer, keys and values of `num_blocks` blocks of
/// `block_size` positions and one more, the scratch block that a decode step's padding rows
/// write ([`PagedKvCache::scratch_block`]): `[num_blocks + 1, block_size, kv_heads, head_dim]` in
/// the model's dtype. Which block holds which positions is [`crate::paged::BlockPool`]'s business.
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
        let shape = [num_blocks + 1, block_size, s.n_kv_heads, s.head_dim];
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

    /// Blocks per layer for sequences (the scratch block aside).
    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }

    /// The block after the sequences' blocks, which no sequence owns: the padding rows of a
    /// [`PagedStep`] write their keys and values there.
    pub fn scratch_block(&self) -> u32 {
        self.num_blocks as u32
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
        let mut pass = Pass::fresh(self, None);
        Ok(self.forward_paged_eager(cache, batch, &mut pass)?)
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
        let mut pass = Pass::fresh(self, Some(prof));
        Ok(self.forward_paged_eager(cache, batch, &mut pass)?)
    }

    /// A decode batch (see [`PagedStep::takes`]) through `step`'s preallocated buffers: the
    /// layers and the final norm replay as a CUDA graph of the batch's size class (rows padded
    /// to a power of two, block tables to a power-of-two number of attention partitions) once
    /// that class has run eagerly; the LM head runs after it on the real rows. The logits
    /// `[rows, vocab]` are bit for bit those of [`forward_paged`](Self::forward_paged): the same
    /// kernels on the same values, each row computed from its own inputs (the padding rows
    /// write only the cache's scratch block, [`PagedKvCache::scratch_block`]). On the CPU the
    /// step runs eagerly.
    ///
    /// # Errors
    /// As [`forward_paged`](Self::forward_paged); [`Error::Invalid`] for a batch the step does
    /// not take; memory errors allocating the buffers (the caller can go on with
    /// [`forward_paged`](Self::forward_paged)); capture and launch errors.
    pub fn forward_paged_step(
        &self,
        cache: &PagedKvCache,
        batch: &StepBatch,
        step: &mut PagedStep,
    ) -> Result<Tensor> {
        check_batch(self, cache, batch)?;
        if !PagedStep::takes(batch) {
            return Err(Error::Invalid {
                what: "decode step",
                detail: format!(
                    "{} rows of {} sequences: a step takes one row per sequence, each with \
                     logits, at most {} rows",
                    batch.ids.len(),
                    batch.block_tables.len(),
                    PagedStep::MAX_ROWS
                ),
            });
        }
        let t = batch.ids.len();
        let bs = cache.block_size;
        let (rows, width) = PagedStep::class(batch, bs);
        step.reserve(self, cache, rows, width)?;
        let Some(bufs) = step.bufs.as_ref() else {
            return Err(Error::Invalid {
                what: "decode step",
                detail: "no buffers".into(),
            });
        };
        // The class's inputs, one upload: ids, positions, slots, sequences, block tables.
        let scratch = cache.scratch_block() as i32;
        let mut host = vec![0i32; 4 * rows + rows * width];
        let (ids, rest) = host.split_at_mut(rows);
        let (pos, rest) = rest.split_at_mut(rows);
        let (slots, rest) = rest.split_at_mut(rows);
        let (seq, tables) = rest.split_at_mut(rows);
        for r in 0..rows {
            seq[r] = r as i32;
            let row = &mut tables[r * width..(r + 1) * width];
            row.fill(-1);
            match r < t {
                true => {
                    ids[r] = batch.ids[r] as i32;
                    pos[r] = batch.pos[r] as i32;
                    slots[r] = batch.slots[r] as i32;
                    for (slot, &b) in row.iter_mut().zip(&batch.block_tables[r]) {
                        *slot = b as i32;
                    }
                }
                false => {
                    slots[r] = scratch * bs as i32;
                    row[0] = scratch;
                }
            }
        }
        let dev = self.device();
        let src = Tensor::from_slice(&host, &[host.len()], dev)?;
        let inputs = bufs.inputs.narrow(0, 0, host.len())?;
        ops::copy_into(&src, &inputs)?;
        let key = (rows, width);
        let record = || self.step_record(cache, bufs, rows, width);
        match dev {
            Device::Cuda(c) => match step.graphs.get(&key) {
                Some(g) => g.launch(c.stream()).map_err(gpukit_ops::Error::from)?,
                None if step.warm.contains(&key) => {
                    let g = c.capture(record)?;
                    g.launch(c.stream()).map_err(gpukit_ops::Error::from)?;
                    step.graphs.insert(key, g);
                }
                None => {
                    record()?;
                    step.warm.insert(key);
                }
            },
            Device::Cpu => record()?,
        }
        let h = bufs
            .view(Slot::Final, rows, self.spec.hidden)?
            .narrow(0, 0, t)?;
        Ok(self.lm_head(&h, &mut Pass::fresh(self, None))?)
    }

    /// The step's recorded work: the layers and the final norm of `rows` rows whose inputs and
    /// block tables (`width` blocks) are in `bufs`.
    fn step_record(
        &self,
        cache: &PagedKvCache,
        bufs: &StepBuffers,
        rows: usize,
        width: usize,
    ) -> gpukit_ops::Result<()> {
        let at = |i: usize, len: usize| bufs.inputs.narrow(0, i * rows, len);
        let block_tables = at(4, rows * width)?.reshape(&[rows, width])?;
        let d = DeviceBatch {
            ids: at(0, rows)?,
            positions: at(1, rows)?,
            slots: at(2, rows)?,
            token_seq: at(3, rows)?,
            block_tables,
        };
        let mut pass = Pass {
            bufs: Some(bufs),
            rows,
            ..Pass::fresh(self, None)
        };
        let x = self.forward_paged_layers(cache, &d, &mut pass)?;
        let h = pass.out(Slot::Final, self.spec.hidden)?;
        self.norm.forward_into(&x, &h)
    }

    /// The eager pass: uploads the batch, runs the layers, and the LM head over the logits rows.
    fn forward_paged_eager(
        &self,
        cache: &PagedKvCache,
        b: &StepBatch,
        pass: &mut Pass<'_, '_>,
    ) -> gpukit_ops::Result<Tensor> {
        let dev = &self.device;
        let i32s = |v: &[u32]| -> gpukit_ops::Result<Tensor> {
            let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
            Tensor::from_slice(&v, &[v.len()], dev)
        };
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
        let d = DeviceBatch {
            ids: i32s(&b.ids)?,
            positions: i32s(&b.pos)?,
            slots: i32s(&b.slots)?,
            token_seq: i32s(&b.seq)?,
            block_tables: Tensor::from_slice(&tables, &[b.block_tables.len(), max_blocks], dev)?,
        };
        pass.rows = b.ids.len();
        let x = self.forward_paged_layers(cache, &d, pass)?;
        if b.logits_rows.is_empty() {
            return Tensor::empty(&[0, self.spec.vocab], self.dtype, dev);
        }
        let rows = i32s(&b.logits_rows)?;
        let h = self.norm.forward(&ops::index_select(&x, 0, &rows)?)?;
        self.lm_head(&h, pass)
    }

    /// The LM head (or the tied embedding) over normalised rows `h`.
    fn lm_head(&self, h: &Tensor, pass: &mut Pass<'_, '_>) -> gpukit_ops::Result<Tensor> {
        let out = Tensor::empty(&[h.shape()[0], self.spec.vocab], h.dtype(), &h.device())?;
        match &self.head {
            Some(head) => pass.linear_to(head, h, &out)?,
            None => pass.linear_to(
                &Linear {
                    w: Weight::Dense(self.embedding.clone()),
                    b: None,
                },
                h,
                &out,
            )?,
        }
        Ok(out)
    }

    /// Every layer over the batch's rows; returns the last residual stream `[rows, hidden]`.
    fn forward_paged_layers(
        &self,
        cache: &PagedKvCache,
        d: &DeviceBatch,
        pass: &mut Pass<'_, '_>,
    ) -> gpukit_ops::Result<Tensor> {
        let s = &self.spec;
        let t = pass.rows;
        let (nh, nkv, hd, hidden) = (s.n_heads, s.n_kv_heads, s.head_dim, s.hidden);
        let paged = PagedBatch {
            block_tables: &d.block_tables,
            token_seq: &d.token_seq,
            token_pos: &d.positions,
        };
        let scale = 1.0 / (hd as f32).sqrt();
        // The residual stream alternates between two buffers (an op's output aliases no input).
        let xs = [pass.out(Slot::X0, hidden)?, pass.out(Slot::X1, hidden)?];
        let mut cur = 0;
        ops::index_select_into(&self.embedding, 0, &d.ids, &xs[0])?;
        if let Some(p) = &self.position_embedding {
            let pe = pass.out(Slot::Proj, hidden)?;
            ops::index_select_into(p, 0, &d.positions, &pe)?;
            ops::binary_into(BinaryOp::Add, &xs[0], &pe, &xs[1])?;
            cur = 1;
        }
        for ((layer, (kc, vc)), window) in
            self.layers.iter().zip(&cache.layers).zip(&s.sliding_window)
        {
            let w = &layer.w;
            let h = pass.out(Slot::H, hidden)?;
            w.attn_norm.forward_into(&xs[cur], &h)?;
            let q = pass.linear(&w.q, &h, Slot::Q)?.reshape(&[t, nh, hd])?;
            let mut k = pass.linear(&w.k, &h, Slot::K)?.reshape(&[t, nkv, hd])?;
            let v = pass.linear(&w.v, &h, Slot::V)?.reshape(&[t, nkv, hd])?;
            let q = match (&w.q_norm, &w.k_norm) {
                (Some(qn), Some(kn)) => {
                    let kn_out = pass.out(Slot::KNorm, nkv * hd)?.reshape(&[t, nkv, hd])?;
                    kn.forward_into(&k, &kn_out)?;
                    k = kn_out;
                    let qn_out = pass.out(Slot::QNorm, nh * hd)?.reshape(&[t, nh, hd])?;
                    qn.forward_into(&q, &qn_out)?;
                    qn_out
                }
                _ => q,
            };
            if let Some((inv_freq, rope_scale, layout)) = self.rope() {
                rope_inplace(&q, &d.positions, inv_freq, rope_scale, layout)?;
                rope_inplace(&k, &d.positions, inv_freq, rope_scale, layout)?;
            }
            pass.mark(Part::Other)?;
            paged_kv_write_into(&k, &v, kc, vc, &d.slots)?;
            let o = pass.out(Slot::Attn, nh * hd)?.reshape(&[t, nh, hd])?;
            let ws = pass.bufs.and_then(|b| b.attn_ws.as_ref());
            paged_attention_with_workspace_into(&q, kc, vc, &paged, scale, *window, ws, &o)?;
            pass.mark(Part::Attention)?;
            let o = pass.linear(&w.o, &o.reshape(&[t, nh * hd])?, Slot::Proj)?;
            ops::binary_into(BinaryOp::Add, &xs[cur], &o, &xs[1 - cur])?;
            cur = 1 - cur;
            let h = pass.out(Slot::H, hidden)?;
            w.mlp_norm.forward_into(&xs[cur], &h)?;
            let a = pass.out(Slot::Act, s.ffn)?;
            match (&w.gate, s.mlp) {
                (Some(gate), MlpKind::SwiGlu) => {
                    let g = pass.linear(gate, &h, Slot::Gate)?;
                    ops::unary_into(UnaryOp::Silu, &g, &a)?;
                    let u = pass.linear(&w.up, &h, Slot::Up)?;
                    ops::binary_into(BinaryOp::Mul, &a, &u, &g)?;
                    let down = pass.linear(&w.down, &g, Slot::Proj)?;
                    ops::binary_into(BinaryOp::Add, &xs[cur], &down, &xs[1 - cur])?;
                }
                _ => {
                    let u = pass.linear(&w.up, &h, Slot::Up)?;
                    ops::unary_into(UnaryOp::GeluTanh, &u, &a)?;
                    let down = pass.linear(&w.down, &a, Slot::Proj)?;
                    ops::binary_into(BinaryOp::Add, &xs[cur], &down, &xs[1 - cur])?;
                }
            }
            cur = 1 - cur;
        }
        Ok(xs[cur].clone())
    }
}

/// The device side of a step's batch: what the kernels read.
struct DeviceBatch {
    ids: Tensor,
    positions: Tensor,
    slots: Tensor,
    token_seq: Tensor,
    block_tables: Tensor,
}

/// The intermediate tensors of a pass, each a `[rows, width]` buffer of the step (the residual
/// stream's two, the norm's output, the projections', attention's, the MLP's, the final norm's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    X0,
    X1,
    H,
    Q,
    K,
    V,
    QNorm,
    KNorm,
    Attn,
    Proj,
    Gate,
    Up,
    Act,
    Final,
}

impl Slot {
    /// Every slot, in declaration order (so `ALL[s as usize] == s`).
    const ALL: [Slot; 14] = [
        Slot::X0,
        Slot::X1,
        Slot::H,
        Slot::Q,
        Slot::K,
        Slot::V,
        Slot::QNorm,
        Slot::KNorm,
        Slot::Attn,
        Slot::Proj,
        Slot::Gate,
        Slot::Up,
        Slot::Act,
        Slot::Final,
    ];

    /// Values per row for `model`.
    fn width(self, model: &Model) -> usize {
        let s = model.spec();
        match self {
            Slot::X0 | Slot::X1 | Slot::H | Slot::Proj | Slot::Final => s.hidden,
            Slot::Q | Slot::QNorm | Slot::Attn => s.n_heads * s.head_dim,
            Slot::K | Slot::V | Slot::KNorm => s.n_kv_heads * s.head_dim,
            Slot::Gate | Slot::Up | Slot::Act => s.ffn,
        }
    }
}

/// A [`PagedStep`]'s device memory for up to `rows` rows and block tables `width` blocks wide.
struct StepBuffers {
    rows: usize,
    width: usize,
    /// i32: ids, positions, slots, sequences (a row each) and the block tables.
    inputs: Tensor,
    /// One flat buffer per [`Slot`], indexed by the slot (in [`Slot::ALL`]'s order).
    slots: Vec<Tensor>,
    /// The batch-invariant linear's split workspace (f32), where its plans need one.
    linear_ws: Option<Tensor>,
    /// The paged attention's partition workspace (f32), where the width allows several.
    attn_ws: Option<Tensor>,
}

impl StepBuffers {
    fn new(model: &Model, cache: &PagedKvCache, rows: usize, width: usize) -> Result<StepBuffers> {
        let (dev, dt, s) = (model.device(), model.dtype(), model.spec());
        let slots = Slot::ALL
            .iter()
            .map(|slot| Tensor::empty(&[rows * slot.width(model)], dt, dev))
            .collect::<gpukit_ops::Result<Vec<_>>>()?;
        // The largest split workspace of any projection at any row count up to `rows`.
        let l = &model.layers[..model.layers.len().min(1)];
        let linears = l.iter().flat_map(|l| {
            let w = &l.w;
            [
                Some(&w.q),
                Some(&w.k),
                Some(&w.v),
                Some(&w.o),
                w.gate.as_ref(),
            ]
            .into_iter()
            .flatten()
            .chain([&w.up, &w.down])
        });
        let linear_len = linears
            .flat_map(|lin| {
                let (n, k) = (lin.out_features(), lin.w.tensor().shape()[1]);
                (0..=rows.ilog2())
                    .map(move |e| ops::linear_batch_invariant_workspace_len(dt, 1 << e, n, k))
            })
            .max()
            .unwrap_or(0);
        let attn_len =
            paged_attention_workspace_len(rows, s.n_heads, s.head_dim, width, cache.block_size);
        let f32s = |len: usize| -> Result<Option<Tensor>> {
            Ok(match len {
                0 => None,
                _ => Some(Tensor::empty(&[len], DType::F32, dev)?),
            })
        };
        Ok(StepBuffers {
            rows,
            width,
            inputs: Tensor::empty(&[4 * rows + rows * width], DType::I32, dev)?,
            slots,
            linear_ws: f32s(linear_len)?,
            attn_ws: f32s(attn_len)?,
        })
    }

    /// The first `rows` rows of `slot`'s buffer, `[rows, width]`.
    fn view(&self, slot: Slot, rows: usize, width: usize) -> gpukit_ops::Result<Tensor> {
        self.slots[slot as usize]
            .narrow(0, 0, rows * width)?
            .reshape(&[rows, width])
    }
}

/// A decode step of a batch of sequences, one row each, replayed as a CUDA graph per size class
/// (what a serving engine runs between prompt chunks). The host otherwise enqueues several
/// hundred kernels a step and waits for the logits, so a small batch's step is bound by the
/// host; a replay is one launch. Graphs are captured per class (rows rounded up to a power of
/// two, at most [`PagedStep::MAX_ROWS`]; block-table width rounded up to a power of two of
/// attention partitions) after one eager run of the class, over buffers sized for the largest
/// class seen (a larger one reallocates them and drops the graphs). See
/// [`Model::forward_paged_step`].
#[derive(Default)]
pub struct PagedStep {
    bufs: Option<StepBuffers>,
    graphs: HashMap<(usize, usize), Graph>,
    warm: HashSet<(usize, usize)>,
}

impl std::fmt::Debug for PagedStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedStep")
            .field("rows", &self.bufs.as_ref().map(|b| b.rows))
            .field("width", &self.bufs.as_ref().map(|b| b.width))
            .field("graphs", &self.graphs.len())
            .finish()
    }
}

impl PagedStep {
    /// Most rows (sequences) of a step.
    pub const MAX_ROWS: usize = 256;

    /// An empty step: buffers come with the first batch.
    pub fn new() -> PagedStep {
        PagedStep::default()
    }

    /// Whether `batch` is a decode batch the step runs: row `i` is sequence `i`'s only row and
    /// its logits row, at most [`PagedStep::MAX_ROWS`] of them.
    pub fn takes(batch: &StepBatch) -> bool {
        let t = batch.ids.len();
        (1..=Self::MAX_ROWS).contains(&t)
            && batch.block_tables.len() == t
            && batch.seq.iter().enumerate().all(|(i, &s)| s as usize == i)
            && batch
                .logits_rows
                .iter()
                .enumerate()
                .all(|(i, &r)| r as usize == i)
            && batch.logits_rows.len() == t
    }

    /// Graphs captured so far.
    pub fn graphs(&self) -> usize {
        self.graphs.len()
    }

    /// The size class of `batch`: rows and block-table width (in blocks of `block_size`).
    fn class(batch: &StepBatch, block_size: usize) -> (usize, usize) {
        let per_part = PAGED_PART_KEYS.div_ceil(block_size.max(1)).max(1);
        let blocks = batch.block_tables.iter().map(Vec::len).max().unwrap_or(1);
        let parts = blocks.div_ceil(per_part).max(1).next_power_of_two();
        (batch.ids.len().next_power_of_two(), parts * per_part)
    }

    /// Buffers for at least `rows` × `width` (reallocated larger, dropping the graphs, when
    /// they are smaller).
    fn reserve(
        &mut self,
        model: &Model,
        cache: &PagedKvCache,
        rows: usize,
        width: usize,
    ) -> Result<()> {
        if let Some(b) = &self.bufs
            && b.rows >= rows
            && b.width >= width
        {
            return Ok(());
        }
        let (r0, w0) = self.bufs.as_ref().map_or((0, 0), |b| (b.rows, b.width));
        self.graphs.clear();
        self.warm.clear();
        self.bufs = None;
        self.bufs = Some(StepBuffers::new(model, cache, rows.max(r0), width.max(w0))?);
        Ok(())
    }
}

/// A forward pass's source of tensors (fresh ones, or a step's buffers) and optional profiler.
struct Pass<'p, 'b> {
    prof: Option<&'p mut StepProfiler>,
    bufs: Option<&'b StepBuffers>,
    /// Rows of the pass.
    rows: usize,
    /// What fresh tensors are.
    dtype: DType,
    device: Device,
}

impl<'p> Pass<'p, '_> {
    /// A pass over `model` whose tensors are allocated as it goes.
    fn fresh(model: &Model, prof: Option<&'p mut StepProfiler>) -> Self {
        Pass {
            prof,
            bufs: None,
            rows: 0,
            dtype: model.dtype(),
            device: model.device().clone(),
        }
    }

    /// `[rows, width]` for `slot`: the step's buffer, or a new tensor.
    fn out(&self, slot: Slot, width: usize) -> gpukit_ops::Result<Tensor> {
        match self.bufs {
            Some(b) => b.view(slot, self.rows, width),
            None => Tensor::empty(&[self.rows, width], self.dtype, &self.device),
        }
    }

    /// Files the work since the last mark under `part`.
    fn mark(&mut self, part: Part) -> gpukit_ops::Result<()> {
        match self.prof.as_deref_mut() {
            Some(p) => p.split(part),
            None => Ok(()),
        }
    }

    /// `x [rows, in] · Wᵀ + b` through the batch-invariant linear, into `slot`.
    fn linear(&mut self, l: &Linear, x: &Tensor, slot: Slot) -> gpukit_ops::Result<Tensor> {
        let out = match self.bufs {
            Some(b) => b.view(slot, self.rows, l.out_features())?,
            None => Tensor::empty(&[x.shape()[0], l.out_features()], x.dtype(), &x.device())?,
        };
        self.linear_to(l, x, &out)?;
        Ok(out)
    }

    /// `x [rows, in] · Wᵀ + b` through the batch-invariant linear, into `out`.
    fn linear_to(&mut self, l: &Linear, x: &Tensor, out: &Tensor) -> gpukit_ops::Result<()> {
        self.mark(Part::Other)?;
        let ws = self.bufs.and_then(|b| b.linear_ws.as_ref());
        ops::linear_batch_invariant_with_workspace_into(x, l.w.tensor(), l.b.as_ref(), ws, out)?;
        self.mark(Part::Linear)
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
