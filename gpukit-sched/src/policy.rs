//! The scheduling policy: QoS classes, admission and pacing, as pure functions of their inputs.
//!
//! Nothing here touches a device. [`Ledger::admit`] decides whether a tenant's reservation fits
//! what is not reserved yet; [`Pacer`] turns measured step times of guaranteed work into a
//! launch budget for best-effort work. The runtime ([`crate::Scheduler`]) enforces the
//! decisions: memory through the pool's quotas, SMs through green-context partitions, urgency
//! through stream priorities. The classes follow Kubernetes' pod QoS classes.

use std::fmt;
use std::time::Duration;

use gpukit_driver::SmResource;
use gpukit_mem::EvictionRank;

/// A tenant's quality-of-service class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// Memory and an SM partition reserved for it alone; the most urgent stream priority;
    /// never evicted for another tenant; never paced.
    Guaranteed,
    /// A reserved minimum of memory; may borrow unreserved memory beyond it, which it gives
    /// back under pressure (its evictable buffers go after best-effort ones); shares the
    /// unreserved SMs at a middle priority.
    Burstable,
    /// Nothing reserved: borrows unreserved memory, first to be evicted, lowest priority,
    /// paced when a guaranteed tenant's latency objective is at risk.
    BestEffort,
}

impl QosClass {
    /// Every class, most protected first.
    pub const ALL: [QosClass; 3] = [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ];

    /// The class's name as the command line and Python spell it (`guaranteed`, `burstable`,
    /// `best-effort`).
    pub fn name(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "guaranteed",
            QosClass::Burstable => "burstable",
            QosClass::BestEffort => "best-effort",
        }
    }

    /// The launch window of its lanes, `(launches per mark, marks pending)`
    /// ([`gpukit_driver::Stream::with_launch_window`]): best-effort lanes keep at most a few
    /// dozen launches queued ahead of the device, so that a long burst of theirs (a prefill's
    /// thousands of kernels) cannot fill the device's launch queue and hold up the launches of
    /// other tenants. `None`: unbounded.
    pub fn launch_window(self) -> Option<(u32, usize)> {
        match self {
            QosClass::BestEffort => Some((16, 2)),
            QosClass::Guaranteed | QosClass::Burstable => None,
        }
    }

    /// When its evictable buffers are spilled for another tenant.
    pub fn eviction_rank(self) -> EvictionRank {
        match self {
            QosClass::Guaranteed => EvictionRank::Never,
            QosClass::Burstable => EvictionRank::Normal,
            QosClass::BestEffort => EvictionRank::First,
        }
    }

    /// The stream priority of its lanes within the device's range (`highest` is the most
    /// urgent, numerically smallest value; `lowest` the default). The range is cut into three
    /// bands, most urgent for guaranteed work; `urgent` picks the more urgent end of the band.
    /// Bands share values when the device has fewer than six levels.
    pub fn stream_priority(self, highest: i32, lowest: i32, urgent: bool) -> i32 {
        let levels = i64::from(lowest) - i64::from(highest) + 1;
        let band = match self {
            QosClass::Guaranteed => 0,
            QosClass::Burstable => 1,
            QosClass::BestEffort => 2,
        };
        // Band b covers [levels*b/3, levels*(b+1)/3) steps below the most urgent value.
        let start = levels * band / 3;
        let end = (levels * (band + 1) / 3 - 1).max(start);
        let step = if urgent { start } else { end };
        (i64::from(highest) + step.min(levels - 1)) as i32
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for QosClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "guaranteed" => Ok(QosClass::Guaranteed),
            "burstable" => Ok(QosClass::Burstable),
            "best-effort" | "besteffort" => Ok(QosClass::BestEffort),
            other => Err(format!(
                "unknown QoS class `{other}`: expected guaranteed, burstable or best-effort"
            )),
        }
    }
}

/// What a tenant asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    /// A name, unique among the admitted tenants of a device.
    pub name: String,
    /// Its class.
    pub class: QosClass,
    /// Device memory reserved for it, in bytes: all it may hold for a guaranteed tenant, its
    /// minimum for a burstable one; ignored (nothing is reserved) for best-effort.
    pub memory_bytes: usize,
    /// The most it may hold by borrowing unreserved memory, in bytes (burstable and
    /// best-effort; `None`: as much as is unreserved). For a guaranteed tenant it is its
    /// reservation.
    pub memory_limit: Option<usize>,
    /// The share of the device's SMs reserved for it as a partition of its own, in `(0, 1]`
    /// (guaranteed tenants only; rounded up to the device's partition granularity).
    pub sm_share: Option<f64>,
}

