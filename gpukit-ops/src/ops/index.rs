//! index_select (embedding lookup), gather along an axis, and concatenation.

use gpukit_driver::KernelArgs;
use gpukit_kernels::gather::GatherKernel;
use gpukit_kernels::{DType, grid};

use super::{check_out, copy_into, dptr, new_output, same_device, u32_dim};
use crate::device::Device;
use crate::tensor::Tensor;
use crate::{Error, Result};

fn select_shape(x: &Tensor, axis: usize, n: usize) -> Result<Vec<usize>> {
    if axis >= x.rank() {
        return Err(Error::shape(
            "index_select",
            format!("axis {axis} of a {}-d tensor {:?}", x.rank(), x.shape()),
        ));
    }
    let mut s = x.shape().to_vec();
    s[axis] = n;
    Ok(s)
}

/// Whether the CPU gather can read and write slices: f32 `x` and `out` and i32 `index`, all
/// contiguous.
fn dense_gather(x: &Tensor, index: &Tensor, out: &Tensor) -> bool {
    x.dtype() == DType::F32
        && index.dtype() == DType::I32
        && [x, index, out].iter().all(|t| t.is_contiguous())
}

/// The CPU gather on slices ([`dense_gather`]): `out[o, j, i] = x[o, index[o, j, i], i]` for
/// `x` `[outer, len, inner]` and `index`/`out` `[outer, n, inner]`, in parallel pieces. The
/// same values as the element-by-element path, without its per-element dispatch.
fn gather_dense_f32(
    x: &Tensor,
    index: &Tensor,
    out: &Tensor,
    (len, n, inner): (usize, usize, usize),
) -> Result<()> {
    use rayon::prelude::*;
    let gi = index.host("cpu")?;
    let crate::HostData::I32(ids) = &*gi else {
        return Err(Error::dtype("gather", "expected i32 ids"));
    };
    let ids = &ids[index.layout().offset()..][..index.numel()];
    if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= len) {
        return Err(Error::Index {
            op: "gather",
            detail: format!("id {bad} for a dimension of size {len}"),
        });
    }
    let gx = x.host("cpu")?;
    let xs = super::host_f32(&gx, x)?;
    let mut od = out.host_mut("cpu")?;
    let dst = super::host_f32_mut(&mut od, out)?;
    dst.par_chunks_mut(super::PIECE)
        .zip(ids.par_chunks(super::PIECE))
        .enumerate()
        .for_each(|(p, (d, ids))| {
            for (k, (d, &id)) in d.iter_mut().zip(ids).enumerate() {
                let t = p * super::PIECE + k;
                let (i, o) = (t % inner, t / inner / n);
                *d = xs[(o * len + id as usize) * inner + i];
            }
        });
    Ok(())
}

