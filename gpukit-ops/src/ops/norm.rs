//! Normalisations over the last axis: rms_norm, layer_norm and the fused residual-add + rms_norm.

use gpukit_driver::KernelArgs;
use gpukit_kernels::grid;
use gpukit_kernels::norm::NormKernel;

use super::{
    check_out, dptr, host_values, need_contiguous, new_output, same_device, u32_dim, write_host,
};
use crate::device::Device;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `(rows, hidden)` of `x` for a weight of `hidden` elements, with dtype checks.
fn rows_hidden(op: &'static str, x: &Tensor, w: &Tensor) -> Result<(usize, usize)> {
    if !x.dtype().is_float() {
        return Err(Error::dtype(
            op,
            format!("needs a float tensor, got {}", x.dtype()),
        ));
    }
    super::same_dtype(op, x, w)?;
    let hidden = *x
        .shape()
        .last()
        .ok_or_else(|| Error::shape(op, "x must have at least one dimension"))?;
    if w.shape() != [hidden] {
        return Err(Error::shape(
            op,
            format!(
                "weight {:?} must be [{hidden}] for x {:?}",
                w.shape(),
                x.shape()
            ),
        ));
    }
    Ok((x.numel() / hidden.max(1), hidden))
}

/// The CPU reference of RMSNorm over rows of `hidden` values, in f64.
fn cpu_rms_norm(v: &[f64], w: &[f64], hidden: usize, eps: f32) -> Vec<f64> {
    let mut r = vec![0f64; v.len()];
    for (row, xs) in v.chunks(hidden.max(1)).enumerate() {
        let ms = xs.iter().map(|a| a * a).sum::<f64>() / hidden as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        for (j, x) in xs.iter().enumerate() {
            r[row * hidden + j] = x * inv * w[j];
        }
    }
    r
}

/// `out = x / sqrt(mean(x², last axis) + eps) · w` (RMSNorm, Zhang & Sennrich 2019), f32 math on
/// CUDA, f64 on the CPU, rounded once.
///
/// # Errors
/// [`Error::Shape`] if `w` is not `[hidden]`; dtype/device errors.
pub fn rms_norm_into(x: &Tensor, w: &Tensor, eps: f32, out: &Tensor) -> Result<()> {
    let dev = same_device("rms_norm", &[x, w])?;
    let (rows, hidden) = rows_hidden("rms_norm", x, w)?;
    check_out("rms_norm", out, x.shape(), x.dtype(), &dev, &[x, w])?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => write_host(
            out,
            cpu_rms_norm(&host_values(x)?, &host_values(w)?, hidden, eps),
        ),
        Device::Cuda(c) => {
            let (x, w) = (x.contiguous()?, w.contiguous()?);
            need_contiguous("rms_norm", out, "the output")?;
            let (cfg, group) = gpukit_kernels::norm::rows(rows, hidden, x.dtype().size_in_bytes())?;
            let args = KernelArgs::new()
                .arg(dptr(&x)?)
                .arg(dptr(&w)?)
                .arg(dptr(out)?)
                .arg(u32_dim("rms_norm", rows)?)
                .arg(u32_dim("rms_norm", hidden)?)
                .arg(group)
                .arg(eps);
            // SAFETY: x and out hold rows·hidden elements, w hidden; the kernel skips rows
            // past `rows` in the last block.
            unsafe { c.launch(NormKernel::RmsNorm(x.dtype()), &cfg, &args) }
        }
    }
}

/// RMSNorm, allocated.
///
/// # Errors
/// As [`rms_norm_into`].
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    let out = new_output("rms_norm", x.shape(), x, &x.device())?;
    rms_norm_into(x, w, eps, &out)?;
    Ok(out)
}

