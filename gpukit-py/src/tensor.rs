//! `gk.Tensor`, dtypes, tensor creation and numpy conversion.

use gpukit_kernels::QuantFormat;
use gpukit_ops::{BinaryOp, DType, Device, Element, ReduceOp, Tensor, UnaryOp, ops};
use half::{bf16, f16};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyString, PyTuple};

use crate::device::{PyDevice, PyStream, resolve};
use crate::errors::{self, type_error, value};
use crate::ops::{Operand, binary_op, reflected_scalar_op, scalar_op};

/// An element type: `gk.float32`, `gk.float16`, `gk.bfloat16`, `gk.int32`, `gk.int64`,
/// `gk.uint8`, and the GGUF block formats `gk.q8_0`, `gk.q4_0`, `gk.q4_1`, `gk.q4_K`,
/// `gk.q5_K`, `gk.q6_K` (values stored in blocks along the last dimension). Functions that take
/// a dtype also take its name (`"float32"`, `"f32"`, `"bf16"`, `"q4_K"`, …).
#[pyclass(module = "gpukit", name = "dtype", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyDType {
    pub(crate) dtype: DType,
}

/// The numpy-style name of `d`.
fn long_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        other => other.name(),
    }
}

/// Every dtype with its module name.
pub(crate) fn all_dtypes() -> Vec<(&'static str, DType)> {
    let mut v: Vec<_> = DType::ALL.iter().map(|&d| (long_name(d), d)).collect();
    v.extend(
        QuantFormat::ALL
            .iter()
            .map(|&f| (f.name(), DType::Quant(f))),
    );
    v
}

fn parse_dtype(name: &str) -> PyResult<DType> {
    let d = match name {
        "float32" | "f32" | "float" => DType::F32,
        "float16" | "f16" | "half" => DType::F16,
        "bfloat16" | "bf16" => DType::BF16,
        "int32" | "i32" => DType::I32,
        "int64" | "i64" | "long" => DType::I64,
        "uint8" | "u8" | "bool" => DType::U8,
        other => match QuantFormat::ALL
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(other))
        {
            Some(&f) => DType::Quant(f),
            None => {
                return Err(value(format!(
                    "dtype \"{other}\": expected float32, float16, bfloat16, int32, int64, uint8 \
                     or a GGUF block format (q8_0, q4_0, q4_1, q4_K, q5_K, q6_K)"
                )));
            }
        },
    };
    Ok(d)
}

/// A dtype argument: a `gk.dtype`, a name, or a numpy dtype / type (`np.float32`).
pub(crate) fn dtype_arg(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(d) = obj.cast::<PyDType>() {
        return Ok(d.get().dtype);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return parse_dtype(s.to_str()?);
    }
    // numpy dtypes and scalar types (and anything else with a dtype name).
    let np = obj.py().import("numpy")?;
    let name = np
        .getattr("dtype")?
        .call1((obj,))
        .and_then(|d| d.getattr("name"))
        .map_err(|_| {
            type_error(format!(
                "not a dtype: {}",
                obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        })?;
    parse_dtype(name.extract::<String>()?.as_str())
}

#[pymethods]
impl PyDType {
    /// The name (`"float32"`, `"bfloat16"`, `"q4_K"`, …).
    #[getter]
    fn name(&self) -> &'static str {
        long_name(self.dtype)
    }

    /// Bytes per element; for a block format, bytes per block.
    #[getter]
    fn itemsize(&self) -> usize {
        self.dtype.size_in_bytes()
    }

    /// Elements per block (1 for element dtypes; 32 or 256 for GGUF formats).
    #[getter]
    fn block_size(&self) -> usize {
        self.dtype.block_values()
    }

    /// Whether this is a floating-point element type.
    #[getter]
    fn is_floating_point(&self) -> bool {
        self.dtype.is_float()
    }

    /// Whether this is a GGUF block format.
    #[getter]
    fn is_quantized(&self) -> bool {
        self.dtype.is_quantized()
    }

    fn __repr__(&self) -> String {
        format!("gpukit.{}", long_name(self.dtype))
    }

    fn __str__(&self) -> &'static str {
        long_name(self.dtype)
    }
}

