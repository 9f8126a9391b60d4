//! Pre-norm projections of the decode step: a residual add and RMSNorm fused into the GEMV that
//! reads the normalised row, so a pre-norm transformer layer needs no separate norm kernel.
//!
//! On CUDA each is one kernel on a persistent grid: every block normalises the row itself (a
//! hidden size: a few KiB from L2) into shared memory with [`add_rms_norm_into`]'s arithmetic,
//! then each warp streams whole weight rows, one output at a time. The CPU computes the norm
//! and the projection as separate ops (the reference); the results agree to the GEMV's
//! rounding (the sums are taken in a different order).

use gpukit_driver::{DevicePtr, KernelArgs};
use gpukit_kernels::DType;
use gpukit_kernels::gemv::{self, GemvKernel};
use gpukit_kernels::sampling::SamplingKernel;
use gpukit_kernels::shared::{ARGMAX_PARTS_THREADS, BLOCK_THREADS};

use super::{
    Activation, add_rms_norm_into, check_out, dptr, float_only, linear_into, linear_swiglu_into,
    need_contiguous, rms_norm_into, same_device, u32_dim,
};
use crate::device::{CudaDevice, Device};
use crate::kv_cache::KvCache;
use crate::rope::{RopeLayout, check_rope_kv, rope_kv_append};
use crate::sampling::{SamplingParams, sample_tokens_into};
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Largest normalised row the CUDA kernels take, in bytes (it lives in shared memory): hidden
/// sizes up to 16384 in f16/bf16, 8192 in f32.
pub const PRE_NORM_MAX_ROW_BYTES: usize = 32 << 10;

/// Whether the CUDA pre-norm kernels take a row of `k` elements of float `dtype`: a multiple of
/// 16 bytes, at most [`PRE_NORM_MAX_ROW_BYTES`] (the CPU takes any row; no other dtype fits).
pub fn pre_norm_row_fits(k: usize, dtype: DType) -> bool {
    let bytes = k.saturating_mul(dtype.size_in_bytes());
    dtype.is_float() && bytes.is_multiple_of(16) && bytes <= PRE_NORM_MAX_ROW_BYTES
}

/// The RMSNorm in front of a pre-norm projection (Zhang & Sennrich 2019, "Root Mean Square
/// Layer Normalization"): `x = rms_norm(residual + pending) · weight`, where `residual + pending`
/// is rounded to the dtype and stored to the second tensor of `pending` (the next residual
/// stream). Without `pending`, `x = rms_norm(residual) · weight`.
#[derive(Clone, Copy, Debug)]
pub struct PreNorm<'a> {
    /// The residual stream `[1, k]` (float).
    pub residual: &'a Tensor,
    /// A sub-layer's output `[1, k]` to add first, and where the sum goes (`[1, k]`, separate
    /// from every input).
    pub pending: Option<(&'a Tensor, &'a Tensor)>,
    /// The norm's weight `[k]`.
    pub weight: &'a Tensor,
    /// Added to the mean square.
    pub eps: f32,
}

