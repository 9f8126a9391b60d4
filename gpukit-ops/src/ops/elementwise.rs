//! Elementwise ops: binary with broadcasting, unary math, scalar ops, clamp, where, copies, casts.

use gpukit_driver::KernelArgs;
use gpukit_kernels::elementwise::ElementwiseKernel;
use gpukit_kernels::ops::{BinaryOp, ScalarOp, UnaryOp};
use gpukit_kernels::{DType, grid};

use super::{
    PIECE, check_out, cuda, dptr, float_only, host_f32, new_output, same_device, same_dtype,
    strided,
};
use crate::device::Device;
use crate::element::HostData;
use crate::layout::broadcast_shapes;
use crate::tensor::Tensor;
use crate::{Error, Result};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Whether the `_contig` kernels (16-byte vector loads) apply: every operand dense and 16-byte
/// aligned.
fn vectorizable(ts: &[&Tensor]) -> Result<bool> {
    for t in ts {
        if !t.is_contiguous() || dptr(t)?.0 % 16 != 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Grid for `n` elements; the contiguous kernels handle 16 bytes per thread and step.
fn elementwise_config(
    n: usize,
    contiguous: bool,
    dtype: DType,
    c: &crate::device::CudaDevice,
) -> gpukit_driver::LaunchConfig {
    let per_thread = if contiguous {
        16 / dtype.size_in_bytes()
    } else {
        1
    };
    grid::elementwise(n.div_ceil(per_thread), c.sm_count())
}

/// Applies `f` elementwise on the CPU: `out[i] = f(x[i], y[i], z[i])` over `shape`, operands
/// broadcast, values as f32 (the kernels' compute type) and rounded once to the output dtype.
fn cpu_map(
    out: &Tensor,
    shape: &[usize],
    inputs: &[&Tensor],
    f: impl Fn(&[f32]) -> f32,
) -> Result<()> {
    let layouts = inputs
        .iter()
        .map(|t| t.layout().broadcast_to(shape))
        .collect::<Result<Vec<_>>>()?;
    let guards = inputs
        .iter()
        .map(|t| t.host("cpu"))
        .collect::<Result<Vec<_>>>()?;
    let datas: Vec<&crate::HostData> = guards.iter().map(|g| &**g).collect();
    let mut iters: Vec<_> = layouts.iter().map(|l| l.indices()).collect();
    let mut od = out.host_mut("cpu")?;
    let mut vals = vec![0f32; inputs.len()];
    for io in out.layout().indices() {
        for (k, it) in iters.iter_mut().enumerate() {
            let i = it.next().unwrap_or(0);
            vals[k] = datas[k].get(i) as f32;
        }
        od.set(io, f64::from(f(&vals)));
    }
    Ok(())
}

/// Whether every operand is a dense f32 tensor of `shape` (the dense CPU paths apply).
fn dense_f32(shape: &[usize], ts: &[&Tensor]) -> bool {
    ts.iter()
        .all(|t| t.dtype() == DType::F32 && t.is_contiguous() && t.shape() == shape)
}

/// `dst[i] = f(x[i], y[i])` (slices of one length) in parallel pieces: the same arithmetic as
/// [`cpu_map`], on slices the compiler vectorises. Writes every element of `dst`.
fn map2(dst: &mut [MaybeUninit<f32>], xs: &[f32], ys: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    dst.par_chunks_mut(PIECE)
        .zip(xs.par_chunks(PIECE).zip(ys.par_chunks(PIECE)))
        .for_each(|(d, (a, b))| {
            for ((d, &a), &b) in d.iter_mut().zip(a).zip(b) {
                d.write(f(a, b));
            }
        });
}

/// `dst[i] = f(x[i])`, as [`map2`].
fn map1(dst: &mut [MaybeUninit<f32>], xs: &[f32], f: impl Fn(f32) -> f32 + Sync) {
    dst.par_chunks_mut(PIECE)
        .zip(xs.par_chunks(PIECE))
        .for_each(|(d, a)| {
            for (d, &a) in d.iter_mut().zip(a) {
                d.write(f(a));
            }
        });
}

/// The dense CPU paths' destination: an existing tensor, or a new one.
enum Dense<'a> {
    /// The caller's output (a dense f32 tensor of the operands' shape).
    Into(&'a Tensor),
    /// A new tensor of that shape.
    New(&'a [usize]),
}

impl Dense<'_> {
    /// Runs `fill`, which writes every element of the slice it is given (each caller's loops
    /// are [`map1`] / [`map2`] over operands of the destination's length), into the
    /// destination; returns the new tensor, if one was asked for. A new tensor is not
    /// zero-filled first: that memset of its size was 8% of the CPU voice's time.
    fn fill(self, fill: impl FnOnce(&mut [MaybeUninit<f32>])) -> Result<Option<Tensor>> {
        match self {
            Dense::Into(out) => {
                let mut od = out.host_mut("cpu")?;
                let dst = super::host_f32_mut(&mut od, out)?;
                // SAFETY: MaybeUninit<f32> has f32's layout, and `fill` writes only f32 values.
                fill(unsafe { &mut *(dst as *mut [f32] as *mut [MaybeUninit<f32>]) });
                Ok(None)
            }
            Dense::New(shape) => {
                let n: usize = shape.iter().product();
                let mut v: Vec<f32> = Vec::new();
                v.try_reserve_exact(n).map_err(|_| Error::HostOutOfMemory {
                    bytes: n.saturating_mul(4),
                })?;
                fill(&mut v.spare_capacity_mut()[..n]);
                // SAFETY: `fill` wrote each of the first n elements.
                unsafe { v.set_len(n) };
                Ok(Some(Tensor::from_host(
                    HostData::F32(v),
                    shape,
                    &Device::Cpu,
                )?))
            }
        }
    }
}

/// `a op b` over dense f32 tensors of one shape ([`dense_f32`]) into `dst`: one arm per op, so
/// each loop is specialised and vectorised.
fn dense_binary(op: BinaryOp, a: &Tensor, b: &Tensor, dst: Dense<'_>) -> Result<Option<Tensor>> {
    let (ga, gb) = (a.host("cpu")?, b.host("cpu")?);
    let (xs, ys) = (host_f32(&ga, a)?, host_f32(&gb, b)?);
    dst.fill(|d| match op {
        BinaryOp::Add => map2(d, xs, ys, |x, y| BinaryOp::Add.apply(x, y)),
        BinaryOp::Sub => map2(d, xs, ys, |x, y| BinaryOp::Sub.apply(x, y)),
        BinaryOp::Mul => map2(d, xs, ys, |x, y| BinaryOp::Mul.apply(x, y)),
        BinaryOp::Div => map2(d, xs, ys, |x, y| BinaryOp::Div.apply(x, y)),
        BinaryOp::Maximum => map2(d, xs, ys, |x, y| BinaryOp::Maximum.apply(x, y)),
        BinaryOp::Minimum => map2(d, xs, ys, |x, y| BinaryOp::Minimum.apply(x, y)),
        other => map2(d, xs, ys, |x, y| other.apply(x, y)),
    })
}

/// `f(x)` over a dense f32 tensor into `dst`.
fn dense_unary(op: UnaryOp, x: &Tensor, dst: Dense<'_>) -> Result<Option<Tensor>> {
    let gx = x.host("cpu")?;
    let xs = host_f32(&gx, x)?;
    dst.fill(|d| map1(d, xs, |v| op.apply(v)))
}

/// `x op s` over a dense f32 tensor into `dst`, one arm per common op.
fn dense_scalar(op: ScalarOp, x: &Tensor, s: f32, dst: Dense<'_>) -> Result<Option<Tensor>> {
    let gx = x.host("cpu")?;
    let xs = host_f32(&gx, x)?;
    dst.fill(|d| match op {
        ScalarOp::Add => map1(d, xs, |v| ScalarOp::Add.apply(v, s)),
        ScalarOp::Mul => map1(d, xs, |v| ScalarOp::Mul.apply(v, s)),
        ScalarOp::Sub => map1(d, xs, |v| ScalarOp::Sub.apply(v, s)),
        ScalarOp::Div => map1(d, xs, |v| ScalarOp::Div.apply(v, s)),
        other => map1(d, xs, |v| other.apply(v, s)),
    })
}

/// `out = a op b` with numpy broadcasting (f32 math, one rounding).
///
/// # Errors
/// [`Error::Shape`] if the shapes do not broadcast or `out` has the wrong shape;
/// [`Error::DType`] for mismatched or non-float dtypes; [`Error::Device`] across devices.
pub fn binary_into(op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let dev = same_device("binary", &[a, b])?;
    same_dtype("binary", a, b)?;
    float_only("binary", a)?;
    let shape = broadcast_shapes("binary", a.shape(), b.shape())?;
    check_out("binary", out, &shape, a.dtype(), &dev, &[a, b])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu if dense_f32(&shape, &[a, b, out]) => {
            dense_binary(op, a, b, Dense::Into(out)).map(drop)
        }
        Device::Cpu => cpu_map(out, &shape, &[a, b], |v| op.apply(v[0], v[1])),
        Device::Cuda(_) => {
            let c = cuda(&dev)?;
            let contiguous = a.shape() == b.shape() && vectorizable(&[a, b, out])?;
            let mut args = KernelArgs::new()
                .arg(op as i32)
                .arg(dptr(a)?)
                .arg(dptr(b)?)
                .arg(dptr(out)?)
                .arg(n as u64);
            if !contiguous {
                args = args.arg(strided(&shape, &[a, b, out])?);
            }
            let kernel = ElementwiseKernel::Binary {
                dtype: a.dtype(),
                contiguous,
            };
            // SAFETY: pointers address the operands' storage; the strided index (or contiguity)
            // keeps every access inside their layouts' spans.
            unsafe {
                c.launch(
                    kernel,
                    &elementwise_config(n, contiguous, a.dtype(), c),
                    &args,
                )
            }
        }
    }
}

/// `a op b` with broadcasting, allocated.
///
/// # Errors
/// As [`binary_into`].
pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let shape = broadcast_shapes("binary", a.shape(), b.shape())?;
    let dev = same_device("binary", &[a, b])?;
    if let (Device::Cpu, true) = (&dev, dense_f32(&shape, &[a, b]))
        && let Some(out) = dense_binary(op, a, b, Dense::New(&shape))?
    {
        return Ok(out);
    }
    let out = new_output("binary", &shape, a, &dev)?;
    binary_into(op, a, b, &out)?;
    Ok(out)
}

