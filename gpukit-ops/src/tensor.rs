//! `Tensor`: storage + layout + dtype.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use gpukit_driver::DevicePtr;
use gpukit_kernels::DType;
use gpukit_mem::{DeviceBuffer, HostSource, Priority};
use rand::{Rng, SeedableRng};

use crate::device::{CudaDevice, Device};
use crate::element::{Element, HostData};
use crate::layout::{Layout, checked_numel};
use crate::{Error, Result};

#[derive(Clone)]
pub(crate) enum Storage {
    Cpu(Arc<RwLock<HostData>>),
    Cuda(Arc<DeviceBuffer>, CudaDevice),
}

/// An n-dimensional array: storage (host memory, or a device block from the lane's pool) plus a
/// layout (shape, strides, offset, in elements) and a dtype.
///
/// Clones and views (`narrow`, `transpose`, `permute`, `reshape` of contiguous data,
/// `broadcast_to`) share storage; `contiguous` copies only when needed.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) storage: Storage,
    pub(crate) layout: Layout,
    pub(crate) dtype: DType,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({:?}, {}, {})",
            self.layout.shape(),
            self.dtype,
            self.device().describe()
        )
    }
}

fn lock_read(l: &RwLock<HostData>) -> RwLockReadGuard<'_, HostData> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_write(l: &RwLock<HostData>) -> RwLockWriteGuard<'_, HostData> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Tensor {
    pub(crate) fn from_host(data: HostData, shape: &[usize], device: &Device) -> Result<Tensor> {
        let n = checked_numel("from_slice", shape)?;
        if data.len() != n {
            return Err(Error::shape(
                "from_slice",
                format!("{} elements for shape {shape:?} ({n})", data.len()),
            ));
        }
        let dtype = data.dtype();
        let host = Tensor {
            storage: Storage::Cpu(Arc::new(RwLock::new(data))),
            layout: Layout::contiguous(shape),
            dtype,
        };
        match device {
            Device::Cpu => Ok(host),
            Device::Cuda(_) => host.to_device(device),
        }
    }

    /// A tensor of `shape` holding `data` (row-major) on `device`.
    ///
    /// # Errors
    /// [`Error::Shape`] if the element count does not match; memory errors.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: &Device) -> Result<Tensor> {
        Self::from_host(T::into_data(data.to_vec()), shape, device)
    }

    /// An uninitialised (on CUDA) or zeroed (on CPU) contiguous tensor, for `_into` outputs.
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape of too many elements; memory errors.
    pub fn empty(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        let n = checked_numel("empty", shape)?;
        let storage = match device {
            Device::Cpu => Storage::Cpu(Arc::new(RwLock::new(HostData::zeros(dtype, n)?))),
            Device::Cuda(c) => {
                Storage::Cuda(Arc::new(c.alloc(n * dtype.size_in_bytes())?), c.clone())
            }
        };
        Ok(Tensor {
            storage,
            layout: Layout::contiguous(shape),
            dtype,
        })
    }

    /// Every element `value` (rounded to `dtype`).
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape of too many elements; memory errors.
    pub fn full(shape: &[usize], value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        let n = checked_numel("full", shape)?;
        let mut data = HostData::zeros(dtype, n)?;
        // Zeros come zeroed from the allocator: writing them again would touch every page.
        if value.to_bits() != 0 {
            for i in 0..n {
                data.set(i, value);
            }
        }
        Self::from_host(data, shape, device)
    }

    /// Zeros.
    ///
    /// # Errors
    /// As [`Tensor::full`].
    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Self::full(shape, 0.0, dtype, device)
    }

    /// Ones.
    ///
    /// # Errors
    /// As [`Tensor::full`].
    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Self::full(shape, 1.0, dtype, device)
    }

    /// Uniform random values in `[lo, hi)` (integers: truncated), reproducible from `seed`
    /// (ChaCha-based `StdRng`, generated on the host).
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape of too many elements or a range that is empty or not
    /// finite (`lo < hi`, `hi − lo` finite); memory errors.
    pub fn rand(
        shape: &[usize],
        lo: f64,
        hi: f64,
        dtype: DType,
        seed: u64,
        device: &Device,
    ) -> Result<Tensor> {
        let n = checked_numel("rand", shape)?;
        if !(lo < hi && (hi - lo).is_finite()) {
            return Err(Error::shape(
                "rand",
                format!("the range [{lo}, {hi}) must be non-empty and finite"),
            ));
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut data = HostData::zeros(dtype, n)?;
        for i in 0..n {
            data.set(i, rng.random_range(lo..hi));
        }
        Self::from_host(data, shape, device)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.layout.shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device.
    pub fn device(&self) -> Device {
        match &self.storage {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(_, c) => Device::Cuda(c.clone()),
        }
    }

    /// Whether the elements are dense and row-major.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
        }
    }

    /// Whether two tensors share storage.
    pub(crate) fn shares_storage(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Arc::ptr_eq(a, b),
            (Storage::Cuda(a, _), Storage::Cuda(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub(crate) fn host(&self) -> Option<RwLockReadGuard<'_, HostData>> {
        match &self.storage {
            Storage::Cpu(d) => Some(lock_read(d)),
            Storage::Cuda(..) => None,
        }
    }

    pub(crate) fn host_mut(&self) -> Option<RwLockWriteGuard<'_, HostData>> {
        match &self.storage {
            Storage::Cpu(d) => Some(lock_write(d)),
            Storage::Cuda(..) => None,
        }
    }

    /// Elements `start..start + len` of dimension `dim` (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] if out of range.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.narrow(dim, start, len)?))
    }

    /// Two dimensions swapped (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] for a dimension out of range.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    /// A size-1 dimension inserted before dimension `dim` (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] for `dim` beyond the rank.
    pub fn unsqueeze(&self, dim: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.unsqueeze(dim)?))
    }

    /// Dimensions reordered (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] unless `dims` is a permutation.
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.permute(dims)?))
    }

    /// Another shape with the same elements (a view when contiguous, else a copy).
    ///
    /// # Errors
    /// [`Error::Shape`] if the element counts differ.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if self.is_contiguous() {
            Ok(self.with_layout(self.layout.reshape(shape)?))
        } else {
            self.contiguous()?.reshape(shape)
        }
    }

    /// Broadcast to `shape` (a view with stride 0 on repeated dimensions).
    ///
    /// # Errors
    /// [`Error::Shape`] if not broadcastable.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.broadcast_to(shape)?))
    }

    /// A contiguous tensor with the same elements (self if already contiguous).
    ///
    /// # Errors
    /// Memory errors.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        crate::ops::copy(self)
    }

    /// The elements in row-major order.
    ///
    /// # Errors
    /// [`Error::DType`] if `T` is not the tensor's dtype; on CUDA, transfer errors and any error
    /// a kernel flagged (see [`CudaDevice::synchronize`]).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        Error::expect_dtype("to_vec", self.dtype, T::DTYPE)?;
        let host = self.to_device(&Device::Cpu)?;
        let data = host
            .host()
            .ok_or_else(|| Error::dtype("to_vec", "not on the host"))?;
        let v = T::slice(&data).ok_or_else(|| Error::dtype("to_vec", "storage dtype"))?;
        Ok(host.layout.indices().map(|i| v[i]).collect())
    }

    /// The elements as f64 in row-major order, whatever the dtype (for tests and printing).
    ///
    /// # Errors
    /// As [`Tensor::to_vec`].
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let host = self.to_device(&Device::Cpu)?;
        let data = host
            .host()
            .ok_or_else(|| Error::dtype("to_vec", "not on the host"))?;
        Ok(host.layout.indices().map(|i| data.get(i)).collect())
    }

    /// The elements as f32 in row-major order, from any dtype (the input of the CPU kernels).
    /// f32 data is copied a row at a time when rows are dense.
    ///
    /// # Errors
    /// As [`Tensor::to_vec`].
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        let host = self.to_device(&Device::Cpu)?;
        if host.numel() == 0 {
            // An empty view's offset may lie past its storage: nothing to read.
            return Ok(Vec::new());
        }
        let data = host
            .host()
            .ok_or_else(|| Error::dtype("to_vec", "not on the host"))?;
        if let crate::HostData::F32(v) = &*data {
            if let Some((len, starts)) = host.layout.rows() {
                let mut out = Vec::with_capacity(host.numel());
                for s in starts {
                    out.extend_from_slice(&v[s..s + len]);
                }
                return Ok(out);
            }
            return Ok(host.layout.indices().map(|i| v[i]).collect());
        }
        Ok(host.layout.indices().map(|i| data.get(i) as f32).collect())
    }

    /// A copy on `device` (self if already there). Uploads and downloads go through the
    /// device's transfer engine; an upload is ordered before later work on the lane without
    /// blocking the host.
    ///
    /// # Errors
    /// Memory and transfer errors.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device().same(device) {
            return Ok(self.clone());
        }
        match (&self.storage, device) {
            (Storage::Cpu(_), Device::Cuda(c)) => {
                let src = self.contiguous()?;
                let bytes = src
                    .host()
                    .map(|d| {
                        let b = d.as_bytes();
                        let s = src.dtype.size_in_bytes();
                        b[src.layout.offset() * s..(src.layout.offset() + src.numel()) * s].to_vec()
                    })
                    .unwrap_or_default();
                let buf = if bytes.is_empty() {
                    c.alloc(1)?
                } else {
                    let engine = c.lane().device().transfers();
                    engine
                        .upload_new(
                            HostSource::bytes(bytes),
                            c.pool(),
                            c.stream(),
                            Priority::High,
                        )?
                        .then_on(c.stream())?
                };
                Ok(Tensor {
                    storage: Storage::Cuda(Arc::new(buf), c.clone()),
                    layout: Layout::contiguous(self.shape()),
                    dtype: self.dtype,
                })
            }
            (Storage::Cuda(buf, c), Device::Cpu) => {
                c.synchronize()?;
                let s = self.dtype.size_in_bytes();
                let span = self.layout.span();
                let bytes = if span == 0 {
                    Vec::new()
                } else {
                    let engine = c.lane().device().transfers();
                    engine
                        .download(buf.clone(), 0..span * s, Priority::High)?
                        .wait()?
                        .1
                };
                let data = HostData::from_bytes(self.dtype, &bytes);
                Ok(Tensor {
                    storage: Storage::Cpu(Arc::new(RwLock::new(data))),
                    layout: self.layout.clone(),
                    dtype: self.dtype,
                })
            }
            (Storage::Cuda(..), Device::Cuda(_)) => self.to_device(&Device::Cpu)?.to_device(device),
            (Storage::Cpu(_), Device::Cpu) => Ok(self.clone()),
        }
    }
}

/// A tensor's device address: its first element's (CUDA dispatch only).
///
/// # Errors
/// [`Error::Shape`] for a CPU tensor; an address past the 64-bit space (a bug) as
/// [`Error::Driver`].
pub(crate) fn dptr(t: &Tensor) -> Result<DevicePtr> {
    match &t.storage {
        Storage::Cuda(b, _) => {
            let bytes = t.layout.offset().saturating_mul(t.dtype.size_in_bytes());
            Ok(b.ptr().offset(bytes)?)
        }
        Storage::Cpu(_) => Err(Error::shape("dispatch", "expected a CUDA tensor")),
    }
}