/// An n-dimensional array on the CPU or a GPU: storage, a shape, element strides and a dtype.
///
/// Made by `gk.zeros/ones/empty/full/arange`, `gk.from_numpy`, `gk.asarray`, `gk.from_dlpack`
/// and by every op. Views (`reshape`, `transpose`, `permute`, slicing with step 1, …) share
/// memory with the tensor they come from. Python operators (`+ - * / ** @`, unary `-`, `abs`)
/// run the matching ops, with broadcasting. `__dlpack__` hands the memory to torch, cupy or
/// numpy without a copy.
#[pyclass(module = "gpukit", name = "Tensor", frozen)]
pub struct PyTensor {
    pub(crate) t: Tensor,
}

impl PyTensor {
    pub(crate) fn new(t: Tensor) -> Self {
        PyTensor { t }
    }
}

/// `dim` (negative counts from the end) for a tensor of `rank` dimensions.
pub(crate) fn axis(dim: isize, rank: usize) -> PyResult<usize> {
    let r = rank as isize;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r.max(1) {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "dimension {dim} is out of range for a {rank}-d tensor"
        )));
    }
    Ok(d as usize)
}

/// A shape given as `n`, `(n, m, …)` or `[n, m, …]`, or as separate arguments.
pub(crate) fn shape_arg(args: &Bound<'_, PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let a = args.get_item(0)?;
        if let Ok(n) = a.extract::<isize>() {
            return Ok(vec![n]);
        }
        return a
            .extract::<Vec<isize>>()
            .map_err(|_| type_error("a shape is an int or a sequence of ints"));
    }
    args.extract::<Vec<isize>>()
        .map_err(|_| type_error("a shape is an int or a sequence of ints"))
}

fn sizes(shape: &[isize]) -> PyResult<Vec<usize>> {
    shape
        .iter()
        .map(|&n| {
            usize::try_from(n).map_err(|_| value(format!("negative size {n} in shape {shape:?}")))
        })
        .collect()
}

/// `shape` with one `-1` inferred from `numel`.
fn infer_shape(shape: &[isize], numel: usize) -> PyResult<Vec<usize>> {
    let unknown = shape.iter().filter(|&&n| n == -1).count();
    if unknown > 1 {
        return Err(value("only one dimension can be -1"));
    }
    if unknown == 0 {
        return sizes(shape);
    }
    let known: usize = shape
        .iter()
        .filter(|&&n| n != -1)
        .map(|&n| n.max(0) as usize)
        .product();
    if known == 0 || !numel.is_multiple_of(known) {
        return Err(value(format!(
            "shape {shape:?} is invalid for {numel} elements"
        )));
    }
    Ok(shape
        .iter()
        .map(|&n| if n == -1 { numel / known } else { n as usize })
        .collect())
}

/// Runs `f` with the GIL released and maps its error.
pub(crate) fn run<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> gpukit_ops::Result<T> + Send,
) -> PyResult<T> {
    py.detach(f).map_err(errors::ops)
}

fn host_tensor<T: Element + numpy::Element + Copy + Send + Sync>(
    py: Python<'_>,
    arr: &Bound<'_, PyAny>,
    shape: &[usize],
    device: &Device,
) -> PyResult<Tensor> {
    let arr = arr.cast::<PyArrayDyn<T>>()?;
    let ro = arr.readonly();
    let slice = ro.as_slice().map_err(|e| value(e.to_string()))?;
    run(py, || Tensor::from_slice(slice, shape, device))
}

fn bits_tensor<T: Element + Send + Sync>(
    py: Python<'_>,
    arr: &Bound<'_, PyAny>,
    shape: &[usize],
    device: &Device,
    from: fn(u16) -> T,
) -> PyResult<Tensor> {
    let np = py.import("numpy")?;
    let raw = arr.call_method1("view", (np.getattr("uint16")?,))?;
    let raw = raw.cast::<PyArrayDyn<u16>>()?;
    let ro = raw.readonly();
    let v: Vec<T> = ro
        .as_slice()
        .map_err(|e| value(e.to_string()))?
        .iter()
        .map(|&b| from(b))
        .collect();
    run(py, || Tensor::from_slice(&v, shape, device))
}

