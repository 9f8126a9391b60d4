//! DLPack exchange (through `dlpark`): `Tensor.__dlpack__` hands out the tensor's memory, and
//! `gk.from_dlpack` takes a torch or cupy GPU tensor's memory, both without a copy.
//!
//! Ordering: an export waits for the work queued on the tensor's stream before the consumer
//! gets the memory (unless the consumer asks for no synchronisation with `stream=-1`); an import
//! passes the importing stream to the producer's `__dlpack__`, so the producer orders its
//! pending work before it. Memory crosses libraries in the process's one primary context.

use dlpark::ffi::{DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::python::{
    CudaStreamRequest, DlpackExporter, DlpackStream, ExportRequest, StreamArg, export_dlpack,
};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use gpukit_ops::{DType, Device, Tensor};
use pyo3::prelude::*;

use crate::errors::{self, type_error, value};
use crate::tensor::{PyTensor, from_array};

fn dl_dtype(d: DType) -> PyResult<DLDataType> {
    Ok(match d {
        DType::F32 => DLDataType::F32,
        DType::F16 => DLDataType::F16,
        DType::BF16 => DLDataType::BF16,
        DType::I32 => DLDataType::I32,
        DType::I64 => DLDataType::I64,
        DType::U8 => DLDataType::U8,
        other => {
            return Err(type_error(format!(
                "a {other} tensor holds GGUF blocks, which DLPack cannot describe: dequantize \
                 first"
            )));
        }
    })
}

fn gk_dtype(d: DLDataType) -> PyResult<DType> {
    let known = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
    ];
    if d == DLDataType::BOOL {
        return Ok(DType::U8);
    }
    for k in known {
        if dl_dtype(k)? == d {
            return Ok(k);
        }
    }
    Err(type_error(format!(
        "DLPack dtype (code {}, {} bits, {} lanes) has no gpukit dtype",
        d.code.0, d.bits, d.lanes
    )))
}

fn dl_device(t: &Tensor) -> DLDevice {
    match t.device() {
        Device::Cpu => DLDevice::CPU,
        Device::Cuda(c) => DLDevice::cuda(c.stream().device().ordinal() as i32),
    }
}

/// `(device_type, device_id)` as DLPack numbers them.
pub(crate) fn device_pair(t: &Tensor) -> (i32, i32) {
    let d = dl_device(t);
    (d.device_type.0 as i32, d.device_id)
}

/// One export of a tensor: each capsule owns a clone of the tensor (its storage stays alive
/// until the consumer's deleter runs).
struct Exporter {
    t: Tensor,
}

impl Exporter {
    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.t.shape().iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = self
            .t
            .layout()
            .strides()
            .iter()
            .map(|&s| s as i64)
            .collect();
        let ptr = self.t.data_ptr();
        let mut init = Dynamic::new(shape, strides)
            .initialize_as::<M>(Box::new(self.t.clone()))
            .map_err(|e| value(format!("DLPack export: {e}")))?;
        init.set_data(ptr as *mut std::ffi::c_void)
            .set_dtype(dl_dtype(self.t.dtype())?)
            .set_device(dl_device(&self.t));
        // SAFETY: the data pointer is the first element of the tensor's storage, which the
        // boxed clone keeps alive until the deleter runs; shape and strides describe its view
        // (element strides, as DLPack counts them) and stay inside that storage.
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for Exporter {
    fn device(&self) -> DLDevice {
        dl_device(&self.t)
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let Device::Cuda(c) = self.t.device() else {
            return Ok(());
        };
        match request.cuda_stream()? {
            CudaStreamRequest::NoSync => Ok(()),
            // Whatever stream the consumer names, the tensor's pending work ends first.
            _ => py.detach(move || c.synchronize()).map_err(errors::ops),
        }
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

/// `Tensor.__dlpack__`.
pub(crate) fn export(
    py: Python<'_>,
    t: &Tensor,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
    export_dlpack(&Exporter { t: t.clone() }, py, request)
}

/// The importing lane, passed to the producer's `__dlpack__(stream=…)`.
struct Lane<'a>(&'a gpukit_ops::CudaDevice);

// SAFETY: the stream handle is the lane's live CUDA stream of the device being imported from
// (checked before the import), valid for the whole call since the lane is borrowed.
unsafe impl DlpackStream for Lane<'_> {
    fn as_python_arg(&self, _py: Python<'_>, device: DLDevice) -> PyResult<StreamArg> {
        if device.device_type != DLDeviceType::CUDA {
            return Ok(dlpark::python::consumer::stream::none());
        }
        Ok(dlpark::python::consumer::stream::cuda(
            self.0.stream().as_raw().cast(),
        ))
    }
}

/// A tensor over `obj`'s memory: an object with `__dlpack__` (torch, cupy, a gk.Tensor) or a
/// DLPack capsule (used once). GPU memory is shared, not copied; CPU memory is copied.
pub(crate) fn import(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(t.get().t.clone());
    }
    if obj.is_instance_of::<pyo3::types::PyCapsule>() {
        // A capsule was made already: nothing to negotiate, the producer synchronised then.
        let imported = dlpark::python::from_dlpack(obj.as_borrowed(), None, None)?;
        let device = imported
            .validate()
            .map_err(|e| value(format!("from_dlpack: {e}")))?
            .device();
        return match device.device_type {
            DLDeviceType::CPU => host_copy(&imported),
            DLDeviceType::CUDA => {
                let lane = lane_of(device)?;
                adopt(imported, &lane, device)
            }
            other => Err(value(format!(
                "from_dlpack: DLPack device type {} is neither the CPU nor CUDA",
                other.0
            ))),
        };
    }
    let device = dlpark::python::dlpack_device(obj.as_borrowed())?;
    if device.device_type == DLDeviceType::CPU {
        // numpy reads any strides; the values are copied.
        let np = py.import("numpy")?;
        let arr = np.call_method1("from_dlpack", (obj,))?;
        return from_array(py, &arr, &Device::Cpu, false);
    }
    if device.device_type != DLDeviceType::CUDA {
        return Err(value(format!(
            "from_dlpack: DLPack device type {} is neither the CPU nor CUDA",
            device.device_type.0
        )));
    }
    let lane = lane_of(device)?;
    let imported = dlpark::python::from_dlpack(obj.as_borrowed(), Some(&Lane(&lane)), None)?;
    adopt(imported, &lane, device)
}

