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
//!   reference) and on CUDA. [`attention`], [`rope`], [`kv_cache`], [`quant`] and [`sampling`]
//!   hold the transformer ops; [`signal`] the FFTs, padding and overlap-add audio is built on.
//!
//! ## Output tensors
//!
//! A [`Tensor`] is a handle to shared storage, as a `torch.Tensor` is: [`Clone`] and every view
//! (`narrow`, `reshape`, `transpose`, …) give another handle to the same memory. Rust's borrows
//! do not follow the storage, so an op could not promise exclusive access through a `&mut
//! Tensor` and does not pretend to: every op that writes into memory it did not allocate — the
//! `_into` forms, [`rope::rope_inplace`], [`kv_cache::KvCache`]'s appends into its own
//! buffers — takes the tensor it writes as `&Tensor` and writes through that handle, in order
//! with every other launch on the lane. An output must not overlap the op's inputs unless the
//! op says it may (`rope_inplace` rotates in place).
//!
//! ```
//! use gpukit_ops::{DType, Device, Tensor, ops};
//!
//! let cpu = Device::Cpu;
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &cpu)?;
//! let w = Tensor::full(&[2], 1.0, DType::F32, &cpu)?;
//! // Allocating form.
//! let y = ops::rms_norm(&x, &w, 1e-6)?;
//! // The same op into a preallocated output: a view of a larger buffer, written in place.
//! let buf = Tensor::zeros(&[3, 2], DType::F32, &cpu)?;
//! ops::rms_norm_into(&x, &w, 1e-6, &buf.narrow(0, 1, 2)?)?;
//! assert_eq!(buf.to_vec::<f32>()?[2..], y.to_vec::<f32>()?[..]);
//! assert_eq!(buf.to_vec::<f32>()?[..2], [0.0, 0.0]);
//! # Ok::<(), gpukit_ops::Error>(())
//! ```

pub mod attention;
mod device;
mod element;
mod error;
pub mod kv_cache;
mod layout;
pub mod ops;
pub mod paged;
pub mod quant;
pub mod rope;
pub mod sampling;
pub mod signal;
mod tensor;

pub use device::{CudaDevice, Device, HandleWatch};
pub use element::{Element, HostData};
pub use error::{Error, Result};
pub use gpukit_kernels::ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
pub use gpukit_kernels::{DType, F32Precision};
pub use layout::{Layout, broadcast_shapes, checked_numel, contiguous_strides};
pub use tensor::Tensor;
