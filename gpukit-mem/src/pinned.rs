//! `PinnedPool`: page-locked host buffers, size-classed and reused.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use gpukit_driver::{Device, PinnedAllocation};

use crate::error::{Result, lock};

/// Smallest pinned buffer handed out.
const MIN_CLASS: usize = 64 << 10;

/// Counters of a [`PinnedPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Bytes of buffers handed out now (by size class).
    pub in_use_bytes: usize,
    /// Bytes cached for reuse.
    pub cached_bytes: usize,
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that needed `cuMemHostAlloc`.
    pub misses: u64,
}

struct Shared {
    device: Device,
    free: Mutex<BTreeMap<usize, Vec<PinnedAllocation>>>,
    stats: Mutex<PinnedStats>,
}

/// A cache of pinned host memory. Allocating pinned memory takes milliseconds (the pages are
/// locked by the kernel), so buffers are rounded up to a power of two of at least 64 KiB and kept
/// for reuse when dropped. Cheap to clone; thread-safe.
#[derive(Clone)]
pub struct PinnedPool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedPool({:?})", self.stats())
    }
}

/// A pinned host buffer of `len` bytes from a [`PinnedPool`]; goes back to the pool on drop.
pub struct PinnedBuffer {
    /// Taken out only in `drop`, to go back to the pool.
    alloc: ManuallyDrop<PinnedAllocation>,
    len: usize,
    pool: Arc<Shared>,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({} bytes)", self.len)
    }
}

/// The power-of-two size class of a request; `None` past the largest power of two.
fn class_of(bytes: usize) -> Option<usize> {
    bytes.max(MIN_CLASS).checked_next_power_of_two()
}

impl PinnedPool {
    /// An empty pool for `device`'s context.
    pub fn new(device: &Device) -> Self {
        PinnedPool {
            shared: Arc::new(Shared {
                device: device.clone(),
                free: Mutex::new(BTreeMap::new()),
                stats: Mutex::new(PinnedStats::default()),
            }),
        }
    }

    /// A buffer of `bytes` bytes (contents unspecified: earlier users' data may remain).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for zero bytes or more than any size class holds
    /// (2^63 on 64-bit hosts); a driver error if the host cannot lock more memory.
    pub fn alloc(&self, bytes: usize) -> Result<PinnedBuffer> {
        if bytes == 0 {
            return Err(crate::Error::InvalidArgument(
                "a pinned buffer needs at least one byte".into(),
            ));
        }
        let class = class_of(bytes).ok_or_else(|| {
            crate::Error::InvalidArgument(format!("a pinned buffer of {bytes} bytes"))
        })?;
        let cached = lock(&self.shared.free).get_mut(&class).and_then(Vec::pop);
        let alloc = match cached {
            Some(a) => {
                let mut s = lock(&self.shared.stats);
                s.hits += 1;
                s.cached_bytes -= class;
                a
            }
            None => {
                let a = self.shared.device.alloc_pinned(class)?;
                lock(&self.shared.stats).misses += 1;
                a
            }
        };
        lock(&self.shared.stats).in_use_bytes += class;
        Ok(PinnedBuffer {
            alloc: ManuallyDrop::new(alloc),
            len: bytes,
            pool: self.shared.clone(),
        })
    }

    /// Frees every cached buffer (`cuMemFreeHost`); returns the bytes released.
    pub fn empty_cache(&self) -> usize {
        let drained = std::mem::take(&mut *lock(&self.shared.free));
        let bytes: usize = drained.values().flatten().map(PinnedAllocation::len).sum();
        lock(&self.shared.stats).cached_bytes -= bytes;
        bytes
    }

    /// The counters.
    pub fn stats(&self) -> PinnedStats {
        *lock(&self.shared.stats)
    }
}

impl PinnedBuffer {
    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: buffers have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.alloc.as_slice()[..self.len]
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.alloc.as_mut_slice()[..len]
    }

    /// First byte, for asynchronous copies.
    pub fn as_ptr(&self) -> *const u8 {
        self.alloc.as_ptr()
    }

    /// First byte, writable, for asynchronous copies.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.alloc.as_mut_ptr()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and `self.alloc` is not used after this.
        let a = unsafe { ManuallyDrop::take(&mut self.alloc) };
        let class = a.len();
        {
            let mut s = lock(&self.pool.stats);
            s.in_use_bytes -= class;
            s.cached_bytes += class;
        }
        lock(&self.pool.free).entry(class).or_default().push(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_powers_of_two_or_none() {
        assert_eq!(class_of(1), Some(MIN_CLASS));
        assert_eq!(class_of(MIN_CLASS + 1), Some(2 * MIN_CLASS));
        assert_eq!(class_of(1 << 63), Some(1 << 63));
        assert_eq!(class_of((1 << 63) + 1), None);
    }
}
