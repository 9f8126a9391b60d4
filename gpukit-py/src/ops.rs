//! The op set of `gpukit-ops` as module functions (`gk.add`, `gk.matmul`, `gk.rms_norm`,
//! `gk.sdpa`, …). Each runs where its inputs are (CPU or their GPU stream) with the GIL
//! released. Most take `out=`: a preallocated tensor the result is written into without
//! allocating, which is what a `gk.Graph` capture needs.

use gpukit_ops::attention::AttentionMask;
use gpukit_ops::ops::{self, Activation};
use gpukit_ops::quant;
use gpukit_ops::rope::{RopeConfig, RopeLayout, RopeScaling, rope_inplace};
use gpukit_ops::sampling::{SamplingParams, sample_tokens_into, sampler_workspace_len};
use gpukit_ops::{BinaryOp, DType, Device, Element, ReduceOp, ScalarOp, Tensor, UnaryOp};
use pyo3::prelude::*;

use crate::errors::{self, type_error, value};
use crate::tensor::{PyTensor, axis, dtype_arg, run, tensor_arg};

/// An operand of an arithmetic op: a tensor or a Python number.
pub(crate) enum Operand {
    Tensor(Tensor),
    Scalar(f64),
}

impl Operand {
    /// `obj` as an operand; arrays and DLPack objects become tensors on `device`.
    pub(crate) fn extract(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        device: &Device,
    ) -> PyResult<Operand> {
        if obj.is_instance_of::<pyo3::types::PyFloat>()
            || obj.is_instance_of::<pyo3::types::PyInt>()
        {
            return Ok(Operand::Scalar(obj.extract()?));
        }
        Ok(Operand::Tensor(tensor_arg(py, obj, device)?))
    }
}

fn out_arg(out: Option<&Bound<'_, PyTensor>>) -> Option<Tensor> {
    out.map(|o| o.get().t.clone())
}

/// `a op b` with broadcasting, into `out` if given.
pub(crate) fn binary_op(
    py: Python<'_>,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    out: Option<Tensor>,
) -> PyResult<PyTensor> {
    let (a, b) = (a.clone(), b.clone());
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::binary_into(op, &a, &b, &o).map(|_| o),
        None => ops::binary(op, &a, &b),
    })?))
}

/// The scalar op computing `x op s` for a tensor `x` and a number `s` (none for the ops with no
/// scalar form).
fn scalar_of(op: BinaryOp) -> Option<ScalarOp> {
    match op {
        BinaryOp::Add => Some(ScalarOp::Add),
        BinaryOp::Sub => Some(ScalarOp::Sub),
        BinaryOp::Mul => Some(ScalarOp::Mul),
        BinaryOp::Div => Some(ScalarOp::Div),
        BinaryOp::Pow => Some(ScalarOp::Pow),
        BinaryOp::Maximum => Some(ScalarOp::Maximum),
        BinaryOp::Minimum => Some(ScalarOp::Minimum),
        BinaryOp::Atan2 | BinaryOp::Lt => None,
    }
}

/// The scalar op computing `s op x` for a number `s` and a tensor `x` (none for a power of a
/// number).
fn reflected_of(op: BinaryOp) -> Option<ScalarOp> {
    match op {
        BinaryOp::Add => Some(ScalarOp::Add),
        BinaryOp::Mul => Some(ScalarOp::Mul),
        BinaryOp::Sub => Some(ScalarOp::RSub),
        BinaryOp::Div => Some(ScalarOp::RDiv),
        BinaryOp::Maximum => Some(ScalarOp::Maximum),
        BinaryOp::Minimum => Some(ScalarOp::Minimum),
        BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Lt => None,
    }
}

/// `s op x` for a number `s`, into `out` if given.
pub(crate) fn reflected_scalar_op(
    py: Python<'_>,
    op: BinaryOp,
    s: f64,
    x: &Tensor,
    out: Option<Tensor>,
) -> PyResult<PyTensor> {
    let sop = reflected_of(op)
        .ok_or_else(|| type_error("pow(number, tensor): give the base as a tensor"))?;
    let x = x.clone();
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::scalar_into(sop, &x, s as f32, &o).map(|_| o),
        None => ops::scalar(sop, &x, s as f32),
    })?))
}

