//! `TransferEngine`: host↔device copies on dedicated streams, queued by priority.

use std::borrow::Borrow;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use gpukit_driver::{Device, Event, Stream};

use crate::error::{Error, Result, lock};
use crate::pinned::{PinnedBuffer, PinnedPool};
use crate::pool::{DeviceBuffer, DevicePool};

/// Size of each staging buffer of the pinned ring (two of them per direction).
pub const DEFAULT_CHUNK_BYTES: usize = 64 << 20;

/// Queue priority of a transfer: higher runs first; equal priorities run in submission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Prefetches and background loads.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Data a computation is waiting for.
    High,
}

/// Host bytes to upload: owned, shared, memory-mapped, a file range, or already pinned.
pub enum HostSource {
    /// Bytes `range` of an open file, read with parallel `pread`s straight into the pinned
    /// staging buffers (no page faults on a mapping; the fastest way from the page cache or disk).
    File {
        /// The file.
        file: Arc<std::fs::File>,
        /// Which bytes.
        range: Range<u64>,
    },
    /// Any owned or shared bytes (a `Vec<u8>`, an `Arc<[u8]>`, a `memmap2::Mmap`, …) and the range
    /// of them to copy. Copied through the pinned staging ring.
    Pageable {
        /// The bytes.
        data: Arc<dyn AsRef<[u8]> + Send + Sync>,
        /// Which of them.
        range: Range<usize>,
    },
    /// Pinned memory: copied directly by the DMA engine, no staging.
    Pinned(PinnedBuffer),
}

impl HostSource {
    /// All of `data`, staged.
    pub fn bytes(data: impl AsRef<[u8]> + Send + Sync + 'static) -> Self {
        let len = data.as_ref().len();
        HostSource::Pageable {
            data: Arc::new(data),
            range: 0..len,
        }
    }

    /// Bytes to copy (0 for a reversed range, which [`HostSource::check`] refuses).
    fn len(&self) -> usize {
        match self {
            HostSource::File { range, .. } => range.end.saturating_sub(range.start) as usize,
            HostSource::Pageable { range, .. } => range.len(),
            HostSource::Pinned(p) => p.len(),
        }
    }

