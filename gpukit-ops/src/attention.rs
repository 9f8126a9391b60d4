//! Scaled dot-product attention — the CPU reference the attention kernels are tested against:
//! `softmax(Q·Kᵀ·scale + mask)·V`, accumulated in f64.
//!
//! Layout: `q [batch, q_heads, q_len, head_dim]`, `k`/`v [batch, kv_heads, kv_len, head_dim]`,
//! output like `q`. Grouped-query attention without replication: query head `h` reads KV head
//! `h / (q_heads / kv_heads)`. The causal mask is offset so the queries are the last `q_len`
//! positions: query `i` sits at position `kv_len − q_len + i` and sees keys at positions ≤ its
//! own, and with a sliding window `w` only the last `w` of them (positions > pos − w). ALiBi
//! (Press et al. 2022) adds `slope_h · (key position − query position)` to the scores, with the
//! slopes of [`alibi_slopes`].
//!
//! [`sdpa`] / [`sdpa_into`] run it on tensors: on the CPU through the reference, on CUDA with
//! the kernels of `gpukit-kernels/cuda/attention.cu` (f16/bf16, head_dim 64, 80, 96, 128, 256):
//! a FlashAttention-2-style tiled kernel for prefill (on Hopper, at head_dim 64 and 128 without ALiBi,
//! one on warpgroup MMA with FlashAttention-3's overlap of the next tile's scores and the
//! softmax) and split-K flash-decoding when a KV head serves at most 16 query rows (GQA group
//! times queries; on Hopper, at head_dim 64 and 128, one persistent kernel that streams the
//! cache through a shared-memory ring of bulk copies and merges its splits itself, elsewhere a
//! kernel per split and a combine kernel), all deterministic. Setting [`PORTABLE_SDPA_ENV`]
//! makes Hopper run the portable kernels too (for testing them there, and for comparisons).
//!
//! K and V may be laid out as a [`KvCache`](crate::kv_cache::KvCache) lays them out
//! ([`KvLayout`]; [`sdpa_kv_into`], [`sdpa_decode_at_into`]): every kernel reads the
//! pre-swizzled layout, and the Hopper decode kernel then copies its tiles as plain 1-d blocks
//! (rows contiguous), faster than through tensor maps.

use gpukit_driver::{KernelArgs, TensorMap, TensorMapElement};
use gpukit_kernels::attention::{self as kernels, AttentionKernel};
use gpukit_kernels::shared::SDPA_DECODE_ROWS;
use gpukit_kernels::{AttentionArgs, DType};
use gpukit_mem::DeviceBuffer;
use rayon::prelude::*;

use crate::device::LaneWorkspace;
use crate::kv_cache::KvLayout;
use crate::ops::{check_out, cuda, dptr, same_device, write_host};
use crate::{CudaDevice, Device, Error, Result, Tensor};

/// Environment variable: when set (to anything) at the process's first attention call, attention
/// uses the portable kernels (`mma.sync` prefill, `cp.async` decode with its combine kernel)
/// even where the Hopper ones (warpgroup-MMA prefill, the decode ring) apply.
pub const PORTABLE_SDPA_ENV: &str = "GPUKIT_SDPA_PORTABLE";

/// Whether [`PORTABLE_SDPA_ENV`] is set, read once per process (not on every call).
fn portable_forced() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| std::env::var_os(PORTABLE_SDPA_ENV).is_some())
}

/// Dimensions of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Sequences.
    pub batch: usize,
    /// Query heads.
    pub q_heads: usize,
    /// Key/value heads (divides `q_heads`).
    pub kv_heads: usize,
    /// Queries per sequence.
    pub q_len: usize,
    /// Keys per sequence.
    pub kv_len: usize,
    /// Values per head.
    pub head_dim: usize,
}

/// Which keys each query sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttentionMask {
    /// Causal (with the offset described in the module docs).
    pub causal: bool,
    /// Sliding window length (Mistral), with `causal`.
    pub sliding_window: Option<usize>,
    /// Add the ALiBi bias (slopes from the number of query heads).
    pub alibi: bool,
}

/// ALiBi slopes for `n_heads` heads (Press et al. 2022): `2^(−8(h+1)/p)` for the first `p`
/// heads, `p` the largest power of two ≤ `n_heads`, then the odd powers of `2^(−4/p)` for the
/// rest — as HF transformers' `build_alibi_tensor` builds them.
pub fn alibi_slopes(n_heads: usize) -> Vec<f32> {
    let p = if n_heads == 0 {
        1
    } else {
        1usize << n_heads.ilog2()
    };
    (0..n_heads)
        .map(|h| {
            let e = if h < p {
                -8.0 * (h + 1) as f64 / p as f64
            } else {
                -4.0 * (2 * (h - p) + 1) as f64 / p as f64
            };
            e.exp2() as f32
        })
        .collect()
}