impl TenantSpec {
    /// A spec of `class` with nothing reserved and no limits (set the fields to reserve).
    pub fn new(name: &str, class: QosClass) -> Self {
        TenantSpec {
            name: name.into(),
            class,
            memory_bytes: 0,
            memory_limit: None,
            sm_share: None,
        }
    }

    /// With `bytes` of memory reserved.
    pub fn memory(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// With a limit of `bytes` on what it may hold by borrowing.
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// With `share` of the SMs reserved as its own partition.
    pub fn sm_share(mut self, share: f64) -> Self {
        self.sm_share = Some(share);
        self
    }
}

/// What a device offers to the tenants of a scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Device memory the scheduler hands out, in bytes.
    pub memory_bytes: usize,
    /// Multiprocessors.
    pub sm_count: u32,
    /// The smallest SM partition.
    pub min_partition_sms: u32,
    /// Partition sizes are multiples of this.
    pub sm_alignment: u32,
}

impl Capacity {
    /// `share` of the SMs as a partition size: rounded up to a multiple of the smallest
    /// partition (itself rounded up to the alignment), as the driver's split makes them.
    pub fn partition_sms(&self, share: f64) -> u32 {
        let want = (share * f64::from(self.sm_count)).ceil().max(1.0) as u32;
        let unit = SmResource {
            sm_count: self.sm_count,
            min_partition_sms: self.min_partition_sms,
            alignment_sms: self.sm_alignment,
        }
        .unit();
        want.div_ceil(unit) * unit
    }
}

/// What admission grants a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Its name.
    pub name: String,
    /// Its class.
    pub class: QosClass,
    /// Memory reserved for it (0 for best-effort).
    pub memory_reserved: usize,
    /// The most memory it may hold (reservation plus what it may borrow).
    pub memory_limit: usize,
    /// SMs of its own partition (guaranteed tenants that asked for a share).
    pub partition_sms: Option<u32>,
}

/// Why a tenant was not admitted: every resource that is short, with the numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The tenant.
    pub name: String,
    /// Its class.
    pub class: QosClass,
    /// What is wrong.
    pub reasons: Vec<Shortage>,
}

