//! # gpukit-mem
//!
//! Every device byte a gpukit tensor uses will come from here (layer 2, above `gpukit-driver`).
//!
//! What it will own (issue "gpukit-mem and the gpukit-sched core"; not written yet):
//! - `DevicePool`: a caching allocator per device. Size-rounded blocks carved from large driver
//!   segments; reuse that is safe across streams (a block freed on stream A is handed to stream B
//!   only after an event recorded on A at free time has completed); per-pool quotas; spill of
//!   evictable buffers to pinned host memory under pressure; statistics.
//! - `PinnedPool`: page-locked host buffers, size-classed and reused.
//! - `TransferEngine`: dedicated host-to-device and device-to-host streams, a double-buffered
//!   pinned staging ring, priorities and completion handles; loading weights from an mmap.