impl AttentionShape {
    fn check(&self, q: usize, k: usize, v: usize, mask: &AttentionMask) -> Result<()> {
        let s = self;
        let bad = |detail: String| Err(Error::shape("sdpa", detail));
        if s.kv_heads == 0 || !s.q_heads.is_multiple_of(s.kv_heads) {
            return bad(format!(
                "{} query heads do not divide into {} KV heads",
                s.q_heads, s.kv_heads
            ));
        }
        // Element counts of q and of k/v. The product with every dimension at least 1 must fit
        // as well: an empty batch (or head, or row) makes no other size valid.
        let size = |heads: usize, len: usize| -> Result<usize> {
            let dims = [s.batch, heads, len, s.head_dim];
            if crate::checked_numel("sdpa", &dims.map(|x| x.max(1))).is_err() {
                return Err(Error::shape(
                    "sdpa",
                    format!("{dims:?} (batch, heads, length, head_dim) has too many elements"),
                ));
            }
            Ok(dims.iter().product())
        };
        let (nq, nk) = (size(s.q_heads, s.q_len)?, size(s.kv_heads, s.kv_len)?);
        if q != nq || k != nk || v != nk {
            return bad(format!(
                "{q}, {k}, {v} values for q, k, v of {s:?} (need {nq}, {nk}, {nk})"
            ));
        }
        if mask.causal && s.kv_len < s.q_len {
            return bad(format!(
                "causal attention with {} queries over {} keys",
                s.q_len, s.kv_len
            ));
        }
        if mask.sliding_window == Some(0) || (mask.sliding_window.is_some() && !mask.causal) {
            return bad("a sliding window needs a causal mask and at least one position".into());
        }
        Ok(())
    }
}

/// The reference attention (see the module docs). Returns the output, laid out like `q`.
///
/// # Errors
/// [`Error::Shape`] for sizes that do not match `shape`, heads that do not group, a causal mask
/// with more queries than keys, or an empty sliding window.
pub fn sdpa_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttentionShape,
    scale: f32,
    mask: AttentionMask,
) -> Result<Vec<f32>> {
    shape.check(q.len(), k.len(), v.len(), &mask)?;
    let AttentionShape {
        batch: _,
        q_heads,
        kv_heads,
        q_len,
        kv_len,
        head_dim: d,
    } = shape;
    if q.is_empty() {
        return Ok(Vec::new());
    }
    let group = q_heads / kv_heads;
    let slopes = if mask.alibi {
        alibi_slopes(q_heads)
    } else {
        Vec::new()
    };
    let mut out = vec![0f32; q.len()];
    // One task per (batch, query head): its output rows are one contiguous block.
    out.par_chunks_mut((q_len * d).max(1))
        .enumerate()
        .for_each(|(bh, out_head)| {
            let (b, h) = (bh / q_heads, bh % q_heads);
            let kbase = (b * kv_heads + h / group) * kv_len * d;
            let (keys, values) = (&k[kbase..][..kv_len * d], &v[kbase..][..kv_len * d]);
            let mut p = vec![0f64; kv_len];
            let mut acc = vec![0f64; d];
            for (i, orow) in out_head.chunks_exact_mut(d).enumerate() {
                let qrow = &q[(bh * q_len + i) * d..][..d];
                // The query's position among the keys: kv_len − q_len + i (below 0 only without
                // a causal mask, where it serves ALiBi alone).
                let pos = (kv_len + i).checked_sub(q_len);
                let visible = |j: usize| {
                    !mask.causal
                        || pos.is_some_and(|p| {
                            j <= p && mask.sliding_window.is_none_or(|w| p - j < w)
                        })
                };
                let mut max = f64::NEG_INFINITY;
                for (j, (s, krow)) in p.iter_mut().zip(keys.chunks_exact(d)).enumerate() {
                    *s = if visible(j) {
                        let dot: f64 = qrow
                            .iter()
                            .zip(krow)
                            .map(|(a, b)| f64::from(*a) * f64::from(*b))
                            .sum();
                        let bias = if mask.alibi {
                            f64::from(slopes[h]) * ((j + q_len) as f64 - (kv_len + i) as f64)
                        } else {
                            0.0
                        };
                        dot * f64::from(scale) + bias
                    } else {
                        f64::NEG_INFINITY
                    };
                    max = max.max(*s);
                }
                // Unnormalised probabilities, then Σ p·V over the keys in order, then / Σ p.
                let mut z = 0f64;
                for s in p.iter_mut() {
                    *s = (*s - max).exp();
                    z += *s;
                }
                acc.fill(0.0);
                for (&pj, vrow) in p.iter().zip(values.chunks_exact(d)) {
                    if pj != 0.0 {
                        for (a, &x) in acc.iter_mut().zip(vrow) {
                            *a += pj * f64::from(x);
                        }
                    }
                }
                for (o, a) in orow.iter_mut().zip(&acc) {
                    *o = (a / z) as f32;
                }
            }
        });
    Ok(out)
}

