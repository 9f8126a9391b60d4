//! Driver initialisation, devices and their properties.

use std::sync::{Arc, OnceLock};

use cudarc::driver::CudaContext;
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};

use crate::error::{CudaCall, Error, Result, check};

/// Why the driver could not be initialised (kept so every later call reports the same error).
#[derive(Clone, Debug)]
enum InitFailure {
    NoDriver,
    NoDevice(String),
    Other(u32, String),
}

/// Loads `libcuda` and calls `cuInit` once per process.
///
/// cudarc panics when a driver function is called without the library present, so the library's
/// presence is checked first ([`cudarc::driver::sys::is_culib_present`]); every entry point of this
/// crate that touches the driver goes through here.
pub(crate) fn init_driver() -> Result<()> {
    static INIT: OnceLock<std::result::Result<(), InitFailure>> = OnceLock::new();
    let outcome = INIT.get_or_init(|| {
        // SAFETY: only tries to dlopen the driver library by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(InitFailure::NoDriver);
        }
        // SAFETY: the library is present, so the symbol lookup inside cudarc cannot panic.
        let code = unsafe { sys::cuInit(0) };
        match code {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(InitFailure::NoDevice(
                "cuInit reports CUDA_ERROR_NO_DEVICE".into(),
            )),
            other => Err(InitFailure::Other(other as u32, format!("{other:?}"))),
        }
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(InitFailure::NoDriver) => Err(Error::NoDriver),
        Err(InitFailure::NoDevice(reason)) => Err(Error::NoDevice {
            reason: reason.clone(),
        }),
        Err(InitFailure::Other(code, name)) => Err(Error::Cuda {
            call: "cuInit",
            code: *code,
            name: name.clone(),
        }),
    }
}

/// True when the NVIDIA driver library can be loaded. Never panics.
pub fn driver_available() -> bool {
    !matches!(init_driver(), Err(Error::NoDriver))
}

/// The CUDA version the installed driver supports, as `(major, minor)`, e.g. `(13, 0)`.
///
/// Wraps [`cuDriverGetVersion`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VERSION.html).
///
/// # Errors
/// [`Error::NoDriver`] without the driver library.
pub fn driver_version() -> Result<(i32, i32)> {
    init_driver()?;
    let mut v = 0;
    // SAFETY: the driver is initialised; `v` is a valid out-pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Number of CUDA devices. Zero when the driver is present but sees no device.
///
/// # Errors
/// [`Error::NoDriver`] without the driver library; [`Error::Cuda`] if the driver fails.
pub fn device_count() -> Result<usize> {
    match init_driver() {
        Ok(()) => {}
        Err(Error::NoDevice { .. }) => return Ok(0),
        Err(e) => return Err(e),
    }
    let n = cudarc::driver::result::device::get_count().call("cuDeviceGetCount")?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// A compute capability, e.g. 9.0 for Hopper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major version (9 on Hopper).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// The SM number, `10 * major + minor` (90 on Hopper).
    pub fn sm(&self) -> u32 {
        self.major * 10 + self.minor
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Properties of a device, read from the driver with `cuDeviceGetAttribute` when the device is
/// opened. Units are in the field names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Ordinal of the device (as the driver numbers them, after `CUDA_VISIBLE_DEVICES`).
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability.
    pub compute_capability: ComputeCapability,
    /// Streaming multiprocessors.
    pub multiprocessor_count: u32,
    /// Total device memory in bytes.
    pub total_memory_bytes: usize,
    /// L2 cache size in bytes.
    pub l2_cache_bytes: u32,
    /// Shared memory a block may use without opting in, in bytes (48 KiB on every current GPU).
    pub shared_memory_per_block_bytes: u32,
    /// Shared memory a block may use after opting in through
    /// [`Function::set_max_dynamic_shared_memory`](crate::Function::set_max_dynamic_shared_memory), in bytes.
    pub shared_memory_per_block_optin_bytes: u32,
    /// Shared memory per multiprocessor, in bytes.
    pub shared_memory_per_multiprocessor_bytes: u32,
    /// 32-bit registers per multiprocessor.
    pub registers_per_multiprocessor: u32,
    /// Threads per block, at most.
    pub max_threads_per_block: u32,
    /// Resident threads per multiprocessor, at most.
    pub max_threads_per_multiprocessor: u32,
    /// Block dimensions (x, y, z), at most.
    pub max_block_dim: [u32; 3],
    /// Grid dimensions (x, y, z), at most.
    pub max_grid_dim: [u32; 3],
    /// Threads per warp.
    pub warp_size: u32,
    /// Peak SM clock in kHz.
    pub clock_rate_khz: u32,
    /// Peak memory clock in kHz.
    pub memory_clock_rate_khz: u32,
    /// Memory bus width in bits.
    pub memory_bus_width_bits: u32,
    /// Whether the device can launch thread-block clusters (sm_90 and later).
    pub cluster_launch: bool,
}

impl DeviceProperties {
    /// Theoretical peak DRAM bandwidth in bytes/s: two transfers per memory clock (DDR/HBM) times
    /// the bus width. Measured copy bandwidth is lower (see the benchmarks).
    pub fn peak_memory_bandwidth_bytes_per_s(&self) -> f64 {
        2.0 * f64::from(self.memory_clock_rate_khz) * 1e3 * f64::from(self.memory_bus_width_bits)
            / 8.0
    }
}

/// Free and total device memory in bytes, as the driver reports them (`cuMemGetInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes free on the device (all processes counted).
    pub free: usize,
    /// Bytes the device has.
    pub total: usize,
}

/// The range of stream priorities a device accepts.
///
/// CUDA counts priorities downwards: a *lower* number is a *higher* priority. `lowest` is the
/// default priority of a stream (0 on current GPUs) and `highest` the most urgent (e.g. -5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPriorityRange {
    /// Numerically largest value: the least urgent priority.
    pub lowest: i32,
    /// Numerically smallest value: the most urgent priority.
    pub highest: i32,
}

