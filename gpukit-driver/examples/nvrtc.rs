//! Compiles a CUDA kernel at run time with NVRTC, loads it on device 0 and launches it:
//! `y = a·x + y` over a million floats, checked on the host.
//!
//! ```text
//! cargo run -p gpukit-driver --example nvrtc
//! ```
//!
//! Needs an NVIDIA GPU of compute capability 8.0 or newer and NVRTC 13 (`cargo xtask
//! setup-cuda` installs it into the gpukit cache); without them it says what is missing and
//! exits with status 1.

use gpukit_driver::{Arch, CompileOptions, Device, KernelArgs, LaunchConfig, Nvrtc, Output};

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned int n) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) if e.is_no_gpu() => {
            eprintln!("this example runs a kernel, so it needs an NVIDIA GPU: {e}");
            std::process::exit(1);
        }
        Err(e) => return Err(e.into()),
    };
    let props = device.properties();
    let sm = props.compute_capability.sm();
    println!(
        "{}: sm_{sm}, {} multiprocessors",
        props.name, props.multiprocessor_count
    );
    // PTX for the device's architecture; the driver finishes the compile when it loads it.
    // Compiled modules are cached on disk, keyed by the source, options and NVRTC version.
    let nvrtc = Nvrtc::get()?;
    let options = CompileOptions::new(Arch::new(sm), Output::Ptx);
    let compiled = nvrtc.compile("saxpy.cu", SAXPY, &options)?;
    let module = device.load_module(compiled.module_image()?)?;
    let saxpy = module.function("saxpy")?;

    let n = 1usize << 20;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y = vec![1.0f32; n];
    let stream = device.new_stream()?;
    let mut dx = device.alloc(4 * n)?;
    let mut dy = device.alloc(4 * n)?;
    stream.copy_to_device(&x, &mut dx, 0)?;
    stream.copy_to_device(&y, &mut dy, 0)?;
    let args = KernelArgs::new()
        .arg(2.0f32)
        .arg(dx.ptr())
        .arg(dy.ptr())
        .arg(u32::try_from(n)?);
    // SAFETY: the arguments are the kernel's (float, float*, float*, unsigned int) in order;
    // both buffers hold n floats and live until the synchronising copy below.
    unsafe { saxpy.launch(&stream, &LaunchConfig::for_elements(n, 256)?, &args) }?;
    let mut out = vec![0f32; n];
    stream.copy_to_host(&dy, 0, &mut out)?;
    let wrong = (0..n).filter(|&i| out[i] != 2.0 * i as f32 + 1.0).count();
    println!(
        "saxpy over {n} floats: {wrong} wrong (compiled from cache: {})",
        compiled.from_cache
    );
    if wrong > 0 {
        return Err(format!("{wrong} of {n} results differ from the host's").into());
    }
    Ok(())
}
