//! The batch-invariant linear family (`cuda/linear.cu`): `y = x · Wᵀ + b` for f16/bf16 on the
//! tensor cores, every output element summed the same way by each tiling: K cut into segments
//! of [`LINEAR_KSEG`], each summed one mma per 16-deep chunk in order, the segments' sums added
//! in order. [`LINEAR_TILES`] lists the tilings, chosen by the number of rows; a tiling runs its
//! segments in one block (fused) or as separate blocks whose sums `Reduce` adds up (split) — so
//! a row's result is the same whatever the batch (what a serving engine needs for
//! batch-invariant results) while each batch size gets a tiling and a parallelism that suit it.

use gpukit_driver::LaunchConfig;

use crate::grid::dim;
use crate::kernel::{KernelFamily, float_name};
use crate::shared::{
    LINEAR_KSEG, LINEAR_NARROW_BELOW_BLOCKS, LINEAR_SPLIT_BELOW_BLOCKS, LINEAR_TILES, LinearTile,
};
use crate::{DType, Error, Result};

/// The batch-invariant linear kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKernel {
    /// `linear_t<i>_<dt>`: the tiling `LINEAR_TILES[i]`; f16 or bf16, K a multiple of 8,
    /// 16-byte aligned operands.
    Tile(usize, DType),
    /// `linear_reduce_<dt>`: the split tilings' segment sums, in order, plus the bias.
    Reduce(DType),
}

impl KernelFamily for LinearKernel {
    fn entry_point(&self) -> Result<String> {
        let (name, dt) = match *self {
            LinearKernel::Tile(i, dt) if i < LINEAR_TILES.len() => (format!("t{i}"), dt),
            LinearKernel::Tile(i, _) => {
                return Err(Error::InvalidArgument(format!(
                    "linear tiling {i} of {}",
                    LINEAR_TILES.len()
                )));
            }
            LinearKernel::Reduce(dt) => ("reduce".to_string(), dt),
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
                (0..LINEAR_TILES.len())
                    .map(move |i| LinearKernel::Tile(i, d))
                    .chain([LinearKernel::Reduce(d)])
            })
            .collect()
    }
}

/// Whether the tiled kernels take a `[m, k] · [n, k]ᵀ` product of `dtype` whose operands start
/// at these addresses: f16/bf16, k a multiple of 8 (16-byte rows), both 16-byte aligned. It
/// does not depend on m, so a sequence's rows take the same family in any batch.
pub fn tiled_fits(dtype: DType, k: usize, x_addr: u64, w_addr: u64) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
        && k.is_multiple_of(8)
        && x_addr.is_multiple_of(16)
        && w_addr.is_multiple_of(16)
}

/// How a batch-invariant linear of `m` rows, `n` outputs and depth `k` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearPlan {
    /// The tiling's kernel.
    pub kernel: LinearKernel,
    /// Its grid (x: row tiles, y: output tiles, z: the K segments when split), block and
    /// dynamic shared memory.
    pub cfg: LaunchConfig,
    /// K segments run as separate blocks: an f32 workspace of `split · m · n` values takes
    /// their sums and [`LinearKernel::Reduce`] (with [`reduce_grid`]) adds them up. `None`:
    /// each block walks every segment (or there is one) and writes the output itself.
    pub split: Option<usize>,
}

/// K segments of depth [`LINEAR_KSEG`] in `k`.
pub fn segments(k: usize) -> usize {
    k.div_ceil(LINEAR_KSEG).max(1)
}

/// The row tiling for `m` rows: the first of [`LINEAR_TILES`] (not narrow) whose `max_rows`
/// covers m.
pub fn tile_for(m: usize) -> (usize, LinearTile) {
    let rows = |t: &LinearTile| !t.narrow;
    let i = LINEAR_TILES
        .iter()
        .position(|t| rows(t) && m <= t.max_rows)
        .or_else(|| LINEAR_TILES.iter().rposition(rows))
        .unwrap_or(0);
    (i, LINEAR_TILES[i])
}