impl PreNorm<'_> {
    /// Checks the shapes and dtypes; returns `k` and the device.
    fn check(&self, op: &'static str) -> Result<(usize, Device)> {
        let mut all = vec![self.residual, self.weight];
        if let Some((p, _)) = self.pending {
            all.push(p);
        }
        let dev = same_device(op, &all)?;
        float_only(op, self.residual)?;
        let r = self.residual;
        if r.rank() != 2 || r.shape()[0] != 1 || r.shape()[1] == 0 {
            return Err(Error::shape(
                op,
                format!("the residual {:?} must be one row [1, k]", r.shape()),
            ));
        }
        let k = r.shape()[1];
        super::same_dtype(op, r, self.weight)?;
        if self.weight.shape() != [k] {
            return Err(Error::shape(
                op,
                format!("norm weight {:?}, expected [{k}]", self.weight.shape()),
            ));
        }
        if let Some((p, out)) = self.pending {
            super::same_dtype(op, r, p)?;
            if p.shape() != r.shape() {
                return Err(Error::shape(
                    op,
                    format!(
                        "pending {:?} must match the residual {:?}",
                        p.shape(),
                        r.shape()
                    ),
                ));
            }
            check_out(op, out, r.shape(), r.dtype(), &dev, &all)?;
        }
        Ok((k, dev))
    }

    /// Checks the pre-norm, a `[rows_per_output·n, k]` weight, an optional `[n]` bias and the
    /// `[1, n]` output (when there is one); returns `k`, `n` and the device.
    fn check_projection(
        &self,
        op: &'static str,
        w: &Tensor,
        bias: Option<&Tensor>,
        out: Option<&Tensor>,
        rows_per_output: usize,
    ) -> Result<(usize, usize, Device)> {
        let (k, dev) = self.check(op)?;
        let dt = self.residual.dtype();
        Error::expect_dtype(op, w.dtype(), dt)?;
        if w.rank() != 2 || w.shape()[1] != k || !w.shape()[0].is_multiple_of(rows_per_output) {
            return Err(Error::shape(
                op,
                format!(
                    "weight {:?} must be [{rows_per_output}·n, {k}] for a row of {k}",
                    w.shape()
                ),
            ));
        }
        let n = w.shape()[0] / rows_per_output;
        let mut inputs = vec![self.residual, self.weight, w];
        if let Some(b) = bias {
            Error::expect_dtype(op, b.dtype(), dt)?;
            if b.shape() != [n] {
                return Err(Error::shape(
                    op,
                    format!("bias {:?}, expected [{n}]", b.shape()),
                ));
            }
            inputs.push(b);
        }
        if let Some((p, o)) = self.pending {
            inputs.extend([p, o]);
        }
        same_device(op, &inputs)?;
        if let Some(out) = out {
            check_out(op, out, &[1, n], dt, &dev, &inputs)?;
        }
        Ok((k, n, dev))
    }

    /// The normalised row, by the separate ops (the CPU path).
    fn normalised(&self) -> Result<Tensor> {
        let r = self.residual;
        let h = Tensor::empty(r.shape(), r.dtype(), &r.device())?;
        match self.pending {
            Some((p, out)) => {
                add_rms_norm_into(p, r, self.weight, self.eps, &h, &out.clone())?;
            }
            None => rms_norm_into(r, self.weight, self.eps, &h)?,
        }
        Ok(h)
    }

    /// The kernels' leading arguments (pending, residual, weight, residual_out, eps), after
    /// checking what the CUDA kernels need: contiguous 16-byte-aligned operands, `k` a
    /// multiple of 16 bytes and at most [`PRE_NORM_MAX_ROW_BYTES`].
    fn cuda_args(&self, op: &'static str, k: usize, w: &Tensor) -> Result<KernelArgs> {
        let mut all = vec![self.residual, self.weight, w];
        if let Some((p, out)) = self.pending {
            all.extend([p, out]);
        }
        for t in &all {
            need_contiguous(op, t, "every operand")?;
        }
        let aligned = all
            .iter()
            .map(|t| dptr(t))
            .collect::<Result<Vec<_>>>()?
            .iter()
            .all(|p| p.0 % 16 == 0);
        if !pre_norm_row_fits(k, self.residual.dtype()) || !aligned {
            return Err(Error::shape(
                op,
                format!(
                    "the CUDA kernel takes a row of a multiple of 16 bytes up to \
                     {PRE_NORM_MAX_ROW_BYTES} and 16-byte aligned operands; got {k} × {}{}",
                    self.residual.dtype(),
                    if aligned { "" } else { " (unaligned)" }
                ),
            ));
        }
        let null = DevicePtr(0);
        let (p, out) = match self.pending {
            Some((p, out)) => (dptr(p)?, dptr(out)?),
            None => (null, null),
        };
        Ok(KernelArgs::new()
            .arg(p)
            .arg(dptr(self.residual)?)
            .arg(dptr(self.weight)?)
            .arg(out)
            .arg(self.eps))
    }
}

