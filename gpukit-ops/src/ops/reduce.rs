//! Reductions and softmax along an axis, in a fixed order (deterministic on every device).
//!
//! The tensor is viewed as `[outer, len, inner]` around the axis. CUDA: one block per row when
//! the axis is last (`inner == 1`), else one thread per `(outer, inner)` walking the axis. The
//! CPU reference accumulates in f64.

use gpukit_driver::KernelArgs;
use gpukit_kernels::ops::ReduceOp;
use gpukit_kernels::reduce::ReduceKernel;
use gpukit_kernels::{DType, grid};

use super::{check_out, float_only, host_values, need_contiguous, new_output, u32_dim, write_host};
use crate::device::Device;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn split(op: &'static str, shape: &[usize], axis: usize) -> Result<(usize, usize, usize)> {
    if axis >= shape.len() {
        return Err(Error::shape(
            op,
            format!("axis {axis} of a {}-d tensor {shape:?}", shape.len()),
        ));
    }
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    Ok((outer, shape[axis], inner))
}

/// `f(a, b)`, or NaN if either is NaN (max and min propagate NaN, like torch).
fn nan_or(a: f64, b: f64, f: fn(f64, f64) -> f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        f(a, b)
    }
}

fn reduced_shape(shape: &[usize], axis: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s.remove(axis);
    s
}

/// `out = reduce(x, axis)` (the axis removed from the shape). Sum and mean accumulate in f32 on
/// CUDA (f64 on the CPU); max and min propagate NaN.
///
/// # Errors
/// [`Error::Shape`] for an axis out of range or a wrong `out`; [`Error::DType`] for non-floats.
pub fn reduce_into(op: ReduceOp, x: &Tensor, axis: usize, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("reduce", x)?;
    let (outer, len, inner) = split("reduce", x.shape(), axis)?;
    check_out(
        "reduce",
        out,
        &reduced_shape(x.shape(), axis),
        x.dtype(),
        &dev,
        &[x],
    )?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let res = (0..outer * inner).map(|t| {
                let (o, i) = (t / inner, t % inner);
                let items = (0..len).map(|j| v[(o * len + j) * inner + i]);
                match op {
                    ReduceOp::Sum => items.sum::<f64>(),
                    ReduceOp::Mean => items.sum::<f64>() / len as f64,
                    ReduceOp::Max => items.fold(f64::NEG_INFINITY, |a, b| nan_or(a, b, f64::max)),
                    ReduceOp::Min => items.fold(f64::INFINITY, |a, b| nan_or(a, b, f64::min)),
                }
            });
            write_host(out, res.collect::<Vec<_>>())
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            need_contiguous("reduce", out, "the output")?;
            let (xp, op_) = (super::dptr(&x)?, op as i32);
            if inner == 1 {
                let args = KernelArgs::new()
                    .arg(op_)
                    .arg(xp)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("reduce", len)?);
                // SAFETY: x holds outer·len elements, out holds outer.
                unsafe {
                    c.launch(
                        ReduceKernel::ReduceRows(x.dtype()),
                        &grid::rows(outer)?,
                        &args,
                    )
                }
            } else {
                let args = KernelArgs::new()
                    .arg(op_)
                    .arg(xp)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("reduce", outer)?)
                    .arg(u32_dim("reduce", len)?)
                    .arg(u32_dim("reduce", inner)?);
                // SAFETY: x holds outer·len·inner elements, out holds outer·inner.
                unsafe {
                    c.launch(
                        ReduceKernel::ReduceCols(x.dtype()),
                        &grid::threads(outer * inner)?,
                        &args,
                    )
                }
            }
        }
    }
}

/// `reduce(x, axis)`, allocated.
///
/// # Errors
/// As [`reduce_into`].
pub fn reduce(op: ReduceOp, x: &Tensor, axis: usize) -> Result<Tensor> {
    split("reduce", x.shape(), axis)?;
    let out = new_output("reduce", &reduced_shape(x.shape(), axis), x, &x.device())?;
    reduce_into(op, x, axis, &out)?;
    Ok(out)
}

/// Sum along `axis`.
///
/// # Errors
/// As [`reduce_into`].
pub fn sum(x: &Tensor, axis: usize) -> Result<Tensor> {
    reduce(ReduceOp::Sum, x, axis)
}

/// Mean along `axis`.
///
/// # Errors
/// As [`reduce_into`].
pub fn mean(x: &Tensor, axis: usize) -> Result<Tensor> {
    reduce(ReduceOp::Mean, x, axis)
}

/// Maximum along `axis`.
///
/// # Errors
/// As [`reduce_into`].
pub fn max(x: &Tensor, axis: usize) -> Result<Tensor> {
    reduce(ReduceOp::Max, x, axis)
}

/// Minimum along `axis`.
///
/// # Errors
/// As [`reduce_into`].
pub fn min(x: &Tensor, axis: usize) -> Result<Tensor> {
    reduce(ReduceOp::Min, x, axis)
}

