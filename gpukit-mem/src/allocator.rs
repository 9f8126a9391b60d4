//! The caching allocator's logic, independent of CUDA.
//!
//! Design (after PyTorch's CUDA caching allocator, with cross-stream reuse added):
//!
//! - Requests are rounded up to a multiple of 512 bytes. Blocks of at most 1 MiB ("small") are
//!   carved from 2 MiB segments; larger ones from 20 MiB segments (requests under 10 MiB) or
//!   from a segment of their own size rounded to 2 MiB. Small and large blocks never share a
//!   segment, which keeps small allocations from fragmenting big segments.
//! - A request takes the best-fitting free block (smallest that fits); the rest of the block is
//!   split off when it is at least 512 bytes (small) or more than 1 MiB (large; a large block is
//!   handed out whole otherwise). Freed blocks merge with free neighbours in the same state.
//! - **Stream order.** A freed block belongs to the stream it was used on and can be reused by
//!   that stream at once (the stream's own order makes it safe). Another stream may take it only
//!   after a *fence* (an event) recorded on the owning stream after the free has completed; the
//!   block is then "ready" and any stream may take it. Fences are recorded lazily — only when
//!   another stream needs memory it cannot find — so the common path (alloc and free on one
//!   stream) records no event at all. A fence recorded later than the free is still correct: it
//!   completes after everything queued before the free.
//! - When the backend is out of memory, every fence is waited for, wholly free segments are
//!   returned to the backend, and the allocation is tried once more.
//! - Quotas (byte limits on the sum of the rounded sizes charged to them) are checked under the
//!   same lock, so they can never be exceeded. A quota with a reservation and a lender charges
//!   what it holds beyond its reservation to the lender as well: tenants that may burst share
//!   one limit for their bursts.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Smallest block and rounding granularity.
pub const MIN_BLOCK: usize = 512;
/// Largest "small" block.
pub const SMALL_MAX: usize = 1 << 20;
/// Segment size for small blocks.
pub const SMALL_SEGMENT: usize = 2 << 20;
/// Segment size for large requests under [`LARGE_SHARED_MAX`].
pub const LARGE_SEGMENT: usize = 20 << 20;
/// Large requests from this size up get a segment of their own.
pub const LARGE_SHARED_MAX: usize = 10 << 20;
/// Granularity of dedicated large segments.
pub const LARGE_ROUND: usize = 2 << 20;

/// What the allocator needs from the memory below it and from the streams.
pub trait Backend {
    /// One allocation from the driver, released when dropped.
    type Segment;
    /// A stream handle the allocator may keep (to record fences on it later).
    type Stream: Clone;
    /// A marker recorded on a stream (a CUDA event).
    type Fence;
    /// The backend's error.
    type Error;

    /// A stable identity for a stream.
    fn stream_key(stream: &Self::Stream) -> u64;
    /// Allocates a segment; `Ok(None)` means out of memory. Returns its base address.
    fn alloc_segment(&mut self, bytes: usize) -> Result<Option<(Self::Segment, u64)>, Self::Error>;
    /// Records a fence at the current end of `stream`.
    fn record_fence(&mut self, stream: &Self::Stream) -> Result<Self::Fence, Self::Error>;
    /// Whether everything before the fence has completed, without blocking.
    fn fence_complete(&mut self, fence: &Self::Fence) -> Result<bool, Self::Error>;
    /// Blocks until the fence completes.
    fn wait_fence(&mut self, fence: &Self::Fence) -> Result<(), Self::Error>;
    /// Takes back a fence that is no longer needed (for reuse).
    fn release_fence(&mut self, fence: Self::Fence);
}

/// A byte limit and the bytes charged against it. Shared between a pool and its buffers.
///
/// A quota may also have a *reservation* and a *lender* ([`Quota::borrowing`]): bytes in use up
/// to the reservation are its own; every byte beyond it is borrowed, and charged to the lender
/// too, so all borrowers of one lender together stay under the lender's limit.
#[derive(Debug)]
pub struct Quota {
    /// The limit in bytes (`usize::MAX`: none); may change ([`Quota::set_limit`]).
    limit: AtomicUsize,
    reserved: usize,
    lender: Option<Arc<Quota>>,
    in_use: AtomicUsize,
}

