//! Where tensors live and ops run.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpukit_driver::{DeviceProperties, DevicePtr, Graph, KernelArgs, LaunchConfig, Stream};
use gpukit_kernels::{GemmProvider, Kernel, KernelRegistry};
use gpukit_mem::{DeviceBuffer, DevicePool};
use gpukit_sched::Lane;

use crate::{Error, Result};

/// A tensor's device: the CPU, or a CUDA lane.
#[derive(Clone, Debug)]
pub enum Device {
    /// Host memory; ops run on the CPU (the reference implementation).
    Cpu,
    /// Device memory from the lane's tenant pool; ops run on the lane's stream.
    Cuda(CudaDevice),
}

impl Device {
    /// A CUDA device on `lane`.
    ///
    /// # Errors
    /// As [`CudaDevice::new`].
    pub fn cuda(lane: &Lane) -> Result<Device> {
        Ok(Device::Cuda(CudaDevice::new(lane)?))
    }

    /// Whether two devices are the same (same lane for CUDA).
    pub fn same(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Cuda(a), Device::Cuda(b)) => Arc::ptr_eq(&a.inner, &b.inner),
            _ => false,
        }
    }

    /// A short description, for errors.
    pub fn describe(&self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Cuda(c) => format!("cuda:{}", c.inner.lane.stream().device().ordinal()),
        }
    }
}

pub(crate) struct CudaInner {
    pub(crate) lane: Lane,
    pub(crate) kernels: Arc<KernelRegistry>,
    gemm: Mutex<Option<Arc<GemmProvider>>>,
    /// Device-side error flag: kernels that find a bad index set bit 0 (see `synchronize`).
    pub(crate) err: DeviceBuffer,
    /// Set by every launch that is handed the flag since the last `synchronize`, which reads the
    /// flag back only then: the 4-byte copy would otherwise cost every synchronize.
    err_armed: AtomicBool,
    /// Set once a captured graph holds such a launch: its replays may set the flag at any time,
    /// so from then on every `synchronize` reads it.
    err_in_graph: AtomicBool,
    /// The ops' lane workspaces ([`LaneWorkspace`]), by type.
    workspaces: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// Launch the kernels that support it with programmatic dependent launch (sm_90+, unless
    /// `GPUKIT_PDL=0`).
    pdl: bool,
    /// Blocks per multiprocessor by (kernel, threads, dynamic shared memory): the occupancy
    /// query is a driver call, made once per configuration.
    occupancy: Mutex<HashMap<(Kernel, u32, u32), u32>>,
}

/// Device memory an op keeps on a lane between its launches (for example decode attention's
/// split counters, which every launch leaves zero for the next): created by the op at its
/// first call on the lane ([`CudaDevice::workspace`]) and kept for the lane's life. Launches on
/// one lane run in order, so they never use it at the same time.
pub(crate) trait LaneWorkspace: Any + Send + Sync + Sized {
    /// The op, for errors.
    const OP: &'static str;

    /// Allocates and initialises the workspace on `device`'s lane.
    ///
    /// # Errors
    /// Memory errors.
    fn create(device: &CudaDevice) -> Result<Self>;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A weak reference to a [`CudaDevice`]'s state (see [`CudaDevice::watch`]).
#[derive(Clone, Debug)]
pub struct HandleWatch(std::sync::Weak<CudaInner>);

impl HandleWatch {
    /// Handles alive now (0 once every handle, tensor and workspace holder is gone).
    pub fn live(&self) -> usize {
        self.0.strong_count()
    }
}

/// Ops on one CUDA lane: its stream, its tenant's memory pool, the device's kernel registry, a
/// cuBLASLt provider (created on first matmul) and a device-side error flag.
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) inner: Arc<CudaInner>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({:?})", self.inner.lane.stream())
    }
}

