//! `DevicePool`: the caching, stream-ordered device allocator, with quotas and eviction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use gpukit_driver::{Device, DeviceAllocation, DeviceCopy, DevicePtr, Event, Stream};

use crate::allocator::{AllocError, Allocation, Allocator, Backend, Quota, Stats};
use crate::error::{Error, Result, lock};
use crate::pinned::{PinnedBuffer, PinnedPool};

/// The allocator's view of CUDA: segments are `cuMemAlloc` allocations, fences are events
/// (recycled).
struct CudaBackend {
    device: Device,
    spare_events: Vec<Event>,
}

/// Events kept for reuse as fences.
const SPARE_EVENTS: usize = 64;

impl Backend for CudaBackend {
    type Segment = DeviceAllocation;
    type Stream = Stream;
    type Fence = Event;
    type Error = gpukit_driver::Error;

    fn stream_key(stream: &Stream) -> u64 {
        stream.as_raw() as usize as u64
    }

    fn alloc_segment(
        &mut self,
        bytes: usize,
    ) -> Result<Option<(DeviceAllocation, u64)>, Self::Error> {
        match self.device.alloc(bytes) {
            Ok(a) => {
                let base = a.ptr().0;
                Ok(Some((a, base)))
            }
            Err(e) if e.is_out_of_memory() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn record_fence(&mut self, stream: &Stream) -> Result<Event, Self::Error> {
        let event = match self.spare_events.pop() {
            Some(e) => e,
            None => self.device.new_event(false)?,
        };
        stream.record(&event)?;
        Ok(event)
    }

    fn fence_complete(&mut self, fence: &Event) -> Result<bool, Self::Error> {
        fence.is_complete()
    }

    fn wait_fence(&mut self, fence: &Event) -> Result<(), Self::Error> {
        fence.synchronize()
    }

    fn release_fence(&mut self, fence: Event) {
        if self.spare_events.len() < SPARE_EVENTS {
            self.spare_events.push(fence);
        }
    }
}

/// Counters of a [`DevicePool`] (shared by a pool and its sub-pools), in bytes or events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The allocator's counters: bytes in use, reserved, peaks, allocations, hits, misses, ….
    pub allocator: Stats,
    /// Evictable buffers spilled to pinned host memory.
    pub evictions: u64,
    /// Spilled buffers brought back to the device.
    pub restores: u64,
}

impl std::fmt::Display for PoolStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = &self.allocator;
        let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
        write!(
            f,
            "{:.1} MiB in use ({} blocks, peak {:.1} MiB), {:.1} MiB reserved in {} segments \
             (peak {:.1} MiB); {} allocations, {} cache hits, {} misses, {} OOM retries, \
             {} cross-stream fences; {} evictions, {} restores",
            mib(a.allocated_bytes),
            a.live_blocks,
            mib(a.peak_allocated_bytes),
            mib(a.reserved_bytes),
            a.segments,
            mib(a.peak_reserved_bytes),
            a.allocations,
            a.cache_hits,
            a.cache_misses,
            a.oom_retries,
            a.fences,
            self.evictions,
            self.restores
        )
    }
}

struct Shared {
    device: Device,
    allocator: Mutex<Allocator<CudaBackend>>,
    pinned: PinnedPool,
    evictables: Mutex<Vec<Weak<Slot>>>,
    clock: AtomicU64,
    evictions: AtomicU64,
    restores: AtomicU64,
}

/// A caching allocator of device memory for one device, ordered by streams.
///
/// - Requests are rounded to 512 bytes and carved from large cached segments (see
///   [`crate::allocator`] for the size classes and splitting rules); freed blocks are kept, not
///   returned to the driver, until [`DevicePool::empty_cache`] or memory pressure.
/// - **Stream order**: a [`DeviceBuffer`] is ordered on a stream. When it is dropped its block can
///   be reused by that stream immediately, and by another stream only once an event recorded on
///   the first stream after the drop has completed.
/// - **Quotas**: [`DevicePool::with_limit`] and [`DevicePool::sub_pool`] cap the bytes in use;
///   over the cap an allocation returns [`Error::OutOfMemory`] (after evicting what it can).
/// - **Eviction**: [`DevicePool::alloc_evictable`] buffers are spilled to pinned host memory,
///   least recently used first, when an allocation would otherwise fail, and restored on use.
///
/// Cheap to clone (clones share the cache); thread-safe.
#[derive(Clone)]
pub struct DevicePool {
    shared: Arc<Shared>,
    /// This pool's quota chain, outermost first.
    quotas: Arc<Vec<Arc<Quota>>>,
    /// When this pool's evictable buffers go, under another pool's pressure.
    eviction: EvictionRank,
}