/// The launch of a pre-norm GEMV kernel over `units` outputs from `rows` weight rows of `k`:
/// its persistent grid and the warps sharing each row (the kernel's `S` argument).
fn pre_norm_launch(
    c: &CudaDevice,
    kernel: GemvKernel,
    units: usize,
    rows: usize,
    k: usize,
    dt: DType,
) -> Result<(gpukit_driver::LaunchConfig, u32)> {
    let smem = k * dt.size_in_bytes();
    let resident = c.resident_blocks(kernel, BLOCK_THREADS, smem as u32)?;
    let split = gemv::split(rows, k, dt.size_in_bytes());
    Ok((gemv::persistent(units, split, smem, resident)?, split))
}

/// The arguments the row-unit pre-norm kernels share after the leading ones: weight, bias (or
/// null; contiguous), output, `n`, `k` and the warps per row.
#[allow(clippy::too_many_arguments)]
fn projection_args(
    op: &'static str,
    args: KernelArgs,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
    n: usize,
    k: usize,
    split: u32,
) -> Result<KernelArgs> {
    let bias = match bias {
        Some(b) => {
            need_contiguous(op, b, "the bias")?;
            dptr(b)?
        }
        None => DevicePtr(0),
    };
    Ok(args
        .arg(dptr(w)?)
        .arg(bias)
        .arg(dptr(out)?)
        .arg(u32_dim(op, n)?)
        .arg(u32_dim(op, k)?)
        .arg(split))
}

/// `out [1, n] = x · Wᵀ (+ bias)` with `x` the pre-norm's row: RMSNorm (after the residual
/// add) and the decode GEMV in one kernel on CUDA. `w` is `[n, k]`, `bias` `[n]`; one dtype
/// throughout.
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes, an output sharing storage with an input, or (CUDA)
/// non-contiguous or unaligned operands or a row over [`PRE_NORM_MAX_ROW_BYTES`];
/// [`Error::DType`] for a non-float or mixed dtype; device errors.
pub fn rms_norm_linear_into(
    x: &PreNorm,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "rms_norm_linear";
    let (k, n, dev) = x.check_projection(OP, w, bias, Some(out), 1)?;
    match &dev {
        Device::Cpu => linear_into(&x.normalised()?, w, bias, Activation::None, out),
        Device::Cuda(c) => {
            let dt = x.residual.dtype();
            let kernel = GemvKernel::GemvNorm {
                dtype: dt,
                argmax: false,
            };
            let (cfg, split) = pre_norm_launch(c, kernel, n, n, k, dt)?;
            let args = projection_args(OP, x.cuda_args(OP, k, w)?, w, bias, out, n, k, split)?;
            // SAFETY: residual, pending and residual_out hold k elements, weight k, w n·k,
            // bias n, out n (checked); k is a multiple of 16 bytes, operands 16-byte aligned
            // and the row fits the dynamic shared memory the launch asks for.
            unsafe { c.launch(kernel, &cfg, &args) }
        }
    }
}

/// SwiGLU's first half ([`linear_swiglu_into`]) on the pre-norm's row: `w_gate_up` `[2n, k]`
/// (gate rows, then up rows), `out [1, n] = silu(x · W_gateᵀ) ⊙ (x · W_upᵀ)`, one kernel on
/// CUDA.
///
/// # Errors
/// As [`rms_norm_linear_into`].
pub fn rms_norm_swiglu_into(x: &PreNorm, w_gate_up: &Tensor, out: &Tensor) -> Result<()> {
    const OP: &str = "rms_norm_swiglu";
    let (k, n, dev) = x.check_projection(OP, w_gate_up, None, Some(out), 2)?;
    match &dev {
        Device::Cpu => linear_swiglu_into(&x.normalised()?, w_gate_up, out),
        Device::Cuda(c) => {
            let dt = x.residual.dtype();
            let kernel = GemvKernel::GemvSwigluNorm(dt);
            let args = x.cuda_args(OP, k, w_gate_up)?;
            let (cfg, split) = pre_norm_launch(c, kernel, n, 2 * n, k, dt)?;
            let args = args
                .arg(dptr(w_gate_up)?)
                .arg(dptr(out)?)
                .arg(u32_dim(OP, n)?)
                .arg(u32_dim(OP, k)?)
                .arg(split);
            // SAFETY: as in rms_norm_linear_into, with w 2n·k elements.
            unsafe { c.launch(kernel, &cfg, &args) }
        }
    }
}

