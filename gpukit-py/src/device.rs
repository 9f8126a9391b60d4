//! Devices, streams and events: `gk.devices()`, `gk.device(...)`, `gk.Stream`, `gk.Event`.
//!
//! A CUDA device opens once per process (its runtime: memory pool, transfer engine) and is
//! kept in a registry; `gk.device("cuda:0")` returns a handle to its default lane. A
//! [`PyStream`] is another lane of the same tenant. Tensors belong to the lane they were made
//! on, and ops run on their inputs' lane, so `with stream:` makes the tensors created inside it
//! (`zeros`, `from_numpy`, …) belong to that stream.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use gpukit_llm::engine::ComputeDevice;
use gpukit_ops::{CudaDevice, Device, HandleWatch};
use gpukit_sched::{
    Isolation, Lane, LanePriority, QosClass, Scheduler, SchedulerOptions, TenantSpec,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors::{self, value};

/// An opened CUDA device: opened as the `gpukit` command opens one (its runtime and default
/// lane), and the lanes derived from it since (tenants, streams), watched so that closing the
/// device can tell whether any of them is still in use.
struct Opened {
    compute: ComputeDevice,
    derived: Vec<HandleWatch>,
}

impl Opened {
    /// Handles to the device's lanes alive now, but for the registry's own.
    fn users(&self) -> usize {
        let default = match self.compute.device() {
            Device::Cuda(c) => c.handle_count().saturating_sub(1),
            Device::Cpu => 0,
        };
        default + self.derived.iter().map(HandleWatch::live).sum::<usize>()
    }
}

/// Opened CUDA devices by ordinal.
type Registry = HashMap<usize, Opened>;

/// Records `lane` as derived from its device, so that closing the device counts its users.
fn derived(lane: &CudaDevice) {
    let ordinal = lane.stream().device().ordinal();
    if let Some(o) = registry().get_mut(&ordinal) {
        o.derived.retain(|w| w.live() > 0);
        o.derived.push(lane.watch());
    }
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The default lane of CUDA device `ordinal`, opening the device the first time.
fn open_cuda(ordinal: usize) -> PyResult<Device> {
    let mut reg = registry();
    if let Some(d) = reg.get(&ordinal) {
        return Ok(d.compute.device().clone());
    }
    if !gpukit_driver::driver_available() {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "cuda:{ordinal}: the NVIDIA driver (libcuda.so.1) is not installed; install it or use \
             device=\"cpu\""
        )));
    }
    if let Ok(count) = gpukit_driver::device_count()
        && ordinal >= count
    {
        return Err(value(format!(
            "cuda:{ordinal} does not exist: {count} CUDA device(s) present"
        )));
    }
    let opened = ComputeDevice::open(&format!("cuda:{ordinal}")).map_err(errors::llm)?;
    let device = opened.device().clone();
    reg.insert(
        ordinal,
        Opened {
            compute: opened,
            derived: Vec::new(),
        },
    );
    Ok(device)
}

/// The current stream if a `with stream:` block is open, else GPU 0's default stream: where
/// work goes that names no device.
pub(crate) fn default_cuda() -> PyResult<Device> {
    current().map_or_else(|| open_cuda(0), Ok)
}

/// The device named `name` (`cpu`, `cuda`, `cuda:N`); inside `with stream:` of that GPU, the
/// stream.
pub(crate) fn named(name: &str) -> PyResult<Device> {
    let dev = match parse_name(name)? {
        None => return Ok(Device::Cpu),
        Some(n) => open_cuda(n)?,
    };
    if let (Device::Cuda(a), Some(Device::Cuda(cur))) = (&dev, current())
        && a.stream().device() == cur.stream().device()
    {
        return Ok(Device::Cuda(cur));
    }
    Ok(dev)
}

/// Parses `cpu`, `cuda`, `cuda:N`.
fn parse_name(name: &str) -> PyResult<Option<usize>> {
    match name {
        "cpu" => Ok(None),
        "cuda" => Ok(Some(0)),
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(Some)
            .ok_or_else(|| {
                value(format!(
                    "device \"{other}\": expected \"cpu\", \"cuda\" or \"cuda:N\""
                ))
            }),
    }
}