/// `x` as one row `[1, numel]` (a view when contiguous) and `out` viewed as `shape`, for the
/// whole-tensor forms, which run the along-an-axis kernels on that row. `out` must be
/// contiguous, so that the view writes its storage.
fn whole(op: &'static str, x: &Tensor, out: &Tensor, shape: &[usize]) -> Result<(Tensor, Tensor)> {
    need_contiguous(op, out, "the output")?;
    Ok((x.reshape(&[1, x.numel()])?, out.reshape(shape)?))
}

/// `out = reduce(x)` over every element, in the along-an-axis op's fixed order (x taken as
/// one row): `out` has shape `[]`.
///
/// # Errors
/// As [`reduce_into`]; `out` must be contiguous.
pub fn reduce_all_into(op: ReduceOp, x: &Tensor, out: &Tensor) -> Result<()> {
    check_out("reduce_all", out, &[], x.dtype(), &x.device(), &[x])?;
    let (row, o) = whole("reduce_all", x, out, &[1])?;
    reduce_into(op, &row, 1, &o)
}

/// Reduction of every element: a tensor of shape `[]`.
///
/// # Errors
/// As [`reduce_all_into`].
pub fn reduce_all(op: ReduceOp, x: &Tensor) -> Result<Tensor> {
    let out = new_output("reduce", &[], x, &x.device())?;
    reduce_all_into(op, x, &out)?;
    Ok(out)
}

/// `out[..] = index of the maximum along axis` (i64; the first one on ties; NaN counts as the
/// maximum, like torch.argmax).
///
/// # Errors
/// As [`reduce_into`]; `out` must be i64.
pub fn argmax_into(x: &Tensor, axis: usize, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("argmax", x)?;
    let (outer, len, inner) = split("argmax", x.shape(), axis)?;
    check_out(
        "argmax",
        out,
        &reduced_shape(x.shape(), axis),
        DType::I64,
        &dev,
        &[x],
    )?;
    if out.numel() == 0 {
        return Ok(());
    }
    if len == 0 {
        return Err(Error::shape("argmax", "the axis is empty"));
    }
    match &dev {
        Device::Cpu => {
            let v = host_values(x)?;
            let res = (0..outer * inner).map(|t| {
                let (o, i) = (t / inner, t % inner);
                let mut best = (v[o * len * inner + i], 0usize);
                for j in 1..len {
                    let val = v[(o * len + j) * inner + i];
                    if (val.is_nan() && !best.0.is_nan()) || val > best.0 {
                        best = (val, j);
                    }
                }
                best.1 as f64
            });
            write_host(out, res.collect::<Vec<_>>())
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            need_contiguous("argmax", out, "the output")?;
            if inner == 1 {
                let args = KernelArgs::new()
                    .arg(super::dptr(&x)?)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("argmax", len)?);
                // SAFETY: x holds outer·len elements, out outer i64.
                unsafe {
                    c.launch(
                        ReduceKernel::ArgmaxRows(x.dtype()),
                        &grid::rows(outer)?,
                        &args,
                    )
                }
            } else {
                let args = KernelArgs::new()
                    .arg(super::dptr(&x)?)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("argmax", outer)?)
                    .arg(u32_dim("argmax", len)?)
                    .arg(u32_dim("argmax", inner)?);
                // SAFETY: x holds outer·len·inner elements, out outer·inner i64.
                unsafe {
                    c.launch(
                        ReduceKernel::ArgmaxCols(x.dtype()),
                        &grid::threads(outer * inner)?,
                        &args,
                    )
                }
            }
        }
    }
}

/// Index of the maximum along `axis` (i64).
///
/// # Errors
/// As [`argmax_into`].
pub fn argmax(x: &Tensor, axis: usize) -> Result<Tensor> {
    split("argmax", x.shape(), axis)?;
    let out = Tensor::empty(&reduced_shape(x.shape(), axis), DType::I64, &x.device())?;
    argmax_into(x, axis, &out)?;
    Ok(out)
}

/// `out = ` the row-major (flat) index of the maximum of every element: i64, shape `[]` (the
/// first one on ties; NaN counts as the maximum, like `torch.argmax` without `dim`).
///
/// # Errors
/// As [`argmax_into`]; an empty `x`; `out` must be contiguous.
pub fn argmax_all_into(x: &Tensor, out: &Tensor) -> Result<()> {
    check_out("argmax_all", out, &[], DType::I64, &x.device(), &[x])?;
    let (row, o) = whole("argmax_all", x, out, &[1])?;
    argmax_into(&row, 1, &o)
}

/// Flat index of the maximum of every element (i64, shape `[]`).
///
/// # Errors
/// As [`argmax_all_into`].
pub fn argmax_all(x: &Tensor) -> Result<Tensor> {
    let out = Tensor::empty(&[], DType::I64, &x.device())?;
    argmax_all_into(x, &out)?;
    Ok(out)
}

