//! # gpukit-driver
//!
//! The bottom layer of gpukit: the only crate that calls the CUDA driver API and NVRTC (through
//! [cudarc]'s dynamically loaded bindings, so a binary built here runs on a machine with only the
//! NVIDIA driver, and reports [`Error::NoDriver`] — never panics — on a machine without one).
//!
//! What it owns:
//! - [`Device`]: opening a device (its primary context) and its [`DeviceProperties`], read from
//!   the driver; [`device_count`], [`driver_version`].
//! - [`Stream`] (with priorities) and [`Event`] (ordering between streams, timing).
//! - [`Graph`]: capture the work of a stream ([`Stream::capture`]) and replay it.
//! - [`Module`] / [`Function`] from a cubin or PTX, and checked launches: grid, block and dynamic
//!   shared memory are checked against the kernel and device before `cuLaunchKernel`; argument
//!   sizes against the kernel's parameters; thread-block clusters through `cuLaunchKernelEx` on
//!   sm_90.
//! - [`TensorMap`]: tiled tensor maps for Hopper's tensor memory accelerator.
//! - [`Nvrtc`]: run-time compilation to cubin or PTX with an on-disk cache.
//! - [`DeviceAllocation`]: raw `cuMemAlloc` memory — the primitive `gpukit-mem` builds its pool on.
//!   Nothing above `gpukit-mem` allocates through it directly.
//!
//! Threading: every type is `Send + Sync` except [`Graph`]; each call makes the device's primary
//! context current on the calling thread first. Destructors never panic: an error met while
//! dropping is recorded and returned by [`Device::take_deferred_error`].
//!
//! [cudarc]: https://docs.rs/cudarc

mod device;
mod error;
mod graph;
mod memory;
mod module;
mod nvrtc;
mod stream;
mod tensor_map;
#[cfg(feature = "testing")]
pub mod testing;

pub use device::{
    ComputeCapability, Device, DeviceProperties, MemoryInfo, StreamPriorityRange, device_count,
    driver_available, driver_version,
};
pub use error::{Error, Result};
pub use graph::Graph;
pub use half;
pub use memory::{AsyncAllocation, DeviceAllocation, DeviceCopy, DevicePtr, PinnedAllocation};
pub use module::{Dim3, Function, KernelArgs, LaunchConfig, Module, ModuleImage};
pub use nvrtc::{Arch, Cache, CompileOptions, Compiled, Nvrtc, Output, cache_dir, cuda_tools_dir};
pub use stream::{Event, Stream};
pub use tensor_map::{TensorMap, TensorMapElement};