impl StreamPriorityRange {
    /// Whether `priority` is inside the range.
    pub fn contains(&self, priority: i32) -> bool {
        (self.highest..=self.lowest).contains(&priority)
    }
}

pub(crate) struct DeviceInner {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) props: DeviceProperties,
}

/// An open CUDA device: its primary context and its properties.
///
/// Cheap to clone (reference counted); every stream, module and allocation keeps its device alive.
/// Thread-safe: every call binds the device's primary context to the calling thread first.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Device({}: {}, sm_{})",
            self.inner.props.ordinal,
            self.inner.props.name,
            self.inner.props.compute_capability.sm()
        )
    }
}

/// Two handles are the same device when they share the CUDA context: opening an ordinal twice
/// retains the same primary context, so objects of one handle work with the other.
impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner.ctx, &other.inner.ctx)
            || self.inner.ctx.cu_ctx() == other.inner.ctx.cu_ctx()
    }
}

impl Eq for Device {}

impl Device {
    /// Opens device `ordinal`: retains its primary context and reads its properties.
    ///
    /// Wraps `cuInit`, `cuDevicePrimaryCtxRetain` and `cuDeviceGetAttribute`.
    ///
    /// # Errors
    /// [`Error::NoDriver`], [`Error::NoDevice`], [`Error::InvalidDevice`] or [`Error::Cuda`].
    pub fn new(ordinal: usize) -> Result<Self> {
        let count = device_count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                reason: "the driver reports 0 devices".into(),
            });
        }
        if ordinal >= count {
            return Err(Error::InvalidDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")?;
        // SAFETY: gpukit never uses cudarc's `CudaSlice`, whose cross-stream event tracking is the
        // only thing this switches off; our memory layer orders streams itself.
        unsafe { ctx.disable_event_tracking() };
        let props = read_properties(&ctx, ordinal)?;
        Ok(Device {
            inner: Arc::new(DeviceInner { ctx, props }),
        })
    }

    /// The device's properties (read once, when the device was opened).
    pub fn properties(&self) -> &DeviceProperties {
        &self.inner.props
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.props.ordinal
    }

    /// Free and total memory now (`cuMemGetInfo`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        self.bind()?;
        let (free, total) = cudarc::driver::result::mem_get_info().call("cuMemGetInfo")?;
        Ok(MemoryInfo { free, total })
    }

    /// The stream priorities this device accepts (`cuCtxGetStreamPriorityRange`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn stream_priority_range(&self) -> Result<StreamPriorityRange> {
        self.bind()?;
        let (lowest, highest) = cudarc::driver::result::stream::get_priority_range()
            .call("cuCtxGetStreamPriorityRange")?;
        Ok(StreamPriorityRange { lowest, highest })
    }

    /// Blocks until all work on the device has finished (`cuCtxSynchronize`).
    ///
    /// # Errors
    /// Any asynchronous error a kernel raised, as [`Error::Cuda`].
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.inner.ctx.synchronize().call("cuCtxSynchronize")
    }

    /// Reports, once, an error that a destructor (`Drop` of a stream, event, module, graph or
    /// allocation) met and could not return. Destructors never panic; they record here instead.
    ///
    /// # Errors
    /// The recorded error, as [`Error::Cuda`].
    pub fn take_deferred_error(&self) -> Result<()> {
        self.inner.ctx.check_err().call("deferred (from a Drop)")
    }

    /// Makes this device's primary context current on the calling thread — for libraries that
    /// use the current context (cuBLASLt). gpukit's own calls do this themselves.
    ///
    /// # Errors
    /// [`Error::Cuda`] if `cuCtxSetCurrent` fails, or an error a destructor recorded earlier.
    pub fn make_current(&self) -> Result<()> {
        self.bind()
    }

    /// Makes this device's primary context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.inner.ctx.bind_to_thread().call("cuCtxSetCurrent")
    }

    /// Binds the context from a destructor: a failure (or an error recorded earlier, which
    /// binding would otherwise consume) is recorded, never lost and never a panic.
    pub(crate) fn bind_in_drop(&self) {
        let r = self.inner.ctx.bind_to_thread();
        self.inner.ctx.record_err(r);
    }

    /// Records an error met in a destructor (see [`Device::take_deferred_error`]).
    pub(crate) fn record_err(&self, r: std::result::Result<(), cudarc::driver::DriverError>) {
        self.inner.ctx.record_err(r);
    }
}

fn read_properties(ctx: &CudaContext, ordinal: usize) -> Result<DeviceProperties> {
    let get = |attr: Attr| -> Result<u32> {
        let v = ctx.attribute(attr).call("cuDeviceGetAttribute")?;
        Ok(u32::try_from(v).unwrap_or(0))
    };
    Ok(DeviceProperties {
        ordinal,
        name: ctx.name().call("cuDeviceGetName")?,
        compute_capability: ComputeCapability {
            major: get(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            minor: get(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        },
        multiprocessor_count: get(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_memory_bytes: ctx.total_mem().call("cuDeviceTotalMem")?,
        l2_cache_bytes: get(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        shared_memory_per_block_bytes: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_memory_per_block_optin_bytes: get(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        shared_memory_per_multiprocessor_bytes: get(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        )?,
        registers_per_multiprocessor: get(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
        )?,
        max_threads_per_block: get(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_threads_per_multiprocessor: get(
            Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
        )?,
        max_block_dim: [
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dim: [
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            get(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        warp_size: get(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        clock_rate_khz: get(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_rate_khz: get(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width_bits: get(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        cluster_launch: get(Attr::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
    })
}