/// The fused pre-norm residual step: `h = x + residual` (rounded to the dtype, as a model stores
/// it), `residual_out = h`, `out = rms_norm(h, w, eps)`.
///
/// # Errors
/// As [`rms_norm_into`]; `residual` must have `x`'s shape.
pub fn add_rms_norm_into(
    x: &Tensor,
    residual: &Tensor,
    w: &Tensor,
    eps: f32,
    out: &Tensor,
    residual_out: &Tensor,
) -> Result<()> {
    let dev = same_device("add_rms_norm", &[x, residual, w])?;
    let (rows, hidden) = rows_hidden("add_rms_norm", x, w)?;
    super::same_dtype("add_rms_norm", x, residual)?;
    if residual.shape() != x.shape() {
        return Err(Error::shape(
            "add_rms_norm",
            format!(
                "residual {:?} must match x {:?}",
                residual.shape(),
                x.shape()
            ),
        ));
    }
    check_out(
        "add_rms_norm",
        out,
        x.shape(),
        x.dtype(),
        &dev,
        &[x, residual, w],
    )?;
    check_out(
        "add_rms_norm",
        residual_out,
        x.shape(),
        x.dtype(),
        &dev,
        &[x, residual, w],
    )?;
    if out.shares_storage(residual_out) {
        return Err(Error::shape(
            "add_rms_norm",
            "out and residual_out must be separate",
        ));
    }
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let (v, rv, wv) = (host_values(x)?, host_values(residual)?, host_values(w)?);
            // h rounded to the dtype first, exactly as stored.
            let dtype = x.dtype();
            let mut h = crate::element::HostData::zeros(dtype, v.len())?;
            for i in 0..v.len() {
                h.set(i, f64::from((v[i] as f32) + (rv[i] as f32)));
            }
            let hv: Vec<f64> = (0..v.len()).map(|i| h.get(i)).collect();
            write_host(residual_out, hv.iter().copied())?;
            write_host(out, cpu_rms_norm(&hv, &wv, hidden, eps))
        }
        Device::Cuda(c) => {
            let (x, residual, w) = (x.contiguous()?, residual.contiguous()?, w.contiguous()?);
            need_contiguous("add_rms_norm", out, "the output")?;
            need_contiguous("add_rms_norm", residual_out, "residual_out")?;
            let (cfg, group) = gpukit_kernels::norm::rows(rows, hidden, x.dtype().size_in_bytes())?;
            let args = KernelArgs::new()
                .arg(dptr(&x)?)
                .arg(dptr(&residual)?)
                .arg(dptr(&w)?)
                .arg(dptr(out)?)
                .arg(dptr(residual_out)?)
                .arg(u32_dim("add_rms_norm", rows)?)
                .arg(u32_dim("add_rms_norm", hidden)?)
                .arg(group)
                .arg(eps);
            // SAFETY: x, residual, out and residual_out hold rows·hidden elements, w hidden;
            // the kernel skips rows past `rows` in the last block.
            unsafe { c.launch(NormKernel::AddRmsNorm(x.dtype()), &cfg, &args) }
        }
    }
}

/// The fused residual-add + RMSNorm, allocated: returns `(out, residual_out)`.
///
/// # Errors
/// As [`add_rms_norm_into`].
pub fn add_rms_norm(
    x: &Tensor,
    residual: &Tensor,
    w: &Tensor,
    eps: f32,
) -> Result<(Tensor, Tensor)> {
    let out = new_output("add_rms_norm", x.shape(), x, &x.device())?;
    let res = new_output("add_rms_norm", x.shape(), x, &x.device())?;
    add_rms_norm_into(x, residual, w, eps, &out, &res)?;
    Ok((out, res))
}

/// `out = (x - mean) / sqrt(var + eps) · w (+ b)` over the last axis (LayerNorm, Ba et al.
/// 2016; biased variance, like torch).
///
/// # Errors
/// As [`rms_norm_into`]; `b`, if given, must be `[hidden]`.
pub fn layer_norm_into(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    eps: f32,
    out: &Tensor,
) -> Result<()> {
    let mut inputs = vec![x, w];
    inputs.extend(b);
    let dev = same_device("layer_norm", &inputs)?;
    let (rows, hidden) = rows_hidden("layer_norm", x, w)?;
    if let Some(b) = b {
        rows_hidden("layer_norm (bias)", x, b)?;
    }
    check_out("layer_norm", out, x.shape(), x.dtype(), &dev, &inputs)?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let (v, wv) = (host_values(x)?, host_values(w)?);
            let bv = b.map(host_values).transpose()?;
            let mut r = vec![0f64; v.len()];
            for row in 0..rows {
                let xs = &v[row * hidden..(row + 1) * hidden];
                let mean = xs.iter().sum::<f64>() / hidden as f64;
                let var = xs.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / hidden as f64;
                let inv = 1.0 / (var + f64::from(eps)).sqrt();
                for j in 0..hidden {
                    let bias = bv.as_ref().map_or(0.0, |b| b[j]);
                    r[row * hidden + j] = (xs[j] - mean) * inv * wv[j] + bias;
                }
            }
            write_host(out, r)
        }
        Device::Cuda(c) => {
            let (x, w) = (x.contiguous()?, w.contiguous()?);
            let b = b.map(Tensor::contiguous).transpose()?;
            need_contiguous("layer_norm", out, "the output")?;
            let bias_ptr = match &b {
                Some(b) => dptr(b)?,
                None => dptr(&w)?, // unread when has_bias is 0
            };
            let args = KernelArgs::new()
                .arg(dptr(&x)?)
                .arg(dptr(&w)?)
                .arg(bias_ptr)
                .arg(dptr(out)?)
                .arg(u32_dim("layer_norm", hidden)?)
                .arg(eps)
                .arg(i32::from(b.is_some()));
            // SAFETY: x and out hold rows·hidden elements, w and b hidden.
            unsafe { c.launch(NormKernel::LayerNorm(x.dtype()), &grid::rows(rows)?, &args) }
        }
    }
}

/// LayerNorm, allocated.
///
/// # Errors
/// As [`layer_norm_into`].
pub fn layer_norm(x: &Tensor, w: &Tensor, b: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    let out = new_output("layer_norm", x.shape(), x, &x.device())?;
    layer_norm_into(x, w, b, eps, &out)?;
    Ok(out)
}