/// A numpy array (any strides; copied) as a tensor on `device`. float64 is refused unless
/// `narrow_float64`, which converts it to float32.
pub(crate) fn from_array(
    py: Python<'_>,
    arr: &Bound<'_, PyAny>,
    device: &Device,
    narrow_float64: bool,
) -> PyResult<Tensor> {
    let np = py.import("numpy")?;
    let mut arr = np.call_method1("ascontiguousarray", (arr,))?;
    let mut name: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
    if name == "float64" && narrow_float64 {
        arr = arr.call_method1("astype", (np.getattr("float32")?,))?;
        name = "float32".into();
    }
    if name == "bool" {
        arr = arr.call_method1("view", (np.getattr("uint8")?,))?;
        name = "uint8".into();
    }
    let shape: Vec<usize> = arr.cast::<PyUntypedArray>()?.shape().to_vec();
    match name.as_str() {
        "float32" => host_tensor::<f32>(py, &arr, &shape, device),
        "float16" => host_tensor::<f16>(py, &arr, &shape, device),
        "int32" => host_tensor::<i32>(py, &arr, &shape, device),
        "int64" => host_tensor::<i64>(py, &arr, &shape, device),
        "uint8" => host_tensor::<u8>(py, &arr, &shape, device),
        "bfloat16" => bits_tensor(py, &arr, &shape, device, bf16::from_bits),
        "float64" => Err(type_error(
            "float64 arrays: gpukit has no float64 dtype; convert with a.astype(np.float32) \
             (gk.asarray does it for you)",
        )),
        other => Err(type_error(format!(
            "numpy dtype {other} has no gpukit dtype (float32, float16, bfloat16, int32, int64, \
             uint8, bool)"
        ))),
    }
}

fn vec_array<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, v)
        .reshape(shape.to_vec())?
        .into_any())
}

/// The tensor's values as a new numpy array.
pub(crate) fn to_array<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    let shape = t.shape().to_vec();
    let t = t.clone();
    match t.dtype() {
        DType::F32 => vec_array(py, run(py, move || t.to_vec::<f32>())?, &shape),
        DType::F16 => vec_array(py, run(py, move || t.to_vec::<f16>())?, &shape),
        DType::I32 => vec_array(py, run(py, move || t.to_vec::<i32>())?, &shape),
        DType::I64 => vec_array(py, run(py, move || t.to_vec::<i64>())?, &shape),
        DType::U8 => vec_array(py, run(py, move || t.to_vec::<u8>())?, &shape),
        DType::BF16 => Err(type_error(
            "numpy has no bfloat16: convert first with t.to(gk.float32).numpy()",
        )),
        other => Err(type_error(format!(
            "a {other} tensor holds GGUF blocks: dequantize first with t.to(gk.float32).numpy()"
        ))),
    }
}

/// A tensor operand: a `gk.Tensor`, or anything with `__dlpack__` or numpy can take (copied to
/// `device`).
pub(crate) fn tensor_arg(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    device: &Device,
) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().t.clone());
    }
    if obj.hasattr("__dlpack__")? && !obj.is_instance_of::<PyUntypedArray>() {
        return crate::dlpack::import(py, obj);
    }
    let np = py.import("numpy")?;
    let arr = np.call_method1("asarray", (obj,))?;
    from_array(py, &arr, device, true)
}

