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

/// A device address (`CUdeviceptr`). Passing it to a kernel passes the pointer. The default is
/// the null address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct DevicePtr(pub u64);

// SAFETY: a 64-bit integer.
unsafe impl DeviceCopy for DevicePtr {}

impl DevicePtr {
    /// The address `bytes` further on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where the sum leaves the 64-bit address space (callers keep
    /// offsets inside an allocation, so this reports a bug instead of wrapping around).
    pub fn offset(self, bytes: usize) -> Result<DevicePtr> {
        u64::try_from(bytes)
            .ok()
            .and_then(|b| self.0.checked_add(b))
            .map(DevicePtr)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "device address {:#x} + {bytes} bytes overflows the address space",
                    self.0
                ))
            })
    }
}

/// Refuses zero-byte allocations with a clear error (the driver's own error is less clear).
fn nonzero(bytes: usize, what: &str) -> Result<()> {
    if bytes == 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} needs at least one byte"
        )));
    }
    Ok(())
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
        nonzero(bytes, "a device allocation")?;
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
        // SAFETY: the destination range is inside a live allocation of this device (checked), the
        // source is a live slice of plain data, and for pageable memory the driver stages `src`
        // before returning.
        unsafe { self.memcpy_htod_async(dst.ptr().offset(offset)?, src.as_ptr().cast(), bytes) }
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
        // SAFETY: the source range is inside a live allocation (checked); `dst` is a live,
        // exclusively borrowed slice of `DeviceCopy` values (any bit pattern valid) and the
        // stream is synchronised below before the borrow ends.
        unsafe {
            self.memcpy_dtoh_async(dst.as_mut_ptr().cast(), src.ptr().offset(offset)?, bytes)
        }?;
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
        // SAFETY: the range is inside a live allocation of this stream's device (checked).
        unsafe { self.memset_d8_async(dst.ptr().offset(offset)?, value, bytes) }
    }

    /// Enqueues a host-to-device copy of `bytes` bytes (`cuMemcpyHtoDAsync`). From pinned memory
    /// the copy is truly asynchronous; from pageable memory the driver stages `src` before
    /// returning. Zero bytes is a no-op.
    ///
    /// # Safety
    /// `dst..dst+bytes` must be device memory of this stream's device that nothing else accesses
    /// until the copy completes; `src..src+bytes` must be readable host memory, and if it is
    /// pinned it must stay valid and unmodified until the copy completes.
    ///
    /// # Errors
    /// [`Error::Cuda`].
    pub unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the caller upholds the ranges' validity (this function's contract).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst.0, src.cast(), bytes, self.as_raw())
        })
    }

    /// Enqueues a device-to-host copy of `bytes` bytes (`cuMemcpyDtoHAsync`). Into pinned memory
    /// it is asynchronous; into pageable memory the driver returns only once the copy is done.
    /// Zero bytes is a no-op.
    ///
    /// # Safety
    /// `src..src+bytes` must be device memory of this stream's device, not written by other work
    /// until the copy completes; `dst..dst+bytes` must be writable host memory that nothing reads
    /// or writes until the copy completes.
    ///
    /// # Errors
    /// [`Error::Cuda`].
    pub unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the caller upholds the ranges' validity (this function's contract).
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.cast(), src.0, bytes, self.as_raw())
        })
    }

    /// Enqueues a device-to-device copy of `bytes` bytes (`cuMemcpyDtoDAsync`). Capturable.
    ///
    /// # Safety
    /// Both ranges must be device memory of this stream's device, not overlapping, and not
    /// accessed by other work until the copy completes.
    ///
    /// # Errors
    /// [`Error::Cuda`].
    pub unsafe fn memcpy_dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the caller upholds the ranges' validity (this function's contract).
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst.0, src.0, bytes, self.as_raw())
        })
    }

    /// Enqueues setting `bytes` bytes at `dst` to `value` (`cuMemsetD8Async`). Capturable.
    ///
    /// # Safety
    /// `dst..dst+bytes` must be device memory of this stream's device that nothing else accesses
    /// until the memset completes.
    ///
    /// # Errors
    /// [`Error::Cuda`].
    pub unsafe fn memset_d8_async(&self, dst: DevicePtr, value: u8, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the caller upholds the range's validity (this function's contract).
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(dst.0, value, bytes, self.as_raw())
        })
    }
}