/// A device: the CPU, or a lane (stream) of a CUDA GPU.
///
/// Made by `gk.device("cpu" | "cuda" | "cuda:N")`; `gk.devices()` lists them. Tensors made
/// with `device=d` live there and ops on them run there.
#[pyclass(module = "gpukit", name = "Device", frozen)]
pub struct PyDevice {
    pub(crate) device: Device,
    closed: AtomicBool,
}

impl PyDevice {
    pub(crate) fn new(device: Device) -> Self {
        PyDevice {
            device,
            closed: AtomicBool::new(false),
        }
    }

    /// The device, unless this handle was closed.
    pub(crate) fn get(&self) -> PyResult<&Device> {
        if self.closed.load(Ordering::Acquire) {
            return Err(value(format!(
                "{} was closed; open it again with gk.device(\"{}\")",
                self.device.describe(),
                self.device.describe()
            )));
        }
        Ok(&self.device)
    }

    fn cuda(&self) -> PyResult<Option<&CudaDevice>> {
        Ok(match self.get()? {
            Device::Cpu => None,
            Device::Cuda(c) => Some(c),
        })
    }
}

fn cc(c: &CudaDevice) -> (u32, u32) {
    let p = c.stream().device().properties();
    (p.compute_capability.major, p.compute_capability.minor)
}

