//! Helpers for the GPU tests of gpukit's crates (feature `testing`; not part of the stable API).
//!
//! Test code only: these panic with a clear message instead of returning errors.

#![allow(clippy::expect_used, clippy::panic)]

use crate::{
    Arch, CompileOptions, Device, KernelArgs, LaunchConfig, Module, Nvrtc, Output, Stream,
};

/// Kernels the tests of several crates use.
pub const TEST_KERNELS: &str = r#"
// Busy-waits `ns` nanoseconds of the global timer (one thread is enough).
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}

// Spins `ns`, then sums n u32 values of `x` into *out (single block; slow on purpose: the read
// happens late, so a concurrent writer to `x` would be caught).
extern "C" __global__ void spin_then_sum_u32(unsigned long long ns, const unsigned int* x,
                                            unsigned int n, unsigned long long* out) {
    __shared__ unsigned long long partial[256];
    if (threadIdx.x == 0) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
    }
    __syncthreads();
    unsigned long long acc = 0;
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
    partial[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (unsigned int t = 0; t < blockDim.x; ++t) total += partial[t];
        *out = total;
    }
}

// Each block spins `ns`, then writes the multiprocessor it ran on to out[blockIdx.x]: which
// SMs a stream's kernels reach.
extern "C" __global__ void record_smid(unsigned long long ns, unsigned int* out) {
    if (threadIdx.x == 0) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        out[blockIdx.x] = smid;
    }
}

// x[i] = value for i < n.
extern "C" __global__ void fill_u32(unsigned int* x, unsigned int value, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}
"#;

/// Device 0, or a panic saying a GPU test needs one.
pub fn device() -> Device {
    Device::new(0).expect("GPU tests need a CUDA device")
}

/// The cubin target for a device: the architecture-specific variant on Hopper.
pub fn arch_of(dev: &Device) -> Arch {
    match dev.properties().compute_capability.sm() {
        90 => Arch::SM90A,
        sm => Arch::new(sm),
    }
}

/// Compiles `src` for `dev` with NVRTC (cached) and loads it.
pub fn load(dev: &Device, src: &str, output: Output) -> Module {
    let nvrtc = Nvrtc::get().expect("NVRTC (run `cargo xtask setup-cuda`)");
    let compiled = nvrtc
        .compile("test.cu", src, &CompileOptions::new(arch_of(dev), output))
        .expect("test kernels compile");
    dev.load_module(compiled.module_image().expect("image"))
        .expect("module loads")
}

/// [`TEST_KERNELS`] loaded on `dev`.
pub fn test_kernels(dev: &Device) -> Module {
    load(dev, TEST_KERNELS, Output::Cubin)
}

/// Enqueues a one-thread kernel that keeps `stream` busy for `ns` nanoseconds.
pub fn spin(kernels: &Module, stream: &Stream, ns: u64) {
    let f = kernels.function("spin_ns").expect("spin_ns");
    // SAFETY: one u64 parameter, no memory touched.
    unsafe { f.launch(stream, &LaunchConfig::new(1, 1), &KernelArgs::new().arg(ns)) }
        .expect("spin launch");
}

/// The distinct multiprocessors that `blocks` blocks of a kernel launched on `stream` ran on
/// (each block busy for `ns` so that they spread over every SM the stream may use), sorted.
pub fn sms_used(kernels: &Module, stream: &Stream, blocks: u32, ns: u64) -> Vec<u32> {
    let dev = stream.device();
    let mut out = dev.alloc(blocks as usize * 4).expect("alloc");
    stream
        .memset(&mut out, 0, blocks as usize * 4, 0xFF)
        .expect("poison");
    let f = kernels.function("record_smid").expect("record_smid");
    // SAFETY: `out` holds one u32 per block.
    unsafe {
        f.launch(
            stream,
            &LaunchConfig::new(blocks, 32),
            &KernelArgs::new().arg(ns).arg(out.ptr()),
        )
    }
    .expect("record_smid launch");
    let mut ids = vec![0u32; blocks as usize];
    stream.copy_to_host(&out, 0, &mut ids).expect("download");
    assert!(
        ids.iter().all(|&s| s != u32::MAX),
        "a block did not record its SM"
    );
    ids.sort_unstable();
    ids.dedup();
    ids
}
