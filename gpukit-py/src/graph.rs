//! `gk.Graph`: CUDA graph capture and replay of ops and jit kernels.

use gpukit_ops::Device;
use pyo3::prelude::*;

use crate::device::{PyStream, default_cuda};
use crate::errors::{self, value};

/// A CUDA graph: the GPU work a Python function queued on one stream, recorded once and
/// replayed with one launch.
///
/// `g = gk.Graph.capture(step, stream=s)` runs `step()` while `s` (default: the current stream,
/// else GPU 0's default stream) records instead of running; `g.replay()` runs the recorded work
/// again, on the same memory. Inside `step`, use preallocated tensors of that stream and the
/// `out=` forms of the ops (nothing may allocate, copy to or from the host, or synchronize); a
/// replay then sees new values written into the inputs beforehand.
#[pyclass(module = "gpukit", name = "Graph", frozen)]
pub struct PyGraph {
    /// Locked by a replay: one launch of a graph at a time.
    graph: std::sync::Mutex<gpukit_driver::Graph>,
    device: gpukit_ops::CudaDevice,
}

impl PyGraph {
    fn locked(&self) -> std::sync::MutexGuard<'_, gpukit_driver::Graph> {
        self.graph
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[pymethods]
impl PyGraph {
    /// Records the work `fn()` queues on `stream` (see the class docs). Raises the exception
    /// `fn` raised, or `ValueError` when an op cannot be recorded (an allocation, a host copy),
    /// `RuntimeError` when the capture fails.
    #[staticmethod]
    #[pyo3(signature = (fn_, stream=None))]
    fn capture(fn_: &Bound<'_, PyAny>, stream: Option<&Bound<'_, PyStream>>) -> PyResult<PyGraph> {
        let device = match stream {
            Some(s) => s.get().device.clone(),
            None => default_cuda()?,
        };
        let Device::Cuda(c) = device else {
            return Err(value("graphs capture CUDA streams"));
        };
        let mut raised: Option<PyErr> = None;
        let graph = c.capture(|| {
            fn_.call0().map(|_| ()).map_err(|e| {
                let msg = e.to_string();
                raised = Some(e);
                gpukit_ops::Error::Capture {
                    op: "Graph.capture",
                    detail: msg,
                }
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        Ok(PyGraph {
            graph: std::sync::Mutex::new(graph.map_err(errors::ops)?),
            device: c,
        })
    }

    /// Queues one run of the recorded work on `stream` (default: the stream it was captured
    /// on) and returns at once.
    #[pyo3(signature = (stream=None))]
    fn replay(&self, py: Python<'_>, stream: Option<&Bound<'_, PyStream>>) -> PyResult<()> {
        let s = match stream {
            Some(s) => s.get().cuda()?.stream().clone(),
            None => self.device.stream().clone(),
        };
        py.detach(|| self.locked().launch(&s)).map_err(errors::drv)
    }

    /// Uploads the graph to the GPU so that the first replay is as fast as later ones.
    fn upload(&self) -> PyResult<()> {
        self.locked().upload().map_err(errors::drv)
    }

    /// Waits for the work queued on the graph's stream (replays included).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.device.clone();
        py.detach(move || c.synchronize()).map_err(errors::ops)
    }
}
