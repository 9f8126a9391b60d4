//! The batch-invariant linear family (`cuda/linear.cu`): `y = x · Wᵀ + b` for f16/bf16 on the
//! tensor cores, every output element summed the same way (one mma per 16-deep chunk of K, in
//! order, no split over K) by each variant — `Tiled` for many rows, `Skinny` for at most
//! [`LINEAR_SKINNY_M`] — so a row's result is the same whatever the batch (what a serving engine
//! needs for batch-invariant results) while each batch size gets a tiling that suits it.

use gpukit_driver::LaunchConfig;

use crate::grid::dim;
use crate::kernel::{KernelFamily, float_name};
use crate::shared::{
    LINEAR_SKINNY_M, LINEAR_SKINNY_N, LINEAR_THREADS, LINEAR_TILE_M, LINEAR_TILE_N,
};
use crate::{DType, Error, Result};

/// The batch-invariant linear kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKernel {
    /// `linear_tiled_<dt>`: 64 × 128 tiles; f16 or bf16, K a multiple of 8, 16-byte aligned
    /// operands.
    Tiled(DType),
    /// `linear_skinny_<dt>`: at most [`LINEAR_SKINNY_M`] rows, [`LINEAR_SKINNY_N`] outputs per
    /// block (decode batches: memory-bound, many blocks); same operand rules.
    Skinny(DType),
}

impl KernelFamily for LinearKernel {
    fn entry_point(&self) -> Result<String> {
        let (name, dt) = match *self {
            LinearKernel::Tiled(dt) => ("tiled", dt),
            LinearKernel::Skinny(dt) => ("skinny", dt),
        };
        match dt {
            DType::F16 | DType::BF16 => Ok(format!("linear_{name}_{}", float_name("linear", dt)?)),
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

/// The kernel for `m` rows of `dtype` and its launch: [`LinearKernel::Skinny`] (one block per
/// [`LINEAR_SKINNY_N`] outputs) up to [`LINEAR_SKINNY_M`] rows, else [`LinearKernel::Tiled`]
/// (one block per [`LINEAR_TILE_M`] rows × [`LINEAR_TILE_N`] outputs). Both sum every element
/// the same way, so the choice may depend on m.
///
/// # Errors
/// [`Error::InvalidArgument`] for more tiles than a grid holds.
pub fn plan(dtype: DType, m: usize, n: usize) -> Result<(LinearKernel, LaunchConfig)> {
    let blocks = |tile: usize| {
        u32::try_from(n.div_ceil(tile).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{n} outputs exceed the grid limit")))
    };
    if m <= LINEAR_SKINNY_M {
        let cfg = LaunchConfig::new(blocks(LINEAR_SKINNY_N)?, LINEAR_THREADS);
        return Ok((LinearKernel::Skinny(dtype), cfg));
    }
    let y = dim("row tiles", m.div_ceil(LINEAR_TILE_M).max(1))?;
    let cfg = LaunchConfig::new((blocks(LINEAR_TILE_N)?, y, 1), LINEAR_THREADS);
    Ok((LinearKernel::Tiled(dtype), cfg))
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
        let (k, g) = plan(DType::BF16, 65, 129).unwrap();
        assert_eq!(k, LinearKernel::Tiled(DType::BF16));
        assert_eq!((g.grid.x, g.grid.y, g.block.x), (2, 2, LINEAR_THREADS));
        let (k, g) = plan(DType::F16, LINEAR_SKINNY_M, 65).unwrap();
        assert_eq!(
            (k, g.grid.x, g.grid.y),
            (LinearKernel::Skinny(DType::F16), 3, 1)
        );
    }
}
