//! The op set. Every op has an allocating form (`add(&a, &b)`) and a form that writes a
//! preallocated output (`add_into(&a, &b, &mut out)`), which allocates nothing and can be
//! captured into a CUDA graph. Every op runs on the CPU (the reference implementation) and on
//! CUDA, on the lane of its operands' device.

mod elementwise;
mod index;
mod matmul;
mod norm;
mod prenorm;
mod reduce;

pub use elementwise::*;
pub use index::*;
pub use matmul::*;
pub(crate) use matmul::{cpu_gemm, cpu_gemm_into};
pub use norm::*;
pub use prenorm::*;
pub use reduce::*;

use gpukit_kernels::{DType, StridedIndex};

use crate::device::{CudaDevice, Device};
use crate::tensor::Tensor;
/// A tensor's device address (CUDA dispatch only).
pub(crate) use crate::tensor::{dptr, dptr_blocks};
use crate::{Error, Result};

/// The common device of `tensors` (an error names both operands' devices and shapes).
pub(crate) fn same_device(op: &'static str, tensors: &[&Tensor]) -> Result<Device> {
    let first = tensors[0].device();
    for t in &tensors[1..] {
        let d = t.device();
        if !d.same(&first) {
            return Err(Error::Device {
                op,
                a: format!("{} {:?}", first.describe(), tensors[0].shape()),
                b: format!("{} {:?}", d.describe(), t.shape()),
            });
        }
    }
    Ok(first)
}

/// Checks that `b` has `a`'s dtype (an error names both operands' dtypes and shapes).
pub(crate) fn same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() == b.dtype() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!(
                "operands of different dtypes: {} {:?} and {} {:?}",
                a.dtype(),
                a.shape(),
                b.dtype(),
                b.shape()
            ),
        ))
    }
}

/// Checks that an output has the shape, dtype and device expected and aliases no input, and
/// that neither it nor any input is block-quantized (only the quantized ops, which check with
/// [`check_out_blocks`], read blocks).
pub(crate) fn check_out(
    op: &'static str,
    out: &Tensor,
    shape: &[usize],
    dtype: DType,
    device: &Device,
    inputs: &[&Tensor],
) -> Result<()> {
    for t in inputs.iter().copied().chain([out]) {
        t.elements_only(op)?;
    }
    check_out_blocks(op, out, shape, dtype, device, inputs)
}

/// [`check_out`] for the ops that read block-quantized inputs.
pub(crate) fn check_out_blocks(
    op: &'static str,
    out: &Tensor,
    shape: &[usize],
    dtype: DType,
    device: &Device,
    inputs: &[&Tensor],
) -> Result<()> {
    if out.shape() != shape {
        return Err(Error::shape(
            op,
            format!("output has shape {:?}, expected {shape:?}", out.shape()),
        ));
    }
    if out.dtype() != dtype {
        return Err(Error::dtype(
            op,
            format!(
                "output {:?} is {}, expected {dtype}",
                out.shape(),
                out.dtype()
            ),
        ));
    }
    if !out.device().same(device) {
        return Err(Error::Device {
            op,
            a: format!("{} (the inputs)", device.describe()),
            b: format!("{} (the output {:?})", out.device().describe(), out.shape()),
        });
    }
    if inputs.iter().any(|t| t.shares_storage(out)) {
        return Err(Error::shape(
            op,
            "the output shares storage with an input; write to a separate tensor",
        ));
    }
    Ok(())
}

/// A new output of `shape` in `like`'s dtype on `device`, for `op`'s allocating form; a
/// block-quantized `like` is refused (as its `_into` form would) before anything is allocated.
pub(crate) fn new_output(
    op: &'static str,
    shape: &[usize],
    like: &Tensor,
    device: &Device,
) -> Result<Tensor> {
    like.elements_only(op)?;
    Tensor::empty(shape, like.dtype(), device)
}