    /// Refuses a reversed range, or a range past the end of pageable bytes (a file's end is
    /// checked when it is read), before the copy is queued: a worker must never be handed a
    /// source it cannot read.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the range.
    fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        match self {
            HostSource::File { range, .. } if range.start > range.end => {
                bad(format!("upload of file bytes {range:?}: a reversed range"))
            }
            HostSource::Pageable { data, range }
                if range.start > range.end || range.end > (**data).as_ref().len() =>
            {
                bad(format!(
                    "upload of bytes {range:?} of {} host bytes",
                    (**data).as_ref().len()
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Counters of a [`TransferEngine`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Bytes copied host → device.
    pub uploaded_bytes: u64,
    /// Bytes copied device → host.
    pub downloaded_bytes: u64,
    /// Transfers finished (or failed).
    pub jobs: u64,
}

enum Outcome<T> {
    Pending,
    /// All copies are enqueued; `event` completes when they have run.
    Enqueued {
        event: Event,
        value: T,
    },
    Failed(String),
    Taken,
}

struct Completion<T> {
    state: Mutex<Outcome<T>>,
    cv: Condvar,
}

impl<T> Completion<T> {
    fn new() -> Arc<Self> {
        Arc::new(Completion {
            state: Mutex::new(Outcome::Pending),
            cv: Condvar::new(),
        })
    }

    fn finish(&self, outcome: Outcome<T>) {
        *lock(&self.state) = outcome;
        self.cv.notify_all();
    }

    /// Blocks until the worker has enqueued the copies (or failed), then takes the result.
    fn take_enqueued(&self) -> Result<(Event, T)> {
        let mut st = lock(&self.state);
        while matches!(*st, Outcome::Pending) {
            st = self
                .cv
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        match std::mem::replace(&mut *st, Outcome::Taken) {
            Outcome::Enqueued { event, value } => Ok((event, value)),
            Outcome::Failed(msg) => Err(Error::Transfer(msg)),
            Outcome::Pending | Outcome::Taken => Err(Error::Transfer(
                "the transfer's result was already taken".into(),
            )),
        }
    }
}

/// A queued or running transfer. Holds the buffers involved until the copy is done, so they can
/// be neither freed nor reused while the DMA engine uses them. Dropping it waits for the copy.
#[must_use = "a transfer should be waited on (wait) or ordered before its use (then_on)"]
pub struct Transfer<T> {
    done: Arc<Completion<T>>,
}

impl<T> Transfer<T> {
    /// Blocks the host until the copy has completed and returns its result.
    ///
    /// # Errors
    /// [`Error::Transfer`] if the engine stopped or the copy failed; driver errors.
    pub fn wait(self) -> Result<T> {
        let (event, value) = self.done.take_enqueued()?;
        event.synchronize()?;
        Ok(value)
    }

    /// Whether the copy has completed (without blocking).
    ///
    /// # Errors
    /// Driver errors of the copy.
    pub fn is_complete(&self) -> Result<bool> {
        match &*lock(&self.done.state) {
            Outcome::Enqueued { event, .. } => Ok(event.is_complete()?),
            Outcome::Failed(msg) => Err(Error::Transfer(msg.clone())),
            Outcome::Pending | Outcome::Taken => Ok(false),
        }
    }
}

impl Transfer<DeviceBuffer> {
    /// Makes `stream` wait (on the device, not the host) for the upload, and returns the buffer
    /// ordered on `stream`: work queued there afterwards sees the data. The host blocks only
    /// until the worker has *queued* the copy.
    ///
    /// # Errors
    /// [`Error::Transfer`] if the engine stopped or failed; driver errors.
    pub fn then_on(self, stream: &Stream) -> Result<DeviceBuffer> {
        let (event, mut buf) = self.done.take_enqueued()?;
        stream.wait(&event)?;
        // The stream now runs after the copy, which ran after the buffer's previous stream
        // (the worker made the copy wait on it), so the buffer is safely ordered on `stream`.
        buf.set_stream_ordered(stream);
        Ok(buf)
    }
}

impl<T> Drop for Transfer<T> {
    fn drop(&mut self) {
        // Whatever was not taken is waited for before its buffers are released.
        if let Ok((event, _value)) = self.done.take_enqueued() {
            let _ = event.synchronize();
        }
    }
}

type Work = Box<dyn FnOnce(&mut Worker) + Send>;

struct Job {
    priority: Priority,
    seq: u64,
    work: Work,
}

impl PartialEq for Job {
    fn eq(&self, o: &Self) -> bool {
        (self.priority, self.seq) == (o.priority, o.seq)
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Job {
    /// Max-heap order: higher priority first, then lower sequence number (FIFO).
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.priority
            .cmp(&o.priority)
            .then_with(|| o.seq.cmp(&self.seq))
    }
}

struct Queue {
    jobs: Mutex<(BinaryHeap<Job>, bool)>,
    cv: Condvar,
}

/// One direction's worker: its stream, staging ring and events.
struct Worker {
    stream: Stream,
    pinned: PinnedPool,
    chunk: usize,
    ring: Vec<PinnedBuffer>,
    ring_events: Vec<Event>,
    stats: Arc<Mutex<TransferStats>>,
}

struct Direction {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

/// Copies between host and device on two dedicated streams (one per direction, never a compute
/// stream), each served by its own worker thread.
///
/// - Requests queue by [`Priority`], then in submission order.
/// - Pageable sources go through a ring of two pinned staging buffers: while the DMA engine copies
///   chunk *n* from one, the worker fills the other with chunk *n + 1* (for a memory-mapped file,
///   that fill is the disk/page-cache read), so reading and copying overlap. Pinned sources are
///   copied directly.
/// - Every request returns a [`Transfer`] handle: wait on it from the host, or make a compute
///   stream depend on it ([`Transfer::then_on`]). Before writing a buffer, the copy waits for the
///   work already queued on the buffer's own stream.
pub struct TransferEngine {
    device: Device,
    h2d: Direction,
    d2h: Direction,
    seq: AtomicU64,
    stats: Arc<Mutex<TransferStats>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for TransferEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TransferEngine({:?}, {:?})", self.device, self.stats())
    }
}

impl TransferEngine {
    /// An engine on `device` with staging chunks of [`DEFAULT_CHUNK_BYTES`].
    ///
    /// # Errors
    /// Driver errors creating its streams.
    pub fn new(device: &Device, pinned: &PinnedPool) -> Result<Self> {
        Self::with_chunk_bytes(device, pinned, DEFAULT_CHUNK_BYTES)
    }

    /// An engine whose staging chunks are `chunk_bytes` each.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero chunk size; driver errors creating its streams.
    pub fn with_chunk_bytes(
        device: &Device,
        pinned: &PinnedPool,
        chunk_bytes: usize,
    ) -> Result<Self> {
        if chunk_bytes == 0 {
            return Err(Error::InvalidArgument(
                "staging chunks need at least one byte".into(),
            ));
        }
        let stats = Arc::new(Mutex::new(TransferStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let spawn = |name: &str| -> Result<Direction> {
            let worker = Worker {
                stream: device.new_stream()?,
                pinned: pinned.clone(),
                chunk: chunk_bytes,
                ring: Vec::new(),
                ring_events: Vec::new(),
                stats: stats.clone(),
            };
            let queue = Arc::new(Queue {
                jobs: Mutex::new((BinaryHeap::new(), false)),
                cv: Condvar::new(),
            });
            let q = queue.clone();
            let thread = std::thread::Builder::new()
                .name(format!("gpukit-{name}"))
                .spawn(move || run_worker(worker, &q))
                .map_err(|e| Error::Transfer(format!("cannot start the {name} worker: {e}")))?;
            Ok(Direction {
                queue,
                thread: Some(thread),
            })
        };
        Ok(TransferEngine {
            device: device.clone(),
            h2d: spawn("h2d")?,
            d2h: spawn("d2h")?,
            seq: AtomicU64::new(0),
            stats,
            stop,
        })
    }

    /// The counters.
    pub fn stats(&self) -> TransferStats {
        *lock(&self.stats)
    }

    fn submit(&self, dir: &Direction, priority: Priority, work: Work) -> Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(Error::Transfer(
                "the transfer engine is shutting down".into(),
            ));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        lock(&dir.queue.jobs).0.push(Job {
            priority,
            seq,
            work,
        });
        dir.queue.cv.notify_one();
        Ok(())
    }

    /// Copies `src` into `dst` starting at byte `offset`, after the work already queued on
    /// `dst`'s stream.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the bytes do not fit, the source range is reversed or runs
    /// past its bytes, or `dst` is on another device; the transfer's own errors come from the
    /// handle.
    pub fn upload(
        &self,
        src: HostSource,
        dst: DeviceBuffer,
        offset: usize,
        priority: Priority,
    ) -> Result<Transfer<DeviceBuffer>> {
        if dst.stream().device() != &self.device {
            return Err(Error::InvalidArgument(
                "upload to a buffer of another device".into(),
            ));
        }
        src.check()?;
        let len = src.len();
        if offset.checked_add(len).is_none_or(|end| end > dst.len()) {
            return Err(Error::InvalidArgument(format!(
                "upload of {len} bytes at offset {offset} does not fit a {}-byte buffer",
                dst.len()
            )));
        }
        let ready = self.device.new_event(false)?;
        dst.stream().record(&ready)?;
        let done = Completion::new();
        let d = done.clone();
        self.submit(
            &self.h2d,
            priority,
            Box::new(move |w: &mut Worker| {
                let outcome = match w.upload(&src, &dst, offset, &ready) {
                    Ok(event) => {
                        drop(src);
                        Outcome::Enqueued { event, value: dst }
                    }
                    Err(e) => Outcome::Failed(e.to_string()),
                };
                d.finish(outcome);
            }),
        )?;
        Ok(Transfer { done })
    }

    /// Allocates a buffer of `src`'s size from `pool` on `stream` and uploads `src` into it.
    ///
    /// # Errors
    /// Allocation errors; as [`TransferEngine::upload`].
    pub fn upload_new(
        &self,
        src: HostSource,
        pool: &DevicePool,
        stream: &Stream,
        priority: Priority,
    ) -> Result<Transfer<DeviceBuffer>> {
        src.check()?;
        let dst = pool.alloc(src.len().max(1), stream)?;
        self.upload(src, dst, 0, priority)
    }

    /// Loads bytes `range` (default: all) of the file at `path` into a new device buffer. Chunks
    /// are read with parallel `pread`s into the pinned staging ring, so the read of one chunk
    /// overlaps the DMA of the previous one. (To upload from a memory-mapped file instead, pass
    /// the mapping as [`HostSource::Pageable`].)
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or read; [`Error::InvalidArgument`] if the
    /// range is outside the file; as [`TransferEngine::upload_new`].
    pub fn load_file(
        &self,
        path: &Path,
        range: Option<Range<u64>>,
        pool: &DevicePool,
        stream: &Stream,
        priority: Priority,
    ) -> Result<Transfer<DeviceBuffer>> {
        let io = |op, source| Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        let range = range.unwrap_or(0..len);
        if range.start > range.end || range.end > len {
            return Err(Error::InvalidArgument(format!(
                "bytes {range:?} are outside {} ({len} bytes)",
                path.display()
            )));
        }
        let src = HostSource::File {
            file: Arc::new(file),
            range,
        };
        self.upload_new(src, pool, stream, priority)
    }

    /// Copies bytes `range` of `src` to host memory, after the work queued on `src`'s stream.
    /// `src` is anything that holds a buffer (the buffer itself, an `Arc` of it); it comes back
    /// with the bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the range is outside the buffer; the transfer's own errors
    /// come from the handle.
    pub fn download<B>(
        &self,
        src: B,
        range: Range<usize>,
        priority: Priority,
    ) -> Result<Transfer<(B, Vec<u8>)>>
    where
        B: Borrow<DeviceBuffer> + Send + 'static,
    {
        let buf = src.borrow();
        if range.start > range.end || range.end > buf.len() {
            return Err(Error::InvalidArgument(format!(
                "bytes {range:?} are outside the {}-byte buffer",
                buf.len()
            )));
        }
        let ready = self.device.new_event(false)?;
        buf.stream().record(&ready)?;
        let done = Completion::new();
        let d = done.clone();
        self.submit(
            &self.d2h,
            priority,
            Box::new(move |w: &mut Worker| {
                let outcome = match w.download(src.borrow(), range, &ready) {
                    Ok((event, bytes)) => Outcome::Enqueued {
                        event,
                        value: (src, bytes),
                    },
                    Err(e) => Outcome::Failed(e.to_string()),
                };
                d.finish(outcome);
            }),
        )?;
        Ok(Transfer { done })
    }
}

impl Drop for TransferEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for dir in [&mut self.h2d, &mut self.d2h] {
            lock(&dir.queue.jobs).1 = true;
            dir.queue.cv.notify_all();
            if let Some(t) = dir.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Serves one direction's queue until told to stop, then runs what is left (so no handle waits
/// forever).
fn run_worker(mut worker: Worker, queue: &Queue) {
    loop {
        let job = {
            let mut jobs = lock(&queue.jobs);
            loop {
                if let Some(job) = jobs.0.pop() {
                    break Some(job);
                }
                if jobs.1 {
                    break None;
                }
                jobs = queue
                    .cv
                    .wait(jobs)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        match job {
            Some(job) => (job.work)(&mut worker),
            None => return,
        }
    }
}

impl Worker {
    fn ensure_ring(&mut self) -> Result<()> {
        while self.ring.len() < 2 {
            self.ring.push(self.pinned.alloc(self.chunk)?);
            self.ring_events
                .push(self.stream.device().new_event(false)?);
        }
        Ok(())
    }

    fn upload(
        &mut self,
        src: &HostSource,
        dst: &DeviceBuffer,
        offset: usize,
        ready: &Event,
    ) -> Result<Event> {
        self.stream.wait(ready)?;
        let base = dst.ptr().offset(offset)?;
        match src {
            HostSource::Pinned(p) => {
                // SAFETY: the range fits `dst` (checked at submit); `p` is pinned, and the job
                // owns it until this function returns, after the synchronisation below.
                unsafe { self.stream.memcpy_htod_async(base, p.as_ptr(), p.len()) }?;
                // The DMA engine reads `p` asynchronously: the worker waits for this copy so
                // that `p` can go back to its pool when the job ends.
                self.stream.synchronize()?;
            }
            staged => {
                self.ensure_ring()?;
                let total = staged.len();
                for (i, start) in (0..total).step_by(self.chunk).enumerate() {
                    let n = self.chunk.min(total - start);
                    let k = i % 2;
                    // Staging buffer k is free again once the last copy out of it has run —
                    // chunk i-2 of this job, or a chunk of the previous job (a never-recorded
                    // event counts as complete).
                    self.ring_events[k].synchronize()?;
                    fill_staging(staged, start, &mut self.ring[k].as_mut_slice()[..n])?;
                    // SAFETY: the destination range lies inside `dst` (checked at submit); the
                    // staging buffer is pinned, holds `n` bytes and is not written again until
                    // `ring_events[k]` (recorded right after) has completed.
                    unsafe {
                        self.stream
                            .memcpy_htod_async(base.offset(start)?, self.ring[k].as_ptr(), n)
                    }?;
                    self.stream.record(&self.ring_events[k])?;
                }
            }
        }
        let done = self.stream.device().new_event(false)?;
        self.stream.record(&done)?;
        let mut s = lock(&self.stats);
        s.uploaded_bytes += src.len() as u64;
        s.jobs += 1;
        Ok(done)
    }

    fn download(
        &mut self,
        src: &DeviceBuffer,
        range: Range<usize>,
        ready: &Event,
    ) -> Result<(Event, Vec<u8>)> {
        self.stream.wait(ready)?;
        self.ensure_ring()?;
        let mut out = vec![0u8; range.len()];
        let base = src.ptr().offset(range.start)?;
        let chunks = range.len().div_ceil(self.chunk);
        // pending[k]: the output range whose bytes sit in staging buffer k.
        let mut pending: [Option<Range<usize>>; 2] = [None, None];
        for i in 0..chunks {
            let k = i % 2;
            self.drain(k, &mut pending, &mut out)?;
            let r = i * self.chunk..((i + 1) * self.chunk).min(range.len());
            // SAFETY: the source range lies inside `src` (checked at submit); the staging buffer
            // is pinned with room for the chunk and is read only after `ring_events[k]`.
            unsafe {
                self.stream.memcpy_dtoh_async(
                    self.ring[k].as_mut_ptr(),
                    base.offset(r.start)?,
                    r.len(),
                )
            }?;
            self.stream.record(&self.ring_events[k])?;
            pending[k] = Some(r);
        }
        for k in [chunks % 2, (chunks + 1) % 2] {
            self.drain(k, &mut pending, &mut out)?;
        }
        let done = self.stream.device().new_event(false)?;
        self.stream.record(&done)?;
        let mut s = lock(&self.stats);
        s.downloaded_bytes += range.len() as u64;
        s.jobs += 1;
        Ok((done, out))
    }

    /// Waits for staging buffer `k`'s copy and moves its bytes to `out`.
    fn drain(
        &mut self,
        k: usize,
        pending: &mut [Option<Range<usize>>; 2],
        out: &mut [u8],
    ) -> Result<()> {
        if let Some(r) = pending[k].take() {
            self.ring_events[k].synchronize()?;
            parallel_copy(&mut out[r.clone()], &self.ring[k].as_slice()[..r.len()]);
        }
        Ok(())
    }
}

/// Bytes per task of the parallel copies and reads.
const PIECE: usize = 1 << 20;

/// Copies `src` into `dst` (same length) on the rayon pool: one thread cannot keep up with the
/// DMA engine (about 55 GB/s on PCIe 5).
fn parallel_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Fills `dst` with the source's bytes from `start` on (relative to its range).
fn fill_staging(src: &HostSource, start: usize, dst: &mut [u8]) -> Result<()> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    match src {
        HostSource::Pageable { data, range } => {
            let bytes = &(**data).as_ref()[range.start + start..][..dst.len()];
            parallel_copy(dst, bytes);
            Ok(())
        }
        HostSource::File { file, range } => {
            let base = range.start + start as u64;
            dst.par_chunks_mut(PIECE)
                .enumerate()
                .try_for_each(|(i, d)| file.read_exact_at(d, base + (i * PIECE) as u64))
                .map_err(|e| Error::Transfer(format!("reading the source file: {e}")))
        }
        HostSource::Pinned(_) => Err(Error::Transfer("pinned sources are not staged".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sources a worker could not read are refused before anything is queued.
    #[test]
    fn unreadable_sources_are_refused() {
        let ten = Arc::new(vec![0u8; 10]);
        let pageable = |range: Range<usize>| HostSource::Pageable {
            data: ten.clone(),
            range,
        };
        pageable(0..10).check().unwrap();
        pageable(10..10).check().unwrap();
        #[allow(clippy::reversed_empty_ranges)]
        for bad in [0..4096, 5..11, 7..3] {
            let e = pageable(bad.clone()).check().unwrap_err().to_string();
            assert!(e.contains("10 host bytes"), "{bad:?}: {e}");
        }
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = HostSource::File {
            file: Arc::new(std::fs::File::open(std::env::current_exe().unwrap()).unwrap()),
            range: 10..5,
        };
        assert_eq!(reversed.len(), 0);
        assert!(
            reversed
                .check()
                .unwrap_err()
                .to_string()
                .contains("reversed")
        );
    }

    #[test]
    fn queue_runs_higher_priority_first_then_fifo() {
        let mut heap = BinaryHeap::new();
        let order = [
            (Priority::Low, 0),
            (Priority::Normal, 1),
            (Priority::Low, 2),
            (Priority::High, 3),
            (Priority::Normal, 4),
            (Priority::High, 5),
        ];
        for (priority, seq) in order {
            heap.push(Job {
                priority,
                seq,
                work: Box::new(|_| {}),
            });
        }
        let popped: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|j| j.seq)).collect();
        assert_eq!(popped, vec![3, 5, 1, 4, 0, 2]);
    }
}
