//! # gpukit-sched
//!
//! The runtime and its execution lanes (layer 2, above `gpukit-mem`).
//!
//! - [`Runtime`] opens the devices and owns, for each, a [`DevicePool`], a [`PinnedPool`] and a
//!   [`TransferEngine`] ([`DeviceRuntime`]).
//! - A [`Lane`] is a stream with a priority, bound to a [`Tenant`]; every kernel launch of the
//!   layers above names a lane. Lanes fork and join through events, without blocking the host.
//! - A [`Tenant`] owns a share of a device's memory (a sub-pool with a byte limit).
//! - A [`Scheduler`] admits tenants by [`QosClass`] — guaranteed, burstable, best-effort —
//!   against what is not reserved yet, and enforces what it granted: memory through the pool's
//!   quotas and eviction ranks, SMs through green-context partitions (stream priorities where
//!   the driver has none), urgency through stream priorities.
//! - [`policy`] holds the decisions as pure functions ([`Ledger::admit`], [`Pacer`]), tested
//!   without a device; [`SharedPacer`] shares a pacer between the threads it paces.

use std::sync::Arc;

use gpukit_driver::{Device, SmPartition, Stream, device_count};
use gpukit_mem::{DeviceBuffer, DevicePool, PinnedPool, TransferEngine};

mod pacing;
pub mod policy;
mod scheduler;

pub use pacing::SharedPacer;
pub use policy::{Capacity, Grant, Ledger, Pacer, QosClass, Refusal, Shortage, TenantSpec};
pub use scheduler::{Isolation, Scheduler, SchedulerOptions};

use scheduler::Admission;

/// Errors of the scheduling layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A driver error (no driver, no device, …).
    #[error(transparent)]
    Driver(#[from] gpukit_driver::Error),
    /// A memory error (out of memory, quota, transfer).
    #[error(transparent)]
    Mem(#[from] gpukit_mem::Error),
    /// A device index the runtime does not have.
    #[error("the runtime has no device {index} ({count} opened)")]
    NoSuchDevice {
        /// The index asked for.
        index: usize,
        /// Devices opened.
        count: usize,
    },
    /// The scheduler did not admit a tenant (the refusal says what is short).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Lanes of different devices cannot be joined directly.
    #[error("cannot join a lane of {other} into a lane of {this}")]
    CrossDevice {
        /// The joining lane's device.
        this: String,
        /// The other lane's device.
        other: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How urgent a lane's work is, mapped onto the device's stream priority range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LanePriority {
    /// The device's least urgent priority (the CUDA default).
    #[default]
    Normal,
    /// The device's most urgent priority: its kernels are scheduled before normal lanes' when
    /// both have work ready (latency-critical decode, say).
    High,
}

/// Everything the runtime keeps for one device.
#[derive(Clone)]
pub struct DeviceRuntime {
    inner: Arc<DeviceInner>,
}

struct DeviceInner {
    device: Device,
    pool: DevicePool,
    pinned: PinnedPool,
    transfers: TransferEngine,
}

impl std::fmt::Debug for DeviceRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceRuntime({:?})", self.inner.device)
    }
}

/// The devices gpukit runs on, with their memory and transfer machinery.
#[derive(Debug)]
pub struct Runtime {
    devices: Vec<DeviceRuntime>,
}

impl Runtime {
    /// Opens every CUDA device.
    ///
    /// # Errors
    /// `NoDriver` / `NoDevice` driver errors when there is nothing to open.
    pub fn new() -> Result<Self> {
        let n = device_count()?;
        if n == 0 {
            return Err(gpukit_driver::Error::NoDevice {
                reason: "the driver reports 0 devices".into(),
            }
            .into());
        }
        Self::with_devices(&(0..n).collect::<Vec<_>>())
    }

    /// Opens the devices with these ordinals.
    ///
    /// # Errors
    /// Driver errors opening a device; memory errors creating its transfer engine.
    pub fn with_devices(ordinals: &[usize]) -> Result<Self> {
        let devices = ordinals
            .iter()
            .map(|&o| DeviceRuntime::open(o))
            .collect::<Result<Vec<_>>>()?;
        Ok(Runtime { devices })
    }

    /// The opened devices, in the order given.
    pub fn devices(&self) -> &[DeviceRuntime] {
        &self.devices
    }

    /// Device `index` (an index into [`Runtime::devices`], not necessarily the CUDA ordinal).
    ///
    /// # Errors
    /// [`Error::NoSuchDevice`].
    pub fn device(&self, index: usize) -> Result<&DeviceRuntime> {
        self.devices.get(index).ok_or(Error::NoSuchDevice {
            index,
            count: self.devices.len(),
        })
    }
}

impl DeviceRuntime {
    fn open(ordinal: usize) -> Result<Self> {
        let device = Device::new(ordinal)?;
        let pool = DevicePool::new(&device);
        let pinned = pool.pinned().clone();
        let transfers = TransferEngine::new(&device, &pinned)?;
        Ok(DeviceRuntime {
            inner: Arc::new(DeviceInner {
                device,
                pool,
                pinned,
                transfers,
            }),
        })
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The device's memory pool (shared by every tenant through sub-pools).
    pub fn pool(&self) -> &DevicePool {
        &self.inner.pool
    }

    /// The pinned host pool.
    pub fn pinned(&self) -> &PinnedPool {
        &self.inner.pinned
    }

    /// The transfer engine.
    pub fn transfers(&self) -> &TransferEngine {
        &self.inner.transfers
    }

    /// A tenant with no memory limit beyond the device's.
    pub fn default_tenant(&self) -> Tenant {
        Tenant {
            name: "default".into(),
            device: self.clone(),
            pool: self.inner.pool.clone(),
            admission: None,
        }
    }

    /// A tenant that may hold at most `memory_limit` bytes of device memory at once.
    pub fn tenant(&self, name: &str, memory_limit: usize) -> Tenant {
        Tenant {
            name: name.into(),
            device: self.clone(),
            pool: self.inner.pool.sub_pool(memory_limit),
            admission: None,
        }
    }

    fn priority_value(&self, p: LanePriority) -> Result<i32> {
        let range = self.inner.device.stream_priority_range()?;
        Ok(match p {
            LanePriority::Normal => range.lowest,
            LanePriority::High => range.highest,
        })
    }
}

/// A user of a device: its memory share and its lanes; for a tenant a [`Scheduler`] admitted,
/// also its class, its grant and its SM partition.
#[derive(Clone)]
pub struct Tenant {
    name: String,
    device: DeviceRuntime,
    pool: DevicePool,
    admission: Option<Arc<Admission>>,
}

impl std::fmt::Debug for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Tenant");
        d.field("name", &self.name).field("pool", &self.pool);
        if let Some(a) = &self.admission {
            d.field("grant", &Scheduler::grant_of(&a.scheduler, &a.name));
        }
        d.finish()
    }
}