impl PyTensor {
    fn arith(&self, py: Python<'_>, op: BinaryOp, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        match Operand::extract(py, other, &self.t.device())? {
            Operand::Tensor(o) => binary_op(py, op, &self.t, &o, None),
            Operand::Scalar(s) => scalar_op(py, op, &self.t, s, None),
        }
    }

    fn rarith(&self, py: Python<'_>, op: BinaryOp, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        match Operand::extract(py, other, &self.t.device())? {
            Operand::Tensor(o) => binary_op(py, op, &o, &self.t, None),
            Operand::Scalar(s) => reflected_scalar_op(py, op, s, &self.t, None),
        }
    }

    /// The view `key` selects: ints, slices (positive steps), `None`, `...`, and an integer tensor on
    /// one dimension (copied rows, through `index_select`).
    fn index(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
            Ok(t) => t.iter().collect(),
            Err(_) => vec![key.clone()],
        };
        let consumed = items
            .iter()
            .filter(|k| !k.is_none() && !k.is_instance_of::<PyEllipsis>())
            .count();
        let rank = self.t.rank();
        if consumed > rank {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "{consumed} indices for a {rank}-d tensor"
            )));
        }
        let mut t = self.t.clone();
        let mut d = 0usize;
        let mut seen_ellipsis = false;
        for k in &items {
            if k.is_none() {
                t = t.unsqueeze(d).map_err(errors::ops)?;
                d += 1;
            } else if k.is_instance_of::<PyEllipsis>() {
                if seen_ellipsis {
                    return Err(pyo3::exceptions::PyIndexError::new_err(
                        "an index can only have one ellipsis",
                    ));
                }
                seen_ellipsis = true;
                let already = d;
                d = already + (rank - consumed);
                let _ = already;
            } else if let Ok(s) = k.cast::<PySlice>() {
                let len = t.shape()[d];
                let ix = s.indices(len as isize)?;
                if ix.step < 1 {
                    return Err(pyo3::exceptions::PyIndexError::new_err(
                        "slices with a negative step are not supported: use gk.index_select \
                         with the indices",
                    ));
                }
                let start = ix.start.clamp(0, len as isize) as usize;
                t = t
                    .slice(d, start, ix.slicelength, ix.step as usize)
                    .map_err(errors::ops)?;
                d += 1;
            } else if let Ok(i) = k.extract::<isize>() {
                let len = t.shape()[d] as isize;
                let j = if i < 0 { i + len } else { i };
                if j < 0 || j >= len {
                    return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                        "index {i} is out of range for dimension {d} of size {len}"
                    )));
                }
                t = t
                    .narrow(d, j as usize, 1)
                    .and_then(|t| t.squeeze(d))
                    .map_err(errors::ops)?;
            } else if let Ok(ids) = k.cast::<PyTensor>() {
                let ids = ids.get().t.clone();
                let x = t.clone();
                t = run(py, move || {
                    ops::index_select(&x, d, &ids.reshape(&[ids.numel()])?)
                })?;
                d += 1;
            } else {
                return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                    "unsupported index {}: use ints, slices, None, ... or an integer tensor",
                    k.repr()?
                )));
            }
        }
        Ok(t)
    }
}

