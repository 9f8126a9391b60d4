//! Raw device memory: the driver allocation that `gpukit-mem`'s pool carves up, and copies.
//!
//! Nothing above `gpukit-mem` should call [`Device::alloc`] directly: every device byte a tensor
//! uses comes from the pool. The driver layer only provides the primitive and its tests.

use cudarc::driver::{result, sys};

use crate::device::Device;
use crate::error::{CudaCall, Error, Result, check};
use crate::stream::Stream;

/// Plain data that can be copied byte for byte to and from the device and passed to kernels.
///
/// # Safety
/// Implementors must be `repr(C)` or primitive, contain no pointers to host memory and no
/// padding, and every bit pattern must be a valid value (device code may write any bytes).
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numeric types: no padding, every bit pattern valid.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    usize,
    isize,
    f32,
    f64,
    half::f16,
    half::bf16
);
// SAFETY: arrays of `DeviceCopy` values have no padding between elements.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// A device address (`CUdeviceptr`). Passing it to a kernel passes the pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct DevicePtr(pub u64);

// SAFETY: a 64-bit integer.
unsafe impl DeviceCopy for DevicePtr {}

impl DevicePtr {
    /// The address `bytes` further on.
    pub fn offset(self, bytes: usize) -> DevicePtr {
        DevicePtr(self.0 + bytes as u64)
    }
}

/// One allocation from the driver (`cuMemAlloc`), freed on drop (`cuMemFree`).
///
/// `cuMemFree` synchronises the device implicitly, which is why `gpukit-mem` keeps these as large
/// cached segments instead of allocating per tensor.
pub struct DeviceAllocation {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    device: Device,
}

impl std::fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceAllocation({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl Device {
    /// Allocates `bytes` of device memory (`cuMemAlloc`; 256-byte aligned; contents undefined).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the device cannot satisfy the request; [`Error::InvalidArgument`]
    /// for zero bytes; [`Error::Cuda`] otherwise.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceAllocation> {
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "a device allocation needs at least one byte".into(),
            ));
        }
        self.bind()?;
        // SAFETY: the context is current; the result is checked.
        match unsafe { result::malloc_sync(bytes) } {
            Ok(ptr) => Ok(DeviceAllocation {
                ptr,
                bytes,
                device: self.clone(),
            }),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory {
                requested: bytes,
                free: self.memory_info().map(|m| m.free).unwrap_or(0),
            }),
            Err(e) => Err(e).call("cuMemAlloc"),
        }
    }
}

impl Drop for DeviceAllocation {
    fn drop(&mut self) {
        // Errors cannot be returned from here: they are recorded on the device and reported by
        // `Device::take_deferred_error`.
        self.device.bind_in_drop();
        // SAFETY: `ptr` came from `cuMemAlloc` in this context and is freed exactly once.
        self.device
            .record_err(unsafe { result::free_sync(self.ptr) });
    }
}

impl DeviceAllocation {
    /// The allocation's first address.
    pub fn ptr(&self) -> DevicePtr {
        DevicePtr(self.ptr)
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Always false: allocations have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The device the memory is on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn check_range(&self, offset: usize, bytes: usize, what: &str) -> Result<()> {
        match offset.checked_add(bytes) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(Error::InvalidArgument(format!(
                "{what}: bytes {offset}..{} are outside the {}-byte allocation",
                offset.saturating_add(bytes),
                self.bytes
            ))),
        }
    }
}

impl Stream {
    fn check_copy(&self, alloc: &DeviceAllocation, what: &str) -> Result<()> {
        self.same_device(&alloc.device, what)?;
        if self.is_capturing()? {
            return Err(Error::InvalidArgument(format!(
                "{what}: copies between device and pageable host memory cannot be captured into a \
                 graph (the host buffer would be read at replay time)"
            )));
        }
        Ok(())
    }

    /// Copies `src` to `dst` starting `offset` bytes in (`cuMemcpyHtoDAsync` from pageable
    /// memory: the call returns once `src` has been staged, so `src` may be reused at once).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the range does not fit, the allocation is on another device,
    /// or the stream is capturing; [`Error::Cuda`].
    pub fn copy_to_device<T: DeviceCopy>(
        &self,
        src: &[T],
        dst: &mut DeviceAllocation,
        offset: usize,
    ) -> Result<()> {
        let bytes = std::mem::size_of_val(src);
        dst.check_range(offset, bytes, "copy to device")?;
        self.check_copy(dst, "copy to device")?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the destination range is inside a live allocation of this device (checked), the
        // source is a live slice of plain data, and for pageable memory the driver stages `src`
        // before returning.
        unsafe { result::memcpy_htod_async(dst.ptr + offset as u64, src, self.as_raw()) }
            .call("cuMemcpyHtoDAsync")
    }

    /// Copies from `src` (starting `offset` bytes in) into `dst`, and waits for the copy (and
    /// everything queued before it on this stream) to finish.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the range does not fit, the allocation is on another device,
    /// or the stream is capturing; [`Error::Cuda`], including asynchronous errors of earlier work.
    pub fn copy_to_host<T: DeviceCopy>(
        &self,
        src: &DeviceAllocation,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
        let bytes = std::mem::size_of_val(dst);
        src.check_range(offset, bytes, "copy to host")?;
        self.check_copy(src, "copy to host")?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the source range is inside a live allocation (checked); `dst` is a live,
        // exclusively borrowed slice of `DeviceCopy` values (any bit pattern valid) and the
        // stream is synchronised below before the borrow ends.
        unsafe { result::memcpy_dtoh_async(dst, src.ptr + offset as u64, self.as_raw()) }
            .call("cuMemcpyDtoHAsync")?;
        self.synchronize()
    }

    /// Sets `bytes` bytes of `dst`, from `offset`, to `value` (`cuMemsetD8Async`). Capturable.
    /// Tests use `0xFF` to poison outputs (all-ones is a NaN in every float format).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the range does not fit or the allocation is on another
    /// device; [`Error::Cuda`].
    pub fn memset(
        &self,
        dst: &mut DeviceAllocation,
        offset: usize,
        bytes: usize,
        value: u8,
    ) -> Result<()> {
        dst.check_range(offset, bytes, "memset")?;
        self.same_device(&dst.device, "memset")?;
        self.device.bind()?;
        // SAFETY: the range is inside a live allocation of this stream's device (checked).
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(dst.ptr + offset as u64, value, bytes, self.as_raw())
        })
    }
}