/// One reason a tenant is refused.
#[derive(Clone, Debug, PartialEq)]
pub enum Shortage {
    /// Its memory reservation exceeds what is unreserved.
    Memory {
        /// Bytes asked.
        requested: usize,
        /// Bytes not reserved by anyone.
        unreserved: usize,
    },
    /// Its SM partition exceeds the SMs not reserved (one minimal partition always stays for
    /// the tenants without one).
    Sms {
        /// SMs asked (rounded to the granularity).
        requested: u32,
        /// SMs that may still be reserved.
        available: u32,
    },
    /// A tenant of that name is admitted already.
    DuplicateName,
    /// The request itself is malformed (the message says how).
    Invalid(String),
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tenant `{}` ({}) is not admitted: ",
            self.name, self.class
        )?;
        for (i, r) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match r {
                Shortage::Memory {
                    requested,
                    unreserved,
                } => write!(
                    f,
                    "it reserves {:.2} GiB of device memory but only {:.2} GiB is unreserved \
                     ({:.2} GiB short)",
                    gib(*requested),
                    gib(*unreserved),
                    gib(requested - unreserved)
                )?,
                Shortage::Sms {
                    requested,
                    available,
                } => write!(
                    f,
                    "it reserves a partition of {requested} SMs but only {available} SMs can \
                     still be reserved"
                )?,
                Shortage::DuplicateName => f.write_str("a tenant of that name is admitted")?,
                Shortage::Invalid(m) => f.write_str(m)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

/// The reservations admitted on one device.
#[derive(Clone, Debug)]
pub struct Ledger {
    capacity: Capacity,
    grants: Vec<Grant>,
}

impl Ledger {
    /// An empty ledger over `capacity`.
    pub fn new(capacity: Capacity) -> Self {
        Ledger {
            capacity,
            grants: Vec::new(),
        }
    }

    /// The capacity.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// The admitted tenants, in admission order.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// Memory reserved by the admitted tenants.
    pub fn memory_reserved(&self) -> usize {
        self.grants.iter().map(|g| g.memory_reserved).sum()
    }

    /// Memory nobody has reserved: what burstable and best-effort tenants borrow from.
    pub fn memory_unreserved(&self) -> usize {
        self.capacity
            .memory_bytes
            .saturating_sub(self.memory_reserved())
    }

    /// SMs in partitions of their own.
    pub fn sms_reserved(&self) -> u32 {
        self.grants.iter().filter_map(|g| g.partition_sms).sum()
    }

    /// SMs that may still be reserved: all but those reserved and one minimal partition kept
    /// for the tenants without a partition of their own.
    pub fn sms_available(&self) -> u32 {
        self.capacity
            .sm_count
            .saturating_sub(self.capacity.min_partition_sms)
            .saturating_sub(self.sms_reserved())
    }

    /// Decides whether `spec` can be admitted, and what it gets. Pure: the ledger changes only
    /// through [`Ledger::commit`].
    ///
    /// # Errors
    /// A [`Refusal`] naming every resource that is short.
    pub fn admit(&self, spec: &TenantSpec) -> Result<Grant, Refusal> {
        let mut reasons = Vec::new();
        if self.grants.iter().any(|g| g.name == spec.name) {
            reasons.push(Shortage::DuplicateName);
        }
        let reserved = match spec.class {
            QosClass::BestEffort => 0,
            _ => spec.memory_bytes,
        };
        if spec.class == QosClass::Guaranteed && spec.memory_bytes == 0 {
            reasons.push(Shortage::Invalid(
                "a guaranteed tenant must reserve its memory (all it may hold)".into(),
            ));
        }
        if spec.class != QosClass::Guaranteed && spec.sm_share.is_some() {
            reasons.push(Shortage::Invalid(
                "only guaranteed tenants reserve an SM partition; the others share the \
                 unreserved SMs"
                    .into(),
            ));
        }
        if let Some(limit) = spec.memory_limit
            && limit < reserved
        {
            reasons.push(Shortage::Invalid(format!(
                "its memory limit ({limit} bytes) is below its reservation ({reserved} bytes)"
            )));
        }
        let unreserved = self.memory_unreserved();
        if reserved > unreserved {
            reasons.push(Shortage::Memory {
                requested: reserved,
                unreserved,
            });
        }
        let mut partition_sms = None;
        if spec.class == QosClass::Guaranteed
            && let Some(share) = spec.sm_share
        {
            match self.partition_for(share, self.sms_available()) {
                Ok(sms) => partition_sms = Some(sms),
                Err(r) => reasons.push(r),
            }
        }
        if !reasons.is_empty() {
            return Err(Refusal {
                name: spec.name.clone(),
                class: spec.class,
                reasons,
            });
        }
        // Borrowing is bounded by the unreserved memory at every moment (the pools enforce
        // it); the grant's limit is the tenant's own cap on top of that.
        let memory_limit = match spec.class {
            QosClass::Guaranteed => reserved,
            _ => spec.memory_limit.unwrap_or(self.capacity.memory_bytes),
        };
        Ok(Grant {
            name: spec.name.clone(),
            class: spec.class,
            memory_reserved: reserved,
            memory_limit,
            partition_sms,
        })
    }

    /// Records an admitted grant (as returned by [`Ledger::admit`] on this ledger).
    pub fn commit(&mut self, grant: Grant) {
        self.grants.push(grant);
    }

    /// The partition size of `share` of the SMs, or why it cannot be had when `available`
    /// SMs may still be reserved.
    fn partition_for(&self, share: f64, available: u32) -> Result<u32, Shortage> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(Shortage::Invalid(format!(
                "an SM share must be in (0, 1], not {share}"
            )));
        }
        let sms = self.capacity.partition_sms(share);
        if sms > available {
            return Err(Shortage::Sms {
                requested: sms,
                available,
            });
        }
        Ok(sms)
    }

    /// Decides whether the admitted guaranteed tenant `name` can have a partition of `share`
    /// of the SMs instead of its current one, and returns its grant with the new size. Pure:
    /// the ledger changes only through [`Ledger::replace`].
    ///
    /// # Errors
    /// A [`Refusal`]: no such tenant, not a guaranteed one, a share outside (0, 1], or more
    /// SMs than are free besides its own partition.
    pub fn resize(&self, name: &str, share: f64) -> Result<Grant, Refusal> {
        let refuse = |class, reason| Refusal {
            name: name.to_string(),
            class,
            reasons: vec![reason],
        };
        let Some(grant) = self.grants.iter().find(|g| g.name == name) else {
            return Err(refuse(
                QosClass::Guaranteed,
                Shortage::Invalid("no tenant of that name is admitted".into()),
            ));
        };
        if grant.class != QosClass::Guaranteed {
            return Err(refuse(
                grant.class,
                Shortage::Invalid(
                    "only guaranteed tenants reserve an SM partition; the others share the \
                     unreserved SMs"
                        .into(),
                ),
            ));
        }
        let available = self.sms_available() + grant.partition_sms.unwrap_or(0);
        let sms = self
            .partition_for(share, available)
            .map_err(|r| refuse(grant.class, r))?;
        Ok(Grant {
            partition_sms: Some(sms),
            ..grant.clone()
        })
    }

    /// Replaces the grant of the same name (as returned by [`Ledger::resize`] on this
    /// ledger); a grant of a name not admitted is ignored.
    pub fn replace(&mut self, grant: Grant) {
        if let Some(g) = self.grants.iter_mut().find(|g| g.name == grant.name) {
            *g = grant;
        }
    }

    /// Removes a tenant's grant (it left); returns it.
    pub fn release(&mut self, name: &str) -> Option<Grant> {
        let i = self.grants.iter().position(|g| g.name == name)?;
        Some(self.grants.remove(i))
    }

    /// The admitted tenants in the order their memory is reclaimed under pressure:
    /// best-effort first, then burstable; guaranteed tenants never appear.
    pub fn eviction_order(&self) -> Vec<&Grant> {
        let mut v: Vec<&Grant> = self
            .grants
            .iter()
            .filter(|g| g.class != QosClass::Guaranteed)
            .collect();
        v.sort_by_key(|g| std::cmp::Reverse(g.class));
        v
    }
}

