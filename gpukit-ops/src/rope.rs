//! Rotary position embeddings (RoPE; Su et al., "RoFormer", 2021): frequency tables with the
//! scalings HF transformers defines in `modeling_rope_utils` — default, linear, dynamic NTK,
//! YaRN (Peng et al. 2023) and Llama 3's `llama3` — and the CPU reference of the rotation in both
//! layouts.
//!
//! Like HF, inverse frequencies are f32 values and the angle of position `p` is the f32 product
//! `p · inv_freq`; cos and sin are then scaled by the table's `attention_scale` (YaRN's
//! "mscale"; 1 otherwise).

use crate::kv_cache::KvCache;
use crate::{Error, Result};

/// How the base frequencies are rescaled for longer contexts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// `inv_freq[i] = base^(-2i/d)` (`rope_type: "default"`).
    None,
    /// Positions divided by `factor` (`"linear"`).
    Linear {
        /// The scaling factor.
        factor: f64,
    },
    /// NTK-aware base rescaling once the sequence outgrows `max_position` (`"dynamic"`):
    /// `base' = base · (factor·len/max − (factor − 1))^(d/(d−2))`.
    DynamicNtk {
        /// The scaling factor.
        factor: f64,
        /// `max_position_embeddings`.
        max_position: usize,
    },
    /// YaRN (`"yarn"`): high frequencies kept, low ones interpolated by `factor`, a linear ramp
    /// between the correction dimensions of `beta_fast` and `beta_slow` rotations, and an
    /// attention scale (default `0.1·ln(factor) + 1`).
    Yarn {
        /// The scaling factor.
        factor: f64,
        /// `original_max_position_embeddings`.
        original_max_position: usize,
        /// Default 32.
        beta_fast: f64,
        /// Default 1.
        beta_slow: f64,
        /// Overrides the default attention scale.
        attention_factor: Option<f64>,
    },
    /// Llama 3.1's scaling (`"llama3"`): wavelengths above `original_max_position / low_freq_factor`
    /// divided by `factor`, below `original_max_position / high_freq_factor` kept, and smoothly
    /// interpolated between.
    Llama3 {
        /// The scaling factor (8 for Llama 3.1).
        factor: f64,
        /// 1 for Llama 3.1.
        low_freq_factor: f64,
        /// 4 for Llama 3.1.
        high_freq_factor: f64,
        /// 8192 for Llama 3.1.
        original_max_position: usize,
    },
}

/// The most rotated dimensions per head [`RopeConfig::table`] takes (head dims are at most a few
/// hundred; a larger value is a malformed config, refused before any table is allocated).
pub const MAX_ROTARY_DIM: usize = 1 << 16;

/// A model's RoPE: rotated dimensions per head, base (`rope_theta`) and scaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    /// Rotated dimensions per head (head_dim × partial_rotary_factor); even.
    pub rotary_dim: usize,
    /// `rope_theta`.
    pub base: f64,
    /// The scaling.
    pub scaling: RopeScaling,
}

/// Inverse frequencies (`rotary_dim / 2` of them, f32 values) and the cos/sin scale.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeTable {
    /// `inv_freq[i]` for pair `i`.
    pub inv_freq: Vec<f32>,
    /// Multiplies cos and sin (YaRN's mscale; 1 otherwise).
    pub attention_scale: f32,
}

/// Which elements of a head are rotated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeLayout {
    /// Element `i` with element `i + rotary_dim/2` (HF checkpoints).
    RotateHalf,
    /// Elements `2i` and `2i + 1` (GGUF / llama.cpp, whose Q/K weights are permuted to match).
    AdjacentPairs,
}