/// The lane imports of `device` go on: the current stream of that GPU, else its default lane.
fn lane_of(device: DLDevice) -> PyResult<gpukit_ops::CudaDevice> {
    match crate::device::named(&format!("cuda:{}", device.device_id))? {
        Device::Cuda(c) => Ok(c),
        Device::Cpu => Err(value("from_dlpack: expected a CUDA device")),
    }
}

/// A tensor over imported CUDA memory, which the producer's deleter frees after the last use.
fn adopt(
    imported: dlpark::python::ImportedDlpack,
    lane: &gpukit_ops::CudaDevice,
    device: DLDevice,
) -> PyResult<Tensor> {
    let (addr, bytes, shape, strides, dtype) = {
        let t = imported
            .validate()
            .map_err(|e| value(format!("from_dlpack: {e}")))?;
        if t.device() != device {
            return Err(value("from_dlpack: the tensor moved between devices"));
        }
        let dtype = gk_dtype(t.dtype())?;
        let strides = t
            .strides_or_compact()
            .map_err(|e| value(format!("from_dlpack: {e}")))?
            .iter()
            .map(|&s| s as isize)
            .collect::<Vec<_>>();
        let shape: Vec<usize> = t.shape().iter().map(|&n| n.max(0) as usize).collect();
        let span = if shape.contains(&0) {
            0
        } else {
            shape
                .iter()
                .zip(&strides)
                .map(|(&n, &s)| (n as isize - 1) * s.max(0))
                .sum::<isize>() as usize
                + 1
        };
        let addr = t.data_ptr() as u64 + t.byte_offset();
        (addr, span * dtype.size_in_bytes(), shape, strides, dtype)
    };
    // The producer's deleter, run once when the last tensor over the memory is gone.
    let owner = imported.into_deleter();
    // SAFETY: the producer describes `bytes` bytes of CUDA memory of this device at `addr`
    // (validated descriptor), kept alive by its deleter, which `owner` runs after the last
    // use; the producer ordered its pending writes before the importing lane (or, for a
    // capsule, before it made the capsule).
    unsafe {
        Tensor::from_device_memory(
            lane,
            addr,
            bytes.max(1),
            &shape,
            &strides,
            dtype,
            Box::new(owner),
        )
    }
    .map_err(errors::ops)
}

/// A CPU tensor with a copy of a dense CPU capsule's values.
fn host_copy(imported: &dlpark::python::ImportedDlpack) -> PyResult<Tensor> {
    let t = imported
        .validate()
        .map_err(|e| value(format!("from_dlpack: {e}")))?;
    let dtype = gk_dtype(t.dtype())?;
    let shape: Vec<usize> = t.shape().iter().map(|&n| n.max(0) as usize).collect();
    // SAFETY: the validated descriptor describes CPU memory the capsule keeps alive while `t`
    // borrows it; the bytes are copied before the borrow ends.
    let bytes = unsafe { t.cpu_bytes() }.map_err(|e| {
        value(format!(
            "from_dlpack: {e} (pass the array itself, not a capsule, for strided CPU data)"
        ))
    })?;
    fn typed<T: gpukit_ops::Element + bytemuck::Pod>(
        b: &[u8],
        shape: &[usize],
    ) -> gpukit_ops::Result<Tensor> {
        Tensor::from_slice(
            &bytemuck::pod_collect_to_vec::<u8, T>(b),
            shape,
            &Device::Cpu,
        )
    }
    match dtype {
        DType::F32 => typed::<f32>(bytes, &shape),
        DType::F16 => typed::<half::f16>(bytes, &shape),
        DType::BF16 => typed::<half::bf16>(bytes, &shape),
        DType::I32 => typed::<i32>(bytes, &shape),
        DType::I64 => typed::<i64>(bytes, &shape),
        _ => typed::<u8>(bytes, &shape),
    }
    .map_err(errors::ops)
}

/// A tensor sharing the memory of `obj` (a torch or cupy tensor, anything with `__dlpack__`,
/// or a DLPack capsule): on a GPU without a copy (writes through either side are seen by the
/// other); CPU data is copied.
///
/// Raises `TypeError` for dtypes gpukit does not have, `BufferError` for a capsule already
/// consumed.
#[pyfunction]
pub fn from_dlpack(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    Ok(PyTensor::new(import(py, obj)?))
}