#[pymethods]
impl PyTensor {
    /// The shape, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.shape())
    }

    /// The element type.
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType {
            dtype: self.t.dtype(),
        }
    }

    /// The device the tensor lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::new(self.t.device())
    }

    /// Element strides, a tuple of ints (as torch counts them, not bytes).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.layout().strides())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.rank()
    }

    /// Bytes of the elements (of the blocks, for a GGUF format).
    #[getter]
    fn nbytes(&self) -> usize {
        self.t.nbytes()
    }

    /// The transpose of a 2-d tensor (a view).
    #[getter(T)]
    fn transposed(&self) -> PyResult<PyTensor> {
        if self.t.rank() != 2 {
            return Err(value(format!(
                ".T is for 2-d tensors; this one is {}-d (use permute)",
                self.t.rank()
            )));
        }
        Ok(PyTensor::new(self.t.transpose(0, 1).map_err(errors::ops)?))
    }

    /// Number of elements.
    fn numel(&self) -> usize {
        self.t.numel()
    }

    /// Whether the elements are dense and row-major.
    fn is_contiguous(&self) -> bool {
        self.t.is_contiguous()
    }

    /// The address of the first element (device or host), for foreign code.
    fn data_ptr(&self) -> u64 {
        self.t.data_ptr()
    }

    /// The raw GGUF blocks of a block-quantized tensor: a 1-D uint8 view of its storage, in
    /// the layout of the GGUF file format (`t.blocks().numpy()` gives the bytes; see
    /// `gk.from_blocks` for the way back).
    ///
    /// Raises `ValueError` for a tensor that is not block-quantized.
    fn blocks(&self) -> PyResult<PyTensor> {
        Ok(PyTensor::new(self.t.blocks().map_err(errors::ops)?))
    }

    /// The values as a new numpy array (a copy; GPU tensors are downloaded).
    ///
    /// Raises `TypeError` for bfloat16 (numpy has none) and GGUF block formats.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_array(py, &self.t)
    }

    /// The values as nested Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_array(py, &self.t)?.call_method0("tolist")
    }

    /// The value of a one-element tensor as a Python number.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.t.numel() != 1 {
            return Err(value(format!(
                "item() needs a one-element tensor; this one has {}",
                self.t.numel()
            )));
        }
        to_array(py, &self.t)?.call_method0("item")
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(value(
                "a gk.Tensor always converts to numpy by copying (use np.from_dlpack for a view \
                 of a CPU tensor)",
            ));
        }
        let a = to_array(py, &self.t)?;
        match dtype {
            Some(d) if !d.is_none() => a.call_method1("astype", (d,)),
            _ => Ok(a),
        }
    }

    /// A copy on another device and/or of another dtype: `t.to("cuda")`, `t.to(gk.float16)`,
    /// `t.to(device, dtype)`, `t.to(stream)`. Returns `t` itself when nothing changes. Casting
    /// from a GGUF format dequantizes; to one quantizes (float32 input).
    #[pyo3(signature = (*args, dtype=None, device=None))]
    fn to(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        let py = slf.py();
        let mut target_dtype = dtype.map(dtype_arg).transpose()?;
        let mut target_device = device.map(|d| resolve(Some(d))).transpose()?;
        for a in args.iter() {
            let is_dtype = a.is_instance_of::<PyDType>()
                || a.extract::<String>().is_ok_and(|s| parse_dtype(&s).is_ok());
            if is_dtype {
                target_dtype = Some(dtype_arg(&a)?);
            } else if a.is_instance_of::<PyDevice>()
                || a.is_instance_of::<PyStream>()
                || a.is_instance_of::<PyString>()
            {
                target_device = Some(resolve(Some(&a))?);
            } else {
                return Err(type_error(format!(
                    "to(): expected a device, a stream or a dtype, got {}",
                    a.repr()?
                )));
            }
        }
        let mut t = slf.get().t.clone();
        if let Some(d) = target_device {
            let src = t.clone();
            t = run(py, move || src.to_device(&d))?;
        }
        if let Some(dt) = target_dtype {
            t = crate::ops::cast(py, &t, dt)?;
        }
        Ok(PyTensor::new(t))
    }

    /// A copy on the CPU (`t` itself if already there).
    fn cpu(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || t.to_device(&Device::Cpu))?))
    }

    /// A copy on GPU `index` (default 0).
    #[pyo3(signature = (index=0))]
    fn cuda(&self, py: Python<'_>, index: usize) -> PyResult<PyTensor> {
        let d = crate::device::device(&format!("cuda:{index}"))?.device;
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || t.to_device(&d))?))
    }

    /// A dense row-major tensor with the same values (`t` itself if already dense).
    fn contiguous(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || t.contiguous())?))
    }

    /// A copy with its own memory.
    fn clone(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || ops::copy(&t))?))
    }

    /// The same elements in a new shape (one size may be -1): a view of a dense tensor, else a
    /// copy.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = infer_shape(&shape_arg(shape)?, self.t.numel())?;
        let t = if self.t.is_contiguous() {
            self.t.clone()
        } else {
            let x = self.t.clone();
            run(py, move || x.contiguous())?
        };
        Ok(PyTensor::new(t.reshape(&s).map_err(errors::ops)?))
    }

    /// As `reshape`, for a dense tensor only (always a view).
    #[pyo3(signature = (*shape))]
    fn view(&self, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = infer_shape(&shape_arg(shape)?, self.t.numel())?;
        Ok(PyTensor::new(self.t.reshape(&s).map_err(errors::ops)?))
    }

    /// Dimensions `dim0` and `dim1` swapped (a view).
    fn transpose(&self, dim0: isize, dim1: isize) -> PyResult<PyTensor> {
        let r = self.t.rank();
        Ok(PyTensor::new(
            self.t
                .transpose(axis(dim0, r)?, axis(dim1, r)?)
                .map_err(errors::ops)?,
        ))
    }

    /// Dimensions reordered: dimension `i` of the result is `dims[i]` of this one (a view).
    #[pyo3(signature = (*dims))]
    fn permute(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let r = self.t.rank();
        let d: Vec<usize> = shape_arg(dims)?
            .into_iter()
            .map(|d| axis(d, r))
            .collect::<PyResult<_>>()?;
        Ok(PyTensor::new(self.t.permute(&d).map_err(errors::ops)?))
    }

    /// A size-1 dimension inserted at `dim` (a view).
    fn unsqueeze(&self, dim: isize) -> PyResult<PyTensor> {
        let r = self.t.rank() as isize;
        let d = if dim < 0 { dim + r + 1 } else { dim };
        let d = usize::try_from(d).map_err(|_| value(format!("dimension {dim} out of range")))?;
        Ok(PyTensor::new(self.t.unsqueeze(d).map_err(errors::ops)?))
    }

    /// Size-1 dimension `dim` removed, or every size-1 dimension when `dim` is None (a view).
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<isize>) -> PyResult<PyTensor> {
        let mut t = self.t.clone();
        match dim {
            Some(d) => t = t.squeeze(axis(d, t.rank())?).map_err(errors::ops)?,
            None => {
                for d in (0..t.rank()).rev() {
                    if t.shape()[d] == 1 {
                        t = t.squeeze(d).map_err(errors::ops)?;
                    }
                }
            }
        }
        Ok(PyTensor::new(t))
    }

    /// Elements `start .. start + length` of dimension `dim` (a view).
    fn narrow(&self, dim: isize, start: usize, length: usize) -> PyResult<PyTensor> {
        Ok(PyTensor::new(
            self.t
                .narrow(axis(dim, self.t.rank())?, start, length)
                .map_err(errors::ops)?,
        ))
    }

    /// The tensor broadcast to `shape` (a view with stride 0 on the repeated dimensions).
    #[pyo3(signature = (*shape))]
    fn expand(&self, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let s = sizes(&shape_arg(shape)?)?;
        Ok(PyTensor::new(self.t.broadcast_to(&s).map_err(errors::ops)?))
    }

    /// The sum over `axis` (every element when None).
    #[pyo3(signature = (axis=None))]
    fn sum(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        crate::ops::reduce(py, ReduceOp::Sum, &self.t, axis)
    }

    /// The mean over `axis` (every element when None).
    #[pyo3(signature = (axis=None))]
    fn mean(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        crate::ops::reduce(py, ReduceOp::Mean, &self.t, axis)
    }

    /// The maximum over `axis` (every element when None).
    #[pyo3(signature = (axis=None))]
    fn max(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        crate::ops::reduce(py, ReduceOp::Max, &self.t, axis)
    }

    /// The minimum over `axis` (every element when None).
    #[pyo3(signature = (axis=None))]
    fn min(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        crate::ops::reduce(py, ReduceOp::Min, &self.t, axis)
    }

    /// Index of the maximum over `axis` (of the flattened tensor when None), int64.
    #[pyo3(signature = (axis=None))]
    fn argmax(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        crate::ops::argmax_impl(py, &self.t, axis)
    }

    /// Softmax over `axis` (default: the last).
    #[pyo3(signature = (axis=-1))]
    fn softmax(&self, py: Python<'_>, axis: isize) -> PyResult<PyTensor> {
        let a = self::axis(axis, self.t.rank())?;
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || ops::softmax(&t, a))?))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        Ok(PyTensor::new(self.index(py, key)?))
    }

    /// Writes `value` (a tensor, array or number, broadcast) into the view `key` selects.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let view = self.index(py, key)?;
        if view.numel() == 0 && !self.t.is_contiguous() {
            return Ok(());
        }
        let src = match Operand::extract(py, value, &self.t.device())? {
            Operand::Tensor(t) => t,
            Operand::Scalar(s) => {
                let d = self.t.device();
                let dt = view.dtype();
                let shape = view.shape().to_vec();
                run(py, move || Tensor::full(&shape, s, dt, &d))?
            }
        };
        let dst = view.clone();
        run(py, move || {
            let src = if src.dtype() == dst.dtype() {
                src
            } else {
                ops::to_dtype(&src, dst.dtype())?
            };
            ops::copy_into(&src.broadcast_to(dst.shape())?, &dst)
        })
    }

    fn __len__(&self) -> PyResult<usize> {
        self.t
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let head = format!(
            "shape={:?}, dtype={}, device=\"{}\"",
            self.t.shape(),
            long_name(self.t.dtype()),
            self.t.device().describe()
        );
        if self.t.numel() > 1000 || self.t.dtype().is_quantized() {
            return Ok(format!("gk.Tensor({head})"));
        }
        let x = self.t.clone();
        let values = run(py, move || x.to_vec_f32())?;
        let np = py.import("numpy")?;
        let arr = np
            .call_method1("array", (values,))?
            .call_method1("reshape", (PyTuple::new(py, self.t.shape())?,))?;
        let text: String = np.call_method1("array2string", (arr,))?.extract()?;
        Ok(format!("gk.Tensor({text}, {head})"))
    }

    fn __add__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.arith(py, BinaryOp::Add, o)
    }
    fn __radd__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.rarith(py, BinaryOp::Add, o)
    }
    fn __sub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.arith(py, BinaryOp::Sub, o)
    }
    fn __rsub__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.rarith(py, BinaryOp::Sub, o)
    }
    fn __mul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.arith(py, BinaryOp::Mul, o)
    }
    fn __rmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.rarith(py, BinaryOp::Mul, o)
    }
    fn __truediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.arith(py, BinaryOp::Div, o)
    }
    fn __rtruediv__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.rarith(py, BinaryOp::Div, o)
    }
    fn __pow__(
        &self,
        py: Python<'_>,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        self.arith(py, BinaryOp::Pow, o)
    }
    fn __matmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let b = tensor_arg(py, o, &self.t.device())?;
        let a = self.t.clone();
        Ok(PyTensor::new(run(py, move || ops::matmul(&a, &b))?))
    }
    fn __neg__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || {
            ops::unary(UnaryOp::Neg, &t)
        })?))
    }
    fn __abs__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t.clone();
        Ok(PyTensor::new(run(py, move || {
            ops::unary(UnaryOp::Abs, &t)
        })?))
    }

    /// DLPack export: a capsule over this tensor's memory (no copy), for `torch.from_dlpack`,
    /// `cupy.from_dlpack`, `np.from_dlpack`. The capsule keeps the memory alive.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        crate::dlpack::export(py, &self.t, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)` as DLPack numbers them: `(1, 0)` for the CPU, `(2, N)` for
    /// GPU N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        crate::dlpack::device_pair(&self.t)
    }
}