impl Quota {
    /// A quota of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Quota {
            limit: AtomicUsize::new(limit),
            reserved: limit,
            lender: None,
            in_use: AtomicUsize::new(0),
        }
    }

    /// A quota of `limit` bytes whose first `reserved` bytes are its own and whose bytes beyond
    /// them are also charged to `lender` (`reserved` is clamped to `limit`).
    pub fn borrowing(reserved: usize, limit: usize, lender: Arc<Quota>) -> Self {
        Quota {
            limit: AtomicUsize::new(limit),
            reserved: reserved.min(limit),
            lender: Some(lender),
            in_use: AtomicUsize::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes the limit. Lowering it below the bytes in use takes nothing back: allocations
    /// are refused until enough is freed (or evicted).
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Bytes charged now.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    /// The bytes that are its own (the limit, for a quota without a lender).
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The quota it borrows from, if any.
    pub fn lender(&self) -> Option<&Arc<Quota>> {
        self.lender.as_ref()
    }

    /// Bytes borrowed from the lender while `in_use` bytes are charged.
    fn borrowed_at(&self, in_use: usize) -> usize {
        match self.lender {
            Some(_) => in_use.saturating_sub(self.reserved),
            None => 0,
        }
    }

    /// The quota — this one or its lender — that `size` more bytes would overflow now.
    fn overflow(&self, size: usize) -> Option<&Quota> {
        let in_use = self.in_use();
        if in_use.saturating_add(size) > self.limit() {
            return Some(self);
        }
        let lender = self.lender.as_deref()?;
        let extra = self.borrowed_at(in_use + size) - self.borrowed_at(in_use);
        (lender.in_use().saturating_add(extra) > lender.limit()).then_some(lender)
    }

    /// Whether `size` more bytes fit this quota and its lender; the limit that would be
    /// exceeded otherwise, with the bytes charged to it.
    fn check(&self, size: usize) -> Result<(), (usize, usize)> {
        match self.overflow(size) {
            Some(q) => Err((q.limit(), q.in_use())),
            None => Ok(()),
        }
    }

    /// The quota — this one or its lender — that `size` more bytes would overflow now.
    pub fn limiting(self: &Arc<Self>, size: usize) -> Option<Arc<Quota>> {
        let q = self.overflow(size)?;
        Some(match &self.lender {
            Some(lender) if std::ptr::eq(q, &**lender) => lender.clone(),
            _ => self.clone(),
        })
    }

    /// Whether bytes charged here count against `other` (it is this quota or its lender).
    pub fn counts_against(&self, other: &Arc<Quota>) -> bool {
        std::ptr::eq(self, &**other) || self.lender.as_ref().is_some_and(|l| Arc::ptr_eq(l, other))
    }

    /// Charges `size` bytes (and what of them is borrowed, to the lender). Call under the
    /// allocator's lock, after [`Quota::check`].
    fn charge(&self, size: usize) {
        let before = self.in_use.fetch_add(size, Ordering::Relaxed);
        if let Some(lender) = &self.lender {
            let extra = self.borrowed_at(before + size) - self.borrowed_at(before);
            lender.in_use.fetch_add(extra, Ordering::Relaxed);
        }
    }

    /// Gives back `size` bytes (and what of them was borrowed, to the lender).
    fn uncharge(&self, size: usize) {
        let before = self.in_use.fetch_sub(size, Ordering::Relaxed);
        if let Some(lender) = &self.lender {
            let back = self.borrowed_at(before) - self.borrowed_at(before - size);
            lender.in_use.fetch_sub(back, Ordering::Relaxed);
        }
    }
}

/// Why an allocation failed.
#[derive(Debug)]
pub enum AllocError<E> {
    /// A quota would be exceeded.
    Quota {
        /// Bytes asked (rounded).
        requested: usize,
        /// The quota's limit.
        limit: usize,
        /// Bytes charged to it.
        in_use: usize,
    },
    /// The backend has no memory left, even after the cache was released.
    OutOfMemory {
        /// Bytes asked (rounded).
        requested: usize,
        /// Bytes the allocator holds from the backend.
        reserved: usize,
    },
    /// The backend failed otherwise.
    Backend(E),
}

impl<E> From<E> for AllocError<E> {
    fn from(e: E) -> Self {
        AllocError::Backend(e)
    }
}

/// A live allocation: where it is and what to give back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Slab index of the block (the handle for [`Allocator::free`]).
    pub block: usize,
    /// The allocation's serial number (its place in [`Stats::allocations`]): a copy of a handle
    /// freed already, whose block may since hold another allocation, no longer matches it.
    pub serial: u64,
    /// Device address.
    pub addr: u64,
    /// Size of the block (≥ the rounded request).
    pub size: usize,
    /// Bytes charged to the quotas (the rounded request).
    pub charged: usize,
}