macro_rules! binary_fns {
    ($($name:ident, $into:ident, $op:ident, $doc:literal;)*) => { $(
        #[doc = concat!("`a ", $doc, " b` with broadcasting.\n\n# Errors\nAs [`binary_into`].")]
        pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
            binary(BinaryOp::$op, a, b)
        }
        #[doc = concat!("`out = a ", $doc, " b` with broadcasting.\n\n# Errors\nAs [`binary_into`].")]
        pub fn $into(a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
            binary_into(BinaryOp::$op, a, b, out)
        }
    )* };
}
binary_fns! {
    add, add_into, Add, "+";
    sub, sub_into, Sub, "-";
    mul, mul_into, Mul, "*";
    div, div_into, Div, "/";
    maximum, maximum_into, Maximum, "max";
    minimum, minimum_into, Minimum, "min";
}

/// `out = f(x)` elementwise (f32 math, one rounding).
///
/// # Errors
/// [`Error::DType`] for non-float tensors; shape/device errors for `out`.
pub fn unary_into(op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("unary", x)?;
    check_out("unary", out, x.shape(), x.dtype(), &dev, &[x])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu if dense_f32(x.shape(), &[x, out]) => {
            dense_unary(op, x, Dense::Into(out)).map(drop)
        }
        Device::Cpu => cpu_map(out, x.shape(), &[x], |v| op.apply(v[0])),
        Device::Cuda(c) => {
            let contiguous = vectorizable(&[x, out])?;
            let mut args = KernelArgs::new()
                .arg(op as i32)
                .arg(dptr(x)?)
                .arg(dptr(out)?)
                .arg(n as u64);
            if !contiguous {
                args = args.arg(strided(x.shape(), &[x, out])?);
            }
            let kernel = ElementwiseKernel::Unary {
                dtype: x.dtype(),
                contiguous,
            };
            // SAFETY: as in `binary_into`.
            unsafe {
                c.launch(
                    kernel,
                    &elementwise_config(n, contiguous, x.dtype(), c),
                    &args,
                )
            }
        }
    }
}