/// A kernel's f32 workspace of at least `need` values: the caller's (checked: f32, contiguous,
/// long enough), or a new one on `dev` when none is given; `None` when nothing is needed.
pub(crate) fn workspace_or_new(
    op: &'static str,
    given: Option<&Tensor>,
    need: usize,
    dev: &Device,
) -> Result<Option<Tensor>> {
    match (need, given) {
        (0, _) => Ok(None),
        (_, Some(w)) => {
            Error::expect_dtype(op, w.dtype(), DType::F32)?;
            need_contiguous(op, w, "the workspace")?;
            if w.numel() < need {
                return Err(Error::shape(
                    op,
                    format!("a workspace of {} f32 values, {need} needed", w.numel()),
                ));
            }
            Ok(Some(w.clone()))
        }
        (_, None) => Ok(Some(Tensor::empty(&[need], DType::F32, dev)?)),
    }
}

/// Checks that a tensor is contiguous (ops that need it say so).
pub(crate) fn need_contiguous(op: &'static str, t: &Tensor, what: &str) -> Result<()> {
    if t.is_contiguous() {
        Ok(())
    } else {
        Err(Error::shape(
            op,
            format!(
                "{what} {:?} must be contiguous (call contiguous() first)",
                t.shape()
            ),
        ))
    }
}

/// The CUDA device, or an internal error if the dispatch was wrong.
pub(crate) fn cuda(device: &Device) -> Result<&CudaDevice> {
    match device {
        Device::Cuda(c) => Ok(c),
        Device::Cpu => Err(Error::shape("dispatch", "expected a CUDA device")),
    }
}

/// A strided index for CUDA over `shape` with the operands' layouts (broadcast to `shape`).
pub(crate) fn strided(shape: &[usize], operands: &[&Tensor]) -> Result<StridedIndex> {
    let layouts = operands
        .iter()
        .map(|t| t.layout().broadcast_to(shape))
        .collect::<Result<Vec<_>>>()?;
    let strides: Vec<&[isize]> = layouts.iter().map(|l| l.strides()).collect();
    Ok(StridedIndex::new(shape, &strides)?)
}

/// Refuses non-float operands.
pub(crate) fn float_only(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!("needs a float tensor, got {:?} {}", t.shape(), t.dtype()),
        ))
    }
}

/// The f32 elements of a contiguous host tensor, in place (`d` is its host data).
pub(crate) fn host_f32<'a>(d: &'a crate::HostData, t: &Tensor) -> Result<&'a [f32]> {
    match d {
        crate::HostData::F32(v) => Ok(&v[t.layout().offset()..][..t.numel()]),
        _ => Err(Error::shape("cpu", "expected f32 data")),
    }
}

/// Elements per parallel piece of the dense CPU paths.
pub(crate) const PIECE: usize = 1 << 14;

/// The f32 slice a dense host output covers (`t.numel()` values from its offset), to write.
pub(crate) fn host_f32_mut<'a>(d: &'a mut crate::HostData, t: &Tensor) -> Result<&'a mut [f32]> {
    match d {
        crate::HostData::F32(v) => Ok(&mut v[t.layout().offset()..][..t.numel()]),
        _ => Err(Error::shape("cpu", "expected f32 data")),
    }
}

/// A host tensor's values as f64, in row-major order of its shape (CPU paths).
pub(crate) fn host_values(t: &Tensor) -> Result<Vec<f64>> {
    let d = t.host("cpu")?;
    Ok(t.layout().indices().map(|i| d.get(i)).collect())
}

/// Writes `values` (row-major order of the shape) into a host output, rounding to its dtype.
pub(crate) fn write_host(out: &Tensor, values: impl IntoIterator<Item = f64>) -> Result<()> {
    let mut d = out.host_mut("cpu")?;
    for (i, v) in out.layout().indices().zip(values) {
        d.set(i, v);
    }
    Ok(())
}

/// A dimension that must fit the kernels' 32-bit sizes.
pub(crate) fn u32_dim(op: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::shape(op, format!("dimension {n} exceeds 2^32 - 1")))
}