/// `x op s` for a number `s`, into `out` if given.
pub(crate) fn scalar_op(
    py: Python<'_>,
    op: BinaryOp,
    x: &Tensor,
    s: f64,
    out: Option<Tensor>,
) -> PyResult<PyTensor> {
    let sop = scalar_of(op).ok_or_else(|| {
        type_error(format!(
            "{op:?} with a number: give both operands as tensors"
        ))
    })?;
    let x = x.clone();
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::scalar_into(sop, &x, s as f32, &o).map(|_| o),
        None => ops::scalar(sop, &x, s as f32),
    })?))
}

fn binary_fn(
    py: Python<'_>,
    op: BinaryOp,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let out = out_arg(out);
    let device = [a, b]
        .iter()
        .find_map(|o| o.cast::<PyTensor>().ok().map(|t| t.get().t.device()))
        .unwrap_or(Device::Cpu);
    match (
        Operand::extract(py, a, &device)?,
        Operand::extract(py, b, &device)?,
    ) {
        (Operand::Tensor(a), Operand::Tensor(b)) => binary_op(py, op, &a, &b, out),
        (Operand::Tensor(a), Operand::Scalar(s)) => scalar_op(py, op, &a, s, out),
        (Operand::Scalar(s), Operand::Tensor(b)) => reflected_scalar_op(py, op, s, &b, out),
        (Operand::Scalar(_), Operand::Scalar(_)) => {
            Err(type_error("at least one operand must be a tensor"))
        }
    }
}

macro_rules! binary_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// `a` and `b` are tensors (broadcast against each other) or one of them a number; the
        /// result has the tensors' dtype. Raises `ValueError` for shapes that do not broadcast,
        /// mixed dtypes or devices.
        #[pyfunction]
        #[pyo3(signature = (a, b, *, out=None))]
        pub fn $name(
            py: Python<'_>,
            a: &Bound<'_, PyAny>,
            b: &Bound<'_, PyAny>,
            out: Option<&Bound<'_, PyTensor>>,
        ) -> PyResult<PyTensor> {
            binary_fn(py, BinaryOp::$op, a, b, out)
        }
    )*};
}

binary_fns! {
    add => Add, "`a + b` elementwise.";
    sub => Sub, "`a - b` elementwise.";
    mul => Mul, "`a * b` elementwise.";
    div => Div, "`a / b` elementwise.";
    maximum => Maximum, "The larger of `a` and `b` elementwise (NaN propagates).";
    minimum => Minimum, "The smaller of `a` and `b` elementwise (NaN propagates).";
    pow => Pow, "`a ** b` elementwise.";
}

fn unary_fn(
    py: Python<'_>,
    op: UnaryOp,
    x: &Bound<'_, PyTensor>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let x = x.get().t.clone();
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::unary_into(op, &x, &o).map(|_| o),
        None => ops::unary(op, &x),
    })?))
}

macro_rules! unary_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// `x`: a float tensor (f32, f16, bf16), computed in f32 and rounded once to the dtype.
        #[pyfunction]
        #[pyo3(signature = (x, *, out=None))]
        pub fn $name(
            py: Python<'_>,
            x: &Bound<'_, PyTensor>,
            out: Option<&Bound<'_, PyTensor>>,
        ) -> PyResult<PyTensor> {
            unary_fn(py, UnaryOp::$op, x, out)
        }
    )*};
}

unary_fns! {
    neg => Neg, "`-x` elementwise.";
    abs => Abs, "`|x|` elementwise.";
    exp => Exp, "`e^x` elementwise.";
    log => Log, "Natural logarithm elementwise.";
    sqrt => Sqrt, "Square root elementwise.";
    rsqrt => Rsqrt, "`1 / sqrt(x)` elementwise.";
    sin => Sin, "Sine elementwise (radians).";
    cos => Cos, "Cosine elementwise (radians).";
    tanh => Tanh, "Hyperbolic tangent elementwise.";
    sigmoid => Sigmoid, "`1 / (1 + e^-x)` elementwise.";
    relu => Relu, "`max(x, 0)` elementwise.";
    silu => Silu, "`x · sigmoid(x)` elementwise (SiLU / swish, Elfwing et al. 2017).";
    square => Square, "`x²` elementwise.";
    reciprocal => Recip, "`1 / x` elementwise.";
}

