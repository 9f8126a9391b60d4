//! # gpukit-kernels
//!
//! The CUDA kernels and the registry that loads them (layer 3, above `gpukit-sched`).
//!
//! - CUDA C++ sources in `gpukit-kernels/cuda/` (device code only, NVRTC-compilable, `extern
//!   "C"` entry points named `<op>_<dtype>[_<variant>]`), one file per kernel family. The build
//!   script compiles each for sm_80, sm_86, sm_89 and sm_90a (cubin) and compute_90 (PTX, the
//!   forward fallback) and embeds them; without NVRTC at build time they are compiled at first
//!   use instead.
//! - One module per family — [`elementwise`], [`reduce`], [`norm`], [`gather`], [`gemv`],
//!   [`rope`], [`quant`], [`kv`], [`attention`], [`paged`], [`linear`], [`sampling`],
//!   [`signal`] —
//!   owning its kernel ids, their entry-point names, its launch geometry (and why it is what it
//!   is) and their tests.
//!   [`Kernel`] wraps a family's id for the registry; [`grid`] holds the launch shapes several
//!   families share.
//! - [`KernelRegistry`]: the best image for the device's SM, modules loaded lazily once per
//!   device, functions cached.
//! - [`shared`]: the constants, op codes and argument structs both Rust and CUDA use, defined
//!   once; the build script generates the CUDA header `gpukit_shared.cuh` from it.
//! - [`GemmProvider`]: cuBLASLt GEMM (f32 at full precision unless TF32 is asked for, f16,
//!   bf16; bias and ReLU/GELU epilogues; strided batches) with a workspace per lane and plans
//!   cached per shape.
//! - [`DType`] (element types and the GGML block formats, [`QuantFormat`]).
//!
//! ```
//! use gpukit_kernels::{DType, Kernel, gemv::GemvKernel};
//!
//! // A kernel is named by what it computes; its entry point follows from that.
//! let k: Kernel = GemvKernel::GemvNorm { dtype: DType::BF16, argmax: true }.into();
//! assert_eq!(k.entry_point()?, "gemv_norm_argmax_bf16");
//! // The launch plan of a (k, n) = (896, 4864) bf16 GEMV on an H200 (132 SMs, 227 KiB of
//! // shared memory a block, a ring kernel of 1032 bytes of static shared memory).
//! let (cfg, [warps_per_group, rows, stages, _]) =
//!     gpukit_kernels::gemv::ring(4864, 896, 2, 132, 227 << 10, 1032)?.expect("a ring plan");
//! assert_eq!((cfg.grid.x, warps_per_group, rows, stages), (132, 2, 4, 8));
//! # Ok::<(), gpukit_kernels::Error>(())
//! ```

mod args;
pub mod attention;
mod dtype;
pub mod elementwise;
mod error;
pub mod gather;
pub mod gemm;
pub mod gemv;
pub mod grid;
mod kernel;
pub mod kv;
pub mod linear;
pub mod norm;
pub mod ops;
pub mod paged;
pub mod quant;
pub mod reduce;
pub mod registry;
pub mod rope;
pub mod sampling;
pub mod shared;
pub mod signal;
mod targets;

pub use args::{MAX_DIMS, StridedIndex};
pub use attention::AttentionArgs;
pub use dtype::{DType, QuantFormat};
pub use error::{Error, Result};
pub use gemm::{BLayout, Epilogue, F32Precision, GemmProvider, GemmShape, cublaslt_version};
pub use kernel::{Kernel, KernelFamily, KernelModule, compile};
pub use registry::{ImageSource, KernelRegistry};
pub use sampling::SamplerArgs;