/// A new tensor from `make(shape, dtype, device)`, with the arguments every creation function
/// takes: the shape, `dtype` (default float32) and `device` (default: the current stream's
/// device, else the CPU).
fn create(
    py: Python<'_>,
    shape: &[isize],
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    make: impl FnOnce(&[usize], DType, &Device) -> gpukit_ops::Result<Tensor> + Send,
) -> PyResult<PyTensor> {
    let s = sizes(shape)?;
    let dt = dtype.map(dtype_arg).transpose()?.unwrap_or(DType::F32);
    let d = resolve(device)?;
    Ok(PyTensor::new(run(py, move || make(&s, dt, &d))?))
}

/// A tensor of `shape` filled with `fill_value`, of `dtype` (default float32) on `device`
/// (default: the current stream's device, else the CPU).
#[pyfunction]
#[pyo3(signature = (shape, fill_value, *, dtype=None, device=None))]
pub fn full(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    fill_value: f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let shape = shape_arg(&PyTuple::new(py, [shape])?)?;
    create(py, &shape, dtype, device, move |s, dt, d| {
        Tensor::full(s, fill_value, dt, d)
    })
}

/// A tensor of zeros: `gk.zeros(2, 3)` or `gk.zeros((2, 3), dtype=gk.float16, device="cuda")`.
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None))]
pub fn zeros(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    create(py, &shape_arg(shape)?, dtype, device, Tensor::zeros)
}