/// When a pool's [`EvictableBuffer`]s are spilled to make room for *another* pool's allocation
/// on a full device. Buffers go in rank order, least recently used first within a rank. A pool
/// always spills its own buffers, whatever their rank, to meet its own quota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvictionRank {
    /// Spilled before any other rank (best-effort work).
    First,
    /// After every `First` buffer (the default).
    #[default]
    Normal,
    /// Never spilled for another pool (reserved, guaranteed memory).
    Never,
}

impl std::fmt::Debug for DevicePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevicePool({:?}: {})", self.shared.device, self.stats())
    }
}

impl DevicePool {
    /// A pool on `device` with no limit but the device's memory.
    pub fn new(device: &Device) -> Self {
        Self::build(device, Vec::new())
    }

    /// A pool on `device` whose buffers may total at most `limit` bytes (rounded sizes).
    pub fn with_limit(device: &Device, limit: usize) -> Self {
        Self::build(device, vec![Arc::new(Quota::new(limit))])
    }

    fn build(device: &Device, quotas: Vec<Arc<Quota>>) -> Self {
        DevicePool {
            shared: Arc::new(Shared {
                device: device.clone(),
                allocator: Mutex::new(Allocator::new(CudaBackend {
                    device: device.clone(),
                    spare_events: Vec::new(),
                })),
                pinned: PinnedPool::new(device),
                evictables: Mutex::new(Vec::new()),
                clock: AtomicU64::new(0),
                evictions: AtomicU64::new(0),
                restores: AtomicU64::new(0),
            }),
            quotas: Arc::new(quotas),
            eviction: EvictionRank::default(),
        }
    }

    /// A pool sharing this one's cache whose buffers may total at most `limit` bytes, and which
    /// also counts against this pool's limits (a tenant's share).
    pub fn sub_pool(&self, limit: usize) -> DevicePool {
        self.with_quota(Quota::new(limit))
    }

    /// A sub-pool that holds `reserved` bytes of its own and may grow to `limit` by borrowing
    /// from `lender`: every byte beyond `reserved` is charged to `lender`'s limit too, so the
    /// pools borrowing from one lender (and the lender's own buffers) share that limit. This is
    /// how a burstable tenant grows into memory nobody has reserved.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `lender` has no limit of its own or shares another cache.
    pub fn sub_pool_borrowing(
        &self,
        reserved: usize,
        limit: usize,
        lender: &DevicePool,
    ) -> Result<DevicePool> {
        if !Arc::ptr_eq(&self.shared, &lender.shared) {
            return Err(Error::InvalidArgument(
                "a pool can only borrow from a pool of the same cache".into(),
            ));
        }
        let Some(quota) = lender.quotas.last() else {
            return Err(Error::InvalidArgument(
                "the lender pool has no limit to lend from (make it with sub_pool)".into(),
            ));
        };
        Ok(self.with_quota(Quota::borrowing(reserved, limit, quota.clone())))
    }

    fn with_quota(&self, quota: Quota) -> DevicePool {
        let mut quotas = (*self.quotas).clone();
        quotas.push(Arc::new(quota));
        DevicePool {
            shared: self.shared.clone(),
            quotas: Arc::new(quotas),
            eviction: self.eviction,
        }
    }

    /// This pool with another [`EvictionRank`] for its evictable buffers (clones share the
    /// cache and the quotas).
    pub fn with_eviction_rank(mut self, rank: EvictionRank) -> DevicePool {
        self.eviction = rank;
        self
    }

    /// The rank of this pool's evictable buffers.
    pub fn eviction_rank(&self) -> EvictionRank {
        self.eviction
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.shared.device
    }

