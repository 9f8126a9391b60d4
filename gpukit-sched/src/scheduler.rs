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
//! The partition layout is cut when a guaranteed tenant with an SM share is admitted or
//! resized ([`Scheduler::resize`]), and only while no lane of the partitions it replaces is
//! alive: admit guaranteed tenants before making the other tenants' lanes (the refusal says so
//! otherwise). When a guaranteed tenant with a partition leaves, its SMs go back to the shared
//! partition at once if no lane is alive, or else as soon as none is and a lane or a partition
//! is asked for.

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
    /// A guaranteed partition was given up while lanes lived: the layout still keeps its SMs
    /// out of the shared partition until the next re-split.
    stale: bool,
}

impl State {
    /// Partitions that a lane (or another handle) still holds, by name.
    fn busy(&self) -> Vec<String> {
        self.partitions
            .iter()
            .filter(|(_, p)| p.is_shared())
            .map(|(n, _)| format!("`{n}`"))
            .chain(
                self.shared
                    .as_ref()
                    .filter(|p| p.is_shared())
                    .map(|_| "the shared partition".to_string()),
            )
            .collect()
    }
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

/// What a scheduled tenant carries: its name and class (its grant lives in the ledger, where
/// a resize changes it), and the scheduler that frees it when the last clone of the tenant goes.
pub(crate) struct Admission {
    pub(crate) name: String,
    pub(crate) class: QosClass,
    pub(crate) scheduler: Arc<SchedulerInner>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut st = lock(&self.scheduler.state);
        st.ledger.release(&self.name);
        // Only a tenant with a partition of its own (partitions on) leaves SMs to hand back.
        if st.partitions.remove(&self.name).is_some() {
            st.stale = true;
            self.scheduler.resplit_if_idle(&mut st);
        }
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
                    stale: false,
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
            let mut layout = st.ledger.clone();
            layout.commit(grant.clone());
            self.inner
                .resplit(&mut st, &layout, &grant.name, grant.class)?;
        }
        let (name, class) = (grant.name.clone(), grant.class);
        st.ledger.commit(grant);
        let unreserved = st.ledger.memory_unreserved();
        drop(st);
        self.inner.unreserved.set_limit(unreserved)?;
        Ok(Tenant {
            name: name.clone(),
            device: self.inner.device.clone(),
            pool,
            admission: Some(Arc::new(Admission {
                name,
                class,
                scheduler: self.inner.clone(),
            })),
        })
    }

    /// Gives a guaranteed tenant's partition `share` of the SMs ([`Ledger::resize`]) and
    /// re-splits the SMs, between work: refused while a lane of any partition is alive. With
    /// stream priorities only, the grant changes and nothing else does.
    ///
    /// # Errors
    /// [`Error::Refused`] for a tenant this scheduler does not hold, a share that does not fit
    /// or live lanes (saying what is short); driver errors cutting partitions (the old layout
    /// and grant stay).
    pub fn resize(&self, tenant: &Tenant, share: f64) -> Result<()> {
        let name = tenant.name();
        let mut st = self.state();
        let grant = st.ledger.resize(name, share).map_err(Error::Refused)?;
        let mut layout = st.ledger.clone();
        layout.replace(grant.clone());
        if matches!(self.inner.isolation, Isolation::Partitions(_)) {
            self.inner.resplit(&mut st, &layout, name, grant.class)?;
        }
        st.ledger = layout;
        Ok(())
    }

    /// The partition a tenant's lanes run on (`None` without partitions). SMs a departed
    /// tenant left are handed back first when nothing runs on the old layout.
    pub(crate) fn partition_of(inner: &SchedulerInner, name: &str) -> Option<SmPartition> {
        let mut st = lock(&inner.state);
        inner.resplit_if_idle(&mut st);
        st.partitions.get(name).or(st.shared.as_ref()).cloned()
    }

    /// A tenant's grant as the ledger holds it now.
    pub(crate) fn grant_of(inner: &SchedulerInner, name: &str) -> Option<Grant> {
        let st = lock(&inner.state);
        st.ledger.grants().iter().find(|g| g.name == name).cloned()
    }
}

impl SchedulerInner {
    /// The partitions something still runs on ([`State::busy`]), once the pool has let go of
    /// the streams only it held (the pool keeps every stream it served, and a stream keeps
    /// its partition). Should letting go fail, the streams count as live: the answer errs
    /// towards refusing a re-split.
    fn busy(&self, st: &State) -> Vec<String> {
        let _ = self.device.pool().retire_streams();
        st.busy()
    }

    /// Re-splits the SMs for the guaranteed partitions of `layout` ([`SchedulerInner::cut`]).
    /// Refused (for `who`) while a lane of the current layout is alive.
    fn resplit(&self, st: &mut State, layout: &Ledger, who: &str, class: QosClass) -> Result<()> {
        let busy = self.busy(st);
        if !busy.is_empty() {
            return Err(Error::Refused(Refusal {
                name: who.to_string(),
                class,
                reasons: vec![Shortage::Invalid(format!(
                    "its SM partition would re-split SMs that live lanes of {} run on: admit \
                     or resize guaranteed tenants before making other tenants' lanes",
                    busy.join(", ")
                ))],
            }));
        }
        self.cut(st, layout)
    }

    /// Cuts the SMs for the guaranteed partitions of `layout`, all from one split so they are
    /// disjoint, the rest going to the shared partition; on a driver error the old layout
    /// stays.
    fn cut(&self, st: &mut State, layout: &Ledger) -> Result<()> {
        let (names, counts): (Vec<String>, Vec<u32>) = layout
            .grants()
            .iter()
            .filter_map(|g| Some((g.name.clone(), g.partition_sms?)))
            .unzip();
        // The old contexts go once the new ones are cut; on a driver error they stay.
        let old = (std::mem::take(&mut st.partitions), st.shared.take());
        let parts = match self.device.device().partition_sms(&counts) {
            Ok(p) => p,
            Err(e) => {
                (st.partitions, st.shared) = old;
                return Err(e.into());
            }
        };
        let mut parts = parts.into_iter();
        for name in names {
            if let Some(p) = parts.next() {
                st.partitions.insert(name, p);
            }
        }
        st.shared = parts.next();
        st.stale = false;
        Ok(())
    }

    /// Hands a departed tenant's SMs back (a re-split) when the layout is stale and no lane
    /// runs on it; otherwise leaves it for later. A driver error leaves the old layout, whose
    /// partitions are still disjoint and valid.
    fn resplit_if_idle(&self, st: &mut State) {
        if st.stale && self.busy(st).is_empty() {
            let layout = st.ledger.clone();
            let _ = self.cut(st, &layout);
        }
    }
}