/// The CPU softmax over rows of `len` contiguous f32 values, rows in parallel: the same f64
/// arithmetic as the general path (max, sum of exponentials, then each value), read from and
/// written to slices.
fn softmax_rows_f32(x: &Tensor, out: &Tensor, len: usize, log: bool) -> Result<()> {
    use rayon::prelude::*;
    let gx = x.host("cpu")?;
    let xs = super::host_f32(&gx, x)?;
    let mut od = out.host_mut("cpu")?;
    let dst = super::host_f32_mut(&mut od, out)?;
    dst.par_chunks_mut(len)
        .zip(xs.par_chunks(len))
        .for_each(|(d, row)| {
            let m = row
                .iter()
                .map(|&v| f64::from(v))
                .fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
            for (d, &v) in d.iter_mut().zip(row) {
                let e = f64::from(v) - m;
                *d = (if log { e - s.ln() } else { e.exp() / s }) as f32;
            }
        });
    Ok(())
}

/// `out = softmax(x)` along `axis` (or log-softmax with `log`), max-subtracted.
///
/// # Errors
/// As [`reduce_into`]; `out` has `x`'s shape.
pub fn softmax_into(x: &Tensor, axis: usize, log: bool, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("softmax", x)?;
    let (outer, len, inner) = split("softmax", x.shape(), axis)?;
    check_out("softmax", out, x.shape(), x.dtype(), &dev, &[x])?;
    if out.numel() == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu
            if inner == 1
                && [x, out]
                    .iter()
                    .all(|t| t.dtype() == DType::F32 && t.is_contiguous()) =>
        {
            softmax_rows_f32(x, out, len, log)
        }
        Device::Cpu => {
            let v = host_values(x)?;
            let mut res = vec![0f64; v.len()];
            for t in 0..outer * inner {
                let (o, i) = (t / inner, t % inner);
                let at = |j: usize| (o * len + j) * inner + i;
                let m = (0..len).map(|j| v[at(j)]).fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..len).map(|j| (v[at(j)] - m).exp()).sum();
                for j in 0..len {
                    let d = v[at(j)] - m;
                    res[at(j)] = if log { d - s.ln() } else { d.exp() / s };
                }
            }
            write_host(out, res)
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            need_contiguous("softmax", out, "the output")?;
            let log = i32::from(log);
            if inner == 1 {
                let args = KernelArgs::new()
                    .arg(super::dptr(&x)?)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("softmax", len)?)
                    .arg(log);
                // SAFETY: x and out hold outer·len elements.
                unsafe {
                    c.launch(
                        ReduceKernel::SoftmaxRows(x.dtype()),
                        &grid::rows(outer)?,
                        &args,
                    )
                }
            } else {
                let args = KernelArgs::new()
                    .arg(super::dptr(&x)?)
                    .arg(super::dptr(out)?)
                    .arg(u32_dim("softmax", outer)?)
                    .arg(u32_dim("softmax", len)?)
                    .arg(u32_dim("softmax", inner)?)
                    .arg(log);
                // SAFETY: x and out hold outer·len·inner elements.
                unsafe {
                    c.launch(
                        ReduceKernel::SoftmaxCols(x.dtype()),
                        &grid::threads(outer * inner)?,
                        &args,
                    )
                }
            }
        }
    }
}

/// softmax along `axis`.
///
/// # Errors
/// As [`softmax_into`].
pub fn softmax(x: &Tensor, axis: usize) -> Result<Tensor> {
    let out = new_output("softmax", x.shape(), x, &x.device())?;
    softmax_into(x, axis, false, &out)?;
    Ok(out)
}

/// log-softmax along `axis`.
///
/// # Errors
/// As [`softmax_into`].
pub fn log_softmax(x: &Tensor, axis: usize) -> Result<Tensor> {
    let out = new_output("softmax", x.shape(), x, &x.device())?;
    softmax_into(x, axis, true, &out)?;
    Ok(out)
}

/// `out = softmax(x)` over every element together (or log-softmax with `log`): `out` has `x`'s
/// shape and sums to 1 over all of it.
///
/// # Errors
/// As [`softmax_into`]; `out` must be contiguous.
pub fn softmax_all_into(x: &Tensor, log: bool, out: &Tensor) -> Result<()> {
    check_out("softmax_all", out, x.shape(), x.dtype(), &x.device(), &[x])?;
    let (row, o) = whole("softmax_all", x, out, &[1, x.numel()])?;
    softmax_into(&row, 1, log, &o)
}

/// softmax over every element together.
///
/// # Errors
/// As [`softmax_all_into`].
pub fn softmax_all(x: &Tensor) -> Result<Tensor> {
    let out = new_output("softmax", x.shape(), x, &x.device())?;
    softmax_all_into(x, false, &out)?;
    Ok(out)
}

/// log-softmax over every element together.
///
/// # Errors
/// As [`softmax_all_into`].
pub fn log_softmax_all(x: &Tensor) -> Result<Tensor> {
    let out = new_output("softmax", x.shape(), x, &x.device())?;
    softmax_all_into(x, true, &out)?;
    Ok(out)
}