/// The shape of an attention call on tensors `q [batch, q_heads, q_len, head_dim]`,
/// `k`/`v [batch, kv_heads, kv_len, head_dim]`.
///
/// # Errors
/// [`Error::Shape`] for ranks other than 4 or mismatched dimensions.
pub fn attention_shape(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<AttentionShape> {
    let bad = || {
        Error::shape(
            "sdpa",
            format!(
                "q {:?}, k {:?}, v {:?} must be [batch, heads, len, head_dim] with k and v alike",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        )
    };
    if q.rank() != 4 || k.rank() != 4 || k.shape() != v.shape() {
        return Err(bad());
    }
    let (qs, ks) = (q.shape(), k.shape());
    if qs[0] != ks[0] || qs[3] != ks[3] {
        return Err(bad());
    }
    Ok(AttentionShape {
        batch: qs[0],
        q_heads: qs[1],
        kv_heads: ks[1],
        q_len: qs[2],
        kv_len: ks[2],
        head_dim: qs[3],
    })
}

/// How the CUDA kernels run a shape: `Some((first key, keys per split, splits))` for the
/// split-K decode kernel, `None` for the prefill kernel.
fn decode_plan(s: &AttentionShape, mask: &AttentionMask) -> Option<(usize, usize, usize)> {
    let rows = (s.q_heads / s.kv_heads.max(1)).saturating_mul(s.q_len);
    if rows > SDPA_DECODE_ROWS {
        return None;
    }
    // Keys before the earliest query's window are never read.
    let first = match (mask.causal, mask.sliding_window) {
        (true, Some(w)) => {
            (((s.kv_len + 1).saturating_sub(s.q_len).saturating_sub(w) / 64) * 64).min(s.kv_len)
        }
        _ => 0,
    };
    let (chunk, splits) =
        kernels::decode_splits(s.kv_len - first, s.batch.saturating_mul(s.kv_heads));
    Some((first, chunk, splits))
}

/// f32 elements of the workspace [`sdpa_into`] needs on CUDA for this shape (0 when none). It
/// never decreases as `kv_len` grows and is bounded for a given batch, heads and head_dim, so a
/// workspace sized for the longest sequence serves every step of a decode loop.
pub fn sdpa_workspace_len(shape: &AttentionShape, mask: &AttentionMask) -> usize {
    match decode_plan(shape, mask) {
        Some((first, _, splits)) => {
            // The Hopper ring's split count (never more than the cp.async kernel's, but the
            // workspace serves whichever runs).
            let bkv = shape.batch.saturating_mul(shape.kv_heads);
            let ring = kernels::decode_ring_splits(shape.kv_len - first, bkv).1;
            let splits = splits.max(ring);
            if splits > 1 {
                // Rows of up to SDPA_DECODE_ROWS per split of head_dim + 2 floats (the portable
                // kernel: m, l, O) or head_dim + 4 (the ring: O, m, l, two to keep rows 16-byte
                // aligned). Saturating: a hand-made shape too large for any tensor asks for
                // usize::MAX.
                bkv.saturating_mul(splits)
                    .saturating_mul(SDPA_DECODE_ROWS)
                    .saturating_mul(shape.head_dim.saturating_add(4))
            } else {
                0
            }
        }
        None => 0,
    }
}

/// f32 elements of the workspace [`sdpa_decode_at_into`] needs for `shape` (`kv_len`: the cache
/// capacity), whatever the mask.
pub fn sdpa_decode_at_workspace_len(shape: &AttentionShape) -> usize {
    let causal = AttentionMask {
        causal: true,
        ..AttentionMask::default()
    };
    sdpa_workspace_len(shape, &causal)
}

/// Scaled dot-product attention `softmax(Q·Kᵀ·scale + bias + mask)·V` on tensors (see the
/// module docs for the layout and mask), into a new contiguous `[batch, q_heads, q_len,
/// head_dim]` tensor of q's dtype.
///
/// # Errors
/// As [`sdpa_into`].
pub fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor, scale: f32, mask: AttentionMask) -> Result<Tensor> {
    sdpa_kv(q, k, v, KvLayout::Linear, scale, mask)
}

/// [`sdpa`] with K and V rows laid out in `layout` (as in a
/// [`KvCache`](crate::kv_cache::KvCache), the key counted from each head's first row).
///
/// # Errors
/// As [`sdpa_kv_into`].
pub fn sdpa_kv(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: KvLayout,
    scale: f32,
    mask: AttentionMask,
) -> Result<Tensor> {
    let dev = same_device("sdpa", &[q, k, v])?;
    let shape = attention_shape(q, k, v)?;
    let out = crate::ops::new_output("sdpa", q.shape(), q, &dev)?;
    let ws = Tensor::empty(&[sdpa_workspace_len(&shape, &mask)], DType::F32, &dev)?;
    sdpa_kv_into(q, k, v, layout, scale, mask, &out, &ws)?;
    Ok(out)
}

/// [`sdpa`] into `out` (`[batch, q_heads, q_len, head_dim]`, any strides with the head
/// dimension contiguous). `workspace` is an f32 tensor of at least [`sdpa_workspace_len`]
/// elements (used by the CUDA decode kernel; ignored on the CPU). Allocates nothing; capturable.
/// On CUDA the operands' batch, head and row strides must be multiples of 8 elements and the
/// rows 16-byte aligned (true of contiguous tensors and of KV-cache views).
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes, heads that do not group, a causal mask with more
/// queries than keys, an empty sliding window, a scale that is not positive and finite,
/// misaligned strides or a short workspace;
/// [`Error::DType`] for mixed dtypes, and on CUDA for dtypes other than f16/bf16 or a head_dim
/// the kernels are not built for.
pub fn sdpa_into(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    mask: AttentionMask,
    out: &Tensor,
    workspace: &Tensor,
) -> Result<()> {
    sdpa_kv_into(q, k, v, KvLayout::Linear, scale, mask, out, workspace)
}

/// [`sdpa_into`] with K and V rows laid out in `layout` (as in a
/// [`KvCache`](crate::kv_cache::KvCache), the key counted from each head's first row: a view
/// that starts part-way into a cache must start at a multiple of 8 keys to keep its meaning).
/// On the CPU the rows are put back in order first.
///
/// # Errors
/// As [`sdpa_into`]; [`Error::Shape`] for a swizzled K or V view that starts part-way into its
/// head's rows at a key that is not a multiple of 8.
#[allow(clippy::too_many_arguments)]
pub fn sdpa_kv_into(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: KvLayout,
    scale: f32,
    mask: AttentionMask,
    out: &Tensor,
    workspace: &Tensor,
) -> Result<()> {
    let (dev, shape) = checked(q, k, v, scale, &mask, out, workspace)?;
    check_swizzle_start(layout, k, v)?;
    match &dev {
        Device::Cpu => {
            let rows = |t: &Tensor| -> Result<Vec<f32>> {
                let x = t.to_vec_f32()?;
                Ok(layout.linearize(x, shape.kv_len, shape.head_dim, t.dtype()))
            };
            let (q, k, v) = (q.to_vec_f32()?, rows(k)?, rows(v)?);
            let o = sdpa_reference(&q, &k, &v, shape, scale, mask)?;
            write_host(out, o.into_iter().map(f64::from))
        }
        Device::Cuda(_) => sdpa_cuda(q, k, v, layout, scale, mask, out, workspace, &shape, None),
    }
}

/// The checks every attention entry point makes; returns the device and the shape.
fn checked(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    mask: &AttentionMask,
    out: &Tensor,
    workspace: &Tensor,
) -> Result<(Device, AttentionShape)> {
    let dev = same_device("sdpa", &[q, k, v, workspace])?;
    let shape = attention_shape(q, k, v)?;
    for t in [k, v] {
        crate::ops::same_dtype("sdpa", q, t)?;
    }
    if !q.dtype().is_float() {
        return Err(Error::dtype(
            "sdpa",
            format!("needs float tensors, got {}", q.dtype()),
        ));
    }
    check_out("sdpa", out, q.shape(), q.dtype(), &dev, &[q, k, v])?;
    shape.check(q.numel(), k.numel(), v.numel(), mask)?;
    if shape.kv_len == 0 {
        return Err(Error::shape("sdpa", "attention over zero keys"));
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::shape(
            "sdpa",
            format!("the softmax scale must be positive and finite, got {scale}"),
        ));
    }
    Ok((dev, shape))
}