/// GELU (Hendrycks & Gimpel 2016) elementwise: `approximate="none"` is the exact erf form,
/// `"tanh"` the tanh approximation (as torch's `gelu(approximate=…)`).
#[pyfunction]
#[pyo3(signature = (x, *, approximate="none", out=None))]
pub fn gelu(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    approximate: &str,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let op = match approximate {
        "none" => UnaryOp::GeluErf,
        "tanh" => UnaryOp::GeluTanh,
        other => {
            return Err(value(format!(
                "approximate=\"{other}\": expected \"none\" or \"tanh\""
            )));
        }
    };
    unary_fn(py, op, x, out)
}

/// `min(max(x, min), max)` elementwise.
#[pyfunction]
#[pyo3(signature = (x, min, max, *, out=None))]
pub fn clamp(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    min: f32,
    max: f32,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let x = x.get().t.clone();
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::clamp_into(&x, min, max, &o).map(|_| o),
        None => ops::clamp(&x, min, max),
    })?))
}

/// `cond ? a : b` elementwise with broadcasting; `cond` is uint8 (nonzero is true), `a` and `b`
/// share a float dtype.
#[pyfunction]
#[pyo3(name = "where", signature = (cond, a, b, *, out=None))]
pub fn where_(
    py: Python<'_>,
    cond: &Bound<'_, PyTensor>,
    a: &Bound<'_, PyTensor>,
    b: &Bound<'_, PyTensor>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (c, a, b) = (cond.get().t.clone(), a.get().t.clone(), b.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::where_into(&c, &a, &b, &o).map(|_| o),
        None => ops::where_cond(&c, &a, &b),
    })?))
}

/// Copies `src` (broadcast to `dst`'s shape) into `dst`, converting the dtype; returns `dst`.
#[pyfunction]
pub fn copy_(
    py: Python<'_>,
    dst: &Bound<'_, PyTensor>,
    src: &Bound<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (d, s) = (dst.get().t.clone(), src.get().t.clone());
    Ok(PyTensor::new(run(py, move || {
        let s = s.broadcast_to(d.shape())?;
        if s.dtype() == d.dtype() {
            ops::copy_into(&s, &d)?;
        } else {
            ops::cast_into(&s, &d)?;
        }
        Ok(d)
    })?))
}

/// `x` converted to `dtype` (a new tensor; `x` itself when the dtype is already `dtype`).
/// From a GGUF block format: dequantized. To one: quantized (float input, on the host).
pub(crate) fn cast(py: Python<'_>, x: &Tensor, dtype: DType) -> PyResult<Tensor> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    let x = x.clone();
    let on_device = x.dtype().is_float() && (dtype.is_float() || dtype.is_quantized())
        || x.dtype().is_quantized() && dtype.is_float();
    if on_device {
        return run(py, move || ops::to_dtype(&x, dtype));
    }
    // Conversions to or from integers (rare: ids, masks) go through the host, value by value
    // (rounding to nearest for floats, saturating and truncating for integers).
    run(py, move || {
        let v = x.to_vec_f64()?;
        let (shape, d) = (x.shape().to_vec(), x.device());
        fn build<T: Element>(v: &[f64], shape: &[usize], d: &Device) -> gpukit_ops::Result<Tensor> {
            Tensor::from_slice(
                &v.iter().map(|&a| T::from_f64(a)).collect::<Vec<T>>(),
                shape,
                d,
            )
        }
        match dtype {
            DType::F32 => build::<f32>(&v, &shape, &d),
            DType::F16 => build::<half::f16>(&v, &shape, &d),
            DType::BF16 => build::<half::bf16>(&v, &shape, &d),
            DType::I32 => build::<i32>(&v, &shape, &d),
            DType::I64 => build::<i64>(&v, &shape, &d),
            DType::U8 => build::<u8>(&v, &shape, &d),
            other => ops::to_dtype(&build::<f32>(&v, &shape, &d)?, other),
        }
    })
}

/// A reduction over `axis` (every element when None).
pub(crate) fn reduce(
    py: Python<'_>,
    op: ReduceOp,
    x: &Tensor,
    axis_arg: Option<isize>,
) -> PyResult<PyTensor> {
    let x = x.clone();
    let a = axis_arg.map(|a| axis(a, x.rank())).transpose()?;
    Ok(PyTensor::new(run(py, move || match a {
        Some(a) => ops::reduce(op, &x, a),
        None => ops::reduce_all(op, &x),
    })?))
}

