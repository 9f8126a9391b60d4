//! The crate's error type.

use crate::DType;

/// Errors of the kernel layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A driver error.
    #[error(transparent)]
    Driver(#[from] gpukit_driver::Error),
    /// A memory error.
    #[error(transparent)]
    Mem(#[from] gpukit_mem::Error),
    /// No kernel image for this GPU and no way to compile one.
    #[error(
        "no {module} kernels for {arch}: this build has no prebuilt image for it and NVRTC is not \
         available to compile one ({why}). Install the CUDA 13 toolkit (or `pip install \
         nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96` and set GPUKIT_NVRTC_DIR to its \
         nvidia/cu13/lib), or run `cargo xtask setup-cuda` before building"
    )]
    NoKernelImage {
        /// The kernel module (source file).
        module: &'static str,
        /// The device architecture.
        arch: String,
        /// Why NVRTC could not be used.
        why: String,
    },
    /// The GPU is older than any architecture gpukit builds for.
    #[error("{device} (sm_{sm}) is not supported: gpukit needs compute capability 8.0 or newer")]
    UnsupportedDevice {
        /// The device name.
        device: String,
        /// Its SM number.
        sm: u32,
    },
    /// An operation not implemented for a dtype.
    #[error("{op} is not implemented for {dtype} on CUDA")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The dtype.
        dtype: DType,
    },
    /// A cuBLASLt call failed.
    #[error("{call} failed: {status}")]
    Blas {
        /// The cuBLASLt function.
        call: &'static str,
        /// Its status, by name.
        status: String,
    },
    /// cuBLASLt could not be loaded.
    #[error(
        "cuBLASLt (libcublasLt.so.13) was not found: install the CUDA 13 toolkit or the PyPI \
         package nvidia-cublas (and add its lib folder to LD_LIBRARY_PATH)"
    )]
    NoBlas,
    /// An argument outside its valid range (the message names it).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