/// A tensor of ones (as `zeros`).
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None))]
pub fn ones(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    create(py, &shape_arg(shape)?, dtype, device, Tensor::ones)
}

/// A tensor whose contents are undefined (as `zeros`, without the fill).
#[pyfunction]
#[pyo3(signature = (*shape, dtype=None, device=None))]
pub fn empty(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    create(py, &shape_arg(shape)?, dtype, device, Tensor::empty)
}

/// Uniform random values in `[low, high)`, reproducible from `seed` (as `zeros` otherwise).
#[pyfunction]
#[pyo3(signature = (*shape, low=0.0, high=1.0, seed=0, dtype=None, device=None))]
#[allow(clippy::too_many_arguments)]
pub fn rand(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    low: f64,
    high: f64,
    seed: u64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    create(py, &shape_arg(shape)?, dtype, device, move |s, dt, d| {
        Tensor::rand(s, low, high, dt, seed, d)
    })
}

/// Values `start, start + step, …` below `stop` (`gk.arange(5)`, `gk.arange(1, 2, 0.25)`):
/// int64 when every argument is an int, else float32, unless `dtype` says otherwise.
#[pyfunction]
#[pyo3(signature = (start, stop=None, step=None, *, dtype=None, device=None))]
pub fn arange(
    py: Python<'_>,
    start: &Bound<'_, PyAny>,
    stop: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let ints = [Some(start), stop, step]
        .iter()
        .flatten()
        .all(|v| v.extract::<i64>().is_ok());
    let (a, b) = match stop {
        Some(s) => (start.extract::<f64>()?, s.extract::<f64>()?),
        None => (0.0, start.extract::<f64>()?),
    };
    let st = step.map(|s| s.extract::<f64>()).transpose()?.unwrap_or(1.0);
    if st == 0.0 || !st.is_finite() || !a.is_finite() || !b.is_finite() {
        return Err(value("arange: step must be non-zero and the bounds finite"));
    }
    let n = ((b - a) / st).ceil().max(0.0) as usize;
    let dt = match dtype.map(dtype_arg).transpose()? {
        Some(d) => d,
        None if ints => DType::I64,
        None => DType::F32,
    };
    let d = resolve(device)?;
    let values = (0..n).map(|i| a + st * i as f64);
    // Made on the host in int64 or float32, then moved and converted as `to` does.
    let host = if dt.is_float() {
        Tensor::from_slice(
            &values.map(|v| v as f32).collect::<Vec<_>>(),
            &[n],
            &Device::Cpu,
        )
    } else {
        Tensor::from_slice(
            &values.map(|v| v as i64).collect::<Vec<_>>(),
            &[n],
            &Device::Cpu,
        )
    }
    .map_err(errors::ops)?;
    let on_device = run(py, move || host.to_device(&d))?;
    Ok(PyTensor::new(crate::ops::cast(py, &on_device, dt)?))
}

