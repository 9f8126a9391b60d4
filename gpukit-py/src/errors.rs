//! Rust errors as Python exceptions: `ValueError` for shapes, dtypes and arguments,
//! `MemoryError` for memory (out of device or host memory, over a quota), `FileNotFoundError` /
//! `ValueError` for model files, `RuntimeError` for the driver and NVRTC (the compile log is in
//! the message). The message is the Rust error's, with its sources.

use pyo3::exceptions::{
    PyFileNotFoundError, PyIndexError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::{PyErr, Python};

/// The message of `e` followed by its sources (`: cause: cause…`), skipping a source whose text
/// the message already contains (errors that print their source transparently).
fn message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

fn driver(e: &gpukit_driver::Error) -> PyErr {
    use gpukit_driver::Error as E;
    let text = message(e);
    match e {
        E::OutOfMemory { .. } => PyMemoryError::new_err(text),
        E::InvalidArgument(_) | E::InvalidLaunch { .. } | E::InvalidDevice { .. } => {
            PyValueError::new_err(text)
        }
        E::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(text)
        }
        _ => PyRuntimeError::new_err(text),
    }
}

fn mem(e: &gpukit_mem::Error) -> PyErr {
    use gpukit_mem::Error as E;
    match e {
        E::OutOfMemory { .. } | E::DeviceOutOfMemory { .. } => PyMemoryError::new_err(message(e)),
        E::Driver(d) => driver(d),
        E::InvalidArgument(_) => PyValueError::new_err(message(e)),
        _ => PyRuntimeError::new_err(message(e)),
    }
}

fn sched(e: &gpukit_sched::Error) -> PyErr {
    use gpukit_sched::Error as E;
    match e {
        E::Driver(d) => driver(d),
        E::Mem(m) => mem(m),
        _ => PyValueError::new_err(message(e)),
    }
}

fn kernels(e: &gpukit_kernels::Error) -> PyErr {
    use gpukit_kernels::Error as E;
    match e {
        E::Driver(d) => driver(d),
        E::Mem(m) => mem(m),
        E::Unsupported { .. } => PyValueError::new_err(message(e)),
        _ => PyRuntimeError::new_err(message(e)),
    }
}

/// A `gpukit-ops` error as its exception.
pub(crate) fn ops(e: gpukit_ops::Error) -> PyErr {
    use gpukit_ops::Error as E;
    match &e {
        E::Shape { .. } | E::DType { .. } | E::Device { .. } | E::Capture { .. } => {
            PyValueError::new_err(message(&e))
        }
        E::Index { .. } => PyIndexError::new_err(message(&e)),
        E::HostOutOfMemory { .. } => PyMemoryError::new_err(message(&e)),
        E::Kernels(k) => kernels(k),
        E::Mem(m) => mem(m),
        E::Sched(s) => sched(s),
        E::Driver(d) => driver(d),
        _ => PyRuntimeError::new_err(message(&e)),
    }
}

/// A `gpukit-audio` error as its exception: bad parameters and unreadable WAV files are
/// `ValueError` (a missing file `FileNotFoundError`), tensor errors as in [`ops`].
pub(crate) fn audio(e: gpukit_audio::Error) -> PyErr {
    use gpukit_audio::Error as E;
    match e {
        E::Tensor(o) => ops(o),
        E::Wav {
            source: hound::Error::IoError(ref io),
            ..
        } if io.kind() == std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message(&e)),
        E::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message(&e))
        }
        _ => PyValueError::new_err(message(&e)),
    }
}

/// A `gpukit-llm` error as its exception.
pub(crate) fn llm(e: gpukit_llm::Error) -> PyErr {
    use gpukit_llm::Error as E;
    match e {
        E::Ops(o) => ops(o),
        E::Driver(d) => driver(&d),
        E::Sched(s) => sched(&s),
        // A lower layer's error keeps its exception; the message names the device or tensor.
        E::Open { device, source } => with_context(llm(*source), &device),
        E::Tensor { file, name, source } => with_context(
            ops(*source),
            &format!("{}: tensor `{name}`", file.display()),
        ),
        E::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(message(&e))
        }
        E::Device(_) => PyRuntimeError::new_err(message(&e)),
        E::Fetch { .. } => PyRuntimeError::new_err(message(&e)),
        _ => PyValueError::new_err(message(&e)),
    }
}

/// `err`'s exception type with `context: ` before its message.
fn with_context(err: PyErr, context: &str) -> PyErr {
    Python::attach(|py| {
        let text = format!("{context}: {}", err.value(py));
        PyErr::from_type(err.get_type(py), text)
    })
}

/// A `gpukit-driver` error as its exception.
pub(crate) fn drv(e: gpukit_driver::Error) -> PyErr {
    driver(&e)
}

/// A `gpukit-sched` error as its exception.
pub(crate) fn sch(e: gpukit_sched::Error) -> PyErr {
    sched(&e)
}

/// `ValueError(msg)`.
pub(crate) fn value(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// `TypeError(msg)`.
pub(crate) fn type_error(msg: impl Into<String>) -> PyErr {
    PyTypeError::new_err(msg.into())
}