/// `out = x` with dimension `axis` replaced by the rows `ids` selects (`ids` is 1-D, i32 or
/// i64). An embedding lookup is `index_select(table, 0, ids)`.
///
/// Ids outside `0..x.shape()[axis]` are never read from: on the CPU they are an error at once; on
/// CUDA their rows are zero-filled and the error is reported by the next synchronising call
/// (`to_vec`, `CudaDevice::synchronize`).
///
/// # Errors
/// [`Error::Index`] (CPU) for an id out of range; shape/dtype/device errors.
pub fn index_select_into(x: &Tensor, axis: usize, ids: &Tensor, out: &Tensor) -> Result<()> {
    let dev = same_device("index_select", &[x, ids])?;
    if !matches!(ids.dtype(), DType::I32 | DType::I64) || ids.rank() != 1 {
        return Err(Error::dtype(
            "index_select",
            format!(
                "ids must be a 1-D i32 or i64 tensor, got {:?} {}",
                ids.shape(),
                ids.dtype()
            ),
        ));
    }
    let n = ids.shape()[0];
    let shape = select_shape(x, axis, n)?;
    check_out("index_select", out, &shape, x.dtype(), &dev, &[x, ids])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let len = x.shape()[axis];
    let outer: usize = x.shape()[..axis].iter().product();
    let inner: usize = x.shape()[axis + 1..].iter().product();
    match &dev {
        Device::Cpu => {
            let idv = ids.to_vec_f64()?;
            if let Some(bad) = idv.iter().find(|&&i| i < 0.0 || i >= len as f64) {
                return Err(Error::Index {
                    op: "index_select",
                    detail: format!("id {bad} for a dimension of size {len}"),
                });
            }
            let xl = x.layout();
            let src = x.host("cpu")?;
            let mut dst = out.host_mut("cpu")?;
            // A dense x is addressed directly (an embedding lookup must not walk the whole
            // table); a strided view through its element indices.
            let xi: Option<Vec<usize>> = (!x.is_contiguous()).then(|| xl.indices().collect());
            for (t, o) in out.layout().indices().enumerate() {
                let (r, i) = (t / inner, t % inner);
                let (j, oo) = (r % n, r / n);
                let row = idv[j] as usize;
                let k = (oo * len + row) * inner + i;
                let from = xi.as_ref().map_or(xl.offset() + k, |v| v[k]);
                dst.copy_elem(o, &src, from);
            }
            Ok(())
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            let ids = ids.contiguous()?;
            super::need_contiguous("index_select", out, "the output")?;
            let args = KernelArgs::new()
                .arg(dptr(&x)?)
                .arg(dptr(&ids)?)
                .arg(dptr(out)?)
                .arg(u32_dim("index_select", outer)?)
                .arg(u32_dim("index_select", len)?)
                .arg(u32_dim("index_select", inner)?)
                .arg(u32_dim("index_select", n)?)
                .arg(c.err_ptr());
            let kernel = GatherKernel::IndexSelect {
                dtype: x.dtype(),
                index: ids.dtype(),
            };
            // SAFETY: x holds outer·len·inner elements, ids n, out outer·n·inner; every id is
            // bounds-checked in the kernel; the error flag is 4 bytes.
            unsafe { c.launch(kernel, &grid::elementwise(out.numel(), c.sm_count()), &args) }
        }
    }
}

/// [`index_select_into`], allocated.
///
/// # Errors
/// As [`index_select_into`].
pub fn index_select(x: &Tensor, axis: usize, ids: &Tensor) -> Result<Tensor> {
    let n = ids.shape().first().copied().unwrap_or(0);
    let out = new_output("index_select", &select_shape(x, axis, n)?, x, &x.device())?;
    index_select_into(x, axis, ids, &out)?;
    Ok(out)
}

/// Embedding lookup: rows `ids` of `table [vocab, hidden]` → `[n, hidden]`.
///
/// # Errors
/// As [`index_select_into`].
pub fn embedding(table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    index_select(table, 0, ids)
}