/// The plan for `m` rows, `n` outputs, depth `k` of `dtype`: the tiling for m (see
/// [`tile_for`]), its segments split into blocks unless it is fused or there is one. Where the
/// grid would be small (few outputs) a tiling with more blocks runs instead: a fused one below
/// [`LINEAR_SPLIT_BELOW_BLOCKS`] blocks gives way to the widest split one, a row tiling below
/// [`LINEAR_NARROW_BELOW_BLOCKS`] to a narrow one that covers m. Which plan runs never changes
/// a result.
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a grid; [`Error::Unsupported`] for a dtype
/// other than f16/bf16.
pub fn plan(dtype: DType, m: usize, n: usize, k: usize) -> Result<LinearPlan> {
    let elem = match dtype {
        DType::F16 | DType::BF16 => dtype.size_in_bytes(),
        dtype => {
            return Err(Error::Unsupported {
                op: "linear (tiled)",
                dtype,
            });
        }
    };
    let segs = segments(k);
    let blocks = |t: &LinearTile| {
        let z = if t.fused { 1 } else { segs };
        m.div_ceil(t.rows).max(1) * n.div_ceil(t.cols).max(1) * z
    };
    let (mut i, mut tile) = tile_for(m);
    if tile.fused
        && segs > 1
        && blocks(&tile) < LINEAR_SPLIT_BELOW_BLOCKS
        && let Some(j) = LINEAR_TILES.iter().rposition(|t| !t.fused && !t.narrow)
    {
        (i, tile) = (j, LINEAR_TILES[j]);
    }
    if blocks(&tile) < LINEAR_NARROW_BELOW_BLOCKS
        && let Some(j) = LINEAR_TILES
            .iter()
            .position(|t| t.narrow && m <= t.max_rows)
    {
        (i, tile) = (j, LINEAR_TILES[j]);
    }
    let split = !tile.fused && segs > 1;
    let grid = (
        dim("row tiles", m.div_ceil(tile.rows).max(1))?,
        dim("output tiles", n.div_ceil(tile.cols).max(1))?,
        dim("K segments", if split { segs } else { 1 })?,
    );
    Ok(LinearPlan {
        kernel: LinearKernel::Tile(i, dtype),
        cfg: LaunchConfig::new(grid, tile.threads()).shared_mem(tile.shared_bytes(elem)),
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
        // 65 rows: the 128-row tiling, one block per segment.
        let p = plan(DType::BF16, 65, 129, 4096).unwrap();
        let (i, t) = tile_for(65);
        assert_eq!(p.kernel, LinearKernel::Tile(i, DType::BF16));
        assert_eq!(
            (
                p.cfg.grid.x,
                p.cfg.grid.y,
                p.cfg.grid.z,
                p.cfg.block.x,
                p.split
            ),
            (1, 2, 2, t.threads(), Some(2))
        );
        assert_eq!(p.cfg.shared_mem_bytes, t.shared_bytes(2));
        // One segment: nothing to split (and few outputs: the narrow tiling).
        let narrow = LINEAR_TILES.iter().position(|t| t.narrow).unwrap();
        let p = plan(DType::F16, 16, 65, LINEAR_KSEG).unwrap();
        assert_eq!(
            (p.kernel, p.split),
            (LinearKernel::Tile(narrow, DType::F16), None)
        );
        assert_eq!(
            plan(DType::F16, 1, 65, LINEAR_KSEG + 1).unwrap().split,
            Some(2)
        );
        // Many rows: the fused tiling, no workspace; with few outputs, split again.
        let p = plan(DType::BF16, 4096, 4096, 14336).unwrap();
        let fused = LINEAR_TILES.iter().position(|t| t.fused).unwrap();
        assert_eq!(
            (p.kernel, p.cfg.grid.z, p.split),
            (LinearKernel::Tile(fused, DType::BF16), 1, None)
        );
        let p = plan(DType::BF16, 512, 1024, 4096).unwrap();
        assert!(p.kernel != LinearKernel::Tile(fused, DType::BF16) && p.split == Some(2));
        assert_eq!(segments(14336), 7);
        assert!(plan(DType::F32, 1, 1, 8).is_err());
        // One row of a projection with few outputs: the narrow tiling (64 blocks, not 16).
        let p = plan(DType::BF16, 1, 1024, 4096).unwrap();
        assert_eq!(p.kernel, LinearKernel::Tile(narrow, DType::BF16));
        assert_eq!((p.cfg.grid.y, p.cfg.grid.z, p.split), (32, 2, Some(2)));
        assert_eq!(
            plan(DType::BF16, 1, 14336, 4096).unwrap().kernel,
            LinearKernel::Tile(0, DType::BF16)
        );
    }

    #[test]
    fn the_tilings_are_consistent() {
        let mut last = 0;
        for t in LINEAR_TILES {
            if !t.narrow {
                assert!(t.max_rows > last, "row tilings by increasing rows");
                last = t.max_rows;
            }
            assert!(LINEAR_KSEG.is_multiple_of(t.depth) && t.depth.is_multiple_of(16));
            assert!(t.rows.is_multiple_of(t.warp_rows) && t.warp_rows.is_multiple_of(16));
            assert!(t.cols.is_multiple_of(t.warp_cols));
            assert!(t.warp_cols == 8 || t.warp_cols.is_multiple_of(16));
            assert!(t.stages >= 2 && t.threads() <= 1024);
            // Within the 99 KiB of shared memory a block may opt into on sm_86 and sm_89 (the
            // least of the architectures built for).
            assert!(t.shared_bytes(2) <= 99 * 1024);
        }
        assert_eq!(last, usize::MAX, "the last tiling takes any number of rows");
    }
}
