//! Modules (cubin or PTX), kernel functions, and checked launches.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cudarc::driver::sys::{self, CUfunction_attribute as FnAttr};
use cudarc::driver::{CudaFunction, CudaModule};

use crate::device::{Device, driver_version};
use crate::error::{CudaCall, Error, Result, check};
use crate::memory::DeviceCopy;
use crate::stream::Stream;

/// Compiled device code to load: a cubin (or fatbin) for this device's architecture, or PTX text,
/// which the driver JIT-compiles for the device.
#[derive(Clone, Copy, Debug)]
pub enum ModuleImage<'a> {
    /// An ELF cubin or a fatbin, as NVRTC or `nvcc -cubin` produce it.
    Cubin(&'a [u8]),
    /// PTX assembly text.
    Ptx(&'a str),
}

/// A module loaded into a device's context (`CUmodule`). Unloaded when the module and every
/// [`Function`] taken from it are dropped.
#[derive(Clone)]
pub struct Module {
    inner: Arc<CudaModule>,
    device: Device,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module(on {:?})", self.device)
    }
}

const ELF_MAGIC: &[u8] = b"\x7fELF";
const FATBIN_MAGIC: &[u8] = &0xBA55_ED50u32.to_le_bytes();

impl Device {
    /// Loads a module (`cuModuleLoadData`). PTX is JIT-compiled by the driver for this device.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a buffer that is not a cubin/fatbin (checked by its magic
    /// number, so the driver never parses garbage) or PTX with a NUL byte; [`Error::Cuda`] if the
    /// driver rejects the image (e.g. `CUDA_ERROR_NO_BINARY_FOR_GPU` for a cubin built for another
    /// architecture, `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` for PTX newer than the driver).
    pub fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        let ptx = match image {
            ModuleImage::Cubin(bytes) => {
                if !(bytes.starts_with(ELF_MAGIC) || bytes.starts_with(FATBIN_MAGIC)) {
                    return Err(Error::InvalidArgument(
                        "module image is neither an ELF cubin nor a fatbin".into(),
                    ));
                }
                cudarc::nvrtc::Ptx::from_binary(bytes.to_vec())
            }
            ModuleImage::Ptx(text) => {
                if text.contains('\0') {
                    return Err(Error::InvalidArgument(
                        "PTX text contains a NUL byte".into(),
                    ));
                }
                cudarc::nvrtc::Ptx::from_src(text)
            }
        };
        self.bind()?;
        let inner = self.inner.ctx.load_module(ptx).call("cuModuleLoadData")?;
        Ok(Module {
            inner,
            device: self.clone(),
        })
    }
}

impl Module {
    /// Looks up the kernel `name` (its `extern "C"` name) and reads its attributes.
    ///
    /// # Errors
    /// [`Error::FunctionNotFound`] if the module has no such entry point; [`Error::Cuda`].
    pub fn function(&self, name: &str) -> Result<Function> {
        if name.contains('\0') {
            return Err(Error::InvalidArgument(format!(
                "kernel name {name:?} contains NUL"
            )));
        }
        self.device.bind()?;
        let func = match self.inner.load_function(name) {
            Ok(f) => f,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(Error::FunctionNotFound { name: name.into() });
            }
            Err(e) => return Err(e).call("cuModuleGetFunction"),
        };
        let attr = |a: FnAttr| -> Result<u32> {
            let v = func.get_attribute(a).call("cuFuncGetAttribute")?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let max_threads_per_block = attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        let static_shared_mem_bytes = attr(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        let max_dynamic = attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        let param_sizes = param_sizes(&func)?;
        Ok(Function {
            inner: Arc::new(FunctionInner {
                func,
                name: name.into(),
                device: self.device.clone(),
                max_threads_per_block,
                static_shared_mem_bytes,
                max_dynamic_shared_mem_bytes: AtomicU32::new(max_dynamic),
                param_sizes,
            }),
        })
    }
}

/// The kernel's parameter sizes, in order (`cuFuncGetParamInfo`, CUDA 12.4+ drivers). `None` on
/// older drivers, where argument lists cannot be checked.
fn param_sizes(func: &CudaFunction) -> Result<Option<Vec<usize>>> {
    if driver_version()? < (12, 4) {
        return Ok(None);
    }
    let mut sizes = Vec::new();
    loop {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: the function handle is alive (held by `func`); out-pointers are valid. The
        // driver is new enough to export the symbol (checked above), so cudarc cannot panic.
        let code = unsafe {
            sys::cuFuncGetParamInfo(func.cu_function(), sizes.len(), &mut offset, &mut size)
        };
        match code {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(Some(sizes)),
            other => return Err(crate::error::cuda_error("cuFuncGetParamInfo", other)),
        }
    }
}

struct FunctionInner {
    func: CudaFunction,
    name: String,
    device: Device,
    max_threads_per_block: u32,
    static_shared_mem_bytes: u32,
    max_dynamic_shared_mem_bytes: AtomicU32,
    param_sizes: Option<Vec<usize>>,
}

/// A kernel entry point in a loaded [`Module`] (`CUfunction`). Cheap to clone; thread-safe.
#[derive(Clone)]
pub struct Function {
    inner: Arc<FunctionInner>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Function({})", self.inner.name)
    }
}