impl Tenant {
    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device it runs on.
    pub fn device(&self) -> &DeviceRuntime {
        &self.device
    }

    /// The tenant's memory (a sub-pool of the device pool, or the device pool itself).
    pub fn pool(&self) -> &DevicePool {
        &self.pool
    }

    /// Its QoS class (`None` for a tenant made without a scheduler).
    pub fn class(&self) -> Option<QosClass> {
        self.admission.as_ref().map(|a| a.class)
    }

    /// What the scheduler granted it, as it stands now (`None` without a scheduler).
    pub fn grant(&self) -> Option<Grant> {
        let a = self.admission.as_ref()?;
        Scheduler::grant_of(&a.scheduler, &a.name)
    }

    /// The SM partition its lanes run on (`None` without partitions).
    pub fn partition(&self) -> Option<SmPartition> {
        let a = self.admission.as_ref()?;
        Scheduler::partition_of(&a.scheduler, &a.name)
    }

    /// A new lane (a new stream) of this tenant. For a scheduled tenant the stream belongs to
    /// its SM partition, takes its class's priority band ([`QosClass::stream_priority`];
    /// `High` is the band's urgent end) and its launch window ([`QosClass::launch_window`]).
    ///
    /// # Errors
    /// Driver errors creating the stream.
    pub fn lane(&self, priority: LanePriority) -> Result<Lane> {
        let stream = match &self.admission {
            None => {
                let value = self.device.priority_value(priority)?;
                self.device.device().new_stream_with_priority(value)?
            }
            Some(a) => {
                let range = self.device.device().stream_priority_range()?;
                let value = a.class.stream_priority(
                    range.highest,
                    range.lowest,
                    priority == LanePriority::High,
                );
                let stream = match self.partition() {
                    Some(p) => p.new_stream(value)?,
                    None => self.device.device().new_stream_with_priority(value)?,
                };
                match a.class.launch_window() {
                    Some((every, depth)) => stream.with_launch_window(every, depth),
                    None => stream,
                }
            }
        };
        Ok(Lane {
            stream,
            priority,
            tenant: self.clone(),
        })
    }
}

/// An ordered queue of device work — a CUDA stream with a priority — belonging to a tenant.
/// Every launch names a lane; buffers allocated through a lane are ordered on it.
#[derive(Clone, Debug)]
pub struct Lane {
    stream: Stream,
    priority: LanePriority,
    tenant: Tenant,
}

impl Lane {
    /// The lane's stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The lane's priority.
    pub fn priority(&self) -> LanePriority {
        self.priority
    }

    /// The tenant it belongs to.
    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// The device runtime.
    pub fn device(&self) -> &DeviceRuntime {
        &self.tenant.device
    }

    /// Allocates `bytes` from the tenant's pool, ordered on this lane.
    ///
    /// # Errors
    /// Out-of-memory (quota or device) and other memory errors.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        Ok(self.tenant.pool.alloc(bytes, &self.stream)?)
    }

    /// A new lane of the same tenant whose work starts only after the work queued on this lane
    /// so far (an event recorded here, waited on there; the host does not block).
    ///
    /// # Errors
    /// Driver errors.
    pub fn fork(&self, priority: LanePriority) -> Result<Lane> {
        let lane = self.tenant.lane(priority)?;
        lane.join(self)?;
        Ok(lane)
    }

    /// Makes work queued on this lane from now on wait for the work queued on `other` so far.
    ///
    /// # Errors
    /// [`Error::CrossDevice`] for lanes of different devices; driver errors.
    pub fn join(&self, other: &Lane) -> Result<()> {
        if other.stream.device() != self.stream.device() {
            return Err(Error::CrossDevice {
                this: format!("{:?}", self.stream.device()),
                other: format!("{:?}", other.stream.device()),
            });
        }
        let event = self.stream.device().new_event(false)?;
        other.stream.record(&event)?;
        self.stream.wait(&event)?;
        Ok(())
    }

    /// Blocks the host until the lane's queued work has finished.
    ///
    /// # Errors
    /// Asynchronous errors of that work.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }
}