#[pymethods]
impl PyDevice {
    /// `"cpu"` or `"cuda"`.
    #[getter]
    fn r#type(&self) -> &'static str {
        match self.device {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
        }
    }

    /// The GPU's ordinal (`None` for the CPU).
    #[getter]
    fn index(&self) -> Option<usize> {
        match &self.device {
            Device::Cpu => None,
            Device::Cuda(c) => Some(c.stream().device().ordinal()),
        }
    }

    /// The device's name (`"cpu"`, or the GPU's marketing name).
    #[getter]
    fn name(&self) -> String {
        match &self.device {
            Device::Cpu => "cpu".into(),
            Device::Cuda(c) => c.stream().device().properties().name.clone(),
        }
    }

    /// Streaming multiprocessors (`None` for the CPU).
    #[getter]
    fn sm_count(&self) -> Option<u32> {
        match &self.device {
            Device::Cpu => None,
            Device::Cuda(c) => Some(c.stream().device().properties().multiprocessor_count),
        }
    }

    /// Total device memory in bytes (`None` for the CPU).
    #[getter]
    fn total_memory(&self) -> Option<usize> {
        match &self.device {
            Device::Cpu => None,
            Device::Cuda(c) => Some(c.stream().device().properties().total_memory_bytes),
        }
    }

    /// `(major, minor)` compute capability (`None` for the CPU).
    #[getter]
    fn compute_capability(&self) -> Option<(u32, u32)> {
        match &self.device {
            Device::Cpu => None,
            Device::Cuda(c) => Some(cc(c)),
        }
    }

    /// Waits until every op queued on this device's stream has finished, and reports an
    /// out-of-range index a kernel found since the last check.
    ///
    /// Raises `IndexError` for such an index, `RuntimeError` for a device failure.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(c) = self.cuda()? {
            let c = c.clone();
            py.detach(move || c.synchronize()).map_err(errors::ops)?;
        }
        Ok(())
    }

    /// The memory pool's counters for this device's tenant, in bytes and counts:
    /// `allocated_bytes`, `reserved_bytes`, `peak_allocated_bytes`, `peak_reserved_bytes`,
    /// `live_blocks`, `segments`, `allocations`, `cache_hits`, `cache_misses`, `oom_retries`,
    /// `evictions`, `restores`, and `limit_bytes` / `in_use_bytes` for a tenant with a quota.
    /// Empty for the CPU.
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let Some(c) = self.cuda()? else {
            return Ok(d);
        };
        let pool = c.pool();
        let s = pool.stats();
        let a = &s.allocator;
        d.set_item("allocated_bytes", a.allocated_bytes)?;
        d.set_item("reserved_bytes", a.reserved_bytes)?;
        d.set_item("peak_allocated_bytes", a.peak_allocated_bytes)?;
        d.set_item("peak_reserved_bytes", a.peak_reserved_bytes)?;
        d.set_item("live_blocks", a.live_blocks)?;
        d.set_item("segments", a.segments)?;
        d.set_item("allocations", a.allocations)?;
        d.set_item("cache_hits", a.cache_hits)?;
        d.set_item("cache_misses", a.cache_misses)?;
        d.set_item("oom_retries", a.oom_retries)?;
        d.set_item("evictions", s.evictions)?;
        d.set_item("restores", s.restores)?;
        d.set_item("limit_bytes", pool.limit())?;
        d.set_item("in_use_bytes", pool.in_use())?;
        Ok(d)
    }

    /// Returns the pool's cached free blocks to the driver (after dropping large tensors, say).
    /// Does nothing for the CPU.
    fn empty_cache(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(c) = self.cuda()? {
            let pool = c.pool().clone();
            py.detach(move || pool.empty_cache())
                .map_err(|e| errors::ops(e.into()))?;
        }
        Ok(())
    }

    /// A tenant of this GPU: a device whose tensors may hold at most `memory_limit` bytes at
    /// once (a quota on a share of the device pool). An allocation past the quota raises
    /// `MemoryError`; what the tenant frees is reused by it first.
    ///
    /// Raises `ValueError` on the CPU.
    #[pyo3(signature = (name, memory_limit))]
    fn tenant(&self, name: &str, memory_limit: usize) -> PyResult<PyDevice> {
        let Some(c) = self.cuda()? else {
            return Err(value("tenants are GPU memory shares: the CPU has none"));
        };
        let tenant = c.lane().device().tenant(name, memory_limit);
        let lane = tenant.lane(c.lane().priority()).map_err(errors::sch)?;
        let lane = CudaDevice::new(&lane).map_err(errors::ops)?;
        derived(&lane);
        Ok(PyDevice::new(Device::Cuda(lane)))
    }

    /// The QoS scheduler of this GPU (see `Scheduler`): tenants admitted by class, with memory
    /// reservations and, where the driver has green contexts, SM partitions. `memory` is the
    /// device memory it hands out in bytes (default: 95% of what is free now);
    /// `partitions=False` keeps to stream priorities.
    ///
    /// Raises `ValueError` on the CPU.
    #[pyo3(signature = (memory=None, partitions=true))]
    fn scheduler(&self, memory: Option<usize>, partitions: bool) -> PyResult<PyScheduler> {
        let Some(c) = self.cuda()? else {
            return Err(value("the scheduler governs a GPU: the CPU has none"));
        };
        let sched = c
            .lane()
            .device()
            .scheduler(SchedulerOptions {
                memory_bytes: memory,
                no_partitions: !partitions,
            })
            .map_err(errors::sch)?;
        Ok(PyScheduler {
            sched,
            anchor: c.clone(),
        })
    }

    /// The QoS class of this device's tenant (`"guaranteed"`, `"burstable"`, `"best-effort"`),
    /// or `None` for a device not admitted by a scheduler.
    #[getter]
    fn qos(&self) -> PyResult<Option<&'static str>> {
        Ok(self
            .cuda()?
            .and_then(|c| c.lane().tenant().class())
            .map(QosClass::name))
    }

    /// The SMs of the partition this device's kernels run on (`None` without one).
    #[getter]
    fn partition_sms(&self) -> PyResult<Option<u32>> {
        Ok(self
            .cuda()?
            .and_then(|c| c.lane().tenant().partition())
            .map(|p| p.sm_count()))
    }

    /// Closes this device: frees the pool's cached memory and forgets the device, so that the
    /// next `gk.device(...)` opens it afresh. Raises `ValueError` while tensors, streams or
    /// models still use it (close them or `del` them first); this handle then stays usable.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(c) = self.cuda()? else {
            return Ok(());
        };
        let ordinal = c.stream().device().ordinal();
        // This handle is not a user; anything more is a tensor, a stream or a model. Checked
        // again after the wait below (the lock is not held across it: another thread may need
        // the GIL and the registry meanwhile).
        let in_use = |reg: &Registry| -> PyResult<()> {
            let users = reg.get(&ordinal).map_or(0, Opened::users).saturating_sub(1);
            if users > 0 {
                return Err(value(format!(
                    "cuda:{ordinal} is still used by {users} tensor(s), stream(s), tenant(s) or \
                     model(s); delete them before closing the device"
                )));
            }
            Ok(())
        };
        in_use(&registry())?;
        let c = c.clone();
        py.detach(|| {
            c.synchronize()?;
            c.pool().empty_cache()?;
            Ok::<_, gpukit_ops::Error>(())
        })
        .map_err(errors::ops)?;
        drop(c);
        let mut reg = registry();
        in_use(&reg)?;
        reg.remove(&ordinal);
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("device(\"{}\")", self.device.describe())
    }

    fn __str__(&self) -> String {
        self.device.describe()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        if let Ok(d) = other.cast::<PyDevice>() {
            return d.get().device.describe() == self.device.describe();
        }
        if let Ok(s) = other.cast::<PyString>() {
            return s.to_str().is_ok_and(|s| {
                let s = if s == "cuda" { "cuda:0" } else { s };
                s == self.device.describe()
            });
        }
        false
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.device.describe().hash(&mut h);
        h.finish()
    }
}

