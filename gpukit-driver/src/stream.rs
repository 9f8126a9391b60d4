//! Streams and events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys;
use cudarc::driver::{CudaEvent, CudaStream};

use crate::device::Device;
use crate::error::{CudaCall, Error, Result, check};
use crate::green::GreenStream;

/// A CUDA stream: an in-order queue of device work (`CUstream`, created non-blocking).
///
/// Thread-safe; cheap to clone (clones name the same stream). Dropping the last clone destroys the
/// stream after its queued work completes (`cuStreamDestroy` semantics).
#[derive(Clone)]
pub struct Stream {
    pub(crate) inner: Arc<CudaStream>,
    pub(crate) device: Device,
    /// For a stream of an SM partition: its owner, which destroys it after `inner` is dropped
    /// (fields drop in order) and keeps the partition alive meanwhile.
    pub(crate) _green: Option<Arc<GreenStream>>,
    /// The bound on its queued launches, if it has one ([`Stream::with_launch_window`]).
    pub(crate) window: Option<Arc<LaunchWindow>>,
}

/// A bound on the launches a stream holds queued but unfinished: after every `every` launches
/// the stream records a mark, and once more than `depth` marks are pending the launching
/// thread waits for the oldest. The driver's queue of pending launches is shared by the
/// streams of a device, and a stream that enqueues thousands of kernels ahead (a long prefill)
/// fills it: then every other stream's launches block on the host until it drains, however
/// urgent their priority or disjoint their SMs. A window keeps such a stream a few marks ahead.
pub(crate) struct LaunchWindow {
    every: u32,
    depth: usize,
    state: Mutex<WindowState>,
}

struct WindowState {
    count: u32,
    marks: VecDeque<Event>,
    spare: Vec<Event>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream({:p} on {:?})",
            self.inner.cu_stream(),
            self.device
        )
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        self.inner.cu_stream() == other.inner.cu_stream()
    }
}

impl Eq for Stream {}

impl Device {
    /// Creates a stream with the default (least urgent) priority.
    ///
    /// # Errors
    /// [`Error::Cuda`] if `cuStreamCreate` fails.
    pub fn new_stream(&self) -> Result<Stream> {
        self.bind()?;
        let inner = self.inner.ctx.new_stream().call("cuStreamCreate")?;
        Ok(Stream {
            inner,
            device: self.clone(),
            _green: None,
            window: None,
        })
    }

    /// Creates a stream with `priority` (see [`Device::stream_priority_range`]: lower numbers are
    /// more urgent). Work on a more urgent stream is scheduled first when both have work ready.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `priority` is outside the device's range (CUDA would silently
    /// clamp it); [`Error::Cuda`] if `cuStreamCreateWithPriority` fails.
    pub fn new_stream_with_priority(&self, priority: i32) -> Result<Stream> {
        let range = self.stream_priority_range()?;
        if !range.contains(priority) {
            return Err(Error::InvalidArgument(format!(
                "stream priority {priority} is outside this device's range {}..={} \
                 (lower is more urgent)",
                range.highest, range.lowest
            )));
        }
        let inner = self
            .inner
            .ctx
            .new_stream_with_priority(priority)
            .call("cuStreamCreateWithPriority")?;
        Ok(Stream {
            inner,
            device: self.clone(),
            _green: None,
            window: None,
        })
    }

    /// Creates an event. With `timing`, [`Event::elapsed_ms`] works on it; without, the event is
    /// lighter to record and wait on (`CU_EVENT_DISABLE_TIMING`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if `cuEventCreate` fails.
    pub fn new_event(&self, timing: bool) -> Result<Event> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let inner = self
            .inner
            .ctx
            .new_event(Some(flags))
            .call("cuEventCreate")?;
        Ok(Event {
            inner,
            device: self.clone(),
            timing,
        })
    }
}

impl Stream {
    /// This stream with at most about `every` × (`depth` + 1) launches queued ahead of the
    /// device: after each `every` launches a mark is recorded, and a launch that would leave
    /// more than `depth` marks pending first waits for the oldest (see the launch path's
    /// [`Stream::launched`]). Clones made from the returned stream share the window. Meant for
    /// background work, so that it cannot fill the device's launch queue and hold up other
    /// streams' launches; marks are not recorded while the stream is being captured.
    pub fn with_launch_window(mut self, every: u32, depth: usize) -> Stream {
        self.window = Some(Arc::new(LaunchWindow {
            every: every.max(1),
            depth: depth.max(1),
            state: Mutex::new(WindowState {
                count: 0,
                marks: VecDeque::new(),
                spare: Vec::new(),
            }),
        }));
        self
    }

    /// The launch window's `(every, depth)`, if the stream has one.
    pub fn launch_window(&self) -> Option<(u32, usize)> {
        self.window.as_ref().map(|w| (w.every, w.depth))
    }

