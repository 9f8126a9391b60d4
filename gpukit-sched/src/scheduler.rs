//! The scheduler of one device: admits tenants by QoS class and enforces what it granted.
//!
//! - **Memory** — a guaranteed tenant's pool is limited to its reservation and its evictable
//!   buffers are never spilled for anyone else; a burstable tenant holds its reservation and
//!   borrows beyond it from the *unreserved* pool (whose limit is the capacity minus every
//!   reservation); best-effort tenants allocate from the unreserved pool only. Borrowed bytes
//!   are bounded by the unreserved pool at every moment, so no reservation can be crowded out.
//!   When a new reservation shrinks the unreserved pool below what is borrowed, borrowers are
//!   refused until they free, and their evictable buffers are spilled (best-effort first) when
//!   the device runs short.
//! - **SMs** — where the driver has green contexts, each guaranteed tenant with an SM share
//!   gets a partition of its own and every other tenant runs on the partition of the SMs left
//!   over; otherwise the scheduler falls back to stream priorities alone and says so
//!   ([`Scheduler::isolation`]).
//! - **Urgency** — lanes take the stream priority of their tenant's class
//!   ([`QosClass::stream_priority`]).
//!
//! The partition layout is cut when a guaranteed tenant with an SM share is admitted, and only
//! while no lane of the partitions it replaces is alive: admit guaranteed tenants before
//! making the other tenants' lanes (the refusal says so otherwise).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use gpukit_driver::{SmPartition, SmResource};
use gpukit_mem::{DevicePool, EvictionRank};

use crate::policy::{Capacity, Grant, Ledger, QosClass, Refusal, Shortage, TenantSpec};
use crate::{DeviceRuntime, Error, Result, Tenant};

/// How a scheduler keeps its tenants' kernels apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// SM partitions (green contexts): a guaranteed tenant's kernels run on SMs no other
    /// tenant's kernels can use.
    Partitions(SmResource),
    /// Stream priorities only: the driver or device has no green contexts (the reason is
    /// given) or partitions were switched off. Urgent work is scheduled first, but a running
    /// kernel keeps its SMs.
    StreamPriorities {
        /// Why there are no partitions.
        reason: String,
    },
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Isolation::Partitions(sm) => write!(
                f,
                "SM partitions (green contexts): {} SMs, partitions of at least {} in steps of {}",
                sm.sm_count, sm.min_partition_sms, sm.alignment_sms
            ),
            Isolation::StreamPriorities { reason } => {
                write!(f, "stream priorities only ({reason})")
            }
        }
    }
}

/// How a [`Scheduler`] is set up.
#[derive(Clone, Debug, Default)]
pub struct SchedulerOptions {
    /// Device memory it hands out, in bytes (`None`: 95% of what the device has free when the
    /// scheduler is made; the rest stays for the driver and libraries).
    pub memory_bytes: Option<usize>,
    /// Use stream priorities alone even where green contexts exist.
    pub no_partitions: bool,
}

/// Admits tenants of one device and enforces their grants (see the module documentation).
///
/// Cheap to clone; clones share the ledger.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<SchedulerInner>,
}

pub(crate) struct SchedulerInner {
    device: DeviceRuntime,
    isolation: Isolation,
    /// Memory nobody reserved: best-effort tenants allocate from it, burstable ones borrow.
    unreserved: DevicePool,
    state: Mutex<State>,
}

struct State {
    ledger: Ledger,
    /// Each guaranteed tenant's partition, by name.
    partitions: HashMap<String, SmPartition>,
    /// The SMs no guaranteed tenant holds (with partitions on).
    shared: Option<SmPartition>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Scheduler({:?}, {}, {} tenants)",
            self.inner.device.device(),
            self.inner.isolation,
            self.state().ledger.grants().len()
        )
    }
}

