//! # gpukit-sched
//!
//! The runtime and its execution lanes (layer 3, above `gpukit-mem`).
//!
//! What it will own (not written yet): a `Runtime` that opens the devices and owns each one's
//! pool, transfer engine and lanes; `Lane`, a stream with a priority bound to a tenant, which every
//! kernel launch names; fork/join between lanes with events; later tenants with QoS classes
//! (Guaranteed / Burstable / BestEffort), admission control, partitions (memory quota plus SM share
//! through green contexts) and pacing of best-effort work.