/// `device` as given to a function: a [`PyDevice`], a name, or `None` (the current stream's
/// device if a `with stream:` block is open, else the CPU).
pub(crate) fn resolve(device: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    let Some(d) = device.filter(|d| !d.is_none()) else {
        return Ok(current().unwrap_or(Device::Cpu));
    };
    if let Ok(d) = d.cast::<PyDevice>() {
        Ok(d.get().get()?.clone())
    } else if let Ok(s) = d.cast::<PyStream>() {
        Ok(s.get().device.clone())
    } else if let Ok(s) = d.extract::<String>() {
        named(&s)
    } else {
        Err(errors::type_error(format!(
            "device: expected a gk.Device, a gk.Stream or a name such as \"cuda:0\", got {}",
            d.get_type().name()?
        )))
    }
}

thread_local! {
    /// The streams of the open `with stream:` blocks of this thread, innermost last.
    static CURRENT: RefCell<Vec<Device>> = const { RefCell::new(Vec::new()) };
}

/// The innermost open `with stream:` block's device on this thread.
pub(crate) fn current() -> Option<Device> {
    CURRENT.with(|c| c.borrow().last().cloned())
}

/// The devices gpukit can use: the CPU, then every CUDA GPU the driver reports (none without a
/// driver).
#[pyfunction]
pub fn devices() -> PyResult<Vec<PyDevice>> {
    let mut all = vec![PyDevice::new(Device::Cpu)];
    if gpukit_driver::driver_available() {
        let n = gpukit_driver::device_count().unwrap_or(0);
        for i in 0..n {
            all.push(PyDevice::new(open_cuda(i)?));
        }
    }
    Ok(all)
}

/// The device named `name`: `"cpu"`, `"cuda"` (GPU 0) or `"cuda:N"`.
///
/// Raises `ValueError` for another name or a GPU that does not exist, `RuntimeError` when the
/// NVIDIA driver is missing.
#[pyfunction]
pub fn device(name: &str) -> PyResult<PyDevice> {
    Ok(PyDevice::new(match parse_name(name)? {
        None => Device::Cpu,
        Some(n) => open_cuda(n)?,
    }))
}

/// Whether a CUDA GPU and its driver are present.
#[pyfunction]
pub fn cuda_available() -> bool {
    gpukit_driver::driver_available() && gpukit_driver::device_count().is_ok_and(|n| n > 0)
}

/// A CUDA stream: an ordered queue of GPU work with a priority (a lane of the device).
///
/// `gk.Stream(device="cuda:0", priority="normal" | "high")`. As a context manager
/// (`with stream:`), tensors created inside belong to it, and ops on them run on it.
#[pyclass(module = "gpukit", name = "Stream", frozen)]
pub struct PyStream {
    pub(crate) device: Device,
}

impl PyStream {
    pub(crate) fn cuda(&self) -> PyResult<&CudaDevice> {
        match &self.device {
            Device::Cuda(c) => Ok(c),
            Device::Cpu => Err(value("a stream is a CUDA stream")),
        }
    }

    fn lane(&self) -> PyResult<&Lane> {
        Ok(self.cuda()?.lane())
    }
}

fn priority(name: &str) -> PyResult<LanePriority> {
    match name {
        "normal" | "low" => Ok(LanePriority::Normal),
        "high" => Ok(LanePriority::High),
        other => Err(value(format!(
            "priority \"{other}\": expected \"normal\" or \"high\""
        ))),
    }
}