/// `f(x)` elementwise, allocated.
///
/// # Errors
/// As [`unary_into`].
pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    if let (Device::Cpu, true) = (x.device(), dense_f32(x.shape(), &[x]))
        && let Some(out) = dense_unary(op, x, Dense::New(x.shape()))?
    {
        return Ok(out);
    }
    let out = new_output("unary", x.shape(), x, &x.device())?;
    unary_into(op, x, &out)?;
    Ok(out)
}

macro_rules! unary_fns {
    ($($name:ident, $into:ident, $op:ident;)*) => { $(
        #[doc = concat!("Elementwise `", stringify!($name), "` (see [`UnaryOp::", stringify!($op), "`]).\n\n# Errors\nAs [`unary_into`].")]
        pub fn $name(x: &Tensor) -> Result<Tensor> {
            unary(UnaryOp::$op, x)
        }
        #[doc = concat!("Elementwise `", stringify!($name), "` into `out`.\n\n# Errors\nAs [`unary_into`].")]
        pub fn $into(x: &Tensor, out: &Tensor) -> Result<()> {
            unary_into(UnaryOp::$op, x, out)
        }
    )* };
}
unary_fns! {
    neg, neg_into, Neg;
    abs, abs_into, Abs;
    exp, exp_into, Exp;
    log, log_into, Log;
    sqrt, sqrt_into, Sqrt;
    rsqrt, rsqrt_into, Rsqrt;
    sin, sin_into, Sin;
    cos, cos_into, Cos;
    tanh, tanh_into, Tanh;
    sigmoid, sigmoid_into, Sigmoid;
    relu, relu_into, Relu;
    relu2, relu2_into, Relu2;
    gelu_erf, gelu_erf_into, GeluErf;
    gelu_tanh, gelu_tanh_into, GeluTanh;
    silu, silu_into, Silu;
}

