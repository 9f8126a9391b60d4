//! gpukit-driver integration tests.
//!
//! CPU tests run everywhere (NVRTC comes from `cargo xtask setup-cuda`). GPU tests are
//! `#[ignore]`d with the reason "needs a CUDA device": `cargo xtask test` reports them as skipped on
//! a machine without one, and `cargo xtask test-gpu` / the GPU bundle run them (and they fail, not
//! skip, if no device is there).

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_driver::half::bf16;
use gpukit_driver::{
    Arch, Cache, CompileOptions, Device, DeviceAllocation, DevicePtr, Error, Event, KernelArgs,
    LaunchConfig, ModuleImage, Nvrtc, Output, Stream, TensorMap, TensorMapElement, device_count,
    driver_available, driver_version,
};
use rand::Rng;

/// Kernels used below. `cuda_bf16.h` comes from the include folder beside NVRTC.
const KERNELS: &str = r#"
#include <cuda_bf16.h>

// out[i] = a * x[i] + y[i], x in bf16, exactly one fused multiply-add in f32.
extern "C" __global__ void axpy_bf16_f32(float a, const __nv_bfloat16* __restrict__ x,
                                         const float* __restrict__ y, float* __restrict__ out,
                                         unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaf(a, __bfloat162float(x[i]), y[i]);
}

// A non-linear in-place update, so the number of applications shows in the result.
extern "C" __global__ void step_f32(float* x, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; x[i] = fmaf(v, 0.75f, sinf(v) * 0.5f + 0.125f); }
}

// Busy-waits `ns` nanoseconds of the global timer.
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}

// Reverses n floats through dynamic shared memory (needs 4n bytes of it).
extern "C" __global__ void reverse_smem(const float* in, float* out, unsigned int n) {
    extern __shared__ float s[];
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}
"#;

/// Needs sm_90: reports each block's rank in its cluster, the cluster size and the cluster id.
const CLUSTER_KERNEL: &str = r#"
extern "C" __global__ void cluster_info(unsigned int* out) {
    unsigned int rank, size, id;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(id));
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = rank; out[3 * blockIdx.x + 1] = size; out[3 * blockIdx.x + 2] = id;
    }
}
"#;

const BF16_KERNEL: &str = r#"
#include <cuda_bf16.h>
extern "C" __global__ void scale_bf16(__nv_bfloat16* x, float s, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16(__bfloat162float(x[i]) * s);
}
"#;

fn nvrtc() -> &'static Nvrtc {
    Nvrtc::get().expect("NVRTC (run `cargo xtask setup-cuda`)")
}

fn fresh_cache() -> (tempfile::TempDir, Cache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::At(dir.path().to_path_buf());
    (dir, cache)
}

// ---------------------------------------------------------------------------------------------
// CPU tests
// ---------------------------------------------------------------------------------------------

#[test]
fn without_a_driver_every_entry_point_says_so() {
    if driver_available() {
        // On a GPU machine the same calls must succeed instead.
        assert!(driver_version().unwrap().0 >= 12);
        assert!(device_count().is_ok());
        return;
    }
    assert!(matches!(Device::new(0), Err(Error::NoDriver)));
    assert!(matches!(device_count(), Err(Error::NoDriver)));
    assert!(matches!(driver_version(), Err(Error::NoDriver)));
    let msg = Device::new(0).unwrap_err().to_string();
    assert!(msg.contains("libcuda.so.1"), "{msg}");
    assert!(Device::new(0).unwrap_err().is_no_gpu());
    // A valid tensor-map description needs the driver to encode it.
    let map = TensorMap::tiled_sw128(
        TensorMapElement::F16,
        DevicePtr(0),
        &[64, 8],
        &[128],
        &[64, 8],
    );
    assert!(matches!(map, Err(Error::NoDriver)), "{map:?}");
}