#[pymethods]
impl PyStream {
    /// A new stream of `device` (default: `"cuda:0"`) with `priority` `"normal"` or `"high"`
    /// (the device's most urgent: its kernels are scheduled first when both have work ready).
    #[new]
    #[pyo3(signature = (device=None, priority="normal"))]
    fn new(device: Option<&Bound<'_, PyAny>>, priority: &str) -> PyResult<Self> {
        let p = self::priority(priority)?;
        let dev = match device {
            None => open_cuda(0)?,
            Some(d) => resolve(Some(d))?,
        };
        let Device::Cuda(c) = dev else {
            return Err(value("streams are CUDA streams: give a CUDA device"));
        };
        let lane = c.lane().fork(p).map_err(errors::sch)?;
        let lane = CudaDevice::new(&lane).map_err(errors::ops)?;
        derived(&lane);
        Ok(PyStream {
            device: Device::Cuda(lane),
        })
    }

    /// The stream's device.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::new(self.device.clone())
    }

    /// `"normal"` or `"high"`.
    #[getter]
    fn priority(&self) -> PyResult<&'static str> {
        Ok(match self.lane()?.priority() {
            LanePriority::Normal => "normal",
            LanePriority::High => "high",
        })
    }

    /// Waits for every op queued on the stream.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.cuda()?.clone();
        py.detach(move || c.synchronize()).map_err(errors::ops)
    }

    /// Makes later work on this stream wait (on the GPU) for `event`.
    fn wait_event(&self, event: &PyEvent) -> PyResult<()> {
        self.cuda()?
            .stream()
            .wait(&event.event)
            .map_err(errors::drv)
    }

    /// Makes later work on this stream wait (on the GPU) for the work queued so far on
    /// `other`.
    fn wait_stream(&self, other: &PyStream) -> PyResult<()> {
        self.lane()?.join(other.lane()?).map_err(errors::sch)
    }

    /// Records a new event on the stream and returns it.
    #[pyo3(signature = (timing=true))]
    fn record_event(&self, timing: bool) -> PyResult<PyEvent> {
        let stream = self.cuda()?.stream();
        let event = stream.device().new_event(timing).map_err(errors::drv)?;
        stream.record(&event).map_err(errors::drv)?;
        Ok(PyEvent { event })
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        let d = slf.get().device.clone();
        CURRENT.with(|c| c.borrow_mut().push(d));
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        CURRENT.with(|c| c.borrow_mut().pop());
        false
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "Stream({}, priority=\"{}\")",
            self.device.describe(),
            self.priority()?
        ))
    }
}

/// A CUDA event: a point in a stream's work, for ordering streams and timing on the GPU.
///
/// `start = gk.Event(); start.record(); …; end = gk.Event(); end.record();
/// end.synchronize(); start.elapsed_time(end)` gives milliseconds.
#[pyclass(module = "gpukit", name = "Event", frozen)]
pub struct PyEvent {
    event: gpukit_driver::Event,
}

#[pymethods]
impl PyEvent {
    /// A new event on `device` (default `"cuda:0"`); `timing=False` makes a lighter event that
    /// cannot be timed.
    #[new]
    #[pyo3(signature = (device=None, timing=true))]
    fn new(device: Option<&Bound<'_, PyAny>>, timing: bool) -> PyResult<Self> {
        let dev = match device {
            None => default_cuda()?,
            Some(d) => resolve(Some(d))?,
        };
        let Device::Cuda(c) = dev else {
            return Err(value("events are CUDA events: give a CUDA device"));
        };
        let event = c.stream().device().new_event(timing).map_err(errors::drv)?;
        Ok(PyEvent { event })
    }

    /// Records the event on `stream` (default: the current stream, else the device's default
    /// stream).
    #[pyo3(signature = (stream=None))]
    fn record(&self, stream: Option<&PyStream>) -> PyResult<()> {
        let dev = match stream {
            Some(s) => s.device.clone(),
            None => default_cuda()?,
        };
        let Device::Cuda(c) = dev else {
            return Err(value("events are recorded on CUDA streams"));
        };
        c.stream().record(&self.event).map_err(errors::drv)
    }

    /// Waits until the work before the event has finished.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.event.synchronize()).map_err(errors::drv)
    }

    /// Whether the work before the event has finished.
    fn query(&self) -> PyResult<bool> {
        self.event.is_complete().map_err(errors::drv)
    }

    /// Milliseconds from this event to `end` (both recorded, `end` complete).
    ///
    /// Raises `RuntimeError` if either was made with `timing=False` or has not completed.
    fn elapsed_time(&self, end: &PyEvent) -> PyResult<f32> {
        gpukit_driver::Event::elapsed_ms(&self.event, &end.event).map_err(errors::drv)
    }
}