/// f32 elements of the workspace [`rms_norm_linear_greedy_into`] needs for an `[n, k]` head:
/// two per block of its grid, at most.
pub fn rms_norm_linear_greedy_workspace_len(n: usize, k: usize, dtype: DType) -> usize {
    let split = gemv::split(n, k, dtype.size_in_bytes());
    gemv::persistent(n, split, 0, usize::MAX).map_or(2 * n, |cfg| 2 * cfg.grid.x as usize)
}

/// The LM head with greedy sampling: `logits [1, n] = x · Wᵀ` on the pre-norm's row, and
/// `token` (i32 `[1]`) = the first maximum of the logits as rounded to the dtype (the lowest id
/// among equal values; NaN counts as the maximum) — what [`crate::sampling::sample_tokens_into`] draws at temperature 0
/// without a penalty. On CUDA each block of the GEMV also reduces its own outputs, so the final
/// pick reads one (value, id) pair per block instead of the vocabulary: two kernels, the second
/// a single small block. `workspace`: f32, at least
/// [`rms_norm_linear_greedy_workspace_len`] elements (unused on the CPU).
///
/// # Errors
/// As [`rms_norm_linear_into`]; [`Error::Shape`] for a short workspace or a token buffer that
/// is not i32 `[1]`.
pub fn rms_norm_linear_greedy_into(
    x: &PreNorm,
    w: &Tensor,
    logits: &Tensor,
    workspace: &Tensor,
    token: &Tensor,
) -> Result<()> {
    const OP: &str = "rms_norm_linear_greedy";
    let (k, n, dev) = x.check_projection(OP, w, None, Some(logits), 1)?;
    check_out(OP, token, &[1], DType::I32, &dev, &[x.residual, w, logits])?;
    match &dev {
        Device::Cpu => {
            linear_into(&x.normalised()?, w, None, Activation::None, logits)?;
            let step = Tensor::from_slice(&[0i64], &[1], &dev)?;
            let greedy = SamplingParams::default();
            sample_tokens_into(logits, None, &greedy, &step, workspace, token)
        }
        Device::Cuda(c) => {
            let dt = x.residual.dtype();
            let kernel = GemvKernel::GemvNorm {
                dtype: dt,
                argmax: true,
            };
            let (cfg, split) = pre_norm_launch(c, kernel, n, n, k, dt)?;
            let parts = cfg.grid.x as usize;
            Error::expect_dtype(OP, workspace.dtype(), DType::F32)?;
            if workspace.numel() < 2 * parts || !workspace.is_contiguous() {
                return Err(Error::shape(
                    OP,
                    format!(
                        "the workspace holds {} f32, {} needed (contiguous)",
                        workspace.numel(),
                        2 * parts
                    ),
                ));
            }
            let args = projection_args(OP, x.cuda_args(OP, k, w)?, w, None, logits, n, k, split)?
                .arg(dptr(workspace)?);
            // SAFETY: as in rms_norm_linear_into; the workspace holds a (value, index) pair
            // for each of the grid's blocks (checked).
            unsafe { c.launch(kernel, &cfg, &args) }?;
            let args = KernelArgs::new()
                .arg(dptr(workspace)?)
                .arg(parts as u32)
                .arg(dptr(token)?);
            let cfg = gpukit_driver::LaunchConfig::new(1, ARGMAX_PARTS_THREADS);
            // SAFETY: `parts` pairs were written above, in stream order; token is one i32.
            unsafe { c.launch(SamplingKernel::SampleArgmaxParts, &cfg, &args) }
        }
    }
}

