//! What the GPU benches of gpukit-llm share.

use gpukit_ops::Device;

/// Waits for the work queued on `dev`'s lane (nothing to wait for on the CPU).
pub fn sync(dev: &Device) -> gpukit_ops::Result<()> {
    if let Device::Cuda(c) = dev {
        c.synchronize()?;
    }
    Ok(())
}

/// Seeded random prompt ids (a 64-bit LCG), the same on every run.
pub fn prompt_ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// Writes `report` as pretty JSON to `$GPUKIT_BENCH_OUT/<file>` (default `target/bench`),
/// making the folder first.
pub fn write_report(
    file: &str,
    report: &serde_json::Value,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let out = std::env::var_os("GPUKIT_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join(file), serde_json::to_string_pretty(report)?)?;
    Ok(())
}

/// What picking a prompt's first greedy id on the device needs, made before any timing.
pub struct GreedyPick {
    params: gpukit_ops::sampling::SamplingParams,
    first: gpukit_ops::Tensor,
    step0: gpukit_ops::Tensor,
    workspace: gpukit_ops::Tensor,
}

impl GreedyPick {
    /// The buffers for `model`'s vocabulary, on its device.
    pub fn new(model: &gpukit_llm::model::Model) -> gpukit_ops::Result<Self> {
        use gpukit_ops::{DType, Tensor};
        let dev = model.device();
        Ok(GreedyPick {
            params: gpukit_ops::sampling::SamplingParams::default(),
            first: Tensor::zeros(&[1], DType::I32, dev)?,
            step0: Tensor::from_slice(&[0i64], &[1], dev)?,
            workspace: Tensor::empty(
                &[gpukit_ops::sampling::sampler_workspace_len(
                    1,
                    model.spec().vocab,
                )],
                DType::U8,
                dev,
            )?,
        })
    }

    /// Greedy sampling parameters.
    pub fn params(&self) -> &gpukit_ops::sampling::SamplingParams {
        &self.params
    }

    /// The greedy id of `logits` (`[1, vocab]`), read back to the host.
    pub fn pick(&self, logits: &gpukit_ops::Tensor) -> gpukit_ops::Result<u32> {
        gpukit_ops::sampling::sample_tokens_into(
            logits,
            None,
            &self.params,
            &self.step0,
            &self.workspace,
            &self.first,
        )?;
        Ok(self.first.to_vec::<i32>()?[0].max(0) as u32)
    }
}