/// Counters, all in bytes or events since the allocator was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes of live blocks.
    pub allocated_bytes: usize,
    /// Bytes of segments held from the backend.
    pub reserved_bytes: usize,
    /// Highest `allocated_bytes` seen.
    pub peak_allocated_bytes: usize,
    /// Highest `reserved_bytes` seen.
    pub peak_reserved_bytes: usize,
    /// Live blocks.
    pub live_blocks: usize,
    /// Segments held.
    pub segments: usize,
    /// Successful allocations.
    pub allocations: u64,
    /// Allocations served from cached blocks.
    pub cache_hits: u64,
    /// Allocations that needed a new segment.
    pub cache_misses: u64,
    /// Times the backend ran out of memory and the cache was released to retry.
    pub oom_retries: u64,
    /// Fences recorded to hand blocks from one stream to another.
    pub fences: u64,
    /// Segments returned to the backend.
    pub segments_released: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Small,
    Large,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owner {
    /// Any stream may take it.
    Ready,
    /// Only this stream may take it until a fence makes it ready.
    Stream(u64),
}

/// Free blocks are kept in one ordered set per (kind, owner).
type SetKey = (Kind, Owner);
/// Ordered by size first (best fit), then address; the last field is the block's slab index.
type SetEntry = (usize, u64, usize);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Live,
    Free {
        owner: Owner,
        fence: Option<u64>,
    },
    /// A slab slot merged away, waiting for reuse.
    Dead,
}

#[derive(Clone, Debug)]
struct Block {
    seg: usize,
    addr: u64,
    size: usize,
    prev: Option<usize>,
    next: Option<usize>,
    state: State,
    /// The serial of the allocation that holds it while live (see [`Allocation::serial`]).
    serial: u64,
    /// Bytes that allocation charged to the quotas (what its free gives back, whatever a
    /// handle says).
    charged: usize,
}

struct Segment<S> {
    _handle: S,
    base: u64,
    size: usize,
    kind: Kind,
    first: usize,
}

struct StreamState<St> {
    handle: St,
    /// Blocks freed on this stream since its last fence (may hold stale indices; the block's
    /// state is the truth).
    unfenced: Vec<usize>,
    /// Fences in recording order (they complete in that order).
    pending: VecDeque<u64>,
}

struct FenceEntry<F> {
    fence: F,
    stream: u64,
    blocks: Vec<usize>,
}

/// The allocator. Not thread-safe by itself: the pools wrap it in a mutex.
pub struct Allocator<B: Backend> {
    backend: B,
    blocks: Vec<Block>,
    dead: Vec<usize>,
    segments: Vec<Option<Segment<B::Segment>>>,
    free: HashMap<SetKey, BTreeSet<SetEntry>>,
    streams: HashMap<u64, StreamState<B::Stream>>,
    fences: HashMap<u64, FenceEntry<B::Fence>>,
    next_fence: u64,
    stats: Stats,
}

