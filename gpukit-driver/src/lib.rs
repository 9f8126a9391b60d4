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
//! - [`SmPartition`]: a green context owning a disjoint share of the device's SMs
//!   ([`Device::partition_sms`]); its streams run kernels on those SMs only.
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
//! ```
//! use gpukit_driver::{Arch, CompileOptions, Device, Nvrtc, Output};
//!
//! // Without the driver or a device this is an error that says so, never a panic.
//! match Device::new(0) {
//!     Ok(device) => {
//!         let p = device.properties();
//!         println!("{}: sm_{}, {} SMs", p.name, p.compute_capability.sm(), p.multiprocessor_count);
//!         // Compile a kernel for this device with NVRTC and look its entry point up.
//!         let src = r#"extern "C" __global__ void fill(float* x, float v) { x[threadIdx.x] = v; }"#;
//!         let opts = CompileOptions::new(Arch::new(p.compute_capability.sm()), Output::Ptx);
//!         let compiled = Nvrtc::get()?.compile("fill.cu", src, &opts)?;
//!         let module = device.load_module(compiled.module_image()?)?;
//!         assert_eq!(module.function("fill")?.name(), "fill");
//!     }
//!     Err(e) => assert!(e.is_no_gpu(), "{e}"),
//! }
//! # Ok::<(), gpukit_driver::Error>(())
//! ```
//!
//! [cudarc]: https://docs.rs/cudarc

mod device;
mod error;
mod graph;
mod green;
mod memory;
mod module;
mod nvrtc;
pub mod store;
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
pub use green::{SmPartition, SmResource};
pub use half;
pub use memory::{AsyncAllocation, DeviceAllocation, DeviceCopy, DevicePtr, PinnedAllocation};
pub use module::{Dim3, Function, KernelArgs, LaunchConfig, Module, ModuleImage};
pub use nvrtc::{Arch, Cache, CompileOptions, Compiled, Nvrtc, Output, cache_dir, cuda_tools_dir};
pub use stream::{Event, Stream};
pub use tensor_map::{TensorMap, TensorMapElement};
