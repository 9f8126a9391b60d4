//! # gpukit-kernels
//!
//! The CUDA kernels and the registry that picks them (layer 3, above `gpukit-sched`).
//!
//! - CUDA C++ sources in `gpukit-kernels/cuda/` (device code only, NVRTC-compilable, `extern "C"`
//!   entry points named `<op>_<dtype>[_<variant>]`). The build script compiles each for sm_80,
//!   sm_86, sm_89 and sm_90a (cubin) and compute_90 (PTX, the forward fallback) and embeds them;
//!   without NVRTC at build time they are compiled at first use instead.
//! - [`KernelRegistry`]: typed [`Kernel`] ids → functions, the best image for the device's SM,
//!   modules loaded lazily once per device, launch geometry in [`registry::launch`].
//! - [`GemmProvider`]: cuBLASLt GEMM (f32 at full precision unless TF32 is asked for, f16,
//!   bf16; bias and ReLU/GELU epilogues; strided batches) with a workspace per lane and plans
//!   cached per shape.
//! - [`DType`] (element types and the GGML block formats, [`QuantFormat`]), the op codes the
//!   kernels take ([`ops`]) and [`StridedIndex`].

mod args;
mod dtype;
mod error;
pub mod gemm;
pub mod ops;
pub mod registry;
mod targets;

pub use args::{AttentionArgs, MAX_DIMS, SamplerArgs, StridedIndex};
pub use dtype::{DType, QuantFormat};
pub use error::{Error, Result};
pub use gemm::{BLayout, Epilogue, F32Precision, GemmProvider, GemmShape, cublaslt_version};
pub use registry::{ImageSource, Kernel, KernelModule, KernelRegistry, RingFormat};