    /// The pinned host pool used for spills (and available to transfers).
    pub fn pinned(&self) -> &PinnedPool {
        &self.shared.pinned
    }

    /// This pool's own limit, if it has one.
    pub fn limit(&self) -> Option<usize> {
        self.quotas.last().map(|q| q.limit())
    }

    /// Changes this pool's own limit (a tenant's share grown or shrunk). Lowering it below the
    /// bytes in use frees nothing: allocations are refused until enough is freed or evicted.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a pool without a limit of its own.
    pub fn set_limit(&self, limit: usize) -> Result<()> {
        match self.quotas.last() {
            Some(q) => {
                q.set_limit(limit);
                Ok(())
            }
            None => Err(Error::InvalidArgument(
                "this pool has no limit of its own to change".into(),
            )),
        }
    }

    /// Bytes charged to this pool's own limit (`None` without a limit: see [`PoolStats`]).
    pub fn in_use(&self) -> Option<usize> {
        self.quotas.last().map(|q| q.in_use())
    }

    /// Bytes this pool may still allocate before one of its limits (its own, or a parent
    /// pool's) refuses; `None` for a pool without limits.
    pub fn headroom(&self) -> Option<usize> {
        self.quotas
            .iter()
            .map(|q| q.limit().saturating_sub(q.in_use()))
            .min()
    }