/// Refuses K or V in [`KvLayout::Swizzled`] whose view starts part-way into a head's rows at a
/// key that is not a multiple of 8: the kernels count each row's key from the operand's first
/// row, so such a view (of a cache, whose keys count from the cache's first row) would be read
/// with the wrong swizzle. The start is the view's offset within a head in rows: its offset
/// modulo the stride of the first dimension above the rows that has more than one element and
/// a stride of whole rows (a size-1 dimension's stride says nothing: a reshape resets it), else
/// its offset in rows. Rows whose stride is not positive are not a cache's, and are not checked.
fn check_swizzle_start(layout: KvLayout, k: &Tensor, v: &Tensor) -> Result<()> {
    if layout != KvLayout::Swizzled {
        return Ok(());
    }
    for (name, t) in [("K", k), ("V", v)] {
        let (shape, st) = (t.shape(), t.layout().strides());
        let row = st[2];
        if row <= 0 {
            continue;
        }
        let offset = t.layout().offset() as isize;
        let head = [1, 0]
            .into_iter()
            .find(|&d| shape[d] > 1 && st[d] > 0 && st[d] % row == 0)
            .map(|d| st[d]);
        let start = head.map_or(offset, |h| offset % h) / row;
        if start % 8 != 0 {
            return Err(Error::shape(
                "sdpa",
                format!(
                    "{name} in the swizzled KV layout starts at key {start} of its head's rows: a \
                     swizzled view must start at a multiple of 8 keys"
                ),
            ));
        }
    }
    Ok(())
}

