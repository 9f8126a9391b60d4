//! # gpukit-kernels
//!
//! The CUDA C++ kernels and the registry that picks them (layer 4, above `gpukit-sched`).
//!
//! What it will own (not written yet): kernel sources in `gpukit-kernels/cuda/` (NVRTC-compilable,
//! `extern "C"` entry points named `<op>_<dtype>[_<variant>]`), built to cubin for sm_80, sm_86,
//! sm_89 and sm_90a plus PTX for the newest virtual architecture and embedded in the binary; a
//! `KernelRegistry` of typed kernel ids that chooses the best variant for a device and loads
//! modules lazily once per device; and GEMM through cuBLASLt with an explicit workspace per lane
//! and algorithms chosen once per shape.