    /// The counters of the cache this pool shares.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            allocator: lock(&self.shared.allocator).stats(),
            evictions: self.shared.evictions.load(Ordering::Relaxed),
            restores: self.shared.restores.load(Ordering::Relaxed),
        }
    }

    /// Restarts the shared cache's peak counters at the bytes in use now
    /// ([`crate::allocator::Allocator::reset_peaks`]).
    pub fn reset_peaks(&self) {
        lock(&self.shared.allocator).reset_peaks();
    }

    /// Returns every wholly free segment to the driver (after waiting for the streams that last
    /// used them); returns the bytes released.
    ///
    /// # Errors
    /// A driver error from waiting on a stream.
    pub fn empty_cache(&self) -> Result<usize> {
        Ok(lock(&self.shared.allocator).release_cached()?)
    }

    /// Lets go of the streams only the pool still holds (every other handle dropped), after
    /// waiting for the work that last used their cached blocks; those blocks stay cached, for
    /// any stream. The pool otherwise keeps every stream it served alive, and with it the SM
    /// partition a stream runs on. Returns how many streams were let go.
    ///
    /// # Errors
    /// A driver error recording or waiting for an event.
    pub fn retire_streams(&self) -> Result<usize> {
        Ok(lock(&self.shared.allocator).retire_streams(|s| s.is_shared())?)
    }

    /// Refuses a buffer of zero bytes or one ordered on a stream of another device.
    fn check_request(&self, bytes: usize, stream: &Stream) -> Result<()> {
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "a device buffer needs at least one byte".into(),
            ));
        }
        if stream.device() != &self.shared.device {
            return Err(Error::InvalidArgument(format!(
                "stream of {:?} given to a pool of {:?}",
                stream.device(),
                self.shared.device
            )));
        }
        Ok(())
    }

    /// Allocates `bytes` (contents undefined) ordered on `stream`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] over a quota, [`Error::DeviceOutOfMemory`] when the device is full —
    /// in both cases only after evicting what could be evicted; [`Error::InvalidArgument`] for
    /// zero bytes or a stream of another device.
    pub fn alloc(&self, bytes: usize, stream: &Stream) -> Result<DeviceBuffer> {
        self.check_request(bytes, stream)?;
        let quotas: Vec<&Quota> = self.quotas.iter().map(|q| &**q).collect();
        let mut evicted = false;
        loop {
            let r = lock(&self.shared.allocator).alloc(bytes, stream, &quotas);
            match r {
                Ok(a) => {
                    return Ok(DeviceBuffer {
                        backing: Backing::Pool(a),
                        len: bytes,
                        stream: stream.clone(),
                        pool: self.clone(),
                    });
                }
                Err(AllocError::Quota {
                    requested,
                    limit,
                    in_use,
                }) => {
                    if requested > limit {
                        // No eviction can make room: spill nothing for nothing.
                        return Err(Error::OutOfMemory {
                            requested,
                            limit,
                            in_use,
                        });
                    }
                    let scope = self.quotas.iter().find_map(|q| q.limiting(requested));
                    let need = (in_use + requested).saturating_sub(limit);
                    if !evicted && self.evict(need, scope.as_ref())? > 0 {
                        evicted = true;
                        continue;
                    }
                    return Err(Error::OutOfMemory {
                        requested,
                        limit,
                        in_use,
                    });
                }
                Err(AllocError::OutOfMemory {
                    requested,
                    reserved,
                }) => {
                    if !evicted && self.evict(requested, None)? > 0 {
                        evicted = true;
                        continue;
                    }
                    return Err(Error::DeviceOutOfMemory {
                        requested,
                        reserved,
                    });
                }
                Err(AllocError::Backend(e)) => return Err(e.into()),
            }
        }
    }

    /// Allocates a buffer that may be spilled to pinned host memory when memory runs short
    /// (least recently used first) and is restored, bit for bit, on its next
    /// [`EvictableBuffer::resident`].
    ///
    /// # Errors
    /// As [`DevicePool::alloc`].
    pub fn alloc_evictable(&self, bytes: usize, stream: &Stream) -> Result<EvictableBuffer> {
        let buf = self.alloc(bytes, stream)?;
        let slot = Arc::new(Slot {
            home: Mutex::new(Home::Device(buf)),
            rank: self.eviction,
            last_use: AtomicU64::new(self.tick()),
            len: bytes,
        });
        let mut list = lock(&self.shared.evictables);
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&slot));
        drop(list);
        Ok(EvictableBuffer {
            slot,
            pool: self.clone(),
        })
    }

    fn tick(&self) -> u64 {
        self.shared.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// Wraps `len` bytes of device memory at `addr` that another library allocated (a tensor
    /// imported through DLPack, for example) as a buffer ordered on `stream`, without copying.
    /// The pool neither counts nor frees it: dropping the buffer waits for `stream` and then
    /// drops `owner`, which keeps the memory alive until then.
    ///
    /// # Safety
    /// `addr..addr + len` must be device memory of this pool's device (or memory the device can
    /// address), valid for reads and writes for as long as `owner` lives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero bytes or a stream of another device.
    pub unsafe fn adopt(
        &self,
        addr: u64,
        len: usize,
        stream: &Stream,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<DeviceBuffer> {
        self.check_request(len, stream)?;
        Ok(DeviceBuffer {
            backing: Backing::Foreign {
                addr,
                owner: Some(owner),
            },
            len,
            stream: stream.clone(),
            pool: self.clone(),
        })
    }

    /// Spills unlocked evictable buffers, least recently used first, until `need` bytes are freed
    /// (counting only buffers charged to `scope` when one is given). Returns the bytes freed.
    fn evict(&self, need: usize, scope: Option<&Arc<Quota>>) -> Result<usize> {
        let mut candidates: Vec<Arc<Slot>> = lock(&self.shared.evictables)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let own = self.quotas.last();
        candidates.sort_by_key(|s| (s.rank, s.last_use.load(Ordering::Relaxed)));
        let mut freed = 0;
        for slot in candidates {
            if freed >= need.max(1) {
                break;
            }
            // A buffer in use (locked) is skipped, never waited for: no lock-order deadlock.
            let Ok(mut home) = slot.home.try_lock() else {
                continue;
            };
            let Home::Device(buf) = &*home else { continue };
            let ours = |q: &Arc<Quota>| buf.pool.quotas.iter().any(|bq| bq.counts_against(q));
            match scope {
                // Over a quota: only buffers charged to it make room.
                Some(q) if !ours(q) => continue,
                // Device full: another pool's `Never` buffers stay.
                None if slot.rank == EvictionRank::Never && !own.is_some_and(ours) => {
                    continue;
                }
                _ => {}
            }
            let mut host = self.shared.pinned.alloc(slot.len)?;
            // SAFETY: `buf` is live and holds `slot.len` bytes; `host` is pinned memory of that
            // size that nothing else touches; the stream is synchronised before either is used.
            unsafe {
                buf.stream
                    .memcpy_dtoh_async(host.as_mut_ptr(), buf.ptr(), slot.len)
            }?;
            buf.stream.synchronize()?;
            freed += buf.charged();
            *home = Home::Host(host); // drops the device buffer: its block returns to the cache
            self.shared.evictions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(freed)
    }
}

/// Where a [`DeviceBuffer`]'s bytes come from.
enum Backing {
    /// A block of the pool's allocator, returned to its cache on drop.
    Pool(Allocation),
    /// Memory another library allocated ([`DevicePool::adopt`]): on drop, `owner` is dropped
    /// (which lets that library free it) and the pool frees nothing.
    Foreign {
        addr: u64,
        owner: Option<Box<dyn std::any::Any + Send + Sync>>,
    },
}

/// A block of device memory from a [`DevicePool`], ordered on a stream; returned to the pool's
/// cache when dropped (reusable at once by its stream, by others after an event). A buffer made
/// by [`DevicePool::adopt`] wraps memory the pool did not allocate instead.
pub struct DeviceBuffer {
    backing: Backing,
    len: usize,
    stream: Stream,
    pool: DevicePool,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr().0, self.len)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match &mut self.backing {
            Backing::Pool(alloc) => {
                let quotas: Vec<&Quota> = self.pool.quotas.iter().map(|q| &**q).collect();
                // The buffer owns its allocation alone: it is live until this free.
                let _ = lock(&self.pool.shared.allocator).free(*alloc, &self.stream, &quotas);
            }
            Backing::Foreign { owner, .. } => {
                // The owner may free the memory at once: work queued on it must end first. A
                // failed wait (a device error) leaves the memory with its owner all the same.
                let _ = self.stream.synchronize();
                drop(owner.take());
            }
        }
    }
}