/// A tensor holding a copy of numpy array `array` (float32, float16, bfloat16 from ml_dtypes,
/// int32, int64, uint8, bool as uint8), on `device`. Large arrays go to the GPU through the
/// transfer engine (pinned staging, copies overlapped).
///
/// Raises `TypeError` for float64 and other dtypes gpukit does not have (`gk.asarray`
/// converts float64 to float32).
#[pyfunction]
#[pyo3(signature = (array, *, device=None))]
pub fn from_numpy(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    if !array.is_instance_of::<PyUntypedArray>() {
        return Err(type_error(format!(
            "from_numpy takes a numpy array, got {} (gk.asarray takes lists and scalars)",
            array.get_type().name()?
        )));
    }
    let d = resolve(device)?;
    Ok(PyTensor::new(from_array(py, array, &d, false)?))
}

/// A tensor from `obj`: a `gk.Tensor` (moved or cast only if asked), an object with
/// `__dlpack__` (torch, cupy: no copy when it stays on its device), or anything numpy takes
/// (lists, scalars, arrays; float64 becomes float32).
#[pyfunction]
#[pyo3(signature = (obj, *, dtype=None, device=None))]
pub fn asarray(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let d = resolve(device)?;
    let mut t = tensor_arg(py, obj, &d)?;
    if device.is_some_and(|d| !d.is_none()) && !t.device().same(&d) {
        let src = t.clone();
        t = run(py, move || src.to_device(&d))?;
    }
    if let Some(dt) = dtype.map(dtype_arg).transpose()? {
        t = crate::ops::cast(py, &t, dt)?;
    }
    Ok(PyTensor::new(t))
}