/// A GPU's QoS scheduler: `gk.device("cuda").scheduler()`.
///
/// `admit(name, qos, ...)` returns a `Device` for the tenant: tensors made on it count against
/// its memory grant and its kernels run on its SM partition at its class's stream priority.
/// The tenant leaves — its reservation returns — when the device and every tensor of it are
/// gone. Classes: `"guaranteed"` (memory and an SM partition reserved), `"burstable"` (a
/// reserved minimum, may borrow unreserved memory), `"best-effort"` (borrows only; evicted
/// first). A request that does not fit raises `ValueError` saying what is short.
#[pyclass(module = "gpukit", name = "Scheduler", frozen)]
pub struct PyScheduler {
    sched: Scheduler,
    /// The device's default lane: a live scheduler is a user of the device (`close` says so).
    anchor: CudaDevice,
}

#[pymethods]
impl PyScheduler {
    /// Admits a tenant and returns its device. `memory`: bytes reserved (all a guaranteed
    /// tenant may hold; a burstable tenant's minimum; ignored for best-effort);
    /// `memory_limit`: the most a burstable or best-effort tenant may hold by borrowing;
    /// `sm_share`: the share of the SMs in `(0, 1]` reserved as a guaranteed tenant's
    /// partition; `priority`: `"normal"` or `"high"` within the class's band.
    ///
    /// Raises `ValueError` when the request does not fit or is malformed.
    #[pyo3(signature = (name, qos="best-effort", memory=0, memory_limit=None, sm_share=None, priority="normal"))]
    fn admit(
        &self,
        name: &str,
        qos: &str,
        memory: usize,
        memory_limit: Option<usize>,
        sm_share: Option<f64>,
        priority: &str,
    ) -> PyResult<PyDevice> {
        let class: QosClass = qos.parse().map_err(value)?;
        let priority = self::priority(priority)?;
        let spec = TenantSpec {
            name: name.into(),
            class,
            memory_bytes: memory,
            memory_limit,
            sm_share,
        };
        let tenant = self.sched.admit(&spec).map_err(errors::sch)?;
        let lane = tenant.lane(priority).map_err(errors::sch)?;
        let lane = CudaDevice::new(&lane).map_err(errors::ops)?;
        derived(&lane);
        Ok(PyDevice::new(Device::Cuda(lane)))
    }

    /// How tenants are kept apart: `"partitions"` (green contexts) or `"priorities"`.
    #[getter]
    fn isolation(&self) -> &'static str {
        match self.sched.isolation() {
            Isolation::Partitions(_) => "partitions",
            Isolation::StreamPriorities { .. } => "priorities",
        }
    }

    /// The isolation in words, with the reason when there are no partitions.
    #[getter]
    fn isolation_detail(&self) -> String {
        self.sched.isolation().to_string()
    }

    /// The admitted tenants: a list of dicts with `name`, `qos`, `memory_reserved`,
    /// `memory_limit` (bytes) and `partition_sms` (or `None`).
    fn tenants<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.sched
            .ledger()
            .grants()
            .iter()
            .map(|g| {
                let d = PyDict::new(py);
                d.set_item("name", &g.name)?;
                d.set_item("qos", g.class.name())?;
                d.set_item("memory_reserved", g.memory_reserved)?;
                d.set_item("memory_limit", g.memory_limit)?;
                d.set_item("partition_sms", g.partition_sms)?;
                Ok(d)
            })
            .collect()
    }

    /// Bytes the scheduler hands out in all.
    #[getter]
    fn capacity(&self) -> usize {
        self.sched.ledger().capacity().memory_bytes
    }

    /// Bytes nobody reserved (what burstable and best-effort tenants borrow from).
    #[getter]
    fn unreserved(&self) -> usize {
        self.sched.ledger().memory_unreserved()
    }

    fn __repr__(&self) -> String {
        format!(
            "Scheduler(cuda:{}, {}, {} tenants)",
            self.anchor.stream().device().ordinal(),
            self.sched.isolation(),
            self.sched.ledger().grants().len()
        )
    }
}