/// The size a request is rounded to; `None` past `isize::MAX` bytes, which no device holds.
pub fn round_size(bytes: usize) -> Option<usize> {
    bytes
        .max(1)
        .checked_next_multiple_of(MIN_BLOCK)
        .filter(|&size| size <= isize::MAX as usize)
}

fn kind_of(size: usize) -> Kind {
    if size <= SMALL_MAX {
        Kind::Small
    } else {
        Kind::Large
    }
}

fn segment_size(kind: Kind, size: usize) -> usize {
    match kind {
        Kind::Small => SMALL_SEGMENT,
        Kind::Large if size < LARGE_SHARED_MAX => LARGE_SEGMENT,
        Kind::Large => size.next_multiple_of(LARGE_ROUND),
    }
}

/// Whether a block becoming free in `state` may merge with a free neighbour in `other` (the
/// result takes `state`). A fresh free on stream S absorbs ready blocks and S's own blocks: S may
/// use both at once, and other streams get the merged block after S's next fence. A block becoming
/// ready absorbs only ready blocks (absorbing S's would hand them out before S's fence).
fn may_absorb(state: State, other: State) -> bool {
    match (state, other) {
        (
            State::Free {
                owner: Owner::Ready,
                ..
            },
            State::Free {
                owner: Owner::Ready,
                ..
            },
        ) => true,
        (
            State::Free {
                owner: Owner::Stream(s),
                fence: None,
            },
            State::Free { owner, .. },
        ) => owner == Owner::Ready || owner == Owner::Stream(s),
        _ => false,
    }
}

fn should_split(kind: Kind, remainder: usize) -> bool {
    match kind {
        Kind::Small => remainder >= MIN_BLOCK,
        Kind::Large => remainder > SMALL_MAX,
    }
}

