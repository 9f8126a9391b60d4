//! A few ops on the CPU (the reference every CUDA kernel is tested against) and, where there is
//! one, on CUDA device 0: RMSNorm, a linear layer, softmax; the CUDA results are compared with
//! the CPU's.
//!
//! ```text
//! cargo run -p gpukit-ops --example ops
//! ```

use gpukit_ops::ops::{self, Activation};
use gpukit_ops::{DType, Device, Tensor};
use gpukit_sched::{LanePriority, Runtime};

/// `softmax(rms_norm(x) · Wᵀ + b)` for x `[4, 256]`, W `[64, 256]`: f32 values on the host.
fn run(device: &Device, dtype: DType) -> gpukit_ops::Result<Vec<f32>> {
    let x = Tensor::rand(&[4, 256], -1.0, 1.0, DType::F32, 1, &Device::Cpu)?;
    let g = Tensor::rand(&[256], 0.5, 1.5, DType::F32, 2, &Device::Cpu)?;
    let w = Tensor::rand(&[64, 256], -0.1, 0.1, DType::F32, 3, &Device::Cpu)?;
    let b = Tensor::rand(&[64], -0.1, 0.1, DType::F32, 4, &Device::Cpu)?;
    let on = |t: &Tensor| ops::to_dtype(&t.to_device(device)?, dtype);
    let h = ops::rms_norm(&on(&x)?, &on(&g)?, 1e-6)?;
    let y = ops::linear(&h, &on(&w)?, Some(&on(&b)?), Activation::None)?;
    let p = ops::softmax(&y, 1)?;
    ops::to_dtype(&p, DType::F32)?.to_vec::<f32>()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let reference = run(&Device::Cpu, DType::F32)?;
    let row: f32 = reference[..64].iter().sum();
    println!(
        "cpu: softmax rows sum to {row:.6}; first probabilities {:?}",
        &reference[..4]
    );
    let runtime = match Runtime::new() {
        Ok(r) if !r.devices().is_empty() => r,
        _ => {
            println!("no CUDA device: the CPU path is all there is to show here");
            return Ok(());
        }
    };
    let lane = runtime
        .device(0)?
        .default_tenant()
        .lane(LanePriority::Normal)?;
    let cuda = Device::cuda(&lane)?;
    for dtype in [DType::F32, DType::BF16] {
        let got = run(&cuda, dtype)?;
        let err = got
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        println!("cuda {dtype}: largest difference from the CPU {err:.2e}");
    }
    Ok(())
}