impl RopeConfig {
    /// The table for sequences up to `seq_len` (only dynamic NTK depends on it).
    ///
    /// # Errors
    /// [`Error::Shape`] for an odd or zero `rotary_dim` or one above [`MAX_ROTARY_DIM`], a
    /// non-positive base or factor.
    pub fn table(&self, seq_len: usize) -> Result<RopeTable> {
        let d = self.rotary_dim;
        if d == 0 || !d.is_multiple_of(2) || d > MAX_ROTARY_DIM || self.base <= 1.0 {
            return Err(Error::shape(
                "rope",
                format!(
                    "rotary_dim {d} must be even, positive and at most {MAX_ROTARY_DIM}, \
                     base {} > 1",
                    self.base
                ),
            ));
        }
        let df = d as f64;
        let default = |base: f64| -> Vec<f64> {
            (0..d / 2)
                .map(|i| 1.0 / base.powf((2 * i) as f64 / df))
                .collect()
        };
        let check = |factor: f64| {
            if factor > 0.0 {
                Ok(())
            } else {
                Err(Error::shape(
                    "rope",
                    format!("scaling factor {factor} must be positive"),
                ))
            }
        };
        let (inv, scale) = match self.scaling {
            RopeScaling::None => (default(self.base), 1.0),
            RopeScaling::Linear { factor } => {
                check(factor)?;
                (
                    default(self.base).into_iter().map(|f| f / factor).collect(),
                    1.0,
                )
            }
            RopeScaling::DynamicNtk {
                factor,
                max_position,
            } => {
                check(factor)?;
                let max = max_position.max(1) as f64;
                let len = (seq_len as f64).max(max);
                let base = self.base * (factor * len / max - (factor - 1.0)).powf(df / (df - 2.0));
                (default(base), 1.0)
            }
            RopeScaling::Yarn {
                factor,
                original_max_position,
                beta_fast,
                beta_slow,
                attention_factor,
            } => {
                check(factor)?;
                let orig = original_max_position.max(1) as f64;
                let correction_dim = |rotations: f64| {
                    df * (orig / (rotations * 2.0 * std::f64::consts::PI)).ln()
                        / (2.0 * self.base.ln())
                };
                let low = correction_dim(beta_fast).floor().max(0.0);
                let high = correction_dim(beta_slow).ceil().min(df - 1.0);
                let high = if low == high { high + 0.001 } else { high };
                let inv = (0..d / 2)
                    .map(|i| {
                        let pos_freq = self.base.powf((2 * i) as f64 / df);
                        let (extra, inter) = (1.0 / pos_freq, 1.0 / (factor * pos_freq));
                        let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                        let extrapolation = 1.0 - ramp;
                        inter * (1.0 - extrapolation) + extra * extrapolation
                    })
                    .collect();
                let mscale = if factor <= 1.0 {
                    1.0
                } else {
                    0.1 * factor.ln() + 1.0
                };
                (inv, attention_factor.unwrap_or(mscale))
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position,
            } => {
                check(factor)?;
                if high_freq_factor <= low_freq_factor {
                    return Err(Error::shape(
                        "rope",
                        "llama3 scaling needs high_freq_factor > low_freq_factor",
                    ));
                }
                let old = original_max_position as f64;
                let (low_wavelen, high_wavelen) = (old / low_freq_factor, old / high_freq_factor);
                let inv = default(self.base)
                    .into_iter()
                    .map(|f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        if wavelen < high_wavelen {
                            f
                        } else if wavelen > low_wavelen {
                            f / factor
                        } else {
                            let smooth = (old / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect();
                (inv, 1.0)
            }
        };
        Ok(RopeTable {
            inv_freq: inv.into_iter().map(|f| f as f32).collect(),
            attention_scale: scale as f32,
        })
    }
}

impl RopeTable {
    /// `(cos, sin)` of pair `i` at position `pos`, scaled; `None` past the table's pairs.
    pub fn cos_sin(&self, pos: usize, i: usize) -> Option<(f32, f32)> {
        self.inv_freq.get(i).map(|&f| self.rotation(pos, f))
    }

    /// `(cos, sin)` of the angle `pos · inv_freq`, scaled.
    fn rotation(&self, pos: usize, inv_freq: f32) -> (f32, f32) {
        let angle = f64::from(pos as f32 * inv_freq);
        let s = f64::from(self.attention_scale);
        ((angle.cos() * s) as f32, (angle.sin() * s) as f32)
    }

    /// Rotates `x`, rows of `head_dim` values (rows of one position each, `positions[r]` for row
    /// `r`), in place; only the first `2 · inv_freq.len()` values of each row rotate.
    ///
    /// # Errors
    /// [`Error::Shape`] if the rows do not fit `head_dim`, the rotated part exceeds it, or there
    /// is not one position per row.
    pub fn apply(
        &self,
        x: &mut [f32],
        head_dim: usize,
        positions: &[usize],
        layout: RopeLayout,
    ) -> Result<()> {
        let half = self.inv_freq.len();
        if head_dim == 0 || !x.len().is_multiple_of(head_dim) || 2 * half > head_dim {
            return Err(Error::shape(
                "rope",
                format!(
                    "{} values in rows of {head_dim}, {} rotated",
                    x.len(),
                    2 * half
                ),
            ));
        }
        if positions.len() != x.len() / head_dim {
            return Err(Error::shape(
                "rope",
                format!(
                    "{} positions for {} rows",
                    positions.len(),
                    x.len() / head_dim
                ),
            ));
        }
        for (row, &pos) in x.chunks_exact_mut(head_dim).zip(positions) {
            for (i, &f) in self.inv_freq.iter().enumerate() {
                let (a, b) = match layout {
                    RopeLayout::RotateHalf => (i, i + half),
                    RopeLayout::AdjacentPairs => (2 * i, 2 * i + 1),
                };
                let (c, s) = self.rotation(pos, f);
                let (x0, x1) = (row[a], row[b]);
                row[a] = x0 * c - x1 * s;
                row[b] = x1 * c + x0 * s;
            }
        }
        Ok(())
    }
}

/// Rotates `x [tokens, heads, head_dim]` (contiguous) in place: token `t` at position
/// `positions[t]` (i32, on `x`'s device — read by the kernel, so a captured graph replays with
/// new positions), with the table's `inv_freq` (f32 `[rotary_dim / 2]`, on the device) and
/// `attention_scale`. `positions` and `inv_freq` must be contiguous (the kernel reads them
/// densely).
///
/// # Errors
/// [`Error::Shape`] / [`Error::DType`] for mismatched or non-contiguous operands; device errors.
pub fn rope_inplace(
    x: &crate::Tensor,
    positions: &crate::Tensor,
    inv_freq: &crate::Tensor,
    attention_scale: f32,
    layout: RopeLayout,
) -> Result<()> {
    use crate::ops::{dptr, need_contiguous, same_device, u32_dim};
    use gpukit_driver::KernelArgs;
    use gpukit_kernels::rope::RopeKernel;
    use gpukit_kernels::{DType, grid};
    let dev = same_device("rope", &[x, positions, inv_freq])?;
    Error::expect_dtype("rope positions", positions.dtype(), DType::I32)?;
    Error::expect_dtype("rope inv_freq", inv_freq.dtype(), DType::F32)?;
    crate::ops::float_only("rope", x)?;
    if x.rank() != 3 {
        return Err(Error::shape(
            "rope",
            format!(
                "x must be a [tokens, heads, head_dim] tensor, got {:?} {}",
                x.shape(),
                x.dtype()
            ),
        ));
    }
    let (tokens, heads, head_dim) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    let half = inv_freq.numel();
    if positions.shape() != [tokens] || inv_freq.rank() != 1 || half == 0 || 2 * half > head_dim {
        return Err(Error::shape(
            "rope",
            format!(
                "positions {:?} must be [{tokens}], inv_freq {:?} 1-D with 2·len ≤ {head_dim}",
                positions.shape(),
                inv_freq.shape()
            ),
        ));
    }
    need_contiguous("rope", x, "x")?;
    need_contiguous("rope", positions, "positions")?;
    need_contiguous("rope", inv_freq, "inv_freq")?;
    match &dev {
        crate::Device::Cpu => {
            let table = RopeTable {
                inv_freq: inv_freq.to_vec::<f32>()?,
                attention_scale,
            };
            let pos: Vec<usize> = positions
                .to_vec::<i32>()?
                .iter()
                .flat_map(|&p| std::iter::repeat_n(p.max(0) as usize, heads))
                .collect();
            let mut v: Vec<f32> = x.to_vec_f32()?;
            table.apply(&mut v, head_dim, &pos, layout)?;
            crate::ops::write_host(x, v.into_iter().map(f64::from))
        }
        crate::Device::Cuda(c) => {
            let args = KernelArgs::new()
                .arg(dptr(x)?)
                .arg(dptr(positions)?)
                .arg(dptr(inv_freq)?)
                .arg(attention_scale)
                .arg(u32_dim("rope", tokens)?)
                .arg(u32_dim("rope", heads)?)
                .arg(u32_dim("rope", head_dim)?)
                .arg(u32_dim("rope", half)?)
                .arg(i32::from(layout == RopeLayout::AdjacentPairs));
            let n = tokens * heads * half;
            // SAFETY: x holds tokens·heads·head_dim elements and 2·half ≤ head_dim; positions
            // `tokens` i32; inv_freq `half` f32 (all checked above).
            unsafe {
                c.launch(
                    RopeKernel::Rope(x.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// The shapes of a QKV projection's output and its targets in [`rope_kv_append`] (and the fused
/// projection `ops::rms_norm_linear_rope_kv_into`), checked.
pub(crate) struct RopeKvShape {
    pub tokens: usize,
    pub nq: usize,
    pub nkv: usize,
    pub hd: usize,
    pub max_len: usize,
    pub half: usize,
}

/// Checks a QKV projection's output of shape `qkv` (`[tokens, (nq + 2·nkv)·head_dim]`, dtype
/// `dt`, `inputs` the tensors it comes from) against `q_out` `[tokens, nq, head_dim]`, the cache,
/// the position, the RoPE table and the q/k norms; returns the device and the shapes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_rope_kv(
    op: &'static str,
    qkv: &[usize],
    dt: gpukit_kernels::DType,
    inputs: &[&crate::Tensor],
    q_out: &crate::Tensor,
    cache: &KvCache,
    position: &crate::Tensor,
    rope: Option<(&crate::Tensor, f32, RopeLayout)>,
    qk_norm: Option<(&crate::Tensor, &crate::Tensor, f32)>,
) -> Result<(crate::Device, RopeKvShape)> {
    use gpukit_kernels::DType;
    let mut operands = inputs.to_vec();
    operands.extend([q_out, position, cache.key_storage()]);
    operands.extend(rope.map(|r| r.0));
    operands.extend(qk_norm.iter().flat_map(|n| [n.0, n.1]));
    let dev = crate::ops::same_device(op, &operands)?;
    Error::expect_dtype(op, position.dtype(), DType::I32)?;
    for t in [q_out, cache.key_storage()]
        .into_iter()
        .chain(qk_norm.iter().flat_map(|n| [n.0, n.1]))
    {
        Error::expect_dtype(op, t.dtype(), dt)?;
    }
    let ks = cache.key_storage().shape();
    let (nkv, max_len, hd) = (ks[0], ks[1], ks[2]);
    let bad = |detail: String| Err(Error::shape(op, detail));
    if q_out.rank() != 3 || q_out.shape()[2] != hd {
        return bad(format!(
            "q_out {:?} must be [tokens, q_heads, {hd}] (the cache's head_dim)",
            q_out.shape()
        ));
    }
    let (tokens, nq) = (q_out.shape()[0], q_out.shape()[1]);
    let Some(width) = nkv
        .checked_mul(2)
        .and_then(|kv| kv.checked_add(nq))
        .and_then(|heads| heads.checked_mul(hd))
    else {
        return bad(format!(
            "{nq} query and 2×{nkv} key/value heads of {hd} overflow a row"
        ));
    };
    if qkv != [tokens, width] || position.shape() != [1] {
        return bad(format!(
            "qkv {qkv:?} must be [{tokens}, {width}] ({nq} query and 2×{nkv} key/value heads of \
             {hd}) and position {:?} [1]",
            position.shape()
        ));
    }
    let half = rope.map_or(0, |r| r.0.numel());
    if let Some((inv_freq, ..)) = rope {
        Error::expect_dtype(op, inv_freq.dtype(), DType::F32)?;
        if inv_freq.rank() != 1 || half == 0 || 2 * half > hd {
            return bad(format!(
                "inv_freq {:?} must be 1-D with 2·len ≤ {hd}",
                inv_freq.shape()
            ));
        }
    }
    if let Some((qw, kw, _)) = qk_norm
        && (qw.shape() != [hd] || kw.shape() != [hd])
    {
        return bad(format!(
            "q/k norm weights {:?} / {:?} must be [{hd}]",
            qw.shape(),
            kw.shape()
        ));
    }
    // The kernels read these densely (the position is one element: always contiguous).
    for (t, what) in rope.map(|r| (r.0, "inv_freq")).into_iter().chain(
        qk_norm
            .iter()
            .flat_map(|n| [(n.0, "q norm weight"), (n.1, "k norm weight")]),
    ) {
        crate::ops::need_contiguous(op, t, what)?;
    }
    Ok((
        dev,
        RopeKvShape {
            tokens,
            nq,
            nkv,
            hd,
            max_len,
            half,
        },
    ))
}

/// The decode step's attention input in one kernel (Su et al. 2021, "RoFormer", for the
/// rotation): `qkv [tokens, (q_heads + 2·kv_heads)·head_dim]` is a fused QKV projection's output
/// (per token: the query heads, then the key heads, then the value heads). Each query and key
/// head is first RMS-normalised when `qk_norm` = (q weight `[head_dim]`, k weight `[head_dim]`,
/// eps) is given (Qwen3), rotated by `rope` = (inv_freq f32 `[rotary_dim / 2]`, attention
/// scale, layout) when given, at position `*position + token`; the queries go to
/// `q_out [tokens, q_heads, head_dim]` and the keys and values into `cache` at rows
/// `*position ..` (`position`: i32 `[1]` on the device, read by the kernel, so a captured graph
/// replays at the next position). The cache's host-side length is not changed. Same results as
/// `rms_norm` + [`rope_inplace`] + [`KvCache::append_at`] (the CPU runs exactly those); on CUDA
/// one block per token and head, head_dim ≤ 256.
///
/// # Errors
/// [`Error::Shape`] / [`Error::DType`] for mismatched operands, or an `inv_freq` or q/k norm
/// weight that is not contiguous (the kernel reads them densely); on the CPU [`Error::Index`]
/// for a position past the cache (on CUDA reported at the next synchronising call, nothing
/// written).
pub fn rope_kv_append(
    qkv: &crate::Tensor,
    q_out: &crate::Tensor,
    cache: &mut KvCache,
    position: &crate::Tensor,
    rope: Option<(&crate::Tensor, f32, RopeLayout)>,
    qk_norm: Option<(&crate::Tensor, &crate::Tensor, f32)>,
) -> Result<()> {
    use crate::ops::{self, dptr, need_contiguous, u32_dim};
    use crate::{Device, Tensor};
    use gpukit_driver::{DevicePtr, KernelArgs};
    use gpukit_kernels::rope::RopeKernel;
    let op = "rope_kv_append";
    let dt = qkv.dtype();
    let bad = |detail: String| Err(Error::shape(op, detail));
    let (
        dev,
        RopeKvShape {
            tokens,
            nq,
            nkv,
            hd,
            max_len,
            half,
        },
    ) = check_rope_kv(
        op,
        qkv.shape(),
        dt,
        &[qkv],
        q_out,
        cache,
        position,
        rope,
        qk_norm,
    )?;
    match &dev {
        Device::Cpu => {
            let p = position.to_vec::<i32>()?[0];
            if p < 0 || p as usize + tokens > max_len {
                return Err(Error::Index {
                    op,
                    detail: format!("position {p} + {tokens} rows in a cache of {max_len}"),
                });
            }
            // Fresh copies of the three parts: rope_inplace must not rotate qkv itself.
            let part = |start: usize, heads: usize| -> Result<Tensor> {
                let t = Tensor::empty(&[tokens, heads, hd], dt, &dev)?;
                let view = qkv.narrow(1, start * hd, heads * hd)?;
                ops::copy_into(&view.reshape(&[tokens, heads, hd])?, &t)?;
                Ok(t)
            };
            let (mut q, mut k, v) = (part(0, nq)?, part(nq, nkv)?, part(nq + nkv, nkv)?);
            if let Some((qw, kw, eps)) = qk_norm {
                q = ops::rms_norm(&q, qw, eps)?;
                k = ops::rms_norm(&k, kw, eps)?;
            }
            if let Some((inv_freq, scale, layout)) = rope {
                let ids: Vec<i32> = (0..tokens as i32).map(|t| p + t).collect();
                let positions = Tensor::from_slice(&ids, &[tokens], &dev)?;
                rope_inplace(&q, &positions, inv_freq, scale, layout)?;
                rope_inplace(&k, &positions, inv_freq, scale, layout)?;
            }
            ops::copy_into(&q, q_out)?;
            cache.append_at(&k, &v, position)
        }
        Device::Cuda(c) => {
            need_contiguous(op, qkv, "qkv")?;
            need_contiguous(op, q_out, "q_out")?;
            if hd > 256 {
                return bad(format!("head_dim {hd} above the kernel's 256"));
            }
            let ptr = |t: Option<&Tensor>| t.map_or(Ok(DevicePtr(0)), dptr);
            let (qw, kw, eps) = match qk_norm {
                Some((q, k, eps)) => (Some(q), Some(k), eps),
                None => (None, None, 0.0),
            };
            let args = KernelArgs::new()
                .arg(dptr(qkv)?)
                .arg(dptr(q_out)?)
                .arg(dptr(cache.key_storage())?)
                .arg(dptr(cache.value_storage())?)
                .arg(dptr(position)?)
                .arg(ptr(rope.map(|r| r.0))?)
                .arg(rope.map_or(1.0, |r| r.1))
                .arg(u32_dim(op, half)?)
                .arg(i32::from(
                    rope.is_some_and(|r| r.2 == RopeLayout::AdjacentPairs),
                ))
                .arg(ptr(qw)?)
                .arg(ptr(kw)?)
                .arg(eps)
                .arg(u32_dim(op, tokens)?)
                .arg(u32_dim(op, nq)?)
                .arg(u32_dim(op, nkv)?)
                .arg(u32_dim(op, hd)?)
                .arg(u32_dim(op, max_len)?)
                .arg(cache.layout().kernel_flag())
                .arg(c.err_ptr());
            // SAFETY: qkv holds tokens·(nq + 2·nkv)·hd elements, q_out tokens·nq·hd, each cache
            // nkv·max_len·hd (shapes checked; the kernel checks position + tokens ≤ max_len
            // before writing); inv_freq `half` f32 with 2·half ≤ hd ≤ 256; norm weights hd; the
            // position one i32; the error flag 4 bytes.
            unsafe {
                c.launch(
                    RopeKernel::RopeKvAppend(dt),
                    &gpukit_kernels::rope::kv_append(tokens, nq + nkv)?,
                    &args,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(scaling: RopeScaling) -> RopeConfig {
        RopeConfig {
            rotary_dim: 128,
            base: 500_000.0,
            scaling,
        }
    }

    #[test]
    fn default_and_linear_tables() {
        let t = cfg(RopeScaling::None).table(0).unwrap();
        assert_eq!(t.inv_freq.len(), 64);
        assert_eq!(t.inv_freq[0], 1.0);
        let want = (1.0 / 500_000f64.powf(2.0 * 10.0 / 128.0)) as f32;
        assert_eq!(t.inv_freq[10], want);
        assert!(t.inv_freq.windows(2).all(|w| w[1] < w[0]));
        let l = cfg(RopeScaling::Linear { factor: 4.0 }).table(0).unwrap();
        for (a, b) in l.inv_freq.iter().zip(&t.inv_freq) {
            assert!((a * 4.0 - b).abs() <= b * 1e-6);
        }
    }

    #[test]
    fn llama3_keeps_high_frequencies_and_divides_low_ones() {
        // Llama 3.1 8B: factor 8, low 1, high 4, original 8192, theta 500000, head_dim 128.
        let base = cfg(RopeScaling::None).table(0).unwrap();
        let t = cfg(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position: 8192,
        })
        .table(0)
        .unwrap();
        let mut kept = 0;
        let mut divided = 0;
        for (i, (&f, &b)) in t.inv_freq.iter().zip(&base.inv_freq).enumerate() {
            let wavelen = 2.0 * std::f64::consts::PI / f64::from(b);
            if wavelen < 2048.0 {
                assert_eq!(f, b, "pair {i}: a high frequency must be kept");
                kept += 1;
            } else if wavelen > 8192.0 {
                assert!(
                    (f * 8.0 - b).abs() <= b * 1e-6,
                    "pair {i}: a low frequency is divided by 8"
                );
                divided += 1;
            } else {
                assert!(f < b && f > b / 8.0, "pair {i}: interpolated between");
            }
        }
        assert!(kept > 20 && divided > 20, "{kept} kept, {divided} divided");
        assert!(t.inv_freq.windows(2).all(|w| w[1] <= w[0]));
    }

    #[test]
    fn yarn_and_dynamic_ntk() {
        let base = cfg(RopeScaling::None).table(0).unwrap();
        let y = cfg(RopeScaling::Yarn {
            factor: 4.0,
            original_max_position: 32768,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: None,
        })
        .table(0)
        .unwrap();
        assert!((y.attention_scale - (0.1 * 4f32.ln() + 1.0)).abs() < 1e-6);
        assert_eq!(
            y.inv_freq[0], base.inv_freq[0],
            "the highest frequency is extrapolated"
        );
        let last = y.inv_freq.len() - 1;
        assert!((y.inv_freq[last] * 4.0 - base.inv_freq[last]).abs() <= base.inv_freq[last] * 1e-5);
        // Dynamic NTK: unchanged within max_position, a larger base beyond.
        let n = cfg(RopeScaling::DynamicNtk {
            factor: 2.0,
            max_position: 4096,
        });
        assert_eq!(n.table(1000).unwrap(), base);
        let longer = n.table(16384).unwrap();
        assert_eq!(longer.inv_freq[0], 1.0);
        assert!(longer.inv_freq[10] < base.inv_freq[10]);
        assert!(cfg(RopeScaling::Linear { factor: 0.0 }).table(0).is_err());
        let odd = RopeConfig {
            rotary_dim: 7,
            base: 1e4,
            scaling: RopeScaling::None,
        };
        assert!(odd.table(0).is_err());
    }

    #[test]
    fn rotation_layouts_agree_and_preserve_norms() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let t = RopeConfig {
            rotary_dim: 64,
            base: 10_000.0,
            scaling: RopeScaling::None,
        }
        .table(0)
        .unwrap();
        let (rows, hd) = (5, 64);
        let x: Vec<f32> = (0..rows * hd)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let positions = [0usize, 1, 7, 100, 4095];
        // Adjacent pairs on a permuted copy (pair i at 2i, 2i+1) equals rotate-half.
        let mut half = x.clone();
        t.apply(&mut half, hd, &positions, RopeLayout::RotateHalf)
            .unwrap();
        let mut pairs = vec![0f32; x.len()];
        for r in 0..rows {
            for i in 0..hd / 2 {
                pairs[r * hd + 2 * i] = x[r * hd + i];
                pairs[r * hd + 2 * i + 1] = x[r * hd + i + hd / 2];
            }
        }
        t.apply(&mut pairs, hd, &positions, RopeLayout::AdjacentPairs)
            .unwrap();
        for r in 0..rows {
            for i in 0..hd / 2 {
                assert_eq!(pairs[r * hd + 2 * i], half[r * hd + i]);
                assert_eq!(pairs[r * hd + 2 * i + 1], half[r * hd + i + hd / 2]);
                let before = x[r * hd + i].hypot(x[r * hd + i + hd / 2]);
                let after = half[r * hd + i].hypot(half[r * hd + i + hd / 2]);
                assert!((before - after).abs() < 1e-5);
            }
        }
        // Position 0 is the identity.
        assert_eq!(&half[..hd], &x[..hd]);
        assert!(
            t.apply(&mut half, hd, &positions[..4], RopeLayout::RotateHalf)
                .is_err()
        );
    }

    /// The tables against HF transformers itself: inverse frequencies and attention factors
    /// written by `tests/fixtures/make_rope_hf.py` (transformers 5.17, on the GPU machine) for
    /// each rope type.
    #[test]
    fn tables_match_hf_transformers() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/rope_hf.json")).unwrap();
        let mut checked = 0;
        for case in fixture["cases"].as_array().unwrap() {
            let p = &case["params"];
            let f = |k: &str| p[k].as_f64().unwrap();
            let u = |k: &str| p[k].as_u64().unwrap() as usize;
            let scaling = match p["rope_type"].as_str().unwrap() {
                "default" => RopeScaling::None,
                "linear" => RopeScaling::Linear {
                    factor: f("factor"),
                },
                "dynamic" => RopeScaling::DynamicNtk {
                    factor: f("factor"),
                    max_position: case["max_position_embeddings"].as_u64().unwrap() as usize,
                },
                "yarn" => RopeScaling::Yarn {
                    factor: f("factor"),
                    original_max_position: u("original_max_position_embeddings"),
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                    attention_factor: None,
                },
                "llama3" => RopeScaling::Llama3 {
                    factor: f("factor"),
                    low_freq_factor: f("low_freq_factor"),
                    high_freq_factor: f("high_freq_factor"),
                    original_max_position: u("original_max_position_embeddings"),
                },
                other => panic!("unknown rope type {other}"),
            };
            let head_dim = case["head_dim"].as_u64().unwrap() as usize;
            let rotary_dim =
                (head_dim as f64 * case["partial_rotary_factor"].as_f64().unwrap()) as usize;
            let cfg = RopeConfig {
                rotary_dim,
                base: case["rope_theta"].as_f64().unwrap(),
                scaling,
            };
            let seq_len = case["seq_len"].as_u64().map_or(1, |v| v as usize);
            let table = cfg.table(seq_len).unwrap();
            let want: Vec<u32> = case["inv_freq_bits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap() as u32)
                .collect();
            let got: Vec<u32> = table.inv_freq.iter().map(|x| x.to_bits()).collect();
            let name = case["name"].as_str().unwrap();
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (i64::from(*a) - i64::from(*b)).unsigned_abs())
                .max()
                .unwrap();
            assert_eq!(got.len(), want.len(), "{name}: table length");
            // HF computes in float32 torch ops (pow, division, blends), gpukit in f64 rounded
            // once: a few ulp apart (measured ≤ 3), angles within ~3e-7 relative.
            assert!(
                worst <= 4,
                "{name}: inv_freq differs from HF by {worst} ulp"
            );
            let af = case["attention_factor"].as_f64().unwrap();
            assert!(
                (f64::from(table.attention_scale) - af).abs() <= 1e-6 * af,
                "{name}: attention scale {} vs HF {af}",
                table.attention_scale
            );
            println!("rope {name}: inv_freq within {worst} ulp of HF, attention scale {af}");
            checked += 1;
        }
        assert_eq!(checked, 6);
    }
}
