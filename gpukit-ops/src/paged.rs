//! The paged KV cache's ops (PagedAttention: Kwon et al. 2023, "Efficient Memory Management
//! for Large Language Model Serving with PagedAttention").
//!
//! Each attention layer's keys and values live in one tensor of fixed-size blocks,
//! `[num_blocks, block_size, kv_heads, head_dim]`: a *slot* (`block · block_size + offset`) per
//! token position. A sequence reaches its positions through its block table (block ids in
//! position order), so sequences of any length share one pool of blocks.
//!
//! The ops take a flat batch of tokens from many sequences — decode tokens and chunks of prompts
//! mixed, described by a [`PagedBatch`] — and compute each token from its own inputs only, in an
//! order fixed by the token's position. A token's result is therefore bit for bit the same
//! whatever else is in the batch and however its prompt was chunked (batch invariance); the
//! tests check this on the CPU and on CUDA.

use gpukit_driver::KernelArgs;
use gpukit_kernels::paged::{self as kernels, PagedKernel};
use gpukit_kernels::shared::PAGED_MAX_HEAD_DIM;
use gpukit_kernels::{DType, grid};
use rayon::prelude::*;

use crate::ops::{
    check_out, dptr, float_only, need_contiguous, same_device, u32_dim, workspace_or_new,
};
use crate::{Device, Error, Result, Tensor};

/// Where each token of a batch belongs: its sequence's block table and its position.
#[derive(Clone, Copy, Debug)]
pub struct PagedBatch<'a> {
    /// i32 `[sequences, max_blocks]`: each sequence's block ids in position order (position `p`
    /// in block `p / block_size`); entries past a sequence's end are never read.
    pub block_tables: &'a Tensor,
    /// i32 `[tokens]`: each token's row of `block_tables`.
    pub token_seq: &'a Tensor,
    /// i32 `[tokens]`: each token's position in its sequence (its keys and values must already
    /// be in the cache, with those of every earlier position).
    pub token_pos: &'a Tensor,
}

/// The shape of a paged cache tensor `[num_blocks, block_size, kv_heads, head_dim]`.
fn cache_shape(op: &'static str, cache: &Tensor) -> Result<[usize; 4]> {
    match *cache.shape() {
        [b, s, h, d] if b > 0 && s > 0 && h > 0 && d > 0 => Ok([b, s, h, d]),
        _ => Err(Error::shape(
            op,
            format!(
                "the cache {:?} must be [num_blocks, block_size, kv_heads, head_dim], none zero",
                cache.shape()
            ),
        )),
    }
}

fn i32_vector(op: &'static str, what: &str, t: &Tensor, len: usize) -> Result<()> {
    Error::expect_dtype(op, t.dtype(), DType::I32)?;
    if t.shape() != [len] {
        return Err(Error::shape(
            op,
            format!("{what} {:?} must be [{len}]", t.shape()),
        ));
    }
    Ok(())
}