impl<B: Backend> Allocator<B> {
    /// An empty allocator over `backend`.
    pub fn new(backend: B) -> Self {
        Allocator {
            backend,
            blocks: Vec::new(),
            dead: Vec::new(),
            segments: Vec::new(),
            free: HashMap::new(),
            streams: HashMap::new(),
            fences: HashMap::new(),
            next_fence: 0,
            stats: Stats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Restarts the peaks at the current allocated and reserved bytes (to measure one phase of
    /// a program, e.g. a generation after the weights are loaded).
    pub fn reset_peaks(&mut self) {
        self.stats.peak_allocated_bytes = self.stats.allocated_bytes;
        self.stats.peak_reserved_bytes = self.stats.reserved_bytes;
    }

    /// The backend (for the pool's own device calls).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Allocates `bytes` ordered on `stream`, charging every quota in `quotas`.
    pub fn alloc(
        &mut self,
        bytes: usize,
        stream: &B::Stream,
        quotas: &[&Quota],
    ) -> Result<Allocation, AllocError<B::Error>> {
        let Some(size) = round_size(bytes) else {
            return Err(AllocError::OutOfMemory {
                requested: bytes,
                reserved: self.stats.reserved_bytes,
            });
        };
        for q in quotas {
            if let Err((limit, in_use)) = q.check(size) {
                return Err(AllocError::Quota {
                    requested: size,
                    limit,
                    in_use,
                });
            }
        }
        let key = B::stream_key(stream);
        self.register_stream(stream);
        let kind = kind_of(size);
        let block = match self.find_cached(kind, size, key)? {
            Some(b) => {
                self.stats.cache_hits += 1;
                b
            }
            None => {
                let b = match self.new_segment(kind, size)? {
                    Some(b) => b,
                    None => {
                        // Out of memory: wait for every fence, give back whole free segments,
                        // and try the cache and the backend once more.
                        self.stats.oom_retries += 1;
                        self.release_cached()?;
                        match self.find_cached(kind, size, key)? {
                            Some(b) => b,
                            None => {
                                self.new_segment(kind, size)?
                                    .ok_or(AllocError::OutOfMemory {
                                        requested: size,
                                        reserved: self.stats.reserved_bytes,
                                    })?
                            }
                        }
                    }
                };
                self.stats.cache_misses += 1;
                b
            }
        };
        let b = self.take(block, size);
        for q in quotas {
            q.charge(size);
        }
        self.stats.allocations += 1;
        self.blocks[b].serial = self.stats.allocations;
        self.blocks[b].charged = size;
        self.stats.live_blocks += 1;
        self.stats.allocated_bytes += self.blocks[b].size;
        self.stats.peak_allocated_bytes = self
            .stats
            .peak_allocated_bytes
            .max(self.stats.allocated_bytes);
        Ok(Allocation {
            block: b,
            serial: self.blocks[b].serial,
            addr: self.blocks[b].addr,
            size: self.blocks[b].size,
            charged: size,
        })
    }

    /// Returns a block whose last use was ordered on `stream`. It stays reserved for that
    /// stream until a fence hands it to others. Returns `false`, changing nothing, for a handle
    /// that is not live here (freed already, or from another allocator).
    pub fn free(&mut self, a: Allocation, stream: &B::Stream, quotas: &[&Quota]) -> bool {
        let b = a.block;
        let live = self.blocks.get(b).is_some_and(|block| {
            block.state == State::Live && block.serial == a.serial && block.addr == a.addr
        });
        if !live {
            return false;
        }
        for q in quotas {
            q.uncharge(self.blocks[b].charged);
        }
        self.stats.live_blocks -= 1;
        self.stats.allocated_bytes -= self.blocks[b].size;
        let stream_key = B::stream_key(stream);
        self.register_stream(stream);
        let stream = stream_key;
        let state = State::Free {
            owner: Owner::Stream(stream),
            fence: None,
        };
        let survivor = self.make_free(b, state);
        if let Some(s) = self.streams.get_mut(&stream) {
            s.unfenced.push(survivor);
        }
        true
    }

    /// Waits for every fence and returns wholly free segments to the backend. Returns the bytes
    /// released.
    pub fn release_cached(&mut self) -> Result<usize, B::Error> {
        let keys: Vec<u64> = self.streams.keys().copied().collect();
        for k in keys {
            self.fence_stream(k)?;
        }
        let fids: Vec<u64> = self.fences.keys().copied().collect();
        for fid in fids {
            if let Some(e) = self.fences.get(&fid) {
                self.backend.wait_fence(&e.fence)?;
            }
        }
        self.poll_fences()?;
        let mut released = 0;
        for si in 0..self.segments.len() {
            let Some(seg) = &self.segments[si] else {
                continue;
            };
            let (first, kind, seg_size) = (seg.first, seg.kind, seg.size);
            let b = &self.blocks[first];
            let whole = b.next.is_none() && b.size == seg_size;
            let ready = b.state
                == State::Free {
                    owner: Owner::Ready,
                    fence: None,
                };
            if whole && ready {
                self.set_remove(kind, first);
                self.blocks[first].state = State::Dead;
                self.dead.push(first);
                released += seg_size;
                self.stats.reserved_bytes -= seg_size;
                self.stats.segments -= 1;
                self.stats.segments_released += 1;
                self.segments[si] = None; // drops the backend segment
            }
        }
        Ok(released)
    }

    /// Lets go of the streams nobody else holds (`held_elsewhere` says which are still held):
    /// their freed blocks are fenced, waited for and made ready for every stream, and their
    /// handles dropped, so that a stream (and what it keeps alive, such as an SM partition)
    /// ends with its last user rather than with the pool. Returns how many were let go.
    ///
    /// # Errors
    /// A backend error recording or waiting for a fence; the streams not yet let go stay.
    pub fn retire_streams(
        &mut self,
        held_elsewhere: impl Fn(&B::Stream) -> bool,
    ) -> Result<usize, B::Error> {
        let gone: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, st)| !held_elsewhere(&st.handle))
            .map(|(&k, _)| k)
            .collect();
        for &key in &gone {
            self.fence_stream(key)?;
            while let Some(&fid) = self.streams.get(&key).and_then(|s| s.pending.front()) {
                if let Some(e) = self.fences.get(&fid) {
                    self.backend.wait_fence(&e.fence)?;
                }
                if let Some(s) = self.streams.get_mut(&key) {
                    s.pending.pop_front();
                }
                self.make_ready(fid);
            }
            self.streams.remove(&key);
        }
        Ok(gone.len())
    }

    fn register_stream(&mut self, stream: &B::Stream) {
        self.streams
            .entry(B::stream_key(stream))
            .or_insert_with(|| StreamState {
                handle: stream.clone(),
                unfenced: Vec::new(),
                pending: VecDeque::new(),
            });
    }

    fn find_cached(
        &mut self,
        kind: Kind,
        size: usize,
        key: u64,
    ) -> Result<Option<usize>, B::Error> {
        if let Some(b) = self.best_fit(kind, Owner::Stream(key), size) {
            return Ok(Some(b));
        }
        if let Some(b) = self.best_fit(kind, Owner::Ready, size) {
            return Ok(Some(b));
        }
        // Blocks of other streams whose fences have completed.
        self.poll_fences()?;
        if let Some(b) = self.best_fit(kind, Owner::Ready, size) {
            return Ok(Some(b));
        }
        // Fence the other streams' recent frees; whatever has already finished becomes ready.
        let others: Vec<u64> = self
            .streams
            .iter()
            .filter(|(k, s)| **k != key && !s.unfenced.is_empty())
            .map(|(k, _)| *k)
            .collect();
        if others.is_empty() {
            return Ok(None);
        }
        for k in others {
            self.fence_stream(k)?;
        }
        self.poll_fences()?;
        Ok(self.best_fit(kind, Owner::Ready, size))
    }

    fn best_fit(&self, kind: Kind, owner: Owner, size: usize) -> Option<usize> {
        self.free
            .get(&(kind, owner))?
            .range((size, 0, 0)..)
            .next()
            .map(|&(_, _, b)| b)
    }

    fn new_segment(&mut self, kind: Kind, size: usize) -> Result<Option<usize>, B::Error> {
        let seg_size = segment_size(kind, size);
        let Some((handle, base)) = self.backend.alloc_segment(seg_size)? else {
            return Ok(None);
        };
        let b = self.new_block(Block {
            seg: usize::MAX,
            addr: base,
            size: seg_size,
            prev: None,
            next: None,
            state: State::Free {
                owner: Owner::Ready,
                fence: None,
            },
            serial: 0,
            charged: 0,
        });
        let si = match self.segments.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.segments.push(None);
                self.segments.len() - 1
            }
        };
        self.segments[si] = Some(Segment {
            _handle: handle,
            base,
            size: seg_size,
            kind,
            first: b,
        });
        self.blocks[b].seg = si;
        self.set_insert(kind, b);
        self.stats.reserved_bytes += seg_size;
        self.stats.peak_reserved_bytes = self
            .stats
            .peak_reserved_bytes
            .max(self.stats.reserved_bytes);
        self.stats.segments += 1;
        Ok(Some(b))
    }

    /// Takes free block `b` (from the free sets) for `size` bytes, splitting off the rest if
    /// worthwhile. Returns the live block.
    fn take(&mut self, b: usize, size: usize) -> usize {
        let kind = self.kind_of_block(b);
        self.set_remove(kind, b);
        let state = self.blocks[b].state;
        let remainder = self.blocks[b].size - size;
        if should_split(kind, remainder) {
            let rest = self.new_block(Block {
                seg: self.blocks[b].seg,
                addr: self.blocks[b].addr + size as u64,
                size: remainder,
                prev: Some(b),
                next: self.blocks[b].next,
                state,
                serial: 0,
                charged: 0,
            });
            if let Some(n) = self.blocks[b].next {
                self.blocks[n].prev = Some(rest);
            }
            self.blocks[b].next = Some(rest);
            self.blocks[b].size = size;
            self.set_insert(kind, rest);
            // The remainder keeps its place in the stream's and the fence's lists.
            if let State::Free { owner, fence } = state {
                match (owner, fence) {
                    (_, Some(fid)) => {
                        if let Some(e) = self.fences.get_mut(&fid) {
                            e.blocks.push(rest);
                        }
                    }
                    (Owner::Stream(s), None) => {
                        if let Some(st) = self.streams.get_mut(&s) {
                            st.unfenced.push(rest);
                        }
                    }
                    (Owner::Ready, None) => {}
                }
            }
        }
        self.blocks[b].state = State::Live;
        b
    }

    /// Marks `b` (not in any free set) free with `state`, merges it with the neighbours that
    /// state may absorb, and puts the survivor in its free set. Returns the survivor.
    fn make_free(&mut self, b: usize, state: State) -> usize {
        let kind = self.kind_of_block(b);
        // Loops: absorbing a ready neighbour can expose one of this stream's blocks behind it.
        let mut cur = b;
        while let Some(p) = self.blocks[cur].prev
            && may_absorb(state, self.blocks[p].state)
        {
            self.set_remove(kind, p);
            self.absorb_next(p);
            cur = p;
        }
        while let Some(n) = self.blocks[cur].next
            && may_absorb(state, self.blocks[n].state)
        {
            self.set_remove(kind, n);
            self.absorb_next(cur);
        }
        self.blocks[cur].state = state;
        self.set_insert(kind, cur);
        cur
    }

    /// Merges `b`'s successor into `b`; the successor's slot dies.
    fn absorb_next(&mut self, b: usize) {
        let Some(n) = self.blocks[b].next else { return };
        self.blocks[b].size += self.blocks[n].size;
        self.blocks[b].next = self.blocks[n].next;
        if let Some(nn) = self.blocks[n].next {
            self.blocks[nn].prev = Some(b);
        }
        self.blocks[n].state = State::Dead;
        self.dead.push(n);
    }

    fn fence_stream(&mut self, key: u64) -> Result<(), B::Error> {
        let Some(st) = self.streams.get_mut(&key) else {
            return Ok(());
        };
        if st.unfenced.is_empty() {
            return Ok(());
        }
        let candidates = std::mem::take(&mut st.unfenced);
        let fence = self.backend.record_fence(&st.handle)?;
        self.stats.fences += 1;
        let fid = self.next_fence;
        self.next_fence += 1;
        let unfenced = State::Free {
            owner: Owner::Stream(key),
            fence: None,
        };
        let mut blocks = Vec::new();
        for b in candidates {
            if self.blocks[b].state == unfenced {
                // The block's set key (kind, owner) is unchanged; only the state tag moves.
                self.blocks[b].state = State::Free {
                    owner: Owner::Stream(key),
                    fence: Some(fid),
                };
                blocks.push(b);
            }
        }
        if blocks.is_empty() {
            self.backend.release_fence(fence);
            return Ok(());
        }
        self.fences.insert(
            fid,
            FenceEntry {
                fence,
                stream: key,
                blocks,
            },
        );
        if let Some(st) = self.streams.get_mut(&key) {
            st.pending.push_back(fid);
        }
        Ok(())
    }

    fn poll_fences(&mut self) -> Result<(), B::Error> {
        let keys: Vec<u64> = self.streams.keys().copied().collect();
        for k in keys {
            while let Some(&fid) = self.streams.get(&k).and_then(|s| s.pending.front()) {
                let done = match self.fences.get(&fid) {
                    Some(e) => self.backend.fence_complete(&e.fence)?,
                    None => true,
                };
                if !done {
                    break;
                }
                if let Some(s) = self.streams.get_mut(&k) {
                    s.pending.pop_front();
                }
                self.make_ready(fid);
            }
        }
        Ok(())
    }

    fn make_ready(&mut self, fid: u64) {
        let Some(entry) = self.fences.remove(&fid) else {
            return;
        };
        let tagged = State::Free {
            owner: Owner::Stream(entry.stream),
            fence: Some(fid),
        };
        for b in entry.blocks {
            if self.blocks[b].state == tagged {
                let kind = self.kind_of_block(b);
                self.set_remove(kind, b);
                self.make_free(
                    b,
                    State::Free {
                        owner: Owner::Ready,
                        fence: None,
                    },
                );
            }
        }
        self.backend.release_fence(entry.fence);
    }

    fn kind_of_block(&self, b: usize) -> Kind {
        self.segments[self.blocks[b].seg]
            .as_ref()
            .map(|s| s.kind)
            .unwrap_or(Kind::Large)
    }

    fn set_key(&self, kind: Kind, b: usize) -> Option<(SetKey, SetEntry)> {
        match self.blocks[b].state {
            State::Free { owner, .. } => {
                Some(((kind, owner), (self.blocks[b].size, self.blocks[b].addr, b)))
            }
            _ => None,
        }
    }

    fn set_insert(&mut self, kind: Kind, b: usize) {
        if let Some((k, e)) = self.set_key(kind, b) {
            self.free.entry(k).or_default().insert(e);
        }
    }

    fn set_remove(&mut self, kind: Kind, b: usize) {
        if let Some((k, e)) = self.set_key(kind, b)
            && let Some(set) = self.free.get_mut(&k)
        {
            set.remove(&e);
        }
    }

    fn new_block(&mut self, block: Block) -> usize {
        match self.dead.pop() {
            Some(i) => {
                self.blocks[i] = block;
                i
            }
            None => {
                self.blocks.push(block);
                self.blocks.len() - 1
            }
        }
    }

    /// Checks every structural invariant; returns the first violation found. For tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut live_bytes = 0;
        let mut live = 0;
        let mut free_count = 0;
        let mut reserved = 0;
        for (si, seg) in self.segments.iter().enumerate() {
            let Some(seg) = seg else { continue };
            reserved += seg.size;
            let mut cur = Some(seg.first);
            let mut addr = seg.base;
            let mut prev: Option<usize> = None;
            while let Some(b) = cur {
                let blk = &self.blocks[b];
                if blk.seg != si || blk.addr != addr || blk.prev != prev {
                    return Err(format!("segment {si}: block {b} misplaced: {blk:?}"));
                }
                match blk.state {
                    State::Dead => return Err(format!("dead block {b} in segment {si}")),
                    State::Live => {
                        live += 1;
                        live_bytes += blk.size;
                    }
                    State::Free { .. } => {
                        free_count += 1;
                        let (k, e) = self.set_key(seg.kind, b).ok_or("no key")?;
                        if !self.free.get(&k).is_some_and(|s| s.contains(&e)) {
                            return Err(format!("free block {b} missing from its set"));
                        }
                        if let Some(p) = prev
                            && self.blocks[p].state == blk.state
                        {
                            return Err(format!("free blocks {p} and {b} not merged"));
                        }
                    }
                }
                addr += blk.size as u64;
                prev = cur;
                cur = blk.next;
            }
            if addr != seg.base + seg.size as u64 {
                return Err(format!(
                    "segment {si}: blocks cover {} of {}",
                    addr - seg.base,
                    seg.size
                ));
            }
        }
        let in_sets: usize = self.free.values().map(BTreeSet::len).sum();
        if in_sets != free_count {
            return Err(format!(
                "{in_sets} entries in free sets, {free_count} free blocks"
            ));
        }
        if live != self.stats.live_blocks || live_bytes != self.stats.allocated_bytes {
            return Err(format!(
                "stats say {} live blocks / {} bytes, segments hold {live} / {live_bytes}",
                self.stats.live_blocks, self.stats.allocated_bytes
            ));
        }
        if reserved != self.stats.reserved_bytes {
            return Err(format!(
                "reserved {} vs {reserved}",
                self.stats.reserved_bytes
            ));
        }
        Ok(())
    }
}