#[test]
fn device_address_offsets_refuse_to_wrap() {
    let top = DevicePtr(u64::MAX - 7);
    assert_eq!(top.offset(7).unwrap(), DevicePtr(u64::MAX));
    assert_eq!(DevicePtr(0x1000).offset(0x20).unwrap(), DevicePtr(0x1020));
    let err = top.offset(8).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("overflows")),
        "{err}"
    );
    assert!(DevicePtr(1).offset(usize::MAX).is_err());
}

#[test]
fn nvrtc_compiles_bf16_kernel_for_sm80_and_sm90a() {
    let (_dir, cache) = fresh_cache();
    for arch in [Arch::SM80, Arch::SM90A] {
        let out = nvrtc()
            .compile(
                "bf16.cu",
                BF16_KERNEL,
                &CompileOptions::new(arch, Output::Cubin).cache(cache.clone()),
            )
            .unwrap();
        assert!(
            out.image.starts_with(b"\x7fELF"),
            "{arch}: not an ELF cubin"
        );
        assert!(!out.from_cache);
        assert!(matches!(out.module_image().unwrap(), ModuleImage::Cubin(_)));
    }
    let ptx = nvrtc()
        .compile(
            "bf16.cu",
            BF16_KERNEL,
            &CompileOptions::new(Arch::SM90A, Output::Ptx).cache(cache),
        )
        .unwrap();
    let text = std::str::from_utf8(&ptx.image).unwrap();
    assert!(
        text.contains(".target sm_90a"),
        "{}",
        &text[..text.len().min(400)]
    );
    assert!(text.contains(".entry scale_bf16"));
}

#[test]
fn nvrtc_syntax_error_gives_a_readable_log() {
    let src = "extern \"C\" __global__ void broken(float* x) {\n    x[0] = 1.0f +;\n}\n";
    let err = nvrtc()
        .compile(
            "broken.cu",
            src,
            &CompileOptions::new(Arch::SM80, Output::Cubin).cache(Cache::Off),
        )
        .unwrap_err();
    let Error::Compile { program, arch, log } = &err else {
        panic!("expected a compile error, got {err:?}");
    };
    assert_eq!(program, "broken.cu");
    assert_eq!(arch, "sm_80");
    assert!(
        log.contains("broken.cu(2)"),
        "log names file and line:\n{log}"
    );
    assert!(log.contains("error"), "{log}");
    assert!(err.to_string().contains(log.as_str()));
}

#[test]
fn nvrtc_second_compile_is_a_cache_hit() {
    let (dir, cache) = fresh_cache();
    let opts = CompileOptions::new(Arch::SM89, Output::Cubin).cache(cache);
    let first = nvrtc().compile("k.cu", KERNELS, &opts).unwrap();
    assert!(!first.from_cache);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let second = nvrtc().compile("k.cu", KERNELS, &opts).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.image, second.image);
    // Another option, another key.
    let third = nvrtc()
        .compile("k.cu", KERNELS, &opts.clone().flag("-DGPUKIT_TEST=1"))
        .unwrap();
    assert!(!third.from_cache);
    // Another architecture, another key.
    let fourth = nvrtc()
        .compile(
            "k.cu",
            KERNELS,
            &CompileOptions {
                arch: Arch::SM86,
                ..opts
            },
        )
        .unwrap();
    assert!(!fourth.from_cache);
}

#[test]
fn nvrtc_in_memory_headers_are_used_and_hashed() {
    let (_dir, cache) = fresh_cache();
    let src = "#include \"scale.cuh\"\nextern \"C\" __global__ void k(float* x) { x[0] *= SCALE; }";
    let opts = |v: &str| {
        CompileOptions::new(Arch::SM80, Output::Ptx)
            .header("scale.cuh", format!("#define SCALE {v}"))
            .cache(cache.clone())
    };
    let a = nvrtc().compile("h.cu", src, &opts("2.0f")).unwrap();
    let b = nvrtc().compile("h.cu", src, &opts("3.0f")).unwrap();
    assert!(!b.from_cache, "a changed header must miss the cache");
    assert_ne!(a.image, b.image);
    let err = nvrtc()
        .compile(
            "h.cu",
            src,
            &CompileOptions::new(Arch::SM80, Output::Ptx).cache(Cache::Off),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Compile { .. }), "{err}");
}