/// Page-locked ("pinned") host memory (`cuMemHostAlloc`, portable across contexts), freed on drop
/// (`cuMemFreeHost`). Copies between pinned memory and the device run at full PCIe/NVLink speed
/// and truly asynchronously. Allocating it is slow (milliseconds): `gpukit-mem`'s `PinnedPool`
/// caches these.
pub struct PinnedAllocation {
    ptr: std::ptr::NonNull<u8>,
    bytes: usize,
    device: Device,
}

// SAFETY: the allocation is plain host memory owned by this value; access goes through `&self` /
// `&mut self` like a `Box<[u8]>`.
unsafe impl Send for PinnedAllocation {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for PinnedAllocation {}

impl std::fmt::Debug for PinnedAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedAllocation({:p}, {} bytes)", self.ptr, self.bytes)
    }
}

impl Device {
    /// Allocates `bytes` of pinned host memory, zero-filled (`cuMemHostAlloc` with
    /// `CU_MEMHOSTALLOC_PORTABLE`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero bytes; [`Error::Cuda`] (`CUDA_ERROR_OUT_OF_MEMORY` when
    /// the host cannot lock that much memory).
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedAllocation> {
        nonzero(bytes, "a pinned allocation")?;
        self.bind()?;
        // SAFETY: the context is current; the result is checked; the memory is zero-filled below
        // before any read.
        let raw = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .call("cuMemHostAlloc")?;
        let ptr = std::ptr::NonNull::new(raw.cast::<u8>())
            .ok_or_else(|| Error::InvalidArgument("cuMemHostAlloc returned null".into()))?;
        // SAFETY: `ptr` points at `bytes` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, bytes) };
        Ok(PinnedAllocation {
            ptr,
            bytes,
            device: self.clone(),
        })
    }
}

impl PinnedAllocation {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Always false: allocations have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The memory as bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points at `bytes` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.bytes) }
    }

    /// The memory as mutable bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.bytes) }
    }

    /// The first byte's address, for asynchronous copies.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The first byte's address, writable, for asynchronous copies.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for PinnedAllocation {
    fn drop(&mut self) {
        self.device.bind_in_drop();
        // SAFETY: the pointer came from `cuMemHostAlloc` and is freed exactly once.
        self.device
            .record_err(unsafe { result::free_host(self.ptr.as_ptr().cast()) });
    }
}

/// Memory from CUDA's own stream-ordered allocator (`cuMemAllocAsync` on the device's default
/// memory pool), freed with `cuMemFreeAsync` on the same stream when dropped. gpukit allocates
/// through `gpukit-mem`'s pool; this exists so benchmarks can compare against CUDA's allocator.
pub struct AsyncAllocation {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    stream: Stream,
}

impl std::fmt::Debug for AsyncAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AsyncAllocation({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl Stream {
    /// Allocates `bytes` in stream order from the device's default CUDA memory pool
    /// (`cuMemAllocAsync`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero bytes; [`Error::Cuda`] (including out of memory).
    pub fn alloc_async(&self, bytes: usize) -> Result<AsyncAllocation> {
        nonzero(bytes, "an allocation")?;
        self.device.bind()?;
        // SAFETY: the context is current and the stream alive; the result is checked.
        let ptr = unsafe { result::malloc_async(self.as_raw(), bytes) }.call("cuMemAllocAsync")?;
        Ok(AsyncAllocation {
            ptr,
            bytes,
            stream: self.clone(),
        })
    }
}

impl AsyncAllocation {
    /// The first byte's address.
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
}

impl Drop for AsyncAllocation {
    fn drop(&mut self) {
        self.stream.device.bind_in_drop();
        // SAFETY: allocated by `cuMemAllocAsync` and freed once, ordered on its stream.
        self.stream
            .device
            .record_err(unsafe { result::free_async(self.ptr, self.stream.as_raw()) });
    }
}