/// Argmax over `axis` (the flattened tensor when None), int64.
pub(crate) fn argmax_impl(
    py: Python<'_>,
    x: &Tensor,
    axis_arg: Option<isize>,
) -> PyResult<PyTensor> {
    let x = x.clone();
    let a = axis_arg.map(|a| axis(a, x.rank())).transpose()?;
    Ok(PyTensor::new(run(py, move || match a {
        Some(a) => ops::argmax(&x, a),
        None => ops::argmax_all(&x),
    })?))
}

macro_rules! reduce_fns {
    ($($name:ident => $op:ident, $doc:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// `axis`: the dimension reduced (removed from the shape), or None for every element
        /// (a 0-d result). Float tensors; f16/bf16 accumulate in f32.
        #[pyfunction]
        #[pyo3(signature = (x, axis=None))]
        pub fn $name(py: Python<'_>, x: &Bound<'_, PyTensor>, axis: Option<isize>) -> PyResult<PyTensor> {
            reduce(py, ReduceOp::$op, &x.get().t, axis)
        }
    )*};
}

reduce_fns! {
    sum => Sum, "The sum of `x` over `axis`.";
    mean => Mean, "The mean of `x` over `axis`.";
    max => Max, "The maximum of `x` over `axis` (NaN propagates).";
    min => Min, "The minimum of `x` over `axis` (NaN propagates).";
}

/// The index of the maximum of `x` over `axis` (of the flattened tensor when None): int64, the
/// first on ties, NaN counting as the maximum (as `torch.argmax`).
#[pyfunction]
#[pyo3(signature = (x, axis=None))]
pub fn argmax(py: Python<'_>, x: &Bound<'_, PyTensor>, axis: Option<isize>) -> PyResult<PyTensor> {
    argmax_impl(py, &x.get().t, axis)
}

fn softmax_fn(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    axis_arg: isize,
    log: bool,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let x = x.get().t.clone();
    let a = axis(axis_arg, x.rank())?;
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::softmax_into(&x, a, log, &o).map(|_| o),
        None if log => ops::log_softmax(&x, a),
        None => ops::softmax(&x, a),
    })?))
}

/// Softmax of `x` over `axis` (default: the last), computed in f32.
#[pyfunction]
#[pyo3(signature = (x, axis=-1, *, out=None))]
pub fn softmax(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    axis: isize,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    softmax_fn(py, x, axis, false, out)
}

/// Log-softmax of `x` over `axis` (default: the last), computed in f32.
#[pyfunction]
#[pyo3(signature = (x, axis=-1, *, out=None))]
pub fn log_softmax(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    axis: isize,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    softmax_fn(py, x, axis, true, out)
}

/// The matrix product `a @ b`: `[m, k] @ [k, n] → [m, n]`, batched over leading dimensions
/// (broadcast). Float tensors of one dtype; on CUDA through cuBLASLt, f32 at full precision
/// (no TF32).
#[pyfunction]
#[pyo3(signature = (a, b, *, out=None))]
pub fn matmul(
    py: Python<'_>,
    a: &Bound<'_, PyTensor>,
    b: &Bound<'_, PyTensor>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (a, b) = (a.get().t.clone(), b.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::matmul_into(&a, &b, &o).map(|_| o),
        None => ops::matmul(&a, &b),
    })?))
}

/// A linear layer: `activation(x @ weight.T + bias)` for `x [..., in]`, `weight [out, in]`,
/// `bias [out]`; `activation` None, `"relu"` or `"gelu_tanh"`. On CUDA, up to 8 rows without
/// activation run gpukit's GEMV; the rest cuBLASLt with a fused epilogue.
#[pyfunction]
#[pyo3(signature = (x, weight, bias=None, *, activation=None, out=None))]
pub fn linear(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    activation: Option<&str>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let act = match activation {
        None | Some("none") => Activation::None,
        Some("relu") => Activation::Relu,
        Some("gelu_tanh") => Activation::GeluTanh,
        Some(other) => {
            return Err(value(format!(
                "activation=\"{other}\": expected None, \"relu\" or \"gelu_tanh\""
            )));
        }
    };
    let (x, w) = (x.get().t.clone(), weight.get().t.clone());
    let b = bias.map(|b| b.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::linear_into(&x, &w, b.as_ref(), act, &o).map(|_| o),
        None => ops::linear(&x, &w, b.as_ref(), act),
    })?))
}