    /// Counts one launch (a kernel, a graph, a library call) just enqueued on this stream, and
    /// keeps the stream within its launch window ([`Stream::with_launch_window`]), waiting for
    /// old work when it is too far ahead. Every launch path of gpukit calls it; without a
    /// window it does nothing.
    ///
    /// # Errors
    /// [`Error::Cuda`] recording a mark, or an asynchronous error of the work waited for.
    pub fn launched(&self) -> Result<()> {
        let Some(w) = &self.window else {
            return Ok(());
        };
        let mut st = w.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.count += 1;
        if st.count < w.every {
            return Ok(());
        }
        st.count = 0;
        // A mark recorded during a capture would be a node of the graph, not a point in this
        // stream's progress.
        if self.is_capturing()? {
            return Ok(());
        }
        let mark = match st.spare.pop() {
            Some(e) => e,
            None => self.device.new_event(false)?,
        };
        self.record(&mark)?;
        st.marks.push_back(mark);
        while st.marks.len() > w.depth {
            if let Some(old) = st.marks.pop_front() {
                old.synchronize()?;
                st.spare.push(old);
            }
        }
        Ok(())
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The stream's priority as the driver reports it (`cuStreamGetPriority`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn priority(&self) -> Result<i32> {
        self.device.bind()?;
        let mut p = 0;
        // SAFETY: the stream handle is alive (we hold it); `p` is a valid out-pointer.
        check("cuStreamGetPriority", unsafe {
            sys::cuStreamGetPriority(self.inner.cu_stream(), &mut p)
        })?;
        Ok(p)
    }

    /// Blocks the host until all work queued on this stream has finished.
    ///
    /// # Errors
    /// Any asynchronous error raised by that work, as [`Error::Cuda`].
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize().call("cuStreamSynchronize")
    }

    /// Records `event` at the current end of this stream (`cuEventRecord`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the event belongs to another device; [`Error::Cuda`].
    pub fn record(&self, event: &Event) -> Result<()> {
        self.same_device(&event.device, "record an event")?;
        event.inner.record(&self.inner).call("cuEventRecord")
    }

    /// Makes future work on this stream wait until `event` has completed (`cuStreamWaitEvent`);
    /// the host does not block.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the event belongs to another device; [`Error::Cuda`].
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.same_device(&event.device, "wait on an event")?;
        self.inner.wait(&event.inner).call("cuStreamWaitEvent")
    }

    /// Whether this stream is being captured into a graph right now (`cuStreamIsCapturing`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn is_capturing(&self) -> Result<bool> {
        let status = self.inner.capture_status().call("cuStreamIsCapturing")?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// The multiprocessors its kernels may run on: its SM partition's for a stream of one
    /// ([`crate::SmPartition::new_stream`]), else the device's. Launch shapes meant to fill the
    /// device (persistent grids, one wave) are sized by this.
    pub fn sm_count(&self) -> u32 {
        match &self._green {
            Some(g) => g.partition_sm_count(),
            None => self.device.properties().multiprocessor_count,
        }
    }

    /// Whether another handle to this stream exists besides this one (a clone held anywhere).
    /// A stream only one holder keeps can receive no more work from anyone else.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// The raw `CUstream`, for libraries that take one (cuBLASLt). The handle stays owned by this
    /// `Stream`: never destroy it, and do not use it after the last clone of the stream is dropped.
    pub fn as_raw(&self) -> sys::CUstream {
        self.inner.cu_stream()
    }

    pub(crate) fn same_device(&self, other: &Device, what: &str) -> Result<()> {
        if &self.device == other {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "cannot {what} on a stream of {:?}: the object belongs to {other:?}",
                self.device
            )))
        }
    }
}

/// A CUDA event: a marker recorded in a stream, used to order streams and to time device work.
///
/// Thread-safe. Dropping it is always allowed, even while it is pending.
pub struct Event {
    inner: CudaEvent,
    device: Device,
    timing: bool,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Event({:p}, timing: {})",
            self.inner.cu_event(),
            self.timing
        )
    }
}

impl Event {
    /// Blocks the host until the work before the event's last record has completed.
    ///
    /// # Errors
    /// Any asynchronous error raised by that work, as [`Error::Cuda`].
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize().call("cuEventSynchronize")
    }

    /// Whether the work before the event's last record has completed, without blocking
    /// (`cuEventQuery`). An event never recorded counts as complete.
    ///
    /// # Errors
    /// Any asynchronous error raised by that work, as [`Error::Cuda`].
    pub fn is_complete(&self) -> Result<bool> {
        self.inner.try_is_complete().call("cuEventQuery")
    }

    /// Milliseconds of device time between `start` and `end` (`cuEventElapsedTime`, resolution
    /// about 0.5 µs). Both must be timing events that were recorded; this waits for both to
    /// complete first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if either event was created without timing; [`Error::Cuda`]
    /// if one was never recorded or its work failed.
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        if !start.timing || !end.timing {
            return Err(Error::InvalidArgument(
                "elapsed_ms needs two events created with timing = true".into(),
            ));
        }
        start
            .inner
            .elapsed_ms(&end.inner)
            .call("cuEventElapsedTime")
    }

    /// The raw `CUevent` (owned by this `Event`: never destroy it).
    pub fn as_raw(&self) -> sys::CUevent {
        self.inner.cu_event()
    }
}