/// Grid, block or cluster dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl Dim3 {
    fn volume(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }

    fn as_array(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// How to launch a kernel: grid and block dimensions, dynamic shared memory, and optionally a
/// thread-block cluster shape and programmatic dependent launch (both sm_90+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Blocks per cluster (`None`: no clusters).
    pub cluster: Option<Dim3>,
    /// Programmatic dependent launch (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`):
    /// the kernel may begin while the previous kernel on the stream is still running, once
    /// every block of that kernel has executed `griddepcontrol.launch_dependents` or exited.
    /// The kernel must execute `griddepcontrol.wait` before it touches anything earlier work
    /// writes or reads. Ignored below compute capability 9.0.
    pub programmatic: bool,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` threads, no dynamic shared memory, no clusters.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            cluster: None,
            programmatic: false,
        }
    }

    /// One thread per element over `n` elements in blocks of `block` threads (1-D).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `block` is 0 or the grid would exceed 2³¹−1 blocks.
    pub fn for_elements(n: usize, block: u32) -> Result<Self> {
        if block == 0 {
            return Err(Error::InvalidArgument("block size 0".into()));
        }
        let blocks = n.div_ceil(block as usize).max(1);
        let grid = u32::try_from(blocks)
            .ok()
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{n} elements need {blocks} blocks, too many"))
            })?;
        Ok(LaunchConfig::new(grid, block))
    }

    /// Sets the dynamic shared memory per block.
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Launches as thread-block clusters of `dims` blocks (sm_90+; at most 8 blocks per cluster,
    /// the portable limit; each grid dimension a multiple of the cluster's).
    pub fn cluster(mut self, dims: impl Into<Dim3>) -> Self {
        self.cluster = Some(dims.into());
        self
    }

    /// Launches with programmatic dependent launch (see [`LaunchConfig::programmatic`]).
    pub fn programmatic(mut self, on: bool) -> Self {
        self.programmatic = on;
        self
    }
}

/// The argument list of one launch: values copied into an aligned buffer, in kernel parameter
/// order. Pass device buffers as [`DevicePtr`](crate::DevicePtr).
#[derive(Default, Clone)]
#[must_use]
pub struct KernelArgs {
    /// 16-byte aligned storage; each argument starts at a multiple of its alignment.
    buf: Vec<u128>,
    /// `(offset, size)` of each argument in `buf`, in bytes.
    slots: Vec<(usize, usize)>,
    used: usize,
}

impl std::fmt::Debug for KernelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: Vec<usize> = self.slots.iter().map(|s| s.1).collect();
        write!(f, "KernelArgs(sizes {sizes:?})")
    }
}

impl KernelArgs {
    /// An empty argument list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one argument (by value).
    pub fn arg<T: DeviceCopy>(mut self, value: T) -> Self {
        self.push(value);
        self
    }

    /// Appends one argument (by value), for loops.
    pub fn push<T: DeviceCopy>(&mut self, value: T) {
        const {
            assert!(
                std::mem::align_of::<T>() <= 16,
                "kernel arguments align to 16 at most"
            )
        };
        let size = std::mem::size_of::<T>();
        let offset = self.used.next_multiple_of(std::mem::align_of::<T>());
        let end = offset + size;
        let words = end.div_ceil(16);
        if self.buf.len() < words {
            self.buf.resize(words, 0);
        }
        // SAFETY: `offset..end` lies inside `buf` (resized above); `offset` is a multiple of
        // `align_of::<T>()` and `buf` is 16-byte aligned, so the write is aligned; `T` is plain data.
        unsafe {
            let base = self.buf.as_mut_ptr().cast::<u8>();
            std::ptr::write(base.add(offset).cast::<T>(), value);
        }
        self.slots.push((offset, size));
        self.used = end;
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Pointers to each argument, as `cuLaunchKernel` takes them. Valid while `self` is borrowed
    /// and unchanged.
    fn pointers(&self) -> Vec<*mut c_void> {
        let base = self.buf.as_ptr().cast::<u8>();
        self.slots
            .iter()
            // SAFETY: every slot lies inside `buf` (see `push`).
            .map(|&(offset, _)| unsafe { base.add(offset) }.cast_mut().cast::<c_void>())
            .collect()
    }
}

impl Function {
    /// The kernel's entry-point name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The device whose context the kernel is loaded in.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Most threads a block of this kernel may have (limited by its register use).
    pub fn max_threads_per_block(&self) -> u32 {
        self.inner.max_threads_per_block
    }

    /// Statically declared shared memory per block, in bytes.
    pub fn static_shared_mem_bytes(&self) -> u32 {
        self.inner.static_shared_mem_bytes
    }

    /// Dynamic shared memory a launch may ask for now, in bytes (48 KiB minus the static part,
    /// until raised with [`Function::set_max_dynamic_shared_memory`]).
    pub fn max_dynamic_shared_mem_bytes(&self) -> u32 {
        self.inner
            .max_dynamic_shared_mem_bytes
            .load(Ordering::Relaxed)
    }

    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn num_registers(&self) -> Result<u32> {
        let v = self.inner.func.num_regs().call("cuFuncGetAttribute")?;
        Ok(u32::try_from(v).unwrap_or(0))
    }

    /// Blocks of `block_threads` threads with `dynamic_smem_bytes` of dynamic shared memory
    /// that fit on one multiprocessor at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`):
    /// how a persistent grid sizes itself to one wave.
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn max_active_blocks_per_sm(
        &self,
        block_threads: u32,
        dynamic_smem_bytes: u32,
    ) -> Result<u32> {
        self.inner.device.bind()?;
        self.inner
            .func
            .occupancy_max_active_blocks_per_multiprocessor(
                block_threads,
                dynamic_smem_bytes as usize,
                None,
            )
            .call("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    }

    /// Parameter sizes in bytes, in order, when the driver can report them (CUDA 12.4+).
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.inner.param_sizes.as_deref()
    }

    /// Allows launches of this kernel to use up to `bytes` of dynamic shared memory per block —
    /// above the default 48 KiB, up to the device's opt-in limit minus the kernel's static shared
    /// memory (`cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `bytes` is above what the device allows; [`Error::Cuda`].
    pub fn set_max_dynamic_shared_memory(&self, bytes: u32) -> Result<()> {
        let props = self.inner.device.properties();
        let limit = props
            .shared_memory_per_block_optin_bytes
            .saturating_sub(self.inner.static_shared_mem_bytes);
        if bytes > limit {
            return Err(Error::InvalidArgument(format!(
                "`{}` can use at most {limit} bytes of dynamic shared memory on {} \
                 ({} opt-in minus {} static); {bytes} asked",
                self.inner.name,
                props.name,
                props.shared_memory_per_block_optin_bytes,
                self.inner.static_shared_mem_bytes
            )));
        }
        self.inner.device.bind()?;
        let value = i32::try_from(bytes).unwrap_or(i32::MAX);
        // SAFETY: the function handle is alive; the attribute takes an int in bytes.
        check("cuFuncSetAttribute", unsafe {
            sys::cuFuncSetAttribute(
                self.inner.func.cu_function(),
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                value,
            )
        })?;
        self.inner
            .max_dynamic_shared_mem_bytes
            .store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Checks `config` and `args` against this kernel and the device, without launching.
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] naming the offending value and the limit; [`Error::Unsupported`]
    /// for clusters on a device without them; [`Error::InvalidArgument`] for a stream of another
    /// device.
    pub fn check_launch(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: &KernelArgs,
    ) -> Result<()> {
        stream.same_device(&self.inner.device, "launch a kernel")?;
        let props = self.inner.device.properties();
        let bad = |reason: String| {
            Err(Error::InvalidLaunch {
                kernel: self.inner.name.clone(),
                reason,
            })
        };
        let (grid, block) = (config.grid.as_array(), config.block.as_array());
        for (axis, i) in ["x", "y", "z"].iter().zip(0..3) {
            if grid[i] == 0 || block[i] == 0 {
                return bad(format!(
                    "grid {:?} and block {:?} must be at least 1 in every dimension",
                    config.grid, config.block
                ));
            }
            if block[i] > props.max_block_dim[i] {
                return bad(format!(
                    "block.{axis} = {} exceeds the device limit {}",
                    block[i], props.max_block_dim[i]
                ));
            }
            if grid[i] > props.max_grid_dim[i] {
                return bad(format!(
                    "grid.{axis} = {} exceeds the device limit {}",
                    grid[i], props.max_grid_dim[i]
                ));
            }
        }
        let threads = config.block.volume();
        if threads > u64::from(self.inner.max_threads_per_block) {
            return bad(format!(
                "{threads} threads per block; this kernel allows at most {}",
                self.inner.max_threads_per_block
            ));
        }
        let smem_limit = self.max_dynamic_shared_mem_bytes();
        if config.shared_mem_bytes > smem_limit {
            return bad(format!(
                "{} bytes of dynamic shared memory asked, {smem_limit} allowed \
                 (raise it with Function::set_max_dynamic_shared_memory, up to {} on this device)",
                config.shared_mem_bytes, props.shared_memory_per_block_optin_bytes
            ));
        }
        if let Some(sizes) = &self.inner.param_sizes {
            let given: Vec<usize> = args.slots.iter().map(|s| s.1).collect();
            if &given != sizes {
                return bad(format!(
                    "the kernel takes {} parameters of sizes {sizes:?} bytes; \
                     {} arguments of sizes {given:?} given",
                    sizes.len(),
                    given.len()
                ));
            }
        }
        if let Some(cluster) = config.cluster {
            if !props.cluster_launch {
                return Err(Error::Unsupported {
                    what: "thread-block cluster launch".into(),
                    needs: "compute capability 9.0 or newer".into(),
                    have: format!("{} (sm_{})", props.name, props.compute_capability.sm()),
                });
            }
            let c = cluster.as_array();
            if c.contains(&0) || cluster.volume() > 8 {
                return bad(format!(
                    "cluster {cluster:?} must have 1 to 8 blocks (the portable limit)"
                ));
            }
            if (0..3).any(|i| grid[i] % c[i] != 0) {
                return bad(format!(
                    "grid {:?} is not a multiple of the cluster {cluster:?}",
                    config.grid
                ));
            }
        }
        Ok(())
    }

    /// Launches the kernel on `stream` after checking the configuration ([`Function::check_launch`]).
    /// With `config.cluster` set or `config.programmatic` on an sm_90+ device, launches through
    /// `cuLaunchKernelEx` with those attributes; otherwise through `cuLaunchKernel`.
    /// Asynchronous: errors raised by the kernel itself surface at the next synchronising call.
    ///
    /// # Safety
    /// The argument types must match the kernel's parameters (the driver can check only their
    /// sizes), and every device pointer passed must stay valid, and not be written concurrently
    /// by other work, until the kernel completes. The kernel must not access memory outside what
    /// it is given. With `config.programmatic`, the kernel must wait (`griddepcontrol.wait`)
    /// before touching memory that earlier work on the stream reads or writes.
    ///
    /// # Errors
    /// As [`Function::check_launch`]; [`Error::Cuda`] if the driver rejects the launch.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        config: &LaunchConfig,
        args: &KernelArgs,
    ) -> Result<()> {
        self.check_launch(stream, config, args)?;
        self.inner.device.bind()?;
        let mut params = args.pointers();
        let f = self.inner.func.cu_function();
        let (g, b) = (config.grid, config.block);
        let programmatic =
            config.programmatic && self.inner.device.properties().compute_capability.major >= 9;
        // At most two attributes, on the stack (no allocation per launch).
        // SAFETY: an all-zero attribute is a valid (ignored) attribute value; each one used
        // gets its id and the union member that id selects.
        let mut attrs: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
        let mut n_attrs = 0;
        if let Some(c) = config.cluster {
            let attr = &mut attrs[n_attrs];
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attr.value.clusterDim.x = c.x;
            attr.value.clusterDim.y = c.y;
            attr.value.clusterDim.z = c.z;
            n_attrs += 1;
        }
        if programmatic {
            let attr = &mut attrs[n_attrs];
            attr.id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            n_attrs += 1;
        }
        let launched = if n_attrs == 0 {
            // SAFETY: configuration checked against the device and kernel; argument sizes
            // checked where the driver reports them; the caller guarantees types and
            // pointer validity (this function's contract).
            unsafe {
                cudarc::driver::result::launch_kernel(
                    f,
                    (g.x, g.y, g.z),
                    (b.x, b.y, b.z),
                    config.shared_mem_bytes,
                    stream.as_raw(),
                    &mut params,
                )
            }
            .call("cuLaunchKernel")
        } else {
            // cudarc's safe launch has no launch attributes, so this goes to `sys`.
            let launch = sys::CUlaunchConfig {
                gridDimX: g.x,
                gridDimY: g.y,
                gridDimZ: g.z,
                blockDimX: b.x,
                blockDimY: b.y,
                blockDimZ: b.z,
                sharedMemBytes: config.shared_mem_bytes,
                hStream: stream.as_raw(),
                attrs: attrs.as_mut_ptr(),
                numAttrs: n_attrs as u32,
            };
            // SAFETY: as above; `launch` and `attrs` outlive the call, which copies them.
            check("cuLaunchKernelEx", unsafe {
                sys::cuLaunchKernelEx(&launch, f, params.as_mut_ptr(), std::ptr::null_mut())
            })
        };
        launched?;
        stream.launched()
    }
}