/// RMSNorm (Zhang & Sennrich 2019) over the last axis: `x / sqrt(mean(x²) + eps) · weight`,
/// `weight [hidden]`, computed in f32.
#[pyfunction]
#[pyo3(signature = (x, weight, eps=1e-6, *, out=None))]
pub fn rms_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    eps: f32,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (x, w) = (x.get().t.clone(), weight.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::rms_norm_into(&x, &w, eps, &o).map(|_| o),
        None => ops::rms_norm(&x, &w, eps),
    })?))
}

/// LayerNorm (Ba et al. 2016) over the last axis: `(x − mean) / sqrt(var + eps) · weight +
/// bias` (biased variance, as torch), `weight`/`bias [hidden]`.
#[pyfunction]
#[pyo3(signature = (x, weight, bias=None, eps=1e-5, *, out=None))]
pub fn layer_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    eps: f32,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (x, w) = (x.get().t.clone(), weight.get().t.clone());
    let b = bias.map(|b| b.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || match out {
        Some(o) => ops::layer_norm_into(&x, &w, b.as_ref(), eps, &o).map(|_| o),
        None => ops::layer_norm(&x, &w, b.as_ref(), eps),
    })?))
}

/// Rows `ids` (int32/int64 `[n]`) of `table [vocab, hidden]` → `[n, hidden]`.
///
/// Raises `IndexError` for an id out of range (on a GPU at the next synchronize).
#[pyfunction]
pub fn embedding(
    py: Python<'_>,
    table: &Bound<'_, PyTensor>,
    ids: &Bound<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (t, i) = (table.get().t.clone(), ids.get().t.clone());
    Ok(PyTensor::new(run(py, move || ops::embedding(&t, &i))?))
}

/// Entries `ids` (int32/int64 `[n]`) of `x` along `axis` (as `torch.index_select`).
#[pyfunction]
pub fn index_select(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    axis: isize,
    ids: &Bound<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (x, i) = (x.get().t.clone(), ids.get().t.clone());
    let a = self::axis(axis, x.rank())?;
    Ok(PyTensor::new(run(py, move || {
        ops::index_select(&x, a, &i)
    })?))
}

/// `out[..., j, ...] = x[..., index[..., j, ...], ...]` along `axis` (as `torch.gather`).
#[pyfunction]
pub fn gather(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    axis: isize,
    index: &Bound<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let (x, i) = (x.get().t.clone(), index.get().t.clone());
    let a = self::axis(axis, x.rank())?;
    Ok(PyTensor::new(run(py, move || ops::gather(&x, a, &i))?))
}

/// The tensors joined along `axis` (same dtype and device, equal other dimensions).
#[pyfunction]
#[pyo3(signature = (tensors, axis=0))]
pub fn concat(
    py: Python<'_>,
    tensors: Vec<Bound<'_, PyTensor>>,
    axis: isize,
) -> PyResult<PyTensor> {
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.get().t.clone()).collect();
    let rank = ts.first().map_or(1, Tensor::rank);
    let a = self::axis(axis, rank)?;
    Ok(PyTensor::new(run(py, move || {
        let refs: Vec<&Tensor> = ts.iter().collect();
        ops::concat(&refs, a)
    })?))
}

/// RoPE inverse frequencies (Su et al. 2021): `base^(−2i/rotary_dim)` for `i < rotary_dim/2`,
/// float32 `[rotary_dim / 2]` on `device`, for `gk.rope`.
#[pyfunction]
#[pyo3(signature = (rotary_dim, base=10000.0, *, device=None))]
pub fn rope_frequencies(
    py: Python<'_>,
    rotary_dim: usize,
    base: f64,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let d = crate::device::resolve(device)?;
    let cfg = RopeConfig {
        rotary_dim,
        base,
        scaling: RopeScaling::None,
    };
    Ok(PyTensor::new(run(py, move || {
        let table = cfg.table(0)?;
        Tensor::from_slice(&table.inv_freq, &[table.inv_freq.len()], &d)
    })?))
}

