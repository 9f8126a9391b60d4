//! # gpukit-ops
//!
//! Tensors and the op set (layer 4, above `gpukit-kernels`).
//!
//! - [`Tensor`] = storage (host memory, or a device block from the lane's pool) + [`Layout`]
//!   (shape, strides, offset) + [`DType`]. Views share storage; host↔device copies go through the
//!   device's transfer engine.
//! - [`Device`]: the CPU, or a CUDA [`CudaDevice`] bound to a `gpukit-sched` lane: every launch
//!   goes on that lane, through the kernel registry.
//! - [`ops`]: every op in an allocating form and an `_into` form that writes a preallocated
//!   output (no allocation; capturable with [`CudaDevice::capture`]). Each runs on the CPU (the
//!   reference) and on CUDA.

pub mod attention;
mod device;
mod element;
mod error;
pub mod kv_cache;
mod layout;
pub mod ops;
pub mod quant;
pub mod rope;
pub mod sampling;
mod tensor;

pub use device::{CudaDevice, Device};
pub use element::{Element, HostData};
pub use error::{Error, Result};
pub use gpukit_kernels::ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
pub use gpukit_kernels::{DType, F32Precision};
pub use layout::{Layout, broadcast_shapes, checked_numel, contiguous_strides};
pub use tensor::Tensor;
