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
//!
//! ```
//! use gpukit_driver::Device;
//! use gpukit_mem::DevicePool;
//!
//! let Ok(device) = Device::new(0) else {
//!     return Ok(()); // no driver or no device: nothing to allocate
//! };
//! let stream = device.new_stream()?;
//! let pool = DevicePool::new(&device);
//! // A tenant's share: at most 64 MiB, refused beyond it.
//! let tenant = pool.sub_pool(64 << 20);
//! let mut buf = tenant.alloc(1 << 20, &stream)?;
//! buf.copy_from_host(&[1.0f32; 1024])?;
//! assert!(tenant.alloc(64 << 20, &stream).is_err());
//! drop(buf); // back to the pool's cache, not to the driver
//! println!("{}", pool.stats());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod allocator;
#[cfg(test)]
mod allocator_tests;
mod error;
pub mod host;
mod pinned;
mod pool;
mod transfer;

pub use error::{Error, Result};
pub use pinned::{PinnedBuffer, PinnedPool, PinnedStats};
pub use pool::{DeviceBuffer, DevicePool, EvictableBuffer, EvictionRank, PoolStats, Resident};
pub use transfer::{
    DEFAULT_CHUNK_BYTES, HostSource, Priority, Transfer, TransferEngine, TransferStats,
};
