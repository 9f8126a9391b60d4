//! The crate's one error type.

use std::path::PathBuf;

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;

/// Everything that can go wrong in `gpukit-driver`.
///
/// Variants are chosen so that a caller can act on them: [`Error::NoDriver`] and
/// [`Error::NoDevice`] mean "run on the CPU or on another machine", [`Error::OutOfMemory`] means
/// "free something or ask for less", [`Error::NvrtcNotFound`] says what to install.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The NVIDIA driver library (`libcuda.so.1`) could not be loaded.
    #[error(
        "the NVIDIA driver library (libcuda.so.1) was not found: install the NVIDIA driver, \
         or run on a machine that has one (CPU execution needs no driver)"
    )]
    NoDriver,
    /// The driver loaded but reports no usable CUDA device.
    #[error("no CUDA device is present: {reason}")]
    NoDevice {
        /// What the driver said.
        reason: String,
    },
    /// A device ordinal beyond the number of devices.
    #[error("CUDA device {ordinal} does not exist: {count} device(s) present")]
    InvalidDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// A CUDA driver API call failed.
    #[error("{call} failed: {name} (CUresult {code})")]
    Cuda {
        /// The driver API function, e.g. `cuLaunchKernel`.
        call: &'static str,
        /// The numeric `CUresult`.
        code: u32,
        /// The symbolic name, e.g. `CUDA_ERROR_INVALID_VALUE`.
        name: String,
    },
    /// A device allocation failed because the device is out of memory.
    #[error("out of device memory: {requested} bytes requested, {free} bytes free on the device")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes the driver reported free right after the failure.
        free: usize,
    },
    /// No usable NVRTC library was found.
    #[error(
        "NVRTC (libnvrtc.so.13) was not found; searched: {searched}. Run `cargo xtask setup-cuda` \
         (installs NVRTC 13.0 from PyPI into the gpukit cache), install the CUDA 13 toolkit, or set \
         GPUKIT_NVRTC_DIR to the folder holding libnvrtc.so.13"
    )]
    NvrtcNotFound {
        /// Every place that was looked at, in order.
        searched: String,
    },
    /// An NVRTC API call failed (other than a compile error, see [`Error::Compile`]).
    #[error("{call} failed: {name} (nvrtcResult {code})")]
    Nvrtc {
        /// The NVRTC function, e.g. `nvrtcGetCUBIN`.
        call: &'static str,
        /// The numeric `nvrtcResult`.
        code: u32,
        /// Its symbolic name.
        name: String,
    },
    /// NVRTC rejected the source; `log` is the full compiler log.
    #[error("NVRTC could not compile `{program}` for {arch}:\n{log}")]
    Compile {
        /// The program name given to NVRTC (shown in the log's file names).
        program: String,
        /// The target, e.g. `sm_90a`.
        arch: String,
        /// The complete compiler log.
        log: String,
    },
    /// A kernel function was not found in a loaded module.
    #[error("kernel `{name}` is not in the module (was it declared `extern \"C\" __global__`?)")]
    FunctionNotFound {
        /// The entry point asked for.
        name: String,
    },
    /// A launch configuration or argument list that does not fit the kernel or the device.
    #[error("invalid launch of `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel's entry point.
        kernel: String,
        /// What is wrong, with the numbers.
        reason: String,
    },
    /// A feature this device (or driver) does not have.
    #[error("{what} needs {needs}; this device is {have}")]
    Unsupported {
        /// The feature asked for.
        what: String,
        /// What it needs.
        needs: String,
        /// What the device has.
        have: String,
    },
    /// An argument outside its valid range (the message names it and the range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A file-system operation failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done, e.g. `read`.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True for [`Error::NoDriver`] and [`Error::NoDevice`]: no GPU work is possible here.
    pub fn is_no_gpu(&self) -> bool {
        matches!(self, Error::NoDriver | Error::NoDevice { .. })
    }

    /// True when the device ran out of memory (either an allocation or a driver call).
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Error::OutOfMemory { .. } => true,
            Error::Cuda { code, .. } => *code == OUT_OF_MEMORY_CODE,
            _ => false,
        }
    }
}

const OUT_OF_MEMORY_CODE: u32 = cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Names the driver call a cudarc result came from: `.call("cuMemAlloc")?`.
pub(crate) trait CudaCall<T> {
    fn call(self, call: &'static str) -> Result<T>;
}

impl<T> CudaCall<T> for std::result::Result<T, DriverError> {
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|e| cuda_error(call, e.0))
    }
}

impl<T> CudaCall<T> for std::result::Result<T, NvrtcError> {
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|e| Error::Nvrtc {
            call,
            code: e.0 as u32,
            name: format!("{:?}", e.0),
        })
    }
}

/// Builds [`Error::Cuda`] from a raw `CUresult` (the `Debug` form of the enum is its CUDA name,
/// so no driver call is needed to name it).
pub(crate) fn cuda_error(call: &'static str, code: cudarc::driver::sys::CUresult) -> Error {
    Error::Cuda {
        call,
        code: code as u32,
        name: format!("{code:?}"),
    }
}

/// Checks a raw `CUresult` from a `sys` call.
pub(crate) fn check(call: &'static str, code: cudarc::driver::sys::CUresult) -> Result<()> {
    if code == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(call, code))
    }
}
