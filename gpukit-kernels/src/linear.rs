//! The batch-invariant linear family (`cuda/linear.cu`): `y = x · Wᵀ + b` for f16/bf16 on the
//! tensor cores with one tile configuration for every number of rows and no split over K, so
//! each output element is summed in the same order whatever the batch (what a serving engine
//! needs for batch-invariant results).

use gpukit_driver::LaunchConfig;

use crate::grid::dim;
use crate::kernel::{KernelFamily, float_name};
use crate::shared::{LINEAR_THREADS, LINEAR_TILE_M, LINEAR_TILE_N};
use crate::{DType, Error, Result};

/// The batch-invariant linear kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKernel {
    /// `linear_tiled_<dt>`: f16 or bf16, K a multiple of 8, 16-byte aligned operands.
    Tiled(DType),
}

impl KernelFamily for LinearKernel {
    fn entry_point(&self) -> Result<String> {
        let LinearKernel::Tiled(dt) = *self;
        match dt {
            DType::F16 | DType::BF16 => Ok(format!("linear_tiled_{}", float_name("linear", dt)?)),
            dtype => Err(Error::Unsupported {
                op: "linear (tiled)",
                dtype,
            }),
        }
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        vec![
            LinearKernel::Tiled(DType::F16),
            LinearKernel::Tiled(DType::BF16),
        ]
    }
}

/// Whether the tiled kernel takes a `[m, k] · [n, k]ᵀ` product of `dtype` whose operands start
/// at these addresses: f16/bf16, k a multiple of 8 (16-byte rows), both 16-byte aligned. It
/// does not depend on m, so a sequence's rows take the same kernel in any batch.
pub fn tiled_fits(dtype: DType, k: usize, x_addr: u64, w_addr: u64) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
        && k.is_multiple_of(8)
        && x_addr.is_multiple_of(16)
        && w_addr.is_multiple_of(16)
}

/// The launch: one block per [`LINEAR_TILE_M`] rows × [`LINEAR_TILE_N`] outputs.
///
/// # Errors
/// [`Error::InvalidArgument`] for more row tiles than a grid's y dimension holds.
pub fn tiled_grid(m: usize, n: usize) -> Result<LaunchConfig> {
    let x = u32::try_from(n.div_ceil(LINEAR_TILE_N).max(1))
        .map_err(|_| Error::InvalidArgument(format!("{n} outputs exceed the grid limit")))?;
    let y = dim("row tiles", m.div_ceil(LINEAR_TILE_M).max(1))?;
    Ok(LaunchConfig::new((x, y, 1), LINEAR_THREADS))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_tile_depends_on_the_shape_never_on_how_rows_are_batched() {
        assert!(tiled_fits(DType::BF16, 4096, 0, 256));
        assert!(!tiled_fits(DType::F32, 4096, 0, 0));
        assert!(!tiled_fits(DType::F16, 4100, 0, 0));
        assert!(!tiled_fits(DType::F16, 4096, 8, 0));
        let g = tiled_grid(65, 129).unwrap();
        assert_eq!((g.grid.x, g.grid.y, g.block.x), (2, 2, LINEAR_THREADS));
        assert_eq!(tiled_grid(1, 1).unwrap().grid.y, 1);
    }
}
