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
///
/// A tensor of a block-quantized dtype ([`DType::Quant`], built with [`Tensor::from_blocks`])
/// keeps its values as GGML blocks along the last dimension (at least one block long), on the
/// host or the device. Its views must be contiguous and keep whole blocks (the offset and the
/// last dimension whole blocks: `narrow` along rows, `reshape`, `unsqueeze` before the last
/// dimension). Its values are read by [`crate::quant::dequantize_into`] and
/// [`crate::quant::dequantize_tensor`] (and [`crate::ops::cast_into`] /
/// [`crate::ops::to_dtype`] from it), [`crate::quant::qgemv_into`], [`Tensor::to_vec_f32`] and
/// [`Tensor::to_vec_f64`]; every other op refuses it with [`Error::DType`].
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
    /// A block-quantized dtype's zeroed blocks hold zeros.
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape of too many elements (or bytes), or, for a block-quantized
    /// dtype, a last dimension that is not a positive whole number of blocks; memory errors.
    pub fn empty(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        let bytes = storage_bytes("empty", shape, dtype)?;
        let n = shape.iter().product();
        let storage = match device {
            Device::Cpu => Storage::Cpu(Arc::new(RwLock::new(HostData::zeros(dtype, n)?))),
            Device::Cuda(c) => Storage::Cuda(Arc::new(c.alloc(bytes)?), c.clone()),
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
    /// [`Error::Shape`] for a shape of too many elements; [`Error::DType`] for a
    /// block-quantized dtype (quantize a float tensor instead:
    /// [`crate::quant::quantize_tensor`]); memory errors.
    pub fn full(shape: &[usize], value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        element_dtype("full", dtype)?;
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
    /// finite (`lo < hi`, `hi − lo` finite); [`Error::DType`] for a block-quantized dtype;
    /// memory errors.
    pub fn rand(
        shape: &[usize],
        lo: f64,
        hi: f64,
        dtype: DType,
        seed: u64,
        device: &Device,
    ) -> Result<Tensor> {
        element_dtype("rand", dtype)?;
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

    /// A tensor of `shape` and dtype `DType::Quant(format)` holding `blocks`: GGML blocks in
    /// row-major order, each row of the last dimension `shape[last] / format.block_values()`
    /// blocks (how GGUF stores a tensor; a linear layer's weight is `[out, in]`), on `device`.
    ///
    /// # Errors
    /// [`Error::Shape`] unless the last dimension is one or more whole blocks and `blocks`
    /// holds exactly the shape's blocks; memory errors.
    pub fn from_blocks(
        blocks: &[u8],
        format: gpukit_kernels::QuantFormat,
        shape: &[usize],
        device: &Device,
    ) -> Result<Tensor> {
        let dtype = DType::Quant(format);
        let bytes = storage_bytes("from_blocks", shape, dtype)?;
        if blocks.len() != bytes {
            return Err(Error::shape(
                "from_blocks",
                format!(
                    "{} bytes for a {shape:?} {format} tensor (needs {bytes})",
                    blocks.len()
                ),
            ));
        }
        let host = Tensor {
            storage: Storage::Cpu(Arc::new(RwLock::new(HostData::U8(blocks.to_vec())))),
            layout: Layout::contiguous(shape),
            dtype,
        };
        host.to_device(device)
    }

    /// A block-quantized tensor's blocks as a 1-D u8 view of its storage (on its device), in
    /// row-major order.
    ///
    /// # Errors
    /// [`Error::DType`] for a tensor of an element dtype.
    pub fn blocks(&self) -> Result<Tensor> {
        self.quant_format("blocks")?;
        let (start, len) = self.byte_range();
        Ok(Tensor {
            storage: self.storage.clone(),
            layout: Layout::contiguous(&[start + len]).narrow(0, start, len)?,
            dtype: DType::U8,
        })
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

    /// Bytes of this view's elements (of a block-quantized tensor: its blocks).
    pub fn nbytes(&self) -> usize {
        self.byte_range().1
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

    /// A view of this storage through `layout` (made by `op`); a block-quantized tensor's
    /// views must be contiguous and keep whole blocks.
    fn with_layout(&self, op: &'static str, layout: Layout) -> Result<Tensor> {
        let bv = self.dtype.block_values();
        if bv > 1 {
            // The shape as any quantized tensor's, then whole blocks in place.
            storage_bytes(op, layout.shape(), self.dtype)?;
            if !layout.is_contiguous() || !layout.offset().is_multiple_of(bv) {
                return Err(Error::shape(
                    op,
                    format!(
                        "a view {:?} of a {:?} {} tensor would split its {bv}-value blocks \
                         (views of block-quantized tensors are contiguous and start at a \
                         block)",
                        layout.shape(),
                        self.shape(),
                        self.dtype
                    ),
                ));
            }
        }
        Ok(Tensor {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
        })
    }

    /// Whether two tensors share storage.
    pub(crate) fn shares_storage(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Arc::ptr_eq(a, b),
            (Storage::Cuda(a, _), Storage::Cuda(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The host storage of a CPU tensor of an element dtype, for `op`'s CPU path.
    ///
    /// # Errors
    /// [`Error::DType`] for a block-quantized tensor (its storage holds blocks, not elements);
    /// [`Error::Shape`] for a CUDA tensor (a dispatch bug).
    pub(crate) fn host(&self, op: &'static str) -> Result<RwLockReadGuard<'_, HostData>> {
        self.elements_only(op)?;
        self.host_raw()
            .ok_or_else(|| Error::shape(op, "expected a host tensor"))
    }

    /// As [`Tensor::host`], for writing.
    ///
    /// # Errors
    /// As [`Tensor::host`].
    pub(crate) fn host_mut(&self, op: &'static str) -> Result<RwLockWriteGuard<'_, HostData>> {
        self.elements_only(op)?;
        match &self.storage {
            Storage::Cpu(d) => Ok(lock_write(d)),
            Storage::Cuda(..) => Err(Error::shape(op, "expected a host output")),
        }
    }

    /// The host storage whatever the dtype (a block-quantized tensor's holds its blocks as
    /// u8); `None` on CUDA.
    pub(crate) fn host_raw(&self) -> Option<RwLockReadGuard<'_, HostData>> {
        match &self.storage {
            Storage::Cpu(d) => Some(lock_read(d)),
            Storage::Cuda(..) => None,
        }
    }

    /// The block format of a block-quantized tensor, for `op`.
    ///
    /// # Errors
    /// [`Error::DType`] for an element dtype.
    pub(crate) fn quant_format(&self, op: &'static str) -> Result<gpukit_kernels::QuantFormat> {
        self.dtype.quant_format().ok_or_else(|| {
            Error::dtype(
                op,
                format!(
                    "{:?} {} is not block-quantized (build one with Tensor::from_blocks or \
                     quant::quantize_tensor)",
                    self.shape(),
                    self.dtype
                ),
            )
        })
    }

    /// Refuses a block-quantized tensor in an op that reads or writes elements.
    pub(crate) fn elements_only(&self, op: &'static str) -> Result<()> {
        if self.dtype.is_quantized() {
            return Err(Error::dtype(
                op,
                format!(
                    "{:?} {} holds quantized blocks, which this op does not read: dequantize \
                     it first (quant::dequantize_tensor or ops::to_dtype)",
                    self.shape(),
                    self.dtype
                ),
            ));
        }
        Ok(())
    }

    /// `(first byte, bytes of the view's elements)`: for a contiguous view (as every
    /// block-quantized one is), the storage it covers.
    pub(crate) fn byte_range(&self) -> (usize, usize) {
        (
            units_bytes(self.dtype, self.layout.offset()),
            units_bytes(self.dtype, self.numel()),
        )
    }

    /// A host block-quantized tensor's blocks, read-locked.
    ///
    /// # Errors
    /// [`Error::DType`] for an element dtype; [`Error::Shape`] for a CUDA tensor or bytes
    /// past the storage (a bug).
    pub(crate) fn host_blocks(&self, op: &'static str) -> Result<HostBlocks<'_>> {
        self.quant_format(op)?;
        let data = self
            .host_raw()
            .ok_or_else(|| Error::shape(op, "expected host blocks"))?;
        let (start, len) = self.byte_range();
        let stored = data.as_bytes().len();
        match start.checked_add(len) {
            Some(end) if end <= stored => Ok(HostBlocks {
                data,
                range: start..end,
            }),
            _ => Err(Error::shape(
                op,
                format!("{len} bytes at byte {start} lie past the {stored} bytes of storage"),
            )),
        }
    }

    /// The address of the element at the view's offset: a device address for a CUDA tensor, a
    /// host address for a CPU one (for a block-quantized tensor, its first block). For handing
    /// the memory to foreign code (a DLPack consumer, a jit kernel's pointer argument); it stays
    /// valid while this tensor or another handle to its storage lives. Writes through it race
    /// with ops on the tensor unless ordered with them (on the tensor's lane, or after a
    /// synchronize).
    pub fn data_ptr(&self) -> u64 {
        let at = units_bytes(self.dtype, self.layout.offset()) as u64;
        match &self.storage {
            Storage::Cpu(d) => lock_read(d).as_bytes().as_ptr() as u64 + at,
            Storage::Cuda(buf, _) => buf.ptr().0 + at,
        }
    }

    /// A tensor over device memory that another library allocated (a tensor imported through
    /// DLPack), without copying: `shape` and element `strides` (non-negative) from `addr`, ops
    /// on `device`'s lane. `owner` keeps the memory alive; it is dropped after the last handle
    /// to the storage, once the lane has finished its work.
    ///
    /// # Safety
    /// `addr..addr + bytes` must be device memory of `device`'s GPU holding `dtype` elements,
    /// valid for reads and writes while `owner` lives, and nothing else may write it while ops
    /// on the tensor run unless ordered with them.
    ///
    /// # Errors
    /// [`Error::Shape`] for a negative stride or a layout that reaches past `bytes`;
    /// [`Error::DType`] for a block-quantized dtype; memory errors for a stream of another
    /// device.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_device_memory(
        device: &CudaDevice,
        addr: u64,
        bytes: usize,
        shape: &[usize],
        strides: &[isize],
        dtype: DType,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Tensor> {
        const OP: &str = "from_device_memory";
        if dtype.is_quantized() {
            return Err(Error::dtype(OP, format!("{dtype}: only element dtypes")));
        }
        if shape.len() != strides.len() || strides.iter().any(|&s| s < 0) {
            return Err(Error::shape(
                OP,
                format!(
                    "shape {shape:?} with strides {strides:?}: one non-negative stride per dimension"
                ),
            ));
        }
        let layout = Layout::strided(shape, strides, 0);
        let need = layout.span().saturating_mul(dtype.size_in_bytes());
        if need > bytes {
            return Err(Error::shape(
                OP,
                format!(
                    "shape {shape:?} with strides {strides:?} reaches {need} bytes; the memory \
                     holds {bytes}"
                ),
            ));
        }
        // SAFETY: the caller vouches for the memory and its owner.
        let buf = unsafe {
            device
                .pool()
                .adopt(addr, bytes.max(1), device.stream(), owner)?
        };
        Ok(Tensor {
            storage: Storage::Cuda(Arc::new(buf), device.clone()),
            layout,
            dtype,
        })
    }

    /// Elements `start..start + len` of dimension `dim` (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] if out of range.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        self.with_layout("narrow", self.layout.narrow(dim, start, len)?)
    }

    /// Every `step`-th element of dimension `dim` from `start`, `len` of them (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] for a step of 0 or elements outside the dimension.
    pub fn slice(&self, dim: usize, start: usize, len: usize, step: usize) -> Result<Tensor> {
        self.with_layout("slice", self.layout.slice(dim, start, len, step)?)
    }

    /// Windows of `size` elements every `step` along `dim`, in a new last dimension (a view;
    /// torch's `Tensor.unfold`). Overlapping windows share elements: write through such a view
    /// only with ops that allow it.
    ///
    /// # Errors
    /// [`Error::Shape`] for a step of 0 or a window longer than the dimension.
    pub fn unfold(&self, dim: usize, size: usize, step: usize) -> Result<Tensor> {
        self.with_layout("unfold", self.layout.unfold(dim, size, step)?)
    }

    /// Two dimensions swapped (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] for a dimension out of range.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        self.with_layout("transpose", self.layout.transpose(a, b)?)
    }

    /// A size-1 dimension inserted before dimension `dim` (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] for `dim` beyond the rank.
    pub fn unsqueeze(&self, dim: usize) -> Result<Tensor> {
        self.with_layout("unsqueeze", self.layout.unsqueeze(dim)?)
    }

    /// Dimension `dim`, of size 1, removed (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] if `dim` is out of range or its size is not 1.
    pub fn squeeze(&self, dim: usize) -> Result<Tensor> {
        self.with_layout("squeeze", self.layout.squeeze(dim)?)
    }

    /// Dimensions reordered (a view).
    ///
    /// # Errors
    /// [`Error::Shape`] unless `dims` is a permutation.
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        self.with_layout("permute", self.layout.permute(dims)?)
    }

    /// Another shape with the same elements (a view when contiguous, else a copy).
    ///
    /// # Errors
    /// [`Error::Shape`] if the element counts differ.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if self.is_contiguous() {
            self.with_layout("reshape", self.layout.reshape(shape)?)
        } else {
            self.contiguous()?.reshape(shape)
        }
    }

    /// Broadcast to `shape` (a view with stride 0 on repeated dimensions).
    ///
    /// # Errors
    /// [`Error::Shape`] if not broadcastable.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        self.with_layout("broadcast_to", self.layout.broadcast_to(shape)?)
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
        let data = host.host("to_vec")?;
        let v = T::slice(&data).ok_or_else(|| Error::dtype("to_vec", "storage dtype"))?;
        Ok(host.layout.indices().map(|i| v[i]).collect())
    }

    /// The elements as f64 in row-major order, whatever the dtype (for tests and printing); a
    /// block-quantized tensor's dequantized on the host ([`crate::quant::dequantize`]).
    ///
    /// # Errors
    /// As [`Tensor::to_vec`].
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        if self.dtype.is_quantized() {
            return Ok(self.to_vec_f32()?.into_iter().map(f64::from).collect());
        }
        let host = self.to_device(&Device::Cpu)?;
        let data = host.host("to_vec")?;
        Ok(host.layout.indices().map(|i| data.get(i)).collect())
    }

    /// The elements as f32 in row-major order, from any dtype (the input of the CPU kernels);
    /// a block-quantized tensor's dequantized on the host ([`crate::quant::dequantize`], bit
    /// for bit what ggml gives). f32 data is copied a row at a time when rows are dense.
    ///
    /// # Errors
    /// As [`Tensor::to_vec`].
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        let host = self.to_device(&Device::Cpu)?;
        if host.numel() == 0 {
            // An empty view's offset may lie past its storage: nothing to read.
            return Ok(Vec::new());
        }
        if let Some(format) = self.dtype.quant_format() {
            let mut out = vec![0f32; host.numel()];
            crate::quant::dequantize(format, host.host_blocks("to_vec")?.bytes(), &mut out)?;
            return Ok(out);
        }
        let data = host.host("to_vec")?;
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
    /// [`Error::Capture`] while either lane is capturing a CUDA graph (the copy would be
    /// recorded, not made); memory and transfer errors.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device().same(device) {
            return Ok(self.clone());
        }
        for end in [self.device(), device.clone()] {
            if let Device::Cuda(c) = end
                && c.stream().is_capturing()?
            {
                return Err(Error::Capture {
                    op: "to_device",
                    detail: "a copy between host and device cannot be recorded into a CUDA graph: \
                             make the tensor (or read it) before or after the capture"
                        .into(),
                });
            }
        }
        match (&self.storage, device) {
            (Storage::Cpu(_), Device::Cuda(c)) => {
                // An empty tensor copies nothing (its layout may not count as contiguous: a
                // block-quantized one could not be copied into one that does).
                let bytes = if self.numel() == 0 {
                    Vec::new()
                } else {
                    let src = self.contiguous()?;
                    let (start, len) = src.byte_range();
                    let data = src
                        .host_raw()
                        .ok_or_else(|| Error::shape("to_device", "expected host storage"))?;
                    data.as_bytes()[start..start + len].to_vec()
                };
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
                let span = units_bytes(self.dtype, self.layout.span());
                let bytes = if span == 0 {
                    Vec::new()
                } else {
                    let engine = c.lane().device().transfers();
                    engine
                        .download(buf.clone(), 0..span, Priority::High)?
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

/// A host block-quantized tensor's bytes, read-locked ([`Tensor::host_blocks`]).
pub(crate) struct HostBlocks<'a> {
    data: RwLockReadGuard<'a, HostData>,
    range: std::ops::Range<usize>,
}

impl HostBlocks<'_> {
    /// The tensor's blocks, in row-major order.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data.as_bytes()[self.range.clone()]
    }
}

/// Bytes of `n` elements of `dtype` (`n` whole blocks for a block-quantized dtype, as every
/// view of one keeps them).
fn units_bytes(dtype: DType, n: usize) -> usize {
    (n / dtype.block_values()).saturating_mul(dtype.size_in_bytes())
}

/// Bytes of a tensor of `shape` and `dtype`, for `op`.
///
/// # Errors
/// [`Error::Shape`] for too many bytes, or for a block-quantized dtype a shape whose last
/// dimension is not a positive whole number of blocks (or a 0-d shape).
pub(crate) fn storage_bytes(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let n = checked_numel(op, shape)?;
    let bv = dtype.block_values();
    if bv > 1 && !shape.last().is_some_and(|&l| l > 0 && l.is_multiple_of(bv)) {
        return Err(Error::shape(
            op,
            format!(
                "a {dtype} tensor's last dimension must be one or more whole {bv}-value blocks, \
                 got {shape:?}"
            ),
        ));
    }
    dtype
        .bytes_for(n)
        .ok_or_else(|| Error::shape(op, format!("{shape:?} {dtype} overflows a byte count")))
}

/// Refuses a block-quantized dtype where `op` makes elements from values.
fn element_dtype(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_quantized() {
        return Err(Error::dtype(
            op,
            format!(
                "{dtype} is block-quantized: build it from blocks (Tensor::from_blocks) or \
                 quantize a float tensor (quant::quantize_tensor)"
            ),
        ));
    }
    Ok(())
}

/// A tensor's device address: its first element's (CUDA dispatch only).
///
/// # Errors
/// [`Error::DType`] for a block-quantized tensor (only [`dptr_blocks`] gives its blocks'
/// address); [`Error::Shape`] for a CPU tensor; an address past the 64-bit space (a bug) as
/// [`Error::Driver`].
pub(crate) fn dptr(t: &Tensor) -> Result<DevicePtr> {
    t.elements_only("kernel operand")?;
    dptr_blocks(t)
}

/// The device address of a tensor's first element, or for a block-quantized tensor its first
/// block (the quantized kernels' operands).
///
/// # Errors
/// As [`dptr`], whatever the dtype.
pub(crate) fn dptr_blocks(t: &Tensor) -> Result<DevicePtr> {
    match &t.storage {
        Storage::Cuda(b, _) => Ok(b.ptr().offset(units_bytes(t.dtype, t.layout.offset()))?),
        Storage::Cpu(_) => Err(Error::shape("dispatch", "expected a CUDA tensor")),
    }
}
