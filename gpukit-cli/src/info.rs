//! `gpukit info`: the driver, every device and the kernels chosen for it, NVRTC, cuBLASLt.

use gpukit_driver::{Device, Error, Nvrtc, device_count, driver_version};
use gpukit_kernels::{KernelModule, KernelRegistry, cublaslt_version};

/// Prints the driver, every device's properties and kernel images, NVRTC, cuBLASLt and the
/// cache folder.
pub fn info() {
    match driver_version() {
        Ok((major, minor)) => println!("CUDA driver: supports CUDA {major}.{minor}"),
        Err(e) => println!("CUDA driver: not usable: {e}"),
    }
    match device_count() {
        Ok(0) => println!("devices: none"),
        Ok(n) => {
            for ordinal in 0..n {
                print_device(ordinal);
            }
        }
        Err(Error::NoDriver) => println!("devices: none (no driver)"),
        Err(e) => println!("devices: cannot enumerate: {e}"),
    }
    match Nvrtc::get() {
        Ok(nvrtc) => {
            let (major, minor) = nvrtc.version();
            println!("NVRTC: {major}.{minor} at {}", nvrtc.library().display());
            match nvrtc.include_dir() {
                Some(dir) => println!("CUDA headers: {}", dir.display()),
                None => println!("CUDA headers: not found beside NVRTC"),
            }
        }
        Err(e) => println!("NVRTC: not found: {e}"),
    }
    match cublaslt_version() {
        Some(v) => println!(
            "cuBLASLt: {}.{}.{} (GEMMs: prompts, batched matmul)",
            v / 10000,
            v / 100 % 100,
            v % 100
        ),
        None => println!("{}", gpukit_kernels::Error::NoBlas),
    }
    println!("cache: {}", gpukit_driver::cache_dir().display());
}

fn print_device(ordinal: usize) {
    let dev = match Device::new(ordinal) {
        Ok(d) => d,
        Err(e) => {
            println!("device {ordinal}: cannot open: {e}");
            return;
        }
    };
    let p = dev.properties();
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    println!(
        "device {ordinal}: {} (compute capability {}, sm_{})",
        p.name,
        p.compute_capability,
        p.compute_capability.sm()
    );
    match dev.memory_info() {
        Ok(m) => println!(
            "  memory: {:.1} GiB total, {:.1} GiB free",
            m.total as f64 / GIB,
            m.free as f64 / GIB
        ),
        Err(e) => println!(
            "  memory: {:.1} GiB total ({e})",
            p.total_memory_bytes as f64 / GIB
        ),
    }
    println!(
        "  {} SMs at up to {} MHz; L2 {:.0} MiB; memory bus {} bits at {} MHz \
         (peak {:.2} TB/s)",
        p.multiprocessor_count,
        p.clock_rate_khz / 1000,
        f64::from(p.l2_cache_bytes) / MIB,
        p.memory_bus_width_bits,
        p.memory_clock_rate_khz / 1000,
        p.peak_memory_bandwidth_bytes_per_s() / 1e12
    );
    println!(
        "  shared memory: {} KiB per block ({} KiB opt-in), {} KiB per SM; cluster launch: {}",
        p.shared_memory_per_block_bytes / 1024,
        p.shared_memory_per_block_optin_bytes / 1024,
        p.shared_memory_per_multiprocessor_bytes / 1024,
        if p.cluster_launch { "yes" } else { "no" }
    );
    // What the scheduler isolates tenants with on this device.
    match dev.green_context_support() {
        Ok(sm) => println!(
            "  scheduler isolation: SM partitions (green contexts), at least {} SMs in steps of {}",
            sm.min_partition_sms, sm.alignment_sms
        ),
        Err(reason) => println!("  scheduler isolation: stream priorities only ({reason})"),
    }
    print_kernels(&dev);
}

/// The image each kernel module would load on `dev`: the device's own cubin or the PTX fallback
/// embedded at build time, or an NVRTC compile at first use.
fn print_kernels(dev: &Device) {
    let reg = match KernelRegistry::for_device(dev) {
        Ok(r) => r,
        Err(e) => {
            println!("  kernels: none usable: {e}");
            return;
        }
    };
    let (prebuilt, nvrtc): (Vec<_>, Vec<_>) = KernelModule::ALL
        .iter()
        .copied()
        .partition(|&m| reg.has_prebuilt(m));
    let names = |ms: &[KernelModule]| ms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
    let kind = if reg.target().starts_with("compute_") {
        "PTX, compiled by the driver at load"
    } else {
        "cubin"
    };
    if nvrtc.is_empty() {
        println!(
            "  kernels: {} {kind}, embedded for all {} modules",
            reg.target(),
            prebuilt.len()
        );
    } else {
        println!(
            "  kernels: {} {kind}; embedded: [{}]; compiled with NVRTC at first use: [{}]",
            reg.target(),
            names(&prebuilt),
            names(&nvrtc)
        );
    }
}