/// `out[.., j, ..] = x[.., index[.., j, ..], ..]` along `axis` (torch.gather): `index` (i32 or
/// i64) has `x`'s shape except along `axis`, and so has `out`. Ids out of range are handled as in
/// [`index_select_into`] (an error on the CPU at once; zero and a deferred error on CUDA).
///
/// # Errors
/// [`Error::Index`] (CPU) for an id out of range; shape/dtype/device errors.
pub fn gather_into(x: &Tensor, axis: usize, index: &Tensor, out: &Tensor) -> Result<()> {
    let dev = same_device("gather", &[x, index])?;
    if !matches!(index.dtype(), DType::I32 | DType::I64) {
        return Err(Error::dtype(
            "gather",
            format!("index must be i32 or i64, got {}", index.dtype()),
        ));
    }
    if axis >= x.rank()
        || index.rank() != x.rank()
        || index
            .shape()
            .iter()
            .zip(x.shape())
            .enumerate()
            .any(|(d, (a, b))| d != axis && a != b)
    {
        return Err(Error::shape(
            "gather",
            format!(
                "index {:?} must have x's shape {:?} except along axis {axis}",
                index.shape(),
                x.shape()
            ),
        ));
    }
    check_out("gather", out, index.shape(), x.dtype(), &dev, &[x, index])?;
    if out.numel() == 0 {
        return Ok(());
    }
    let len = x.shape()[axis];
    let n = index.shape()[axis];
    let outer: usize = x.shape()[..axis].iter().product();
    let inner: usize = x.shape()[axis + 1..].iter().product();
    match &dev {
        Device::Cpu if dense_gather(x, index, out) => {
            gather_dense_f32(x, index, out, (len, n, inner))
        }
        Device::Cpu => {
            let idv = index.to_vec_f64()?;
            if let Some(bad) = idv.iter().find(|&&i| i < 0.0 || i >= len as f64) {
                return Err(Error::Index {
                    op: "gather",
                    detail: format!("id {bad} for a dimension of size {len}"),
                });
            }
            let xi: Vec<usize> = x.layout().indices().collect();
            let src = x.host("cpu")?;
            let mut dst = out.host_mut("cpu")?;
            for (t, o) in out.layout().indices().enumerate() {
                let (i, oo) = (t % inner, t / inner / n);
                dst.copy_elem(o, &src, xi[(oo * len + idv[t] as usize) * inner + i]);
            }
            Ok(())
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            let index = index.contiguous()?;
            super::need_contiguous("gather", out, "the output")?;
            let args = KernelArgs::new()
                .arg(dptr(&x)?)
                .arg(dptr(&index)?)
                .arg(dptr(out)?)
                .arg(u32_dim("gather", outer)?)
                .arg(u32_dim("gather", len)?)
                .arg(u32_dim("gather", inner)?)
                .arg(u32_dim("gather", n)?)
                .arg(c.err_ptr());
            let kernel = GatherKernel::Gather {
                dtype: x.dtype(),
                index: index.dtype(),
            };
            // SAFETY: x holds outer·len·inner elements, index and out outer·n·inner; every id
            // is bounds-checked in the kernel; the error flag is 4 bytes.
            unsafe { c.launch(kernel, &grid::elementwise(out.numel(), c.sm_count()), &args) }
        }
    }
}

/// [`gather_into`], allocated.
///
/// # Errors
/// As [`gather_into`].
pub fn gather(x: &Tensor, axis: usize, index: &Tensor) -> Result<Tensor> {
    let out = new_output("gather", index.shape(), x, &x.device())?;
    gather_into(x, axis, index, &out)?;
    Ok(out)
}

/// Concatenates `tensors` (same dtype, device and shape but along `axis`) into `out`.
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes or an empty list; dtype/device errors.
pub fn concat_into(tensors: &[&Tensor], axis: usize, out: &Tensor) -> Result<()> {
    let first = tensors
        .first()
        .ok_or_else(|| Error::shape("concat", "no tensors to concatenate"))?;
    let dev = same_device("concat", tensors)?;
    let shape = concat_shape(tensors, axis)?;
    check_out("concat", out, &shape, first.dtype(), &dev, tensors)?;
    let mut start = 0;
    for t in tensors {
        let len = t.shape()[axis];
        let view = out.narrow(axis, start, len)?;
        copy_into(t, &view)?;
        start += len;
    }
    Ok(())
}

fn concat_shape(tensors: &[&Tensor], axis: usize) -> Result<Vec<usize>> {
    let first = tensors[0];
    if axis >= first.rank() {
        return Err(Error::shape(
            "concat",
            format!("axis {axis} of {:?}", first.shape()),
        ));
    }
    let mut shape = first.shape().to_vec();
    shape[axis] = 0;
    for t in tensors {
        super::same_dtype("concat", first, t)?;
        let ok = t.rank() == first.rank()
            && t.shape()
                .iter()
                .zip(first.shape())
                .enumerate()
                .all(|(d, (a, b))| d == axis || a == b);
        if !ok {
            return Err(Error::shape(
                "concat",
                format!(
                    "{:?} and {:?} differ outside axis {axis}",
                    first.shape(),
                    t.shape()
                ),
            ));
        }
        shape[axis] += t.shape()[axis];
    }
    Ok(shape)
}

/// Concatenation along `axis`, allocated.
///
/// # Errors
/// As [`concat_into`].
pub fn concat(tensors: &[&Tensor], axis: usize) -> Result<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| Error::shape("concat", "no tensors to concatenate"))?;
    let out = new_output(
        "concat",
        &concat_shape(tensors, axis)?,
        first,
        &first.device(),
    )?;
    concat_into(tensors, axis, &out)?;
    Ok(out)
}