/// `out = x op s` (or `s op x` for the reversed ops) with a scalar `s`.
///
/// # Errors
/// [`Error::DType`] for non-float tensors; shape/device errors for `out`.
pub fn scalar_into(op: ScalarOp, x: &Tensor, s: f32, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("scalar", x)?;
    check_out("scalar", out, x.shape(), x.dtype(), &dev, &[x])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu if dense_f32(x.shape(), &[x, out]) => {
            dense_scalar(op, x, s, Dense::Into(out)).map(drop)
        }
        Device::Cpu => cpu_map(out, x.shape(), &[x], |v| op.apply(v[0], s)),
        Device::Cuda(c) => {
            let args = KernelArgs::new()
                .arg(op as i32)
                .arg(s)
                .arg(dptr(x)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(strided(x.shape(), &[x, out])?);
            // SAFETY: as in `binary_into`.
            unsafe {
                c.launch(
                    ElementwiseKernel::Scalar(x.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// `x op s`, allocated.
///
/// # Errors
/// As [`scalar_into`].
pub fn scalar(op: ScalarOp, x: &Tensor, s: f32) -> Result<Tensor> {
    if let (Device::Cpu, true) = (x.device(), dense_f32(x.shape(), &[x]))
        && let Some(out) = dense_scalar(op, x, s, Dense::New(x.shape()))?
    {
        return Ok(out);
    }
    let out = new_output("scalar", x.shape(), x, &x.device())?;
    scalar_into(op, x, s, &out)?;
    Ok(out)
}

/// `out = min(max(x, lo), hi)`.
///
/// # Errors
/// As [`scalar_into`].
pub fn clamp_into(x: &Tensor, lo: f32, hi: f32, out: &Tensor) -> Result<()> {
    let dev = x.device();
    float_only("clamp", x)?;
    check_out("clamp", out, x.shape(), x.dtype(), &dev, &[x])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => cpu_map(out, x.shape(), &[x], |v| v[0].max(lo).min(hi)),
        Device::Cuda(c) => {
            let args = KernelArgs::new()
                .arg(lo)
                .arg(hi)
                .arg(dptr(x)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(strided(x.shape(), &[x, out])?);
            // SAFETY: as in `binary_into`.
            unsafe {
                c.launch(
                    ElementwiseKernel::Clamp(x.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// `min(max(x, lo), hi)`, allocated.
///
/// # Errors
/// As [`scalar_into`].
pub fn clamp(x: &Tensor, lo: f32, hi: f32) -> Result<Tensor> {
    let out = new_output("clamp", x.shape(), x, &x.device())?;
    clamp_into(x, lo, hi, &out)?;
    Ok(out)
}

/// `out = cond ? a : b` elementwise with broadcasting; `cond` is u8 (nonzero is true).
///
/// # Errors
/// [`Error::DType`] unless `cond` is u8 and `a`, `b` share a float dtype; shape/device errors.
pub fn where_into(cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let dev = same_device("where", &[cond, a, b])?;
    Error::expect_dtype("where (condition)", cond.dtype(), DType::U8)?;
    same_dtype("where", a, b)?;
    float_only("where", a)?;
    let shape = broadcast_shapes("where", cond.shape(), a.shape())?;
    let shape = broadcast_shapes("where", &shape, b.shape())?;
    check_out("where", out, &shape, a.dtype(), &dev, &[cond, a, b])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => cpu_map(out, &shape, &[cond, a, b], |v| {
            if v[0] != 0.0 { v[1] } else { v[2] }
        }),
        Device::Cuda(c) => {
            let args = KernelArgs::new()
                .arg(dptr(cond)?)
                .arg(dptr(a)?)
                .arg(dptr(b)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(strided(&shape, &[cond, a, out])?)
                .arg(strided(&shape, &[b])?);
            // SAFETY: as in `binary_into`.
            unsafe {
                c.launch(
                    ElementwiseKernel::Where(a.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// `cond ? a : b`, allocated.
///
/// # Errors
/// As [`where_into`].
pub fn where_cond(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let shape = broadcast_shapes("where", cond.shape(), a.shape())?;
    let shape = broadcast_shapes("where", &shape, b.shape())?;
    let out = new_output("where", &shape, a, &same_device("where", &[cond, a, b])?)?;
    where_into(cond, a, b, &out)?;
    Ok(out)
}

/// Copies `x` into `out` (same shape and dtype, any layouts): transposes and permutations made
/// dense, and writes into views (e.g. a `narrow` of a larger tensor, for concatenation).
///
/// # Errors
/// Shape, dtype and device errors.
pub fn copy_into(x: &Tensor, out: &Tensor) -> Result<()> {
    let dev = x.device();
    check_out("copy", out, x.shape(), x.dtype(), &dev, &[x])?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let src = x.host("copy")?;
            let mut dst = out.host_mut("copy")?;
            if x.is_contiguous() && out.is_contiguous() {
                let (from, to) = (x.layout().offset(), out.layout().offset());
                dst.copy_range(to, &src, from, n);
                return Ok(());
            }
            for (i, o) in x.layout().indices().zip(out.layout().indices()) {
                dst.copy_elem(o, &src, i);
            }
            Ok(())
        }
        Device::Cuda(c) => {
            if x.is_contiguous() && out.is_contiguous() {
                // SAFETY: both ranges are n elements of their tensors' storage on the lane's
                // device, and do not overlap (`check_out` refused shared storage).
                return Ok(unsafe {
                    c.stream().memcpy_dtod_async(
                        dptr(out)?,
                        dptr(x)?,
                        n * x.dtype().size_in_bytes(),
                    )
                }?);
            }
            let args = KernelArgs::new()
                .arg(dptr(x)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(strided(x.shape(), &[x, out])?);
            // SAFETY: as in `binary_into`.
            unsafe {
                c.launch(
                    ElementwiseKernel::Copy(x.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// A contiguous copy of `x`.
///
/// # Errors
/// Memory errors.
pub fn copy(x: &Tensor) -> Result<Tensor> {
    let out = new_output("copy", x.shape(), x, &x.device())?;
    copy_into(x, &out)?;
    Ok(out)
}

/// `out = x` converted to `out`'s float dtype (round to nearest even); a block-quantized `x`
/// is dequantized ([`crate::quant::dequantize_into`]).
///
/// # Errors
/// [`Error::DType`] unless both are float (or `x` block-quantized); shape/device errors.
pub fn cast_into(x: &Tensor, out: &Tensor) -> Result<()> {
    if x.dtype().is_quantized() {
        return crate::quant::dequantize_into(x, out);
    }
    let dev = x.device();
    float_only("cast", x)?;
    float_only("cast", out)?;
    let to = out.dtype();
    check_out("cast", out, x.shape(), to, &dev, &[x])?;
    if to == x.dtype() {
        return copy_into(x, out);
    }
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => cpu_map(out, x.shape(), &[x], |v| v[0]),
        Device::Cuda(c) => {
            let args = KernelArgs::new()
                .arg(dptr(x)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(strided(x.shape(), &[x, out])?);
            let kernel = ElementwiseKernel::Cast {
                from: x.dtype(),
                to,
            };
            // SAFETY: as in `binary_into`.
            unsafe { c.launch(kernel, &grid::elementwise(n, c.sm_count()), &args) }
        }
    }
}

/// `x` converted to `dtype`: between float dtypes as [`cast_into`]; a block-quantized `x`
/// dequantized into float `dtype`; a float `x` quantized into a block-quantized `dtype` by
/// [`crate::quant::quantize_tensor`] (ggml's reference quantizers, on the host).
///
/// # Errors
/// As [`cast_into`] or [`crate::quant::quantize_tensor`].
pub fn to_dtype(x: &Tensor, dtype: DType) -> Result<Tensor> {
    if let Some(format) = dtype.quant_format() {
        return crate::quant::quantize_tensor(x, format);
    }
    let out = Tensor::empty(x.shape(), dtype, &x.device())?;
    cast_into(x, &out)?;
    Ok(out)
}