/// Decode attention over KV caches whose filled length lives on the device — the attention of
/// a captured decode step. `q [batch, q_heads, q_len, head_dim]` are the queries at positions
/// `position .. position + q_len` (`position`: i32 `[1]` on q's device, read when the kernel
/// runs); `k`/`v [batch, kv_heads, capacity, head_dim]` are the whole caches, of which keys
/// `0 .. position + q_len` are attended (never past the capacity), under the causal mask and
/// the optional sliding window. The launch depends only on the shapes — the split count is
/// fixed by the capacity — so a graph replays it at any position, bit for bit as it runs
/// eagerly. `layout`: how the caches' rows are laid out
/// ([`KvCache::layout`](crate::kv_cache::KvCache::layout)).
/// `workspace`: f32, at least [`sdpa_decode_at_workspace_len`] elements. At most
/// [`SDPA_DECODE_ROWS`] query rows per KV head (GQA group × q_len). Allocates nothing;
/// capturable. The CPU reads the position and runs [`sdpa_kv_into`] on the filled keys.
///
/// # Errors
/// As [`sdpa_kv_into`]; a mask that is not causal; more query rows than the decode kernel takes;
/// `position` not an i32 `[1]` on the device; on the CPU, a position whose queries do not fit
/// the capacity.
#[allow(clippy::too_many_arguments)]
pub fn sdpa_decode_at_into(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: KvLayout,
    position: &Tensor,
    scale: f32,
    mask: AttentionMask,
    out: &Tensor,
    workspace: &Tensor,
) -> Result<()> {
    let (dev, shape) = checked(q, k, v, scale, &mask, out, workspace)?;
    check_swizzle_start(layout, k, v)?;
    same_device("sdpa", &[q, position])?;
    if position.dtype() != DType::I32 || position.shape() != [1] {
        return Err(Error::shape(
            "sdpa",
            format!(
                "the position must be an i32 [1], got {} {:?}",
                position.dtype(),
                position.shape()
            ),
        ));
    }
    if !mask.causal {
        return Err(Error::shape(
            "sdpa",
            "attention at a device position needs the causal mask",
        ));
    }
    let rows = shape.q_heads / shape.kv_heads * shape.q_len;
    if rows > SDPA_DECODE_ROWS {
        return Err(Error::shape(
            "sdpa",
            format!(
                "attention at a device position takes at most {} query rows per KV head, got {rows}",
                SDPA_DECODE_ROWS
            ),
        ));
    }
    match &dev {
        Device::Cpu => {
            let p = position.to_vec::<i32>()?[0];
            let keys = usize::try_from(p).ok().map(|p| p + shape.q_len);
            let Some(keys) = keys.filter(|&n| n <= shape.kv_len) else {
                return Err(Error::shape(
                    "sdpa",
                    format!(
                        "position {p} with {} queries does not fit a cache of {}",
                        shape.q_len, shape.kv_len
                    ),
                ));
            };
            let (k, v) = (k.narrow(2, 0, keys)?, v.narrow(2, 0, keys)?);
            sdpa_kv_into(q, &k, &v, layout, scale, mask, out, workspace)
        }
        Device::Cuda(_) => sdpa_cuda(
            q,
            k,
            v,
            layout,
            scale,
            mask,
            out,
            workspace,
            &shape,
            Some(position),
        ),
    }
}

/// Batch, head and row strides of a rank-4 operand whose last dimension is contiguous and whose
/// rows are 16-byte aligned.
fn strides16(t: &Tensor, what: &str) -> Result<[i64; 3]> {
    let s = t.layout().strides();
    let ok = s[3] == 1 && s[..3].iter().all(|&x| x % 8 == 0) && dptr(t)?.0 % 16 == 0;
    if !ok {
        return Err(Error::shape(
            "sdpa",
            format!(
                "{what} strides {s:?} must be multiples of 8 elements with rows 16-byte aligned \
                 and the head dimension contiguous (call contiguous() first)"
            ),
        ));
    }
    Ok([s[0] as i64, s[1] as i64, s[2] as i64])
}