/// Rotates `x [tokens, heads, head_dim]` (contiguous) in place with rotary position embeddings
/// (Su et al. 2021): token `t` at position `positions[t]` (int32 `[tokens]`), frequencies
/// `inv_freq` (float32 `[rotary_dim/2]`, `gk.rope_frequencies`). `layout="rotate_half"` pairs
/// element `i` with `i + rotary_dim/2` (HF checkpoints); `"adjacent"` pairs `2i` with `2i+1`
/// (GGUF). Returns `x`.
#[pyfunction]
#[pyo3(signature = (x, positions, inv_freq, *, attention_scale=1.0, layout="rotate_half"))]
pub fn rope(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    positions: &Bound<'_, PyTensor>,
    inv_freq: &Bound<'_, PyTensor>,
    attention_scale: f32,
    layout: &str,
) -> PyResult<PyTensor> {
    let l = match layout {
        "rotate_half" => RopeLayout::RotateHalf,
        "adjacent" => RopeLayout::AdjacentPairs,
        other => {
            return Err(value(format!(
                "layout=\"{other}\": expected \"rotate_half\" or \"adjacent\""
            )));
        }
    };
    let (x, p, f) = (
        x.get().t.clone(),
        positions.get().t.clone(),
        inv_freq.get().t.clone(),
    );
    Ok(PyTensor::new(run(py, move || {
        rope_inplace(&x, &p, &f, attention_scale, l).map(|_| x)
    })?))
}

/// Scaled dot-product attention `softmax(q·kᵀ·scale + mask)·v` (flash attention on CUDA):
/// `q [batch, q_heads, q_len, head_dim]`, `k`/`v [batch, kv_heads, kv_len, head_dim]` with
/// `kv_heads` dividing `q_heads` (grouped-query attention); `scale` defaults to
/// `1/sqrt(head_dim)`. `causal` aligns the last query with the last key; `sliding_window`
/// (with causal) limits each query to that many keys; `alibi` adds ALiBi biases. Returns
/// `[batch, q_heads, q_len, head_dim]`. On CUDA: f16/bf16 and the built head dims.
#[pyfunction]
#[pyo3(signature = (q, k, v, *, scale=None, causal=false, sliding_window=None, alibi=false))]
#[allow(clippy::too_many_arguments)]
pub fn sdpa(
    py: Python<'_>,
    q: &Bound<'_, PyTensor>,
    k: &Bound<'_, PyTensor>,
    v: &Bound<'_, PyTensor>,
    scale: Option<f32>,
    causal: bool,
    sliding_window: Option<usize>,
    alibi: bool,
) -> PyResult<PyTensor> {
    let (q, k, v) = (q.get().t.clone(), k.get().t.clone(), v.get().t.clone());
    let head_dim = q.shape().last().copied().unwrap_or(1).max(1);
    let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    let mask = AttentionMask {
        causal,
        sliding_window,
        alibi,
    };
    Ok(PyTensor::new(run(py, move || {
        gpukit_ops::attention::sdpa(&q, &k, &v, scale, mask)
    })?))
}

/// Sampling parameters from the arguments `sample` and the LLM's generating methods take.
/// Raises `ValueError` for values out of range.
pub(crate) fn sampling_params(
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    seed: u64,
) -> PyResult<SamplingParams> {
    let params = SamplingParams {
        temperature,
        top_k,
        top_p,
        min_p,
        repetition_penalty,
        seed,
    };
    params.validate().map_err(errors::ops)?;
    Ok(params)
}

/// One token id per row of `logits [rows, vocab]`, int32 `[rows]`: greedy at temperature 0,
/// else a seeded draw (Philox, counter `(step, row)`) after the repetition penalty (over the
/// ids in `recent [rows, window]`, int32, negative entries empty), temperature, top-k, top-p
/// and min-p. The same seed and step give the same ids on the CPU and on CUDA.
#[pyfunction]
#[pyo3(signature = (logits, *, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                    repetition_penalty=1.0, seed=0, step=0, recent=None))]
#[allow(clippy::too_many_arguments)]
pub fn sample(
    py: Python<'_>,
    logits: &Bound<'_, PyTensor>,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    seed: u64,
    step: i64,
    recent: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let params = sampling_params(temperature, top_k, top_p, min_p, repetition_penalty, seed)?;
    let logits = logits.get().t.clone();
    let recent = recent.map(|r| r.get().t.clone());
    Ok(PyTensor::new(run(py, move || {
        let d = logits.device();
        let rows = if logits.rank() == 2 {
            logits.shape()[0]
        } else {
            1
        };
        let vocab = logits.shape().last().copied().unwrap_or(0);
        let out = Tensor::zeros(&[rows], DType::I32, &d)?;
        let step_t = Tensor::from_slice(&[step], &[1], &d)?;
        let ws = Tensor::empty(&[sampler_workspace_len(rows, vocab).max(1)], DType::U8, &d)?;
        sample_tokens_into(&logits, recent.as_ref(), &params, &step_t, &ws, &out)?;
        Ok(out)
    })?))
}