impl DeviceBuffer {
    /// The first byte's device address.
    pub fn ptr(&self) -> DevicePtr {
        match &self.backing {
            Backing::Pool(a) => DevicePtr(a.addr),
            Backing::Foreign { addr, .. } => DevicePtr(*addr),
        }
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: buffers have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the underlying block (≥ `len`; `len` for adopted memory).
    pub fn capacity(&self) -> usize {
        match &self.backing {
            Backing::Pool(a) => a.size,
            Backing::Foreign { .. } => self.len,
        }
    }

    /// Whether the bytes belong to another library ([`DevicePool::adopt`]).
    pub fn is_adopted(&self) -> bool {
        matches!(self.backing, Backing::Foreign { .. })
    }

    /// Bytes charged to the pool's quotas (none for adopted memory).
    fn charged(&self) -> usize {
        match &self.backing {
            Backing::Pool(a) => a.charged,
            Backing::Foreign { .. } => 0,
        }
    }

    /// The stream this buffer is ordered on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The pool it came from.
    pub fn pool(&self) -> &DevicePool {
        &self.pool
    }

    /// Hands the buffer to stream `to`: `to` waits (on the device) for the work queued so far on
    /// the current stream, and from now on the buffer is ordered on `to` (its drop is ordered
    /// there too).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a stream of another device; driver errors.
    pub fn move_to_stream(&mut self, to: &Stream) -> Result<()> {
        if to.device() != self.stream.device() {
            return Err(Error::InvalidArgument(
                "a buffer can only move to a stream of its own device".into(),
            ));
        }
        if to == &self.stream {
            return Ok(());
        }
        let event = to.device().new_event(false)?;
        self.stream.record(&event)?;
        to.wait(&event)?;
        self.stream = to.clone();
        Ok(())
    }

    /// Re-orders the buffer on `stream` without synchronising: for callers that have already
    /// made `stream` wait for everything that touched the buffer.
    pub(crate) fn set_stream_ordered(&mut self, stream: &Stream) {
        self.stream = stream.clone();
    }

    fn check_len(&self, bytes: usize, what: &str) -> Result<()> {
        if bytes > self.len {
            return Err(Error::InvalidArgument(format!(
                "{what}: {bytes} bytes do not fit the {}-byte buffer",
                self.len
            )));
        }
        Ok(())
    }

    /// Copies `src` into the start of the buffer on its stream (from pageable memory: `src` is
    /// staged before this returns).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `src` is larger than the buffer; driver errors.
    pub fn copy_from_host<T: DeviceCopy>(&mut self, src: &[T]) -> Result<()> {
        let bytes = std::mem::size_of_val(src);
        self.check_len(bytes, "copy_from_host")?;
        // SAFETY: the range lies inside this live buffer (checked), which is ordered on this
        // stream; pageable sources are staged by the driver before the call returns.
        unsafe {
            self.stream
                .memcpy_htod_async(self.ptr(), src.as_ptr().cast(), bytes)
        }?;
        Ok(())
    }

    /// Copies the start of the buffer into `dst`, waiting for the buffer's stream.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dst` is larger than the buffer; driver errors, including
    /// those of earlier work on the stream.
    pub fn copy_to_host<T: DeviceCopy>(&self, dst: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(dst);
        self.check_len(bytes, "copy_to_host")?;
        // SAFETY: the range lies inside this live buffer; `dst` is exclusively borrowed plain
        // data and the stream is synchronised before the borrow ends.
        unsafe {
            self.stream
                .memcpy_dtoh_async(dst.as_mut_ptr().cast(), self.ptr(), bytes)
        }?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Sets every byte to `value` on the buffer's stream (tests poison with 0xFF).
    ///
    /// # Errors
    /// Driver errors.
    pub fn fill_bytes(&mut self, value: u8) -> Result<()> {
        // SAFETY: the whole range is this live buffer, ordered on this stream.
        unsafe { self.stream.memset_d8_async(self.ptr(), value, self.len) }?;
        Ok(())
    }
}

enum Home {
    Device(DeviceBuffer),
    Host(PinnedBuffer),
}

struct Slot {
    home: Mutex<Home>,
    /// The rank of the pool that allocated it.
    rank: EvictionRank,
    last_use: AtomicU64,
    len: usize,
}

/// A device buffer the pool may spill to pinned host memory under pressure. Use it through
/// [`EvictableBuffer::resident`], which brings it back if needed and keeps it on the device while
/// the returned guard lives.
pub struct EvictableBuffer {
    slot: Arc<Slot>,
    pool: DevicePool,
}

impl std::fmt::Debug for EvictableBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EvictableBuffer({} bytes)", self.slot.len)
    }
}