/// Writes the keys and values of a batch's new tokens, `k` and `v` `[tokens, kv_heads,
/// head_dim]`, into the paged caches `[num_blocks, block_size, kv_heads, head_dim]` at `slots`
/// (i32 `[tokens]`, `block · block_size + offset`; a negative slot writes nothing).
///
/// # Errors
/// [`Error::Shape`] / [`Error::DType`] for mismatched operands; [`Error::Index`] for a slot
/// outside the cache (at once on the CPU, at the next synchronising call on CUDA, where that
/// token is not written).
pub fn paged_kv_write_into(
    k: &Tensor,
    v: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    slots: &Tensor,
) -> Result<()> {
    const OP: &str = "paged_kv_write";
    let dev = same_device(OP, &[k, v, k_cache, v_cache, slots])?;
    let [blocks, block_size, kv_heads, head_dim] = cache_shape(OP, k_cache)?;
    if v_cache.shape() != k_cache.shape() {
        return Err(Error::shape(
            OP,
            format!(
                "the value cache {:?} must match the key cache {:?}",
                v_cache.shape(),
                k_cache.shape()
            ),
        ));
    }
    let tokens = k.shape().first().copied().unwrap_or(0);
    for t in [k, v] {
        crate::ops::same_dtype(OP, k_cache, t)?;
        if t.shape() != [tokens, kv_heads, head_dim] {
            return Err(Error::shape(
                OP,
                format!(
                    "new rows {:?} must be [tokens, {kv_heads}, {head_dim}] like the keys {:?}",
                    t.shape(),
                    k.shape()
                ),
            ));
        }
    }
    crate::ops::same_dtype(OP, k_cache, v_cache)?;
    i32_vector(OP, "slots", slots, tokens)?;
    need_contiguous(OP, k_cache, "the key cache")?;
    need_contiguous(OP, v_cache, "the value cache")?;
    let num_slots = blocks * block_size;
    let row = kv_heads * head_dim;
    match &dev {
        Device::Cpu => {
            let slots = slots.to_vec::<i32>()?;
            if let Some(&s) = slots.iter().find(|&&s| s >= 0 && s as usize >= num_slots) {
                return Err(Error::Index {
                    op: OP,
                    detail: format!("slot {s} in a cache of {num_slots} slots"),
                });
            }
            for (cache, fresh) in [(k_cache, k), (v_cache, v)] {
                let src = fresh.to_vec_f64()?;
                let base = cache.layout().offset();
                let mut dst = cache.host_mut("cpu")?;
                for (t, &s) in slots.iter().enumerate().filter(|(_, s)| **s >= 0) {
                    for c in 0..row {
                        dst.set(base + s as usize * row + c, src[t * row + c]);
                    }
                }
            }
            Ok(())
        }
        Device::Cuda(c) => {
            if tokens == 0 {
                return Ok(());
            }
            let (k, v) = (k.contiguous()?, v.contiguous()?);
            let args = KernelArgs::new()
                .arg(dptr(k_cache)?)
                .arg(dptr(v_cache)?)
                .arg(dptr(&k)?)
                .arg(dptr(&v)?)
                .arg(dptr(slots)?)
                .arg(u32_dim(OP, tokens)?)
                .arg(u32_dim(OP, row)?)
                .arg(num_slots as u64)
                .arg(c.err_ptr());
            // SAFETY: the caches hold num_slots rows of `row` elements, k and v tokens rows,
            // slots tokens i32; the kernel writes only slots in [0, num_slots) and reports the
            // others through the 4-byte error flag.
            unsafe {
                c.launch(
                    PagedKernel::KvWrite(k_cache.dtype()),
                    &grid::elementwise(tokens * row, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// Attention of each token of a batch over its own sequence's cached keys and values up to its
/// position: `out[t, h] = softmax(scale · q[t, h] · K[lo..=pos]ᵀ) · V[lo..=pos]`, where `lo` is 0,
/// or `pos + 1 - w` with a sliding window of `w` positions. Query head `h` reads KV head
/// `h / (heads / kv_heads)` (grouped-query attention).
///
/// `q` and `out` are `[tokens, heads, head_dim]`, the caches `[num_blocks, block_size, kv_heads,
/// head_dim]` (f32, f16 or bf16, one dtype throughout; head_dim at most
/// [`PAGED_MAX_HEAD_DIM`]; on CUDA a multiple of 16 bytes' elements). Accumulation is in f32:
/// on the CPU keys in position order; on CUDA in partitions of 1,024 positions, each a block
/// with the online softmax of Milakov & Gimelshein 2018 ("Online normalizer calculation for
/// softmax"), merged in warp and then partition order. f16/bf16 at head dims 64, 80, 96, 128
/// and 256 run on the tensor cores as flash-decoding (Dao et al. 2023): the query heads of a KV
/// head are the rows of `mma.sync` tiles, 64-key tiles go through shared memory, each of four
/// warps takes 16 keys of each, and the softmax weights are rounded to the input dtype before
/// they multiply the values (as FlashAttention does). Other dtypes and head dims take one warp's
/// tile of 32 keys at a time on the CUDA cores. Every boundary is a function of the token's
/// position, so each token's output is a function of its own query and keys only.
///
/// On CUDA a token whose keys span several partitions leaves their states in an f32 workspace
/// of `tokens · heads · P · (head_dim + 2)` values, P the partitions the block tables' width
/// allows (`⌈max_blocks · block_size / 1024⌉`, when above 1): every token gets P rows, so one
/// long sequence in a batch of many tokens sizes it for all of them.
///
/// # Errors
/// [`Error::Shape`] / [`Error::DType`] for mismatched operands; [`Error::Index`] for a block id
/// outside the cache or a sequence row outside the block tables (at once on the CPU; on CUDA a
/// bad block id is reported at the next synchronising call and that token's output is zero).
pub fn paged_attention_into(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    batch: &PagedBatch<'_>,
    scale: f32,
    sliding_window: Option<usize>,
    out: &Tensor,
) -> Result<()> {
    paged_attention_with_workspace_into(
        q,
        k_cache,
        v_cache,
        batch,
        scale,
        sliding_window,
        None,
        out,
    )
}

/// f32 values of the workspace [`paged_attention_with_workspace_into`] takes for `tokens`
/// tokens of `heads` query heads of `head_dim`, with block tables `max_blocks` wide of
/// `block_size` positions (0: none needed, one partition).
pub fn paged_attention_workspace_len(
    tokens: usize,
    heads: usize,
    head_dim: usize,
    max_blocks: usize,
    block_size: usize,
) -> usize {
    match kernels::partitions(max_blocks.saturating_mul(block_size)) {
        1 => 0,
        parts => tokens * heads * parts * (head_dim + 2),
    }
}

/// [`paged_attention_into`] with the partitions' workspace given (f32, contiguous, at least
/// [`paged_attention_workspace_len`] values; `None`: allocated when needed), so that nothing is
/// allocated: what a CUDA graph of the step needs, which replays with the same addresses.
///
/// # Errors
/// As [`paged_attention_into`]; [`Error::Shape`] / [`Error::DType`] for a workspace too small or
/// not f32.
#[allow(clippy::too_many_arguments)]
pub fn paged_attention_with_workspace_into(
    q: &Tensor,
    k_cache: &Tensor,
    v_cache: &Tensor,
    batch: &PagedBatch<'_>,
    scale: f32,
    sliding_window: Option<usize>,
    workspace: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "paged_attention";
    let PagedBatch {
        block_tables,
        token_seq,
        token_pos,
    } = *batch;
    let inputs = [q, k_cache, v_cache, block_tables, token_seq, token_pos];
    let dev = same_device(OP, &inputs)?;
    float_only(OP, q)?;
    let [num_blocks, block_size, kv_heads, head_dim] = cache_shape(OP, k_cache)?;
    let &[tokens, heads, qd] = q.shape() else {
        return Err(Error::shape(
            OP,
            format!("q {:?} must be [tokens, heads, head_dim]", q.shape()),
        ));
    };
    if qd != head_dim
        || v_cache.shape() != k_cache.shape()
        || heads == 0
        || !heads.is_multiple_of(kv_heads)
        || head_dim > PAGED_MAX_HEAD_DIM
    {
        return Err(Error::shape(
            OP,
            format!(
                "q {:?} with caches {:?} / {:?}: head dims must match (at most \
                 {PAGED_MAX_HEAD_DIM}), the caches' shapes too, and the query heads be a \
                 multiple of the KV heads",
                q.shape(),
                k_cache.shape(),
                v_cache.shape()
            ),
        ));
    }
    for t in [k_cache, v_cache] {
        crate::ops::same_dtype(OP, q, t)?;
    }
    Error::expect_dtype(OP, block_tables.dtype(), DType::I32)?;
    let &[seqs, max_blocks] = block_tables.shape() else {
        return Err(Error::shape(
            OP,
            format!(
                "block tables {:?} must be [sequences, max_blocks]",
                block_tables.shape()
            ),
        ));
    };
    i32_vector(OP, "token_seq", token_seq, tokens)?;
    i32_vector(OP, "token_pos", token_pos, tokens)?;
    check_out(OP, out, q.shape(), q.dtype(), &dev, &[q, k_cache, v_cache])?;
    need_contiguous(OP, k_cache, "the key cache")?;
    need_contiguous(OP, v_cache, "the value cache")?;
    let window = sliding_window.unwrap_or(0);
    if tokens == 0 {
        return Ok(());
    }
    let bad = |detail: String| Error::Index { op: OP, detail };
    match &dev {
        Device::Cpu => {
            let (seq, pos) = (token_seq.to_vec::<i32>()?, token_pos.to_vec::<i32>()?);
            let tables = block_tables.to_vec::<i32>()?;
            // Every token's slots, checked before anything is computed.
            let mut slots: Vec<Vec<usize>> = Vec::with_capacity(tokens);
            for (&s, &p) in seq.iter().zip(&pos) {
                if s < 0 || s as usize >= seqs || p < 0 || p as usize / block_size >= max_blocks {
                    return Err(bad(format!(
                        "token of sequence {s} at position {p}: the block tables are \
                         [{seqs}, {max_blocks}] of {block_size} positions"
                    )));
                }
                let lo = match window {
                    w if w > 0 => (p as usize + 1).saturating_sub(w),
                    _ => 0,
                };
                let row = &tables[s as usize * max_blocks..][..max_blocks];
                let mut keys = Vec::with_capacity(p as usize + 1 - lo);
                for key in lo..=p as usize {
                    let b = row[key / block_size];
                    if b < 0 || b as usize >= num_blocks {
                        return Err(bad(format!(
                            "block id {b} (sequence {s}, position {key}) in a cache of \
                             {num_blocks} blocks"
                        )));
                    }
                    keys.push(b as usize * block_size + key % block_size);
                }
                slots.push(keys);
            }
            let qv = q.to_vec_f32()?;
            let (kg, vg) = (k_cache.host("cpu")?, v_cache.host("cpu")?);
            let (k_base, v_base) = (k_cache.layout().offset(), v_cache.layout().offset());
            let row = kv_heads * head_dim;
            let group = heads / kv_heads;
            let mut o = vec![0f32; tokens * heads * head_dim];
            o.par_chunks_mut(head_dim)
                .enumerate()
                .for_each(|(item, o)| {
                    let (t, h) = (item / heads, item % heads);
                    let kvh = h / group;
                    let qr = &qv[item * head_dim..][..head_dim];
                    let scores: Vec<f32> = slots[t]
                        .iter()
                        .map(|&s| {
                            let at = k_base + s * row + kvh * head_dim;
                            let dot = (0..head_dim)
                                .fold(0f32, |acc, d| qr[d].mul_add(kg.get(at + d) as f32, acc));
                            dot * scale
                        })
                        .collect();
                    let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let p: Vec<f32> = scores.iter().map(|&s| (s - m).exp()).collect();
                    let l: f32 = p.iter().sum();
                    for (&s, &pj) in slots[t].iter().zip(&p) {
                        let at = v_base + s * row + kvh * head_dim;
                        for (d, od) in o.iter_mut().enumerate() {
                            *od = pj.mul_add(vg.get(at + d) as f32, *od);
                        }
                    }
                    for od in o.iter_mut() {
                        *od /= l;
                    }
                });
            drop((kg, vg));
            crate::ops::write_host(out, o.into_iter().map(f64::from))
        }
        Device::Cuda(c) => {
            let q = q.contiguous()?;
            need_contiguous(OP, out, "the output")?;
            for t in [block_tables, token_seq, token_pos] {
                need_contiguous(OP, t, "the batch description")?;
            }
            // Rows are read in 16-byte vectors.
            let vec = 16 / q.dtype().size_in_bytes().max(1);
            let aligned = [k_cache, v_cache]
                .iter()
                .all(|t| dptr(t).is_ok_and(|p| p.0.is_multiple_of(16)));
            if !head_dim.is_multiple_of(vec) || !aligned {
                return Err(Error::shape(
                    OP,
                    format!(
                        "on CUDA the head dim ({head_dim}) must be a multiple of {vec} and the \
                         caches 16-byte aligned"
                    ),
                ));
            }
            let max_parts = kernels::partitions(max_blocks.saturating_mul(block_size));
            // Each partition's state of tokens with several: (output, max, sum) per query head.
            let need =
                paged_attention_workspace_len(tokens, heads, head_dim, max_blocks, block_size);
            let partial = workspace_or_new(OP, workspace, need, &dev)?;
            let partial_ptr = partial.as_ref().map(dptr).transpose()?.unwrap_or_default();
            let head = KernelArgs::new()
                .arg(dptr(out)?)
                .arg(partial_ptr)
                .arg(dptr(&q)?)
                .arg(dptr(k_cache)?)
                .arg(dptr(v_cache)?)
                .arg(dptr(block_tables)?)
                .arg(dptr(token_seq)?)
                .arg(dptr(token_pos)?)
                .arg(u32_dim(OP, heads)?)
                .arg(u32_dim(OP, kv_heads)?);
            let tail = |args: KernelArgs| -> Result<KernelArgs> {
                Ok(args
                    .arg(u32_dim(OP, block_size)?)
                    .arg(u32_dim(OP, seqs)?)
                    .arg(u32_dim(OP, max_blocks)?)
                    .arg(u32_dim(OP, num_blocks)?)
                    .arg(scale)
                    .arg(u32_dim(OP, window)?)
                    .arg(u32_dim(OP, max_parts)?))
            };
            // SAFETY (both kernels): q and out hold tokens·heads·head_dim elements, the caches
            // num_blocks·block_size·kv_heads·head_dim (rows 16-byte aligned, checked above),
            // block_tables seqs·max_blocks i32 and token_seq/token_pos tokens i32 each; the
            // partial workspace tokens·heads·max_parts·(head_dim + 2) f32 where max_parts > 1
            // (no token has more partitions than max_blocks·block_size positions give, and
            // with one partition none is written). The kernels check each token's sequence row
            // against seqs, its position against max_blocks · block_size and every block id
            // against num_blocks before reading, and report a bad one through the 4-byte flag.
            if kernels::has_mma(q.dtype(), head_dim) {
                let props = c.props();
                let (cfg, stages) = kernels::attention_mma_grid(
                    tokens,
                    heads,
                    kv_heads,
                    max_parts,
                    head_dim,
                    props.shared_memory_per_multiprocessor_bytes as usize,
                    props.shared_memory_per_block_optin_bytes as usize,
                )?;
                let args = tail(head)?.arg(stages).arg(c.err_ptr());
                // SAFETY: as above; the launch gives the ring of `stages` tiles its shared
                // memory, and head_dim is the kernel's D.
                unsafe {
                    c.launch(
                        PagedKernel::AttentionMma {
                            dtype: q.dtype(),
                            head_dim: u32_dim(OP, head_dim)?,
                        },
                        &cfg,
                        &args,
                    )
                }?;
            } else {
                let args = tail(head.arg(u32_dim(OP, head_dim)?))?.arg(c.err_ptr());
                // SAFETY: as above.
                unsafe {
                    c.launch(
                        PagedKernel::Attention(q.dtype()),
                        &kernels::attention_grid(tokens, heads, kv_heads, max_parts)?,
                        &args,
                    )
                }?;
            }
            if let Some(partial) = &partial {
                let args = KernelArgs::new()
                    .arg(dptr(out)?)
                    .arg(dptr(partial)?)
                    .arg(dptr(token_seq)?)
                    .arg(dptr(token_pos)?)
                    .arg(u32_dim(OP, tokens)?)
                    .arg(u32_dim(OP, heads)?)
                    .arg(u32_dim(OP, head_dim)?)
                    .arg(u32_dim(OP, block_size)?)
                    .arg(u32_dim(OP, seqs)?)
                    .arg(u32_dim(OP, max_blocks)?)
                    .arg(u32_dim(OP, window)?)
                    .arg(u32_dim(OP, max_parts)?);
                // SAFETY: as above; the merge reads the partitions the attention kernel wrote
                // for tokens with more than one and writes those tokens' outputs.
                unsafe {
                    c.launch(
                        PagedKernel::Merge(q.dtype()),
                        &kernels::merge_grid(tokens, heads)?,
                        &args,
                    )
                }?;
            }
            Ok(())
        }
    }
}