impl CudaDevice {
    /// Ops on `lane`.
    ///
    /// # Errors
    /// An unsupported GPU (before sm_80); memory errors for the error flag.
    pub fn new(lane: &Lane) -> Result<Self> {
        let kernels = KernelRegistry::for_device(lane.stream().device())?;
        let mut err = lane.alloc(4)?;
        err.fill_bytes(0)?;
        let pdl = lane.stream().device().properties().compute_capability.major >= 9
            && std::env::var("GPUKIT_PDL").map_or(true, |v| v != "0");
        Ok(CudaDevice {
            inner: Arc::new(CudaInner {
                lane: lane.clone(),
                kernels,
                gemm: Mutex::new(None),
                err,
                err_armed: AtomicBool::new(false),
                err_in_graph: AtomicBool::new(false),
                workspaces: Mutex::new(HashMap::new()),
                pdl,
                occupancy: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The lane.
    pub fn lane(&self) -> &Lane {
        &self.inner.lane
    }

    /// The lane's stream.
    pub fn stream(&self) -> &Stream {
        self.inner.lane.stream()
    }

    /// The pool tensors are allocated from (the lane's tenant's).
    pub fn pool(&self) -> &DevicePool {
        self.inner.lane.tenant().pool()
    }

    /// The kernel registry.
    pub fn kernels(&self) -> &KernelRegistry {
        &self.inner.kernels
    }

    pub(crate) fn props(&self) -> &DeviceProperties {
        self.stream().device().properties()
    }

    /// The multiprocessors this lane's kernels run on: its SM partition's, else the device's.
    /// Grids meant to fill the device are sized by it, never by the device's count (a
    /// persistent grid for 132 SMs on a 72-SM partition would run in two waves).
    pub(crate) fn sm_count(&self) -> u32 {
        self.stream().sm_count()
    }

    /// Blocks of `kernel` (of `threads` threads and `smem` bytes of dynamic shared memory)
    /// the lane's multiprocessors hold at once: one wave, for persistent grids. The driver's occupancy
    /// query runs once per configuration (an eager decode step asks for each of its GEMVs).
    /// Above the default 48 KiB of dynamic shared memory the driver answers 0 until the
    /// kernel's limit is raised (at its first launch), taken as 1 block per SM and kept: the
    /// persistent GEMVs ask for at most 32 KiB.
    ///
    /// # Errors
    /// Kernel loading and driver errors.
    pub(crate) fn resident_blocks(
        &self,
        kernel: impl Into<Kernel>,
        threads: u32,
        smem: u32,
    ) -> Result<usize> {
        let kernel = kernel.into();
        let mut cache = lock(&self.inner.occupancy);
        let per_sm = match cache.get(&(kernel, threads, smem)) {
            Some(&n) => n,
            None => {
                let f = self.inner.kernels.function(kernel)?;
                let n = f.max_active_blocks_per_sm(threads, smem)?.max(1);
                cache.insert((kernel, threads, smem), n);
                n
            }
        };
        Ok(self.sm_count() as usize * per_sm as usize)
    }

    pub(crate) fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        Ok(self.inner.lane.alloc(bytes.max(1))?)
    }

    /// Handles to this lane's ops state alive now: this one, its clones, and one per tensor
    /// and per lane workspace holder using it (for refusing to close a device still in use).
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// A handle count that does not keep this lane's ops state alive: what a registry of open
    /// devices keeps of the lanes it derived (tenants, streams), to tell whether they are still
    /// in use.
    pub fn watch(&self) -> HandleWatch {
        HandleWatch(Arc::downgrade(&self.inner))
    }

    /// cuBLASLt plans this device's GEMM provider has built so far: one per distinct product
    /// (shape, dtype, layout, epilogue, precision, alignment), chosen once and reused, never
    /// re-picked (0 before the first product).
    pub fn gemm_plans(&self) -> usize {
        lock(&self.inner.gemm).as_ref().map_or(0, |p| p.plans())
    }

    pub(crate) fn gemm(&self) -> Result<Arc<GemmProvider>> {
        let mut g = lock(&self.inner.gemm);
        if let Some(p) = &*g {
            return Ok(p.clone());
        }
        let p = Arc::new(GemmProvider::new(self.pool(), self.stream())?);
        *g = Some(p.clone());
        Ok(p)
    }

    /// Launches `kernel` on the lane. A launch asking for more dynamic shared memory than the
    /// default 48 KiB raises the kernel's limit first (up to the device's opt-in maximum).
    /// Kernels that support it ([`Kernel::programmatic`]) launch with programmatic dependent
    /// launch on sm_90+ (so their start overlaps the previous kernel's tail), unless the
    /// environment sets `GPUKIT_PDL=0`.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters and every pointer must address live
    /// device memory of the sizes the kernel reads and writes.
    pub(crate) unsafe fn launch(
        &self,
        kernel: impl Into<Kernel>,
        cfg: &LaunchConfig,
        args: &KernelArgs,
    ) -> Result<()> {
        let kernel = kernel.into();
        let f = self.inner.kernels.function(kernel)?;
        if cfg.shared_mem_bytes > f.max_dynamic_shared_mem_bytes() {
            f.set_max_dynamic_shared_memory(cfg.shared_mem_bytes)?;
        }
        let cfg = cfg.programmatic(self.inner.pdl && kernel.programmatic());
        // SAFETY: forwarded to the caller; programmatic launches only for kernels that wait
        // for the previous grid before touching memory (Kernel::programmatic).
        unsafe { f.launch(self.stream(), &cfg, args) }?;
        Ok(())
    }

    /// The error flag's address, for a launch that may set it.
    pub(crate) fn err_ptr(&self) -> DevicePtr {
        self.inner.err_armed.store(true, Ordering::Release);
        self.inner.err.ptr()
    }

    /// The lane's workspace of type `W`, created by `W::create` on first use. First use must
    /// not fall inside a graph capture (creating it allocates and fills device memory): the
    /// eager call an op gets before it is captured creates it.
    ///
    /// # Errors
    /// [`Error::Capture`] on first use inside a capture; what `W::create` returns.
    pub(crate) fn workspace<W: LaneWorkspace>(&self) -> Result<Arc<W>> {
        let mut map = lock(&self.inner.workspaces);
        let any = match map.get(&TypeId::of::<W>()) {
            Some(w) => w.clone(),
            None => {
                if self.stream().is_capturing()? {
                    return Err(Error::Capture {
                        op: W::OP,
                        detail: "its lane workspace is created at its first call, which cannot \
                                 be captured: run the op once eagerly on this lane first"
                            .into(),
                    });
                }
                let w: Arc<dyn Any + Send + Sync> = Arc::new(W::create(self)?);
                map.insert(TypeId::of::<W>(), w.clone());
                w
            }
        };
        any.downcast::<W>().map_err(|_| Error::Capture {
            op: W::OP,
            detail: "a lane workspace of another type is stored under its type".into(),
        })
    }

    /// Waits for the lane and reports (once) an out-of-range index a kernel found since the last
    /// check.
    ///
    /// # Errors
    /// [`Error::Index`]; asynchronous errors of earlier work.
    pub fn synchronize(&self) -> Result<()> {
        let armed = self.inner.err_armed.swap(false, Ordering::AcqRel)
            || self.inner.err_in_graph.load(Ordering::Acquire);
        if !armed {
            // No launch since the last check could have set the flag.
            self.stream().synchronize()?;
            return Ok(());
        }
        let mut flag = [0u32];
        self.inner.err.copy_to_host(&mut flag)?;
        if flag[0] != 0 {
            // SAFETY: the flag buffer is 4 bytes, ordered on the lane's stream.
            unsafe { self.stream().memset_d8_async(self.inner.err.ptr(), 0, 4) }?;
            return Err(Error::Index {
                op: "index_select / embedding / gather / paged KV cache",
                detail: "an index (a token id, a gather index, a KV-cache slot or block id) was \
                         outside its range; what it selected was filled with zeros or not written"
                    .into(),
            });
        }
        Ok(())
    }

    /// Captures the ops `record` enqueues on this lane into a CUDA graph (nothing runs until the
    /// graph is launched). Use the `_into` forms on preallocated tensors inside: the graph replays
    /// with the same device addresses. Host↔device copies cannot be captured.
    ///
    /// # Errors
    /// The error `record` returned, or capture errors.
    pub fn capture<F>(&self, record: F) -> Result<Graph>
    where
        F: FnOnce() -> Result<()>,
    {
        let armed_before = self.inner.err_armed.swap(false, Ordering::AcqRel);
        let mut inner: Option<Error> = None;
        let graph = self.stream().capture(|_| {
            record().map_err(|e| {
                let msg = e.to_string();
                inner = Some(e);
                gpukit_driver::Error::InvalidArgument(msg)
            })
        });
        if self.inner.err_armed.load(Ordering::Acquire) {
            self.inner.err_in_graph.store(true, Ordering::Release);
        }
        if armed_before {
            self.inner.err_armed.store(true, Ordering::Release);
        }
        match (graph, inner) {
            (_, Some(e)) => Err(e),
            (g, None) => Ok(g?),
        }
    }
}