/// The decode step's attention input from the pre-norm's row in one kernel on CUDA: the fused
/// QKV projection `qkv [1, (nq + 2·nkv)·head_dim] = x · Wᵀ (+ bias)` (per row: the query heads,
/// then the key heads, then the value heads), RoPE on the query and key heads (Su et al. 2021,
/// "RoFormer"; `rope` = (inv_freq f32 `[rotary_dim / 2]`, attention scale, layout), at
/// `*position`), the queries into `q_out [1, nq, head_dim]` and the keys and values into
/// `cache` at row `*position` (`position`: i32 `[1]` on the device, read by the kernel, so a
/// captured graph replays at the next position). The same as [`rms_norm_linear_into`] followed
/// by [`crate::rope::rope_kv_append`] without q/k norms (what the CPU runs), bit for bit on
/// CUDA too: the epilogue rotates the projection's outputs as rounded to the dtype. The
/// projection is never stored.
///
/// # Errors
/// As [`rms_norm_linear_into`] and [`crate::rope::rope_kv_append`]; on CUDA a position past the
/// cache writes no cache row and is reported at the next synchronising call.
pub fn rms_norm_linear_rope_kv_into(
    x: &PreNorm,
    w: &Tensor,
    bias: Option<&Tensor>,
    q_out: &Tensor,
    cache: &mut KvCache,
    position: &Tensor,
    rope: Option<(&Tensor, f32, RopeLayout)>,
) -> Result<()> {
    const OP: &str = "rms_norm_linear_rope_kv";
    let (k, n, dev) = x.check_projection(OP, w, bias, None, 1)?;
    let dt = x.residual.dtype();
    let (_, shape) = check_rope_kv(
        OP,
        &[1, n],
        dt,
        &[x.residual, w],
        q_out,
        cache,
        position,
        rope,
        None,
    )?;
    match &dev {
        Device::Cpu => {
            let qkv = Tensor::empty(&[1, n], dt, &dev)?;
            rms_norm_linear_into(x, w, bias, &qkv)?;
            rope_kv_append(&qkv, q_out, cache, position, rope, None)
        }
        Device::Cuda(c) => {
            let kernel = GemvKernel::GemvNormRopeKv(dt);
            need_contiguous(OP, q_out, "q_out")?;
            if shape.hd % 2 != 0 || shape.hd > 256 {
                return Err(Error::shape(
                    OP,
                    format!(
                        "the CUDA kernel takes an even head_dim ≤ 256, not {}",
                        shape.hd
                    ),
                ));
            }
            let (cfg, split) = pre_norm_launch(c, kernel, n / 2, n, k, dt)?;
            let args = projection_args(OP, x.cuda_args(OP, k, w)?, w, bias, q_out, n, k, split)?
                .arg(dptr(cache.key_storage())?)
                .arg(dptr(cache.value_storage())?)
                .arg(dptr(position)?)
                .arg(rope.map_or(Ok(DevicePtr(0)), |r| dptr(r.0))?)
                .arg(rope.map_or(1.0, |r| r.1))
                .arg(u32_dim(OP, shape.half)?)
                .arg(i32::from(
                    rope.is_some_and(|r| r.2 == RopeLayout::AdjacentPairs),
                ))
                .arg(u32_dim(OP, shape.nq)?)
                .arg(u32_dim(OP, shape.nkv)?)
                .arg(u32_dim(OP, shape.hd)?)
                .arg(u32_dim(OP, shape.max_len)?)
                .arg(cache.layout().kernel_flag())
                .arg(c.err_ptr());
            // SAFETY: as in rms_norm_linear_into, with w n·k elements and n = (nq + 2·nkv)·hd
            // (checked, hd even: the kernel's units are n / 2 row pairs); q_out holds nq·hd
            // elements, each cache nkv·max_len·hd (the kernel checks 0 ≤ *position < max_len
            // before writing a cache row); inv_freq `half` f32 with 2·half ≤ hd ≤ 256 (the
            // kernel's table of 128 angles); the position
            // one i32; the error flag 4 bytes.
            unsafe { c.launch(kernel, &cfg, &args) }
        }
    }
}