#[test]
fn nvrtc_rejects_nul_bytes_cleanly() {
    let err = nvrtc()
        .compile(
            "n.cu",
            "a\0b",
            &CompileOptions::new(Arch::SM80, Output::Ptx),
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn nvrtc_supports_every_target_architecture() {
    let archs = nvrtc().supported_archs().unwrap();
    for sm in [80, 86, 89, 90] {
        assert!(archs.contains(&sm), "NVRTC lacks sm_{sm}: {archs:?}");
    }
    assert_eq!(nvrtc().version().0, 13);
    assert!(nvrtc().include_dir().is_some());
}

// ---------------------------------------------------------------------------------------------
// GPU tests
// ---------------------------------------------------------------------------------------------

fn device() -> Device {
    Device::new(0).expect("GPU tests need a CUDA device")
}

/// The cubin target for a device: the architecture-specific variant on Hopper.
fn arch_of(dev: &Device) -> Arch {
    match dev.properties().compute_capability.sm() {
        90 => Arch::SM90A,
        sm => Arch::new(sm),
    }
}

fn load(dev: &Device, src: &str, output: Output) -> gpukit_driver::Module {
    let compiled = nvrtc()
        .compile("test.cu", src, &CompileOptions::new(arch_of(dev), output))
        .unwrap();
    dev.load_module(compiled.module_image().unwrap()).unwrap()
}

fn upload<T: gpukit_driver::DeviceCopy>(stream: &Stream, data: &[T]) -> DeviceAllocation {
    let mut buf = stream
        .device()
        .alloc(std::mem::size_of_val(data).max(1))
        .unwrap();
    stream.copy_to_device(data, &mut buf, 0).unwrap();
    buf
}

fn download_f32(stream: &Stream, buf: &DeviceAllocation, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    stream.copy_to_host(buf, 0, &mut out).unwrap();
    out
}

/// Fills with 0xFF bytes: a NaN in every float format, so unwritten outputs cannot pass.
fn poisoned(stream: &Stream, bytes: usize) -> DeviceAllocation {
    let mut buf = stream.device().alloc(bytes).unwrap();
    stream.memset(&mut buf, 0, bytes, 0xFF).unwrap();
    buf
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_device_properties_come_from_the_device() {
    let dev = device();
    // Opening the ordinal again shares the primary context: the same device for every check.
    assert_eq!(dev, device(), "two opens of device 0 must compare equal");
    let p = dev.properties().clone();
    println!("[gpu] {p:?}");
    assert!(!p.name.is_empty());
    assert!(p.compute_capability.major >= 7);
    assert!(p.multiprocessor_count > 0);
    assert!(p.total_memory_bytes > 1 << 30);
    assert!(p.l2_cache_bytes >= 1 << 20);
    assert_eq!(p.shared_memory_per_block_bytes, 48 * 1024);
    assert!(p.shared_memory_per_block_optin_bytes >= p.shared_memory_per_block_bytes);
    assert!(p.shared_memory_per_multiprocessor_bytes >= p.shared_memory_per_block_optin_bytes);
    assert_eq!(p.warp_size, 32);
    assert!(p.clock_rate_khz > 500_000);
    assert!(p.memory_bus_width_bits >= 128);
    assert!(p.peak_memory_bandwidth_bytes_per_s() > 1e11);
    assert_eq!(p.cluster_launch, p.compute_capability.major >= 9);
    let mem = dev.memory_info().unwrap();
    assert_eq!(mem.total, p.total_memory_bytes);
    assert!(mem.free <= mem.total && mem.free > 0);
    // Cross-check with nvidia-smi, an independent reader of the same device.
    let smi = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,memory.total",
            "--format=csv,noheader,nounits",
            "-i",
            "0",
        ])
        .output()
        .expect("nvidia-smi (installed with the driver)");
    let line = String::from_utf8_lossy(&smi.stdout).trim().to_string();
    let (name, mib) = line.rsplit_once(',').expect("name, memory");
    assert_eq!(name.trim(), p.name, "nvidia-smi: {line}");
    let smi_mib: f64 = mib.trim().parse().unwrap();
    let ours_mib = p.total_memory_bytes as f64 / (1u64 << 20) as f64;
    assert!(
        (smi_mib - ours_mib).abs() / smi_mib < 0.01,
        "{smi_mib} vs {ours_mib} MiB"
    );
    println!("[gpu] properties match nvidia-smi: {line}");
    assert!(matches!(
        Device::new(4096),
        Err(Error::InvalidDevice { ordinal: 4096, .. })
    ));
}

/// Runs axpy on random data through a module loaded from `output` and checks every element.
fn check_axpy(output: Output) {
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let module = load(&dev, KERNELS, output);
    let f = module.function("axpy_bf16_f32").unwrap();
    let mut rng = rand::rng();
    for n in [1usize, 255, 1_000_003] {
        let a: f32 = rng.random_range(-3.0..3.0);
        let x: Vec<bf16> = (0..n)
            .map(|_| bf16::from_f32(rng.random_range(-4.0..4.0)))
            .collect();
        let y: Vec<f32> = (0..n).map(|_| rng.random_range(-4.0..4.0)).collect();
        let (dx, dy) = (upload(&stream, &x), upload(&stream, &y));
        let out = poisoned(&stream, 4 * n);
        let args = KernelArgs::new()
            .arg(a)
            .arg(dx.ptr())
            .arg(dy.ptr())
            .arg(out.ptr())
            .arg(n as u32);
        let cfg = LaunchConfig::for_elements(n, 256).unwrap();
        // SAFETY: argument types match the kernel; the buffers hold n elements and outlive the
        // synchronising copy below.
        unsafe { f.launch(&stream, &cfg, &args) }.unwrap();
        let got = download_f32(&stream, &out, n);
        for i in 0..n {
            let want = a.mul_add(x[i].to_f32(), y[i]);
            assert_eq!(got[i].to_bits(), want.to_bits(), "{output:?} n={n} i={i}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_jit_cubin_kernel_matches_cpu_on_every_element() {
    check_axpy(Output::Cubin);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_jit_ptx_kernel_matches_cpu_on_every_element() {
    check_axpy(Output::Ptx);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_stream_priorities_span_the_device_range() {
    let dev = device();
    let range = dev.stream_priority_range().unwrap();
    println!(
        "[gpu] stream priorities: lowest {} highest {}",
        range.lowest, range.highest
    );
    assert!(range.highest < range.lowest, "{range:?}");
    for p in [range.lowest, range.highest] {
        assert_eq!(
            dev.new_stream_with_priority(p).unwrap().priority().unwrap(),
            p
        );
    }
    assert_eq!(dev.new_stream().unwrap().priority().unwrap(), range.lowest);
    let err = dev.new_stream_with_priority(range.highest - 1).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_events_time_device_work() {
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let f = load(&dev, KERNELS, Output::Cubin)
        .function("spin_ns")
        .unwrap();
    let (start, end) = (dev.new_event(true).unwrap(), dev.new_event(true).unwrap());
    for spin_ms in [1.0f32, 5.0] {
        stream.record(&start).unwrap();
        let args = KernelArgs::new().arg((spin_ms * 1e6) as u64);
        // SAFETY: one u64 parameter, no memory.
        unsafe { f.launch(&stream, &LaunchConfig::new(1, 1), &args) }.unwrap();
        stream.record(&end).unwrap();
        let ms = Event::elapsed_ms(&start, &end).unwrap();
        println!("[gpu] event timing: spin {spin_ms} ms, measured {ms:.4} ms");
        assert!(
            ms >= spin_ms * 0.99 && ms < spin_ms + 5.0,
            "{ms} ms for {spin_ms} ms"
        );
        assert!(end.is_complete().unwrap());
    }
    let untimed = dev.new_event(false).unwrap();
    assert!(matches!(
        Event::elapsed_ms(&start, &untimed),
        Err(Error::InvalidArgument(_))
    ));
    // Ordering between streams: `other` waits for a long spin on `stream`.
    let other = dev.new_stream().unwrap();
    let done = dev.new_event(false).unwrap();
    let args = KernelArgs::new().arg(20_000_000u64);
    // SAFETY: as above.
    unsafe { f.launch(&stream, &LaunchConfig::new(1, 1), &args) }.unwrap();
    stream.record(&done).unwrap();
    other.wait(&done).unwrap();
    other.record(&end).unwrap();
    assert!(
        !end.is_complete().unwrap(),
        "the waiting stream ran ahead of the event"
    );
    other.synchronize().unwrap();
    assert!(done.is_complete().unwrap());
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_graph_replayed_100_times_equals_eager_bitwise() {
    const N: usize = 65_537;
    const STEPS: usize = 5;
    const REPLAYS: usize = 100;
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let f = load(&dev, KERNELS, Output::Cubin)
        .function("step_f32")
        .unwrap();
    let mut rng = rand::rng();
    let x0: Vec<f32> = (0..N).map(|_| rng.random_range(-2.0..2.0)).collect();
    let cfg = LaunchConfig::for_elements(N, 128).unwrap();

    let eager = upload(&stream, &x0);
    let args = KernelArgs::new().arg(eager.ptr()).arg(N as u32);
    for _ in 0..REPLAYS * STEPS {
        // SAFETY: x holds N floats and lives until the copy below.
        unsafe { f.launch(&stream, &cfg, &args) }.unwrap();
    }
    let eager_out = download_f32(&stream, &eager, N);

    let mut x = upload(&stream, &x0);
    stream.synchronize().unwrap();
    let args = KernelArgs::new().arg(x.ptr()).arg(N as u32);
    let graph = stream
        .capture(|s| {
            for _ in 0..STEPS {
                // SAFETY: as above; the graph is dropped before `x`.
                unsafe { f.launch(s, &cfg, &args) }?;
            }
            Ok(())
        })
        .unwrap();
    // Capturing runs nothing.
    assert_eq!(download_f32(&stream, &x, N), x0);
    graph.upload().unwrap();
    let other = dev.new_stream().unwrap();
    for i in 0..REPLAYS {
        // Replays alternate between the capture stream and another one, ordered by sync.
        let s = if i % 2 == 0 { &stream } else { &other };
        graph.launch(s).unwrap();
        s.synchronize().unwrap();
    }
    let graph_out = download_f32(&stream, &x, N);
    let differ = (0..N)
        .filter(|&i| graph_out[i].to_bits() != eager_out[i].to_bits())
        .count();
    assert_eq!(
        differ, 0,
        "{differ} of {N} elements differ between graph and eager"
    );
    assert!(graph_out.iter().zip(&x0).any(|(a, b)| a != b));
    println!("[gpu] graph: {REPLAYS} replays x {STEPS} launches bitwise equal to eager");

    // A copy to pageable host memory cannot be captured: a clear error, and the stream survives.
    let mut host = vec![0f32; 4];
    let err = stream
        .capture(|s| s.copy_to_host(&x, 0, &mut host))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    stream.memset(&mut x, 0, 4, 0).unwrap();
    stream.synchronize().unwrap();
    drop(graph);
    dev.take_deferred_error().unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_dynamic_shared_memory_above_48k_on_request() {
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let f = load(&dev, KERNELS, Output::Cubin)
        .function("reverse_smem")
        .unwrap();
    let n = 30_000usize; // 120,000 bytes of shared memory
    let smem = (4 * n) as u32;
    let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let input = upload(&stream, &data);
    let out = poisoned(&stream, 4 * n);
    let args = KernelArgs::new()
        .arg(input.ptr())
        .arg(out.ptr())
        .arg(n as u32);
    let cfg = LaunchConfig::new(1, 512).shared_mem(smem);
    // SAFETY: never launched: the check rejects it.
    let err = unsafe { f.launch(&stream, &cfg, &args) }.unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
    assert!(
        err.to_string().contains("set_max_dynamic_shared_memory"),
        "{err}"
    );
    let too_much = dev.properties().shared_memory_per_block_optin_bytes + 1;
    assert!(f.set_max_dynamic_shared_memory(too_much).is_err());
    f.set_max_dynamic_shared_memory(smem).unwrap();
    assert_eq!(f.max_dynamic_shared_mem_bytes(), smem);
    // SAFETY: buffers hold n floats; shared memory raised to 4n bytes.
    unsafe { f.launch(&stream, &cfg, &args) }.unwrap();
    let got = download_f32(&stream, &out, n);
    for i in 0..n {
        assert_eq!(got[i].to_bits(), data[n - 1 - i].to_bits(), "i={i}");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_bad_launches_are_errors_not_crashes() {
    let dev = device();
    let stream = dev.new_stream().unwrap();
    let module = load(&dev, KERNELS, Output::Cubin);
    let f = module.function("step_f32").unwrap();
    assert_eq!(f.param_sizes(), Some(&[8usize, 4][..]));
    let x = dev.alloc(1024).unwrap();
    let good = KernelArgs::new().arg(x.ptr()).arg(256u32);
    let cases = [
        (LaunchConfig::new(1, 2048), good.clone(), "block.x = 2048"),
        (
            LaunchConfig::new(1, (32, 32, 2)),
            good.clone(),
            "2048 threads per block",
        ),
        (LaunchConfig::new(0, 32), good.clone(), "at least 1"),
        (
            LaunchConfig::new((1, 1, 1 << 20), 32),
            good.clone(),
            "grid.z",
        ),
        (
            LaunchConfig::new(1, 32),
            KernelArgs::new().arg(x.ptr()),
            "parameters",
        ),
        (
            LaunchConfig::new(1, 32),
            KernelArgs::new().arg(x.ptr()).arg(256u64),
            "sizes",
        ),
    ];
    for (cfg, args, expect) in cases {
        // SAFETY: every case is rejected before launching.
        let err = unsafe { f.launch(&stream, &cfg, &args) }.unwrap_err();
        assert!(
            matches!(err, Error::InvalidLaunch { .. }) && err.to_string().contains(expect),
            "{cfg:?}: {err}"
        );
    }
    assert!(matches!(
        module.function("no_such_kernel"),
        Err(Error::FunctionNotFound { .. })
    ));
    assert!(dev.load_module(ModuleImage::Cubin(b"not a cubin")).is_err());
    let huge = dev.properties().total_memory_bytes * 4;
    let err = dev.alloc(huge).unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { requested, .. } if requested == huge),
        "{err}"
    );
    assert!(err.is_out_of_memory());
    assert!(matches!(dev.alloc(0), Err(Error::InvalidArgument(_))));
    // The device is still usable afterwards.
    // SAFETY: x holds 256 floats.
    unsafe { f.launch(&stream, &LaunchConfig::new(1, 256), &good) }.unwrap();
    stream.synchronize().unwrap();
    let mut host = [0f32; 4];
    assert!(matches!(
        stream.copy_to_host(&x, 1022, &mut host),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_cluster_launch_on_sm90() {
    let dev = device();
    let stream = dev.new_stream().unwrap();
    if !dev.properties().cluster_launch {
        // Before sm_90: the launch must be refused with a clear error.
        let f = load(&dev, KERNELS, Output::Cubin)
            .function("spin_ns")
            .unwrap();
        let cfg = LaunchConfig::new(2, 32).cluster(2);
        // SAFETY: rejected before launching.
        let err = unsafe { f.launch(&stream, &cfg, &KernelArgs::new().arg(0u64)) }.unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        return;
    }
    let f = load(&dev, CLUSTER_KERNEL, Output::Cubin)
        .function("cluster_info")
        .unwrap();
    for (blocks, cluster) in [(8u32, 2u32), (16, 4), (24, 8)] {
        let out = poisoned(&stream, 12 * blocks as usize);
        let cfg = LaunchConfig::new(blocks, 64).cluster(cluster);
        let args = KernelArgs::new().arg(out.ptr());
        // SAFETY: `out` holds 3 u32 per block.
        unsafe { f.launch(&stream, &cfg, &args) }.unwrap();
        let mut got = vec![0u32; 3 * blocks as usize];
        stream.copy_to_host(&out, 0, &mut got).unwrap();
        for b in 0..blocks {
            let (rank, size, id) = (
                got[3 * b as usize],
                got[3 * b as usize + 1],
                got[3 * b as usize + 2],
            );
            assert_eq!(
                (rank, size, id),
                (b % cluster, cluster, b / cluster),
                "block {b}"
            );
        }
    }
    // A grid that is not a multiple of the cluster is refused before launch.
    let cfg = LaunchConfig::new(6, 64).cluster(4);
    let out = dev.alloc(72).unwrap();
    // SAFETY: rejected before launching.
    let err = unsafe { f.launch(&stream, &cfg, &KernelArgs::new().arg(out.ptr())) }.unwrap_err();
    assert!(matches!(err, Error::InvalidLaunch { .. }), "{err}");
    println!("[gpu] cluster launch: cluster sizes 2, 4, 8 verified");
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_a_launch_window_bounds_the_work_queued_ahead() {
    const SPIN_NS: u64 = 200_000;
    const LAUNCHES: usize = 40;
    let dev = device();
    let f = load(&dev, KERNELS, Output::Cubin)
        .function("spin_ns")
        .unwrap();
    let args = KernelArgs::new().arg(SPIN_NS);
    // An event after each launch shows how far the device got when the last launch returned.
    let run = |stream: &Stream| -> Vec<Event> {
        let events: Vec<Event> = (0..LAUNCHES)
            .map(|_| dev.new_event(false).unwrap())
            .collect();
        for e in &events {
            // SAFETY: one u64 parameter, no memory.
            unsafe { f.launch(stream, &LaunchConfig::new(1, 1), &args) }.unwrap();
            stream.record(e).unwrap();
        }
        events
    };
    // A mark every 4 launches, at most one pending: when the 40th launch returns, the mark
    // after the 36th has completed (8 ms of spinning queued, 0.8 ms allowed ahead).
    let windowed = dev.new_stream().unwrap().with_launch_window(4, 1);
    assert_eq!(windowed.launch_window(), Some((4, 1)));
    let events = run(&windowed);
    assert!(events[35].is_complete().unwrap(), "ran ahead of its window");
    assert!(!events[LAUNCHES - 1].is_complete().unwrap());
    windowed.synchronize().unwrap();
    // Without a window the whole queue is ahead of the device.
    let free = dev.new_stream().unwrap();
    let events = run(&free);
    assert!(!events[35].is_complete().unwrap());
    free.synchronize().unwrap();
    // No marks inside a capture: the graph records the kernels, and replays like any other.
    let graph = windowed
        .capture(|s| {
            for _ in 0..10 {
                // SAFETY: as above.
                unsafe { f.launch(s, &LaunchConfig::new(1, 1), &KernelArgs::new().arg(1000u64)) }?;
            }
            Ok(())
        })
        .unwrap();
    graph.launch(&windowed).unwrap();
    windowed.synchronize().unwrap();
}