/// `x` (float, last dimension whole blocks) quantized to GGUF block format `format`
/// (`gk.q8_0`, `gk.q4_0`, `gk.q4_1`, or the name), computed on the host.
#[pyfunction]
pub fn quantize(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    format: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let DType::Quant(f) = dtype_arg(format)? else {
        return Err(value(
            "quantize: format must be a GGUF block format such as gk.q8_0",
        ));
    };
    let x = x.get().t.clone();
    Ok(PyTensor::new(run(py, move || {
        quant::quantize_tensor(&x, f)
    })?))
}

/// A block-quantized tensor of `shape` in GGUF block format `format` (`gk.q8_0`, `gk.q4_0`,
/// `gk.q4_1`, `gk.q4_K`, `gk.q5_K`, `gk.q6_K`, or the name) from its raw blocks, as a GGUF file
/// stores them: `data` is `bytes` or a contiguous uint8 numpy array of exactly the tensor's
/// size (the last dimension whole blocks of 32 or 256 values). On `device` (default: the
/// current stream's device, else the CPU).
///
/// Raises `ValueError` for a size or shape that does not fit the format, `TypeError` for other
/// data.
#[pyfunction]
#[pyo3(signature = (data, format, shape, *, device=None))]
pub fn from_blocks(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    format: &Bound<'_, PyAny>,
    shape: Vec<usize>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let DType::Quant(f) = dtype_arg(format)? else {
        return Err(value(
            "from_blocks: format must be a GGUF block format such as gk.q4_K",
        ));
    };
    let bytes: Vec<u8> = if let Ok(b) = data.cast::<pyo3::types::PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(a) = data.extract::<numpy::PyReadonlyArrayDyn<'_, u8>>() {
        a.as_slice()
            .map_err(|_| value("from_blocks: the array must be C-contiguous"))?
            .to_vec()
    } else {
        return Err(type_error(
            "from_blocks: data must be bytes or a uint8 numpy array",
        ));
    };
    let d = crate::device::resolve(device)?;
    Ok(PyTensor::new(run(py, move || {
        Tensor::from_blocks(&bytes, f, &shape, &d)
    })?))
}

/// The values of block-quantized `q` as a float tensor of `dtype` (default float32).
#[pyfunction]
#[pyo3(signature = (q, dtype=None))]
pub fn dequantize(
    py: Python<'_>,
    q: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let dt = dtype.map(dtype_arg).transpose()?.unwrap_or(DType::F32);
    let q = q.get().t.clone();
    Ok(PyTensor::new(run(py, move || {
        quant::dequantize_tensor(&q, dt)
    })?))
}

/// The quantized matrix-vector product `x @ w.T` for block-quantized `w [n, k]` and float
/// `x [m, k]` (m ≤ 8): the weight blocks are expanded in registers, products in f32.
#[pyfunction]
#[pyo3(signature = (x, w, *, out=None))]
pub fn qgemv(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    w: &Bound<'_, PyTensor>,
    out: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (x, w) = (x.get().t.clone(), w.get().t.clone());
    let out = out_arg(out);
    Ok(PyTensor::new(run(py, move || {
        let o = match out {
            Some(o) => o,
            None => {
                let m = if x.rank() == 2 { x.shape()[0] } else { 1 };
                let n = w.shape().first().copied().unwrap_or(0);
                let shape: Vec<usize> = if x.rank() == 2 { vec![m, n] } else { vec![n] };
                Tensor::empty(&shape, x.dtype(), &x.device())?
            }
        };
        quant::qgemv_into(&x, &w, &o)?;
        Ok(o)
    })?))
}
