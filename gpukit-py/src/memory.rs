//! `gk.evictable`: a GPU tensor's values parked in memory that the pool may spill to pinned
//! host memory under pressure (`gpukit_mem::EvictableBuffer`).

use gpukit_mem::EvictableBuffer;
use gpukit_ops::{CudaDevice, DType, Device, Tensor};
use pyo3::prelude::*;

use crate::errors::value;
use crate::tensor::{PyDType, PyTensor, run};

/// A tensor's values held in evictable GPU memory: when an allocation of the same tenant (or
/// of the device) would otherwise fail, the pool copies such buffers to pinned host memory,
/// least recently used first, and frees their device memory. `load()` brings the values back
/// (to the device first, if they were spilled) as a new tensor. For data that must survive
/// memory pressure but is not needed on every step: a parked KV cache, an idle adapter.
#[pyclass(module = "gpukit", name = "Evictable", frozen)]
pub struct PyEvictable {
    buf: EvictableBuffer,
    shape: Vec<usize>,
    dtype: DType,
    device: CudaDevice,
}

#[pymethods]
impl PyEvictable {
    /// The values as a new tensor on the device (copied back from host memory first if they
    /// were spilled). Raises `MemoryError` when they cannot be brought back.
    fn load(&self, py: Python<'_>) -> PyResult<PyTensor> {
        Ok(PyTensor::new(run(py, || {
            let out = Tensor::empty(&self.shape, self.dtype, &Device::Cuda(self.device.clone()))?;
            let resident = self.buf.resident(self.device.stream())?;
            // SAFETY: both ranges are live device memory of this device holding `nbytes`
            // bytes; the copy is ordered on the lane that owns the new tensor, and the
            // buffer stays resident while the copy is queued (a later spill waits for it).
            unsafe {
                self.device.stream().memcpy_dtod_async(
                    gpukit_driver::DevicePtr(out.data_ptr()),
                    resident.buffer().ptr(),
                    out.nbytes(),
                )
            }?;
            Ok(out)
        })?))
    }

    /// Whether the values are on the device now (False once spilled to host memory).
    #[getter]
    fn is_resident(&self) -> bool {
        self.buf.is_on_device()
    }

    /// The shape of the tensor `load()` returns.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// Its dtype.
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType { dtype: self.dtype }
    }

    /// Bytes held.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buf.len()
    }
}

/// A copy of GPU tensor `t` in evictable memory of its device and tenant (see `Evictable`).
///
/// Raises `ValueError` for a CPU tensor (host memory already) and `MemoryError` when the copy
/// does not fit.
#[pyfunction]
pub fn evictable(py: Python<'_>, t: &Bound<'_, PyTensor>) -> PyResult<PyEvictable> {
    let t = t.get().t.clone();
    let Device::Cuda(c) = t.device() else {
        return Err(value(
            "evictable memory is GPU memory that may move to the host: a CPU tensor is there \
             already",
        ));
    };
    if t.dtype().is_quantized() {
        return Err(value("evictable: dequantize GGUF block tensors first"));
    }
    let buf = run(py, || {
        let src = t.contiguous()?;
        let buf = c.pool().alloc_evictable(src.nbytes().max(1), c.stream())?;
        {
            let resident = buf.resident(c.stream())?;
            // SAFETY: both ranges are live device memory of this device holding the tensor's
            // bytes; the copy is ordered on the tensor's lane, where the buffer was allocated.
            unsafe {
                c.stream().memcpy_dtod_async(
                    resident.buffer().ptr(),
                    gpukit_driver::DevicePtr(src.data_ptr()),
                    src.nbytes(),
                )
            }?;
        }
        Ok::<_, gpukit_ops::Error>(buf)
    })?;
    Ok(PyEvictable {
        buf,
        shape: t.shape().to_vec(),
        dtype: t.dtype(),
        device: c,
    })
}
