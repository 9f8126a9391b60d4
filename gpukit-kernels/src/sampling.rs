//! The sampling family (`cuda/sampling.cu`): token sampling on the device, one id per row of
//! logits, the same ids as the CPU reference (`gpukit_ops::sampling`): every weight is a 40-bit
//! fixed-point integer, so every sum is exact and no order of the work changes a threshold or a
//! draw. Each draw runs on a grid of ([`chunks`], rows) blocks ([`grid`]) of [`SAMPLE_THREADS`]
//! threads, a block per [`SAMPLE_CHUNK`] ids, sharing a per-row workspace of [`row_bytes`]:
//! greedy in two launches, temperature / top-k / top-p / min-p in up to six. Arguments in
//! [`SamplerArgs`]. The family also holds `decode_advance`, which moves a captured decode step's
//! device position, step and recent-id window on by one token.
//!
//! On many blocks with exact fixed-point sums, top-p over 128k ids took 17 µs on an H200 where a
//! single-block sort had taken 212 (about 10× torch's).

use gpukit_driver::{DeviceCopy, LaunchConfig};

use crate::kernel::{KernelFamily, float_name};
pub use crate::shared::SamplerArgs;
use crate::shared::{
    ARGMAX_PARTS_THREADS, SAMPLE_BINS, SAMPLE_CHUNK, SAMPLE_HEAD_BYTES, SAMPLE_THREADS,
};
use crate::{DType, Error, Result};

// SAFETY: `repr(C)`, integers and floats, no implicit padding (seed falls on offset 32).
unsafe impl DeviceCopy for SamplerArgs {}

/// The sampling kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SamplingKernel {
    /// `sample_greedy_<dt>`, first stage of a draw at temperature 0: each chunk's first maximum
    /// of the penalised logits (grid [`grid`]).
    SampleGreedy(DType),
    /// `sample_greedy_merge`: each row's first maximum of its chunks' (grid [`merge_grid`]).
    SampleGreedyMerge,
    /// `sample_scale_<dt>`, first stage of a draw at a temperature above 0: z = penalised logit
    /// / temperature into the workspace and each chunk's maximum (grid [`grid`], as every stage
    /// below).
    SampleScale(DType),
    /// `sample_exp`: e = exp(z − max), the total fixed-point weight and the first histogram.
    SampleExp,
    /// `sample_refine`: rounds 2 and 3 of the top-k / top-p radix select.
    SampleRefine,
    /// `sample_theta`: the filters' threshold and each chunk's kept weight.
    SampleTheta,
    /// `sample_draw`: the uniform draw over the kept weight, one id per row.
    SampleDraw,
    /// `decode_advance`: a decode step's device position, step and recent-id window, moved on
    /// by one token.
    DecodeAdvance,
    /// `sample_argmax_parts`: the greedy token from the LM head's per-block maxima
    /// (`gemv_norm_argmax`), one block of [`ARGMAX_PARTS_THREADS`].
    SampleArgmaxParts,
}

impl KernelFamily for SamplingKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            SamplingKernel::SampleGreedy(dt) => {
                format!("sample_greedy_{}", float_name("sampling", dt)?)
            }
            SamplingKernel::SampleScale(dt) => {
                format!("sample_scale_{}", float_name("sampling", dt)?)
            }
            SamplingKernel::SampleGreedyMerge => "sample_greedy_merge".into(),
            SamplingKernel::SampleExp => "sample_exp".into(),
            SamplingKernel::SampleRefine => "sample_refine".into(),
            SamplingKernel::SampleTheta => "sample_theta".into(),
            SamplingKernel::SampleDraw => "sample_draw".into(),
            SamplingKernel::DecodeAdvance => "decode_advance".into(),
            SamplingKernel::SampleArgmaxParts => "sample_argmax_parts".into(),
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = vec![
            SamplingKernel::SampleGreedyMerge,
            SamplingKernel::SampleExp,
            SamplingKernel::SampleRefine,
            SamplingKernel::SampleTheta,
            SamplingKernel::SampleDraw,
            SamplingKernel::DecodeAdvance,
            SamplingKernel::SampleArgmaxParts,
        ];
        for dt in DType::ALL {
            v.push(SamplingKernel::SampleGreedy(dt));
            v.push(SamplingKernel::SampleScale(dt));
        }
        v
    }
}

/// Blocks per row of the sampler's stages: one per [`SAMPLE_CHUNK`] ids.
pub fn chunks(vocab: usize) -> usize {
    vocab.div_ceil(SAMPLE_CHUNK).max(1)
}

/// Workspace bytes per row of the sampler's stages (`SampleWs` in `cuda/sampling.cu`): a
/// [`SAMPLE_HEAD_BYTES`] head (total weight, threshold, two radix-select records), the three
/// rounds' histograms ([`SAMPLE_BINS`] u64 weights each, then as many u32 counts each), a u64
/// kept weight (a greedy draw's chunk maximum) and an f32 maximum per chunk, then (16-byte
/// aligned) one f32 per id of every chunk. A multiple of 16.
pub fn row_bytes(vocab: usize) -> usize {
    let chunks = chunks(vocab);
    (SAMPLE_HEAD_BYTES + 3 * SAMPLE_BINS * 12 + 12 * chunks).next_multiple_of(16)
        + 4 * SAMPLE_CHUNK * chunks
}

/// The grid of the sampler's stages: ([`chunks`], rows) blocks of [`SAMPLE_THREADS`].
///
/// # Errors
/// [`Error::InvalidArgument`] for a vocabulary or a row count beyond a grid.
pub fn grid(rows: usize, vocab: usize) -> Result<LaunchConfig> {
    let chunks = u32::try_from(chunks(vocab)).map_err(|_| {
        Error::InvalidArgument(format!("vocabulary of {vocab} too large for the sampler"))
    })?;
    Ok(LaunchConfig::new(
        (chunks, grid_rows(rows)?),
        SAMPLE_THREADS,
    ))
}

/// The grid of [`SamplingKernel::SampleGreedyMerge`]: (1, rows) blocks of
/// [`ARGMAX_PARTS_THREADS`] threads.
///
/// # Errors
/// As [`grid`].
pub fn merge_grid(rows: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig::new(
        (1, grid_rows(rows)?),
        ARGMAX_PARTS_THREADS,
    ))
}

/// The sampler grids' second dimension: one row per block row (at least 1), at most the grid's
/// 65 535.
fn grid_rows(rows: usize) -> Result<u32> {
    u32::try_from(rows.max(1))
        .ok()
        .filter(|&r| r <= 65_535)
        .ok_or_else(|| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_and_workspace_follow_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<SamplerArgs>(), 48);
        assert_eq!(std::mem::offset_of!(SamplerArgs, seed), 32);
        // 49152 ids: 48 chunks; head, histograms, per-chunk weights and maxima, then the ids.
        assert_eq!(
            row_bytes(49_152),
            (80 + 3 * 1024 * 12 + 12 * 48usize).next_multiple_of(16) + 4 * 1024 * 48
        );
        assert_eq!(row_bytes(1) % 16, 0);
        assert!(grid(1 << 16, 100).is_err());
        assert_eq!(grid(2, 2049).unwrap().grid.x, 3);
    }
}
