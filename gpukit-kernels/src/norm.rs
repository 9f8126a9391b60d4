//! The normalisation family (`cuda/norm.cu`): `rms_norm`, `add_rms_norm` (the residual add
//! fused in) and `layer_norm`, over the last axis.
//!
//! `rms_norm` and `add_rms_norm` give each row a group of threads (a power of two) whose lanes
//! hold up to [`NORM_VEC`] 16-byte vectors of it, so the row is read once and the kernel stays at
//! 32 registers (full occupancy). Swept on an H200: two vectors per lane streamed 80–99% of the
//! copy rate at hidden 1024–8192; one vector reached 73–77%, and four (55 registers) no more
//! than two, as did the earlier block per row. `layer_norm` runs one block per row.

use gpukit_driver::LaunchConfig;

use crate::kernel::{KernelFamily, float_name};
use crate::shared::NORM_VEC;
use crate::{DType, Error, Result};

/// The normalisation kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NormKernel {
    /// `rms_norm_<dt>`.
    RmsNorm(DType),
    /// `add_rms_norm_<dt>`.
    AddRmsNorm(DType),
    /// `layer_norm_<dt>`.
    LayerNorm(DType),
}

impl KernelFamily for NormKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            NormKernel::RmsNorm(dt) => format!("rms_norm_{}", float_name("rms_norm", dt)?),
            NormKernel::AddRmsNorm(dt) => {
                format!("add_rms_norm_{}", float_name("add_rms_norm", dt)?)
            }
            NormKernel::LayerNorm(dt) => format!("layer_norm_{}", float_name("layer_norm", dt)?),
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL
            .into_iter()
            .flat_map(|dt| {
                [
                    NormKernel::RmsNorm(dt),
                    NormKernel::AddRmsNorm(dt),
                    NormKernel::LayerNorm(dt),
                ]
            })
            .collect()
    }
}

/// The `rms_norm` / `add_rms_norm` launch for `rows` rows of `hidden` elements of `elem_bytes`
/// bytes: groups of `group` threads (a power of two, 32 to 1024) per row, each lane holding up
/// to [`NORM_VEC`] 16-byte vectors of it, in blocks of at least 128 threads (`128 / group` rows
/// per block for short rows). Returns the launch and `group`.
///
/// # Errors
/// [`Error::InvalidArgument`] for an element size outside 1..=16 bytes or too many rows.
pub fn rows(rows: usize, hidden: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
    if !(1..=16).contains(&elem_bytes) {
        return Err(Error::InvalidArgument(format!(
            "rms_norm rows of {elem_bytes}-byte elements"
        )));
    }
    let nvec = hidden.div_ceil(16 / elem_bytes);
    let group = nvec.div_ceil(NORM_VEC).next_power_of_two().clamp(32, 1024);
    let block = group.max(128);
    let per_block = block / group;
    let grid = u32::try_from(rows.div_ceil(per_block).max(1))
        .map_err(|_| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))?;
    Ok((LaunchConfig::new(grid, block as u32), group as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_whole_vectors_and_refuse_bad_sizes() {
        assert!(rows(4, 4096, 32).is_err());
        assert!(rows(4, 4096, 0).is_err());
        // 4096 bf16 values: 512 vectors, two a lane, 256 lanes a row.
        let (cfg, group) = rows(4, 4096, 2).unwrap();
        assert_eq!((cfg.grid.x, cfg.block.x, group), (4, 256, 256));
        // Short rows share a 128-thread block.
        let (cfg, group) = rows(10, 64, 4).unwrap();
        assert_eq!((cfg.grid.x, cfg.block.x, group), (3, 128, 32));
        assert_eq!(
            NormKernel::AddRmsNorm(DType::BF16).entry_point().unwrap(),
            "add_rms_norm_bf16"
        );
    }
}
