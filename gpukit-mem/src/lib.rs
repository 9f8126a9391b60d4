//! # gpukit-mem
//!
//! Every device byte a gpukit tensor uses comes from here (layer 1, above `gpukit-driver`).
//!
//! - [`DevicePool`] — a caching allocator per device, ordered by streams: blocks carved from
//!   large cached segments, reused by the same stream at once and by other streams after an
//!   event; quotas and sub-pools; eviction of [`EvictableBuffer`]s to pinned host memory;
//!   statistics. Its logic lives in [`allocator`], which is tested without a GPU.
//! - [`PinnedPool`] — page-locked host buffers, size-classed and reused.
//! - [`TransferEngine`] — host↔device copies on dedicated streams, queued by priority, staged
//!   through a double-buffered pinned ring, with completion handles.

pub mod allocator;
#[cfg(test)]
mod allocator_tests;
mod error;
mod pinned;
mod pool;
mod transfer;

pub use error::{Error, Result};
pub use pinned::{PinnedBuffer, PinnedPool, PinnedStats};
pub use pool::{DeviceBuffer, DevicePool, EvictableBuffer, PoolStats, Resident};
pub use transfer::{
    DEFAULT_CHUNK_BYTES, HostSource, Priority, Transfer, TransferEngine, TransferStats,
};
