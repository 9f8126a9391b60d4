//! The crate's error type.

use gpukit_kernels::DType;

/// Errors of tensor operations. Shape and dtype errors name the op and the operands' shapes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Operand shapes that do not fit the op.
    #[error("{op}: {detail}")]
    Shape {
        /// The op.
        op: &'static str,
        /// The shapes and what is wrong with them.
        detail: String,
    },
    /// A dtype the op does not take, or operands of different dtypes.
    #[error("{op}: {detail}")]
    DType {
        /// The op.
        op: &'static str,
        /// What was given and what is needed.
        detail: String,
    },
    /// Operands on different devices.
    #[error("{op}: operands on different devices ({a} and {b})")]
    Device {
        /// The op.
        op: &'static str,
        /// One device.
        a: String,
        /// The other.
        b: String,
    },
    /// An index outside its range (found on the device and reported at the next sync).
    #[error("{op}: index out of range: {detail}")]
    Index {
        /// The op.
        op: &'static str,
        /// What was out of range.
        detail: String,
    },
    /// The op cannot be recorded into a CUDA graph as things stand (the detail says what to do).
    #[error("{op}: {detail}")]
    Capture {
        /// The op.
        op: &'static str,
        /// Why, and what to do.
        detail: String,
    },
    /// Host memory for a CPU tensor could not be allocated.
    #[error("host out of memory: {bytes} bytes for a tensor could not be allocated")]
    HostOutOfMemory {
        /// The bytes asked for (saturated at `usize::MAX`).
        bytes: usize,
    },
    /// A kernel-layer error.
    #[error(transparent)]
    Kernels(#[from] gpukit_kernels::Error),
    /// A memory error.
    #[error(transparent)]
    Mem(#[from] gpukit_mem::Error),
    /// A scheduling error.
    #[error(transparent)]
    Sched(#[from] gpukit_sched::Error),
    /// A driver error.
    #[error(transparent)]
    Driver(#[from] gpukit_driver::Error),
}

impl Error {
    pub(crate) fn shape(op: &'static str, detail: impl Into<String>) -> Self {
        Error::Shape {
            op,
            detail: detail.into(),
        }
    }

    pub(crate) fn dtype(op: &'static str, detail: impl Into<String>) -> Self {
        Error::DType {
            op,
            detail: detail.into(),
        }
    }

    pub(crate) fn expect_dtype(op: &'static str, got: DType, want: DType) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(Error::dtype(op, format!("expected {want}, got {got}")))
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