/// What a scheduled tenant carries: its grant, and the scheduler that frees it when the last
/// clone of the tenant goes.
pub(crate) struct Admission {
    pub(crate) grant: Grant,
    pub(crate) scheduler: Arc<SchedulerInner>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut st = lock(&self.scheduler.state);
        st.ledger.release(&self.grant.name);
        st.partitions.remove(&self.grant.name);
        let unreserved = st.ledger.memory_unreserved();
        drop(st);
        // The pool has its own limit (made with `sub_pool`): this cannot fail.
        let _ = self.scheduler.unreserved.set_limit(unreserved);
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DeviceRuntime {
    /// A scheduler over this device.
    ///
    /// # Errors
    /// Driver errors reading the free memory or making the first partition.
    pub fn scheduler(&self, options: SchedulerOptions) -> Result<Scheduler> {
        Scheduler::new(self, options)
    }
}

impl Scheduler {
    fn new(device: &DeviceRuntime, options: SchedulerOptions) -> Result<Self> {
        let dev = device.device();
        let memory_bytes = match options.memory_bytes {
            Some(b) => b,
            None => dev.memory_info()?.free / 20 * 19,
        };
        let sm_count = dev.properties().multiprocessor_count;
        let (isolation, sm) = match dev.green_context_support() {
            Err(reason) => (Isolation::StreamPriorities { reason }, None),
            Ok(_) if options.no_partitions => (
                Isolation::StreamPriorities {
                    reason: "partitions switched off".into(),
                },
                None,
            ),
            Ok(sm) => (Isolation::Partitions(sm), Some(sm)),
        };
        let capacity = Capacity {
            memory_bytes,
            sm_count: sm.map_or(sm_count, |s| s.sm_count),
            min_partition_sms: sm.map_or(1, |s| s.min_partition_sms),
            sm_alignment: sm.map_or(1, |s| s.alignment_sms),
        };
        let unreserved = device
            .pool()
            .sub_pool(memory_bytes)
            .with_eviction_rank(EvictionRank::First);
        let shared = match &isolation {
            Isolation::Partitions(_) => dev.partition_sms(&[])?.into_iter().next(),
            Isolation::StreamPriorities { .. } => None,
        };
        Ok(Scheduler {
            inner: Arc::new(SchedulerInner {
                device: device.clone(),
                isolation,
                unreserved,
                state: Mutex::new(State {
                    ledger: Ledger::new(capacity),
                    partitions: HashMap::new(),
                    shared,
                }),
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// How tenants are kept apart on this device.
    pub fn isolation(&self) -> &Isolation {
        &self.inner.isolation
    }

    /// The device.
    pub fn device(&self) -> &DeviceRuntime {
        &self.inner.device
    }

    /// A copy of the ledger: capacity, grants, what is reserved.
    pub fn ledger(&self) -> Ledger {
        self.state().ledger.clone()
    }

    /// The pool of unreserved memory (what best-effort tenants allocate from and burstable
    /// ones borrow from); its limit follows the reservations.
    pub fn unreserved_pool(&self) -> &DevicePool {
        &self.inner.unreserved
    }

    /// Admits a tenant: checks its reservation against what is unreserved ([`Ledger::admit`]),
    /// builds its memory pool, and for a guaranteed tenant with an SM share cuts its
    /// partition. The tenant is released (its reservation returned) when its last clone is
    /// dropped.
    ///
    /// # Errors
    /// [`Error::Refused`] saying what is short; driver errors cutting partitions.
    pub fn admit(&self, spec: &TenantSpec) -> Result<Tenant> {
        let mut st = self.state();
        let grant = st.ledger.admit(spec).map_err(Error::Refused)?;
        let root = self.inner.device.pool();
        let pool = match grant.class {
            QosClass::Guaranteed => root.sub_pool(grant.memory_reserved),
            QosClass::Burstable => root.sub_pool_borrowing(
                grant.memory_reserved,
                grant.memory_limit,
                &self.inner.unreserved,
            )?,
            QosClass::BestEffort => self.inner.unreserved.sub_pool(grant.memory_limit),
        }
        .with_eviction_rank(grant.class.eviction_rank());
        if grant.partition_sms.is_some() && matches!(self.inner.isolation, Isolation::Partitions(_))
        {
            self.cut_partition(&mut st, &grant)?;
        }
        st.ledger.commit(grant.clone());
        let unreserved = st.ledger.memory_unreserved();
        drop(st);
        self.inner.unreserved.set_limit(unreserved)?;
        Ok(Tenant {
            name: grant.name.clone(),
            device: self.inner.device.clone(),
            pool,
            admission: Some(Arc::new(Admission {
                grant,
                scheduler: self.inner.clone(),
            })),
        })
    }

    /// Re-splits the SMs: every admitted guaranteed tenant's partition (its new one first) and
    /// the shared rest, all from one split so they are disjoint. Refused while a lane of a
    /// partition being replaced is alive.
    fn cut_partition(&self, st: &mut State, grant: &Grant) -> Result<()> {
        let busy: Vec<String> = st
            .partitions
            .iter()
            .filter(|(_, p)| p.is_shared())
            .map(|(n, _)| format!("`{n}`"))
            .chain(
                st.shared
                    .as_ref()
                    .filter(|p| p.is_shared())
                    .map(|_| "the shared partition".to_string()),
            )
            .collect();
        if !busy.is_empty() {
            return Err(Error::Refused(Refusal {
                name: grant.name.clone(),
                class: grant.class,
                reasons: vec![Shortage::Invalid(format!(
                    "its SM partition would re-split SMs that live lanes of {} run on: admit \
                     guaranteed tenants before making other tenants' lanes",
                    busy.join(", ")
                ))],
            }));
        }
        let (names, counts): (Vec<String>, Vec<u32>) = st
            .ledger
            .grants()
            .iter()
            .chain(std::iter::once(grant))
            .filter_map(|g| Some((g.name.clone(), g.partition_sms?)))
            .unzip();
        // Drop the old contexts before cutting new ones.
        st.partitions.clear();
        st.shared = None;
        let mut parts = self
            .inner
            .device
            .device()
            .partition_sms(&counts)?
            .into_iter();
        for name in names {
            if let Some(p) = parts.next() {
                st.partitions.insert(name, p);
            }
        }
        st.shared = parts.next();
        Ok(())
    }

    /// The partition a tenant's lanes run on (`None` without partitions).
    pub(crate) fn partition_of(inner: &SchedulerInner, grant: &Grant) -> Option<SmPartition> {
        let st = lock(&inner.state);
        st.partitions
            .get(&grant.name)
            .or(st.shared.as_ref())
            .cloned()
    }
}