#[allow(clippy::too_many_arguments)]
fn sdpa_cuda(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: KvLayout,
    scale: f32,
    mask: AttentionMask,
    out: &Tensor,
    workspace: &Tensor,
    s: &AttentionShape,
    position: Option<&Tensor>,
) -> Result<()> {
    let c = cuda(&out.device())?.clone();
    let dtype = q.dtype();
    if !matches!(dtype, DType::F16 | DType::BF16) {
        return Err(Error::dtype(
            "sdpa",
            format!("the CUDA kernels take f16 or bf16, got {dtype}"),
        ));
    }
    let head_dim = u32::try_from(s.head_dim).unwrap_or(0);
    if !kernels::HEAD_DIMS.contains(&head_dim) {
        return Err(Error::shape(
            "sdpa",
            format!(
                "the CUDA kernels are built for head_dim {:?}, not {}",
                kernels::HEAD_DIMS,
                s.head_dim
            ),
        ));
    }
    let u = |n: usize| crate::ops::u32_dim("sdpa", n);
    let mut args = AttentionArgs {
        q_stride: strides16(q, "q")?,
        k_stride: strides16(k, "k")?,
        v_stride: strides16(v, "v")?,
        o_stride: strides16(out, "out")?,
        q_heads: u(s.q_heads)?,
        kv_heads: u(s.kv_heads)?,
        q_len: u(s.q_len)?,
        kv_len: u(s.kv_len)?,
        scale_log2: scale * std::f32::consts::LOG2_E,
        causal: u32::from(mask.causal),
        // A window past every key is no window; clamped so any usize window fits the u32.
        window: u(mask.sliding_window.map_or(0, |w| w.min(s.kv_len)))?,
        alibi: u32::from(mask.alibi),
        position: position.map(dptr).transpose()?.unwrap_or_default(),
        kv_swizzled: layout.kernel_flag(),
        ..AttentionArgs::default()
    };
    let ptrs = [dptr(q)?, dptr(k)?, dptr(v)?, dptr(out)?];
    let run = |kernel: AttentionKernel, cfg: &gpukit_driver::LaunchConfig, args: KernelArgs| {
        // SAFETY: q, k, v and out are rank-4 tensors of the checked shape whose strides the
        // arguments carry (rows 16-byte aligned, head dimension contiguous); the kernels read
        // only rows < q_len / kv_len of heads < q_heads / kv_heads; the partial workspace holds
        // sdpa_workspace_len f32 (checked by the caller).
        unsafe { c.launch(kernel, cfg, &args) }
    };
    let tensors = |a: AttentionArgs| {
        let mut ka = KernelArgs::new();
        for p in ptrs {
            ka.push(p);
        }
        ka.arg(a)
    };
    // With a device position the keys before a sliding window are not known here: the plan
    // covers the whole capacity and the kernel masks.
    let plan_mask = AttentionMask {
        sliding_window: mask.sliding_window.filter(|_| position.is_none()),
        ..mask
    };
    match decode_plan(s, &plan_mask) {
        None => {
            let optin = c.props().shared_memory_per_block_optin_bytes as usize;
            let wgmma_cfg = if c.kernels().target() == "sm_90a"
                && kernels::WGMMA_HEAD_DIMS.contains(&head_dim)
                && !mask.alibi
                && !portable_forced()
            {
                kernels::prefill_wgmma(s.batch, s.q_heads, s.q_len, s.head_dim, optin)?
            } else {
                None
            };
            if let Some(cfg) = wgmma_cfg {
                return run(
                    AttentionKernel::SdpaPrefillWgmma { dtype, head_dim },
                    &cfg,
                    tensors(args),
                );
            }
            let (cfg, key_tile) = kernels::prefill(s.batch, s.q_heads, s.q_len, s.head_dim, optin)?;
            args.chunk = key_tile;
            run(
                AttentionKernel::Sdpa {
                    dtype,
                    head_dim,
                    decode: false,
                },
                &cfg,
                tensors(args),
            )
        }
        Some((first, chunk, splits)) => {
            let ring = decode_ring(&c, s, first, head_dim, layout, q, k, v)?;
            let (chunk, splits) = ring
                .as_ref()
                .map_or((chunk, splits), |r| (r.chunk, r.splits));
            args.key_begin = u(first)?;
            args.chunk = u(chunk)?;
            args.splits = u(splits)?;
            if splits > 1 {
                let need = sdpa_workspace_len(s, &plan_mask);
                if workspace.dtype() != DType::F32 || workspace.numel() < need {
                    return Err(Error::shape(
                        "sdpa",
                        format!(
                            "the workspace must be f32 with at least {need} elements, got {} {}",
                            workspace.numel(),
                            workspace.dtype()
                        ),
                    ));
                }
                crate::ops::need_contiguous("sdpa", workspace, "the workspace")?;
                args.partial = dptr(workspace)?;
            }
            if let Some(r) = ring {
                args.stages = r.stages;
                let mut ka = KernelArgs::new().arg(ptrs[0]).arg(ptrs[3]).arg(args);
                match r.maps {
                    Some((tk, tv)) => ka = ka.arg(tk).arg(tv),
                    None => ka = ka.arg(ptrs[1]).arg(ptrs[2]),
                }
                let kernel = AttentionKernel::SdpaDecodeRing {
                    dtype,
                    head_dim,
                    swizzled_kv: r.maps.is_none(),
                };
                let counters = c.workspace::<RingCounters>()?;
                return run(kernel, &r.cfg, ka.arg(counters.0.ptr()).arg(u(s.batch)?));
            }
            let props = c.props();
            let (cfg, stages) = kernels::decode(
                s.batch,
                s.kv_heads,
                splits,
                s.head_dim,
                props.shared_memory_per_multiprocessor_bytes as usize,
                props.shared_memory_per_block_optin_bytes as usize,
            )?;
            args.stages = stages;
            run(
                AttentionKernel::Sdpa {
                    dtype,
                    head_dim,
                    decode: true,
                },
                &cfg,
                tensors(args),
            )?;
            if splits > 1 {
                run(
                    AttentionKernel::SdpaCombine(dtype),
                    &kernels::combine(s.batch, s.kv_heads, s.head_dim, splits)?,
                    KernelArgs::new().arg(ptrs[3]).arg(args).arg(head_dim),
                )?;
            }
            Ok(())
        }
    }
}

