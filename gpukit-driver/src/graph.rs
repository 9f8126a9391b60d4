//! CUDA graphs: capture the work a stream is given, instantiate it once, replay it many times.

use cudarc::driver::sys;
use cudarc::driver::{CudaGraph, result};

use crate::error::{CudaCall, Error, Result};
use crate::stream::Stream;

/// An instantiated CUDA graph (`CUgraphExec`), made by [`Stream::capture`].
///
/// Replaying a graph launches every captured operation with the arguments it was captured with:
/// the same device addresses, the same scalars. Inputs that change between replays must therefore
/// live in device memory that the captured kernels read (e.g. a position counter).
///
/// `Send` but not `Sync`: a graph may move to another thread, but CUDA graph objects are not
/// internally synchronised, so two threads must not launch it at once (wrap it in a mutex to
/// share it).
pub struct Graph {
    inner: CudaGraph,
    stream: Stream,
}

// SAFETY: the graph and its executable are driver handles of the device's primary context,
// usable from any thread that binds that context (every call here does); `Graph` is not `Sync`,
// so no two threads use one at the same time without a lock.
unsafe impl Send for Graph {}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph(captured on {:?})", self.stream)
    }
}

impl Stream {
    /// Captures everything `record` enqueues on this stream into a graph, instead of running it,
    /// and instantiates the graph (`cuStreamBeginCapture` / `cuStreamEndCapture` /
    /// `cuGraphInstantiate`). Capture is thread-local: other threads' CUDA calls are unaffected.
    ///
    /// Work enqueued during capture does not run until the graph is launched. Operations that
    /// cannot be captured (a synchronisation, a copy to pageable host memory) invalidate the
    /// capture and make this return an error.
    ///
    /// # Errors
    /// The error `record` returned (the capture is ended and discarded first), or
    /// [`Error::Cuda`] from the capture calls, or [`Error::InvalidArgument`] if nothing was
    /// captured.
    pub fn capture<F>(&self, record: F) -> Result<Graph>
    where
        F: FnOnce(&Stream) -> Result<()>,
    {
        self.inner
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .call("cuStreamBeginCapture")?;
        let recorded = record(self);
        let ended = self
            .inner
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .call("cuStreamEndCapture");
        recorded?;
        match ended? {
            Some(inner) => Ok(Graph {
                inner,
                stream: self.clone(),
            }),
            None => Err(Error::InvalidArgument(
                "the capture recorded no work, so there is no graph".into(),
            )),
        }
    }
}

impl Graph {
    /// Uploads the graph's resources to the device so the first launch is not slower than later
    /// ones (`cuGraphUpload`).
    ///
    /// # Errors
    /// [`Error::Cuda`] if the driver call fails.
    pub fn upload(&self) -> Result<()> {
        self.inner.upload().call("cuGraphUpload")
    }

    /// Replays the graph on `stream` (`cuGraphLaunch`), after the work already queued there.
    /// Launching on another stream of the same device than the capture stream is allowed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `stream` is on another device; [`Error::Cuda`].
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        stream.same_device(&self.stream.device, "launch a graph")?;
        stream.device.bind()?;
        // SAFETY: the exec handle is owned by `self.inner` and alive; the stream handle is alive
        // (we hold a clone) and belongs to the graph's context (checked above).
        unsafe { result::graph::launch(self.inner.cu_graph_exec(), stream.inner.cu_stream()) }
            .call("cuGraphLaunch")?;
        stream.launched()
    }
}
