//! The batch-invariant linear family (`cuda/linear.cu`): `y = x · Wᵀ + b` for f16/bf16 on the
//! tensor cores, every output element summed the same way by each variant: K cut into segments
//! of [`LINEAR_KSEG`], each summed one mma per 16-deep chunk in order, the segments' sums added
//! in order. `Tiled` serves many rows, `Skinny` at most [`LINEAR_SKINNY_M`]; either runs its
//! segments in one block (fused) or as separate blocks whose sums `Reduce` adds up (split) — so a
//! row's result is the same whatever the batch (what a serving engine needs for batch-invariant
//! results) while each batch size gets a tiling and a parallelism that suit it.

use gpukit_driver::LaunchConfig;

use crate::grid::dim;
use crate::kernel::{KernelFamily, float_name};
use crate::shared::{
    LINEAR_KSEG, LINEAR_SKINNY_M, LINEAR_SKINNY_N, LINEAR_SPLIT_BELOW_BLOCKS, LINEAR_THREADS,
    LINEAR_TILE_M, LINEAR_TILE_N,
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
    /// `linear_reduce_<dt>`: the split variants' segment sums, in order, plus the bias.
    Reduce(DType),
}

impl KernelFamily for LinearKernel {
    fn entry_point(&self) -> Result<String> {
        let (name, dt) = match *self {
            LinearKernel::Tiled(dt) => ("tiled", dt),
            LinearKernel::Skinny(dt) => ("skinny", dt),
            LinearKernel::Reduce(dt) => ("reduce", dt),
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
        [DType::F16, DType::BF16]
            .into_iter()
            .flat_map(|d| {
                [
                    LinearKernel::Tiled(d),
                    LinearKernel::Skinny(d),
                    LinearKernel::Reduce(d),
                ]
            })
            .collect()
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
/// How a batch-invariant linear of `m` rows, `n` outputs and depth `k` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearPlan {
    /// The tiled or skinny kernel.
    pub kernel: LinearKernel,
    /// Its grid (z: the K segments when split).
    pub cfg: LaunchConfig,
    /// K segments run as separate blocks: an f32 workspace of `split · m · n` values takes
    /// their sums and [`LinearKernel::Reduce`] (with [`reduce_grid`]) adds them up. `None`:
    /// each block walks every segment and writes the output itself.
    pub split: Option<usize>,
}

/// K segments of depth [`LINEAR_KSEG`] in `k`.
pub fn segments(k: usize) -> usize {
    k.div_ceil(LINEAR_KSEG).max(1)
}

/// The plan for `m` rows, `n` outputs, depth `k`: the skinny kernel up to
/// [`LINEAR_SKINNY_M`] rows, the tiled one above; segments split where there are several and
/// the unsplit grid would be small (the skinny kernel always). Which plan runs never changes a
/// result.
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a grid.
pub fn plan(dtype: DType, m: usize, n: usize, k: usize) -> Result<LinearPlan> {
    let blocks = |tile: usize| {
        u32::try_from(n.div_ceil(tile).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{n} outputs exceed the grid limit")))
    };
    let segs = segments(k);
    let z = |split: bool| -> Result<u32> {
        match split {
            true => dim("K segments", segs),
            false => Ok(1),
        }
    };
    if m <= LINEAR_SKINNY_M {
        let split = segs > 1;
        let cfg = LaunchConfig::new((blocks(LINEAR_SKINNY_N)?, 1, z(split)?), LINEAR_THREADS);
        return Ok(LinearPlan {
            kernel: LinearKernel::Skinny(dtype),
            cfg,
            split: split.then_some(segs),
        });
    }
    let (x, y) = (
        blocks(LINEAR_TILE_N)?,
        dim("row tiles", m.div_ceil(LINEAR_TILE_M).max(1))?,
    );
    let split = segs > 1 && (x as usize) * (y as usize) < LINEAR_SPLIT_BELOW_BLOCKS;
    Ok(LinearPlan {
        kernel: LinearKernel::Tiled(dtype),
        cfg: LaunchConfig::new((x, y, z(split)?), LINEAR_THREADS),
        split: split.then_some(segs),
    })
}

/// The reduce kernel's grid for `m · n` outputs (grid-stride, 256 threads a block).
pub fn reduce_grid(m: usize, n: usize) -> LaunchConfig {
    let blocks = (m.saturating_mul(n)).div_ceil(256).clamp(1, 65_535);
    LaunchConfig::new(blocks as u32, 256)
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
        let p = plan(DType::BF16, 65, 129, 4096).unwrap();
        assert_eq!(p.kernel, LinearKernel::Tiled(DType::BF16));
        // 4 blocks: below the split threshold, so both K segments run as blocks.
        assert_eq!(
            (
                p.cfg.grid.x,
                p.cfg.grid.y,
                p.cfg.grid.z,
                p.cfg.block.x,
                p.split
            ),
            (2, 2, 2, LINEAR_THREADS, Some(2))
        );
        let p = plan(DType::F16, LINEAR_SKINNY_M, 65, LINEAR_KSEG).unwrap();
        assert_eq!(
            (p.kernel, p.cfg.grid.x, p.cfg.grid.y, p.split),
            (LinearKernel::Skinny(DType::F16), 3, 1, None)
        );
        assert_eq!(
            plan(DType::F16, 1, 65, LINEAR_KSEG + 1).unwrap().split,
            Some(2)
        );
        // Many tiles: segments fused.
        let p = plan(DType::BF16, 4096, 4096, 14336).unwrap();
        assert_eq!((p.cfg.grid.z, p.split), (1, None));
        assert_eq!(segments(14336), 7);
    }
}