/// The decode ring's split counters on a lane: [`kernels::RING_UNITS`] u32, zero between
/// launches (the split of each (sequence, KV head) that counts last returns its counter to
/// zero).
struct RingCounters(DeviceBuffer);

impl LaneWorkspace for RingCounters {
    const OP: &'static str = "sdpa decode";

    fn create(c: &CudaDevice) -> Result<Self> {
        let mut counters = c.alloc(4 * kernels::RING_UNITS)?;
        counters.fill_bytes(0)?;
        Ok(RingCounters(counters))
    }
}

/// A launch of the Hopper decode ring: its grid and ring, the split plan it was sized for, and
/// the K and V tensor maps (K/V laid out linearly), or none (pre-swizzled rows, copied by 1-d
/// bulk copies).
struct DecodeRing {
    cfg: gpukit_driver::LaunchConfig,
    stages: u32,
    chunk: usize,
    splits: usize,
    maps: Option<(TensorMap, TensorMap)>,
}

/// The decode ring for this call where it applies: the sm_90a image, head_dim 64 or 128, at
/// least [`kernels::RING_MIN_KEYS`] keys to read per head, the portable kernels not forced,
/// a ring that fits the device, and K/V views the ring can copy: pre-swizzled with contiguous
/// rows (1-d copies of whole tiles), or linear and addressable by the tensor memory accelerator
/// (4-d maps `[head_dim, kv_len, kv_heads, batch]` over their strides).
/// `None` sends the call to the portable decode kernel.
#[allow(clippy::too_many_arguments)]
fn decode_ring(
    c: &CudaDevice,
    s: &AttentionShape,
    first: usize,
    head_dim: u32,
    layout: KvLayout,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
) -> Result<Option<DecodeRing>> {
    if c.kernels().target() != "sm_90a"
        || !kernels::RING_HEAD_DIMS.contains(&head_dim)
        || s.kv_len - first < kernels::RING_MIN_KEYS
        || portable_forced()
    {
        return Ok(None);
    }
    let element = match q.dtype() {
        DType::BF16 => TensorMapElement::BF16,
        DType::F16 => TensorMapElement::F16,
        _ => return Ok(None),
    };
    let (chunk, splits) = kernels::decode_ring_splits(s.kv_len - first, s.batch * s.kv_heads);
    let props = c.props();
    let kernel = AttentionKernel::SdpaDecodeRing {
        dtype: q.dtype(),
        head_dim,
        swizzled_kv: layout == KvLayout::Swizzled,
    };
    let Some((cfg, stages)) = kernels::decode_ring(
        s.batch,
        s.kv_heads,
        splits,
        s.head_dim,
        c.sm_count() as usize,
        props.shared_memory_per_block_optin_bytes as usize,
        c.kernels().function(kernel)?.static_shared_mem_bytes() as usize,
    )?
    else {
        return Ok(None);
    };
    let ring = |maps| DecodeRing {
        cfg,
        stages,
        chunk,
        splits,
        maps,
    };
    if layout == KvLayout::Swizzled {
        // Rows back to back (the strides are 16-byte multiples, checked by the caller).
        let rows = |t: &Tensor| t.layout().strides()[2] == s.head_dim as isize;
        return Ok((rows(k) && rows(v)).then(|| ring(None)));
    }
    let map = |t: &Tensor| -> Result<Option<TensorMap>> {
        let st = t.layout().strides();
        let dims = [s.head_dim, s.kv_len, s.kv_heads, s.batch].map(|d| d as u64);
        let strides = [st[2], st[1], st[0]].map(|x| x as u64 * 2);
        // A view the tensor memory accelerator cannot describe stays on the portable kernel.
        Ok(TensorMap::tiled_sw128(element, dptr(t)?, &dims, &strides, &[64, 64, 1, 1]).ok())
    };
    let (Some(tk), Some(tv)) = (map(k)?, map(v)?) else {
        return Ok(None);
    };
    Ok(Some(ring(Some((tk, tv)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HF transformers' `build_alibi_tensor`: for 6 heads (p = 4) 2^-2, 2^-4, 2^-6, 2^-8, then
    /// 2^-1, 2^-3; for 12 (p = 8) 2^-1 … 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    #[test]
    fn alibi_slopes_match_hf() {
        let pow = |e: f64| e.exp2() as f32;
        let six: Vec<f32> = [-2.0, -4.0, -6.0, -8.0, -1.0, -3.0].map(pow).to_vec();
        assert_eq!(alibi_slopes(6), six);
        let mut twelve: Vec<f32> = (1..=8).map(|i| pow(-f64::from(i))).collect();
        twelve.extend([-0.5, -1.5, -2.5, -3.5].map(pow));
        assert_eq!(alibi_slopes(12), twelve);
        assert_eq!(
            alibi_slopes(8),
            (1..=8).map(|i| pow(-f64::from(i))).collect::<Vec<_>>()
        );
        assert_eq!(alibi_slopes(1), vec![pow(-8.0)]);
    }

    fn shape(
        q_heads: usize,
        kv_heads: usize,
        q_len: usize,
        kv_len: usize,
        d: usize,
    ) -> AttentionShape {
        AttentionShape {
            batch: 1,
            q_heads,
            kv_heads,
            q_len,
            kv_len,
            head_dim: d,
        }
    }

    #[test]
    fn equal_scores_average_the_values_and_the_mask_selects_keys() {
        // q = 0 gives equal scores: the output is the mean of the visible values.
        let s = shape(1, 1, 2, 3, 1);
        let (q, k, v) = ([0f32; 2], [1f32, 2.0, 3.0], [10f32, 20.0, 60.0]);
        let full = sdpa_reference(&q, &k, &v, s, 1.0, AttentionMask::default()).unwrap();
        assert_eq!(full, vec![30.0, 30.0]);
        // Causal with offset: query 0 is at position 1 (sees keys 0, 1), query 1 at 2 (all).
        let causal = AttentionMask {
            causal: true,
            sliding_window: None,
            alibi: false,
        };
        assert_eq!(
            sdpa_reference(&q, &k, &v, s, 1.0, causal).unwrap(),
            vec![15.0, 30.0]
        );
        // A window of 1: each query sees only its own position.
        let w1 = AttentionMask {
            causal: true,
            sliding_window: Some(1),
            alibi: false,
        };
        assert_eq!(
            sdpa_reference(&q, &k, &v, s, 1.0, w1).unwrap(),
            vec![20.0, 60.0]
        );
    }

    #[test]
    fn grouped_heads_equal_replicated_kv_heads() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (hq, hkv, ql, kl, d) = (8, 2, 3, 17, 16);
        let mut r = |n: usize| {
            (0..n)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect::<Vec<_>>()
        };
        let (q, k, v) = (r(hq * ql * d), r(hkv * kl * d), r(hkv * kl * d));
        let mask = AttentionMask {
            causal: true,
            sliding_window: Some(5),
            alibi: false,
        };
        let gqa = sdpa_reference(&q, &k, &v, shape(hq, hkv, ql, kl, d), 0.25, mask).unwrap();
        let rep = |x: &[f32]| -> Vec<f32> {
            (0..hq)
                .flat_map(|h| x[(h / (hq / hkv)) * kl * d..][..kl * d].to_vec())
                .collect()
        };
        let mha =
            sdpa_reference(&q, &rep(&k), &rep(&v), shape(hq, hq, ql, kl, d), 0.25, mask).unwrap();
        assert_eq!(gqa, mha);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let s = shape(3, 2, 1, 1, 1);
        assert!(
            sdpa_reference(
                &[0.0; 3],
                &[0.0; 2],
                &[0.0; 2],
                s,
                1.0,
                AttentionMask::default()
            )
            .is_err()
        );
        let s = shape(1, 1, 2, 1, 1);
        let causal = AttentionMask {
            causal: true,
            sliding_window: None,
            alibi: false,
        };
        assert!(sdpa_reference(&[0.0; 2], &[0.0; 1], &[0.0; 1], s, 1.0, causal).is_err());
        let s = shape(1, 1, 1, 1, 1);
        assert!(
            sdpa_reference(&[0.0; 2], &[0.0], &[0.0], s, 1.0, AttentionMask::default()).is_err()
        );
    }
}