/// Feedback control of best-effort work from a guaranteed tenant's step times.
///
/// Time is cut into slices; in each, best-effort work may start at most [`Pacer::budget`]
/// launches (or chunks). After every guaranteed step the pacer sees its duration: while the
/// recent worst step (the maximum over a short window) is above the objective, the budget is
/// halved; once it is back under `headroom` × objective, the budget grows by one per slice —
/// additive increase, multiplicative decrease, as in TCP congestion control. The budget never
/// drops below `min_budget`, so best-effort work is slowed, never starved.
#[derive(Clone, Debug)]
pub struct Pacer {
    objective: Duration,
    headroom: f64,
    slice: Duration,
    min_budget: u32,
    max_budget: u32,
    budget: u32,
    window: Vec<Duration>,
    window_len: usize,
    slice_start: Duration,
    used: u32,
    steps_in_slice: u32,
}

impl Pacer {
    /// A pacer keeping guaranteed steps under `objective`, with budgets counted per `slice`,
    /// between `min_budget` (≥ 1) and `max_budget` launches per slice.
    pub fn new(objective: Duration, slice: Duration, min_budget: u32, max_budget: u32) -> Self {
        let min_budget = min_budget.max(1);
        let max_budget = max_budget.max(min_budget);
        Pacer {
            objective,
            headroom: 0.9,
            slice,
            min_budget,
            max_budget,
            budget: max_budget,
            window: Vec::new(),
            window_len: 8,
            slice_start: Duration::ZERO,
            used: 0,
            steps_in_slice: 0,
        }
    }

    /// The launches best-effort work may start in the current slice.
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// The objective.
    pub fn objective(&self) -> Duration {
        self.objective
    }

    /// Feeds one guaranteed step's duration.
    pub fn observe(&mut self, step: Duration) {
        if self.window.len() == self.window_len {
            self.window.remove(0);
        }
        self.window.push(step);
        self.steps_in_slice += 1;
        let worst = self.window.iter().max().copied().unwrap_or_default();
        if worst > self.objective {
            self.budget = (self.budget / 2).max(self.min_budget);
            // Judge the next decrease on steps taken under the new budget.
            self.window.clear();
        }
    }

    /// Whether a best-effort launch may start at time `now` (any monotonic clock, the same
    /// for every call); counts it when it may.
    pub fn try_launch(&mut self, now: Duration) -> bool {
        if now >= self.slice_start + self.slice {
            // Grow when the guaranteed work was idle for the slice, or its recent steps kept
            // their headroom under the objective (no step yet since a cut: wait).
            let worst = self.window.iter().max().copied();
            let calm = self.steps_in_slice == 0
                || worst.is_some_and(|w| {
                    w.as_secs_f64() <= self.objective.as_secs_f64() * self.headroom
                });
            if calm {
                self.budget = (self.budget + 1).min(self.max_budget);
            }
            self.slice_start = now;
            self.used = 0;
            self.steps_in_slice = 0;
        }
        if self.used < self.budget {
            self.used += 1;
            true
        } else {
            false
        }
    }

    /// How long until the next slice starts (when [`Pacer::try_launch`] said no).
    pub fn wait(&self, now: Duration) -> Duration {
        (self.slice_start + self.slice).saturating_sub(now)
    }
}