/// Proof that an [`EvictableBuffer`] is on the device; it cannot be evicted while this lives.
pub struct Resident<'a> {
    home: MutexGuard<'a, Home>,
}

impl EvictableBuffer {
    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.slot.len
    }

    /// Always false: buffers have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.slot.len == 0
    }

    /// Whether the data is on the device now (false when spilled, or while another thread holds
    /// it resident).
    pub fn is_on_device(&self) -> bool {
        match self.slot.home.try_lock() {
            Ok(h) => matches!(*h, Home::Device(_)),
            Err(_) => false,
        }
    }

    /// Makes the buffer resident (allocating on `stream` and copying its data back from host
    /// memory if it was spilled; the copy is complete when this returns) and marks it used.
    ///
    /// # Errors
    /// As [`DevicePool::alloc`] when it must be brought back.
    pub fn resident(&self, stream: &Stream) -> Result<Resident<'_>> {
        let mut home = lock(&self.slot.home);
        self.slot
            .last_use
            .store(self.pool.tick(), Ordering::Relaxed);
        if let Home::Host(host) = &*home {
            let buf = self.pool.alloc(self.slot.len, stream)?;
            // SAFETY: `buf` is a fresh live buffer of `len` bytes ordered on `stream`; `host` is
            // pinned, holds `len` bytes and lives until the synchronisation below.
            unsafe { stream.memcpy_htod_async(buf.ptr(), host.as_ptr(), self.slot.len) }?;
            stream.synchronize()?;
            *home = Home::Device(buf);
            self.pool.shared.restores.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Resident { home })
    }
}

impl Resident<'_> {
    /// The device buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        match &*self.home {
            Home::Device(b) => b,
            // `resident` always leaves the data on the device before building a `Resident`.
            Home::Host(_) => unreachable_home(),
        }
    }

    /// The device buffer, writable.
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        match &mut *self.home {
            Home::Device(b) => b,
            Home::Host(_) => unreachable_home(),
        }
    }
}

#[cold]
fn unreachable_home() -> ! {
    unreachable!("a Resident guard always holds a device buffer")
}
