//! The GEMV family (`cuda/gemv.cu`): matrix-vector products for up to
//! [`GEMV_MAX_M`](crate::shared::GEMV_MAX_M) rows of x, and the decode step's fused GEMVs.
//!
//! How a product of one row of x with a `[n, k]` weight is run (the decode case), by weight
//! size, on Hopper (`sm_90a`):
//! - below [`RING_MIN_BYTES`] (4 MiB): the persistent kernel ([`persistent`]): one wave of
//!   blocks whose warp groups stride over the rows, [`split`] warps sharing a row;
//! - from 4 MiB to [`RING_SMALL_BELOW`] (16 MiB) with rows of at most 8 KiB: the small-matrix
//!   ring ([`ring`]), whose blocks fit twice on a multiprocessor, so the next launch's blocks
//!   start beside the previous launch's and ask L2 for their stages before it ends;
//! - above: the large ring, one block per multiprocessor streaming 32 KiB stages of whole rows
//!   through a 128 KiB shared-memory ring by bulk asynchronous copies.
//!
//! Elsewhere (and for several rows of x) the block-per-columns kernel ([`blocks`]). The pre-norm
//! kernels (`gemv_norm`, `gemv_swiglu_norm`, `gemv_norm_rope_kv`) run the residual add and
//! RMSNorm as the GEMV's prologue on the persistent grid; `gemv_norm_argmax` also reduces each
//! block's logits to a first maximum (the LM head with greedy sampling).
//!
//! The sums' order depends on the shape only, never on the device's multiprocessor count, so
//! results are deterministic and the same on every card.
//!
//! Tried and slower on an H200/H100 (so the next engineer need not): 8 or 16 KiB stages, a 192
//! KiB ring and two large-ring blocks per SM (up to 30% slower at one or more shapes); x staged
//! through registers for the large ring; a tensor-core consumer; sub-stage barriers; weights
//! copied before the PDL wait (they may still be written by the previous kernel, and L2 hits
//! then queue behind the next launch's HBM reads); the next launch let in at the block's entry.

use gpukit_driver::LaunchConfig;

use crate::kernel::{KernelFamily, float_name};
use crate::shared::{BLOCK_THREADS, GEMV_RING_MAX_STAGES, GEMV_RING_WARPS};
use crate::{DType, Error, Result};

/// The GEMV kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemvKernel {
    /// `gemv_<dt>` / `gemv_<dt>_vec` / `gemv_<dt>_vec_m1`.
    Gemv {
        /// Element type (float).
        dtype: DType,
        /// 16-byte vector loads (K a multiple of 16 bytes, rows aligned).
        vectorized: bool,
        /// Exactly one row of x (the decode case): the persistent kernel of [`persistent`],
        /// arguments (x, w, bias, out, N, K, warps per row). Only with `vectorized`.
        single_row: bool,
    },
    /// `gemv_ring_<dt>_r<rows>`: one row of x against a weight matrix of [`RING_MIN_BYTES`] or
    /// more on Hopper, streamed through a shared-memory ring by bulk asynchronous copies
    /// ([`ring`]) in stages of `rows` whole rows (1, 2, 4 or 8), arguments (x, w, bias, out, N,
    /// K, warps per group, stages, stages prefetched). Only the sm_90+ images have its body
    /// (elsewhere the entry point traps): launch it only where the registry's target is
    /// `sm_90a`.
    GemvRing {
        /// Element type (float).
        dtype: DType,
        /// Weight rows per ring stage: 1, 2, 4 or 8.
        rows: u32,
    },
    /// `gemv_swiglu_<dt>`: SwiGLU's gate and up projections of one row with silu(gate)·up
    /// (weights `[2N, K]`, gate rows first; K a multiple of 16 bytes, rows aligned).
    GemvSwiglu(DType),
    /// `gemv_norm_<dt>` / `gemv_norm_argmax_<dt>`: one row's RMSNorm (after an optional residual
    /// add) then its GEMV, on a persistent grid; `argmax` also writes each block's first maximum
    /// (the LM head with greedy sampling).
    GemvNorm {
        /// Element type (float).
        dtype: DType,
        /// Per-block first maxima for `sample_argmax_parts`.
        argmax: bool,
    },
    /// `gemv_swiglu_norm_<dt>`: [`GemvKernel::GemvSwiglu`] with the pre-norm of
    /// [`GemvKernel::GemvNorm`].
    GemvSwigluNorm(DType),
    /// `gemv_norm_rope_kv_<dt>`: [`GemvKernel::GemvNorm`] for a fused QKV projection whose
    /// epilogue applies RoPE and writes the queries out and the keys and values into the KV
    /// cache at the device position (what `rope_kv_append` does, without q/k norms).
    GemvNormRopeKv(DType),
}

impl KernelFamily for GemvKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            GemvKernel::Gemv {
                dtype,
                vectorized,
                single_row,
            } => format!(
                "gemv_{}{}",
                float_name("gemv", dtype)?,
                match (vectorized, single_row) {
                    (true, true) => "_vec_m1",
                    (true, false) => "_vec",
                    (false, _) => "",
                }
            ),
            GemvKernel::GemvRing { dtype, rows } => {
                if !matches!(rows, 1 | 2 | 4 | 8) {
                    return Err(Error::InvalidArgument(format!(
                        "the ring GEMV kernels exist for 1, 2, 4 or 8 rows a stage, not {rows}"
                    )));
                }
                format!("gemv_ring_{}_r{rows}", float_name("gemv", dtype)?)
            }
            GemvKernel::GemvSwiglu(dt) => format!("gemv_swiglu_{}", float_name("gemv", dt)?),
            GemvKernel::GemvNorm { dtype, argmax } => format!(
                "gemv_norm_{}{}",
                if argmax { "argmax_" } else { "" },
                float_name("gemv", dtype)?
            ),
            GemvKernel::GemvSwigluNorm(dt) => {
                format!("gemv_swiglu_norm_{}", float_name("gemv", dt)?)
            }
            GemvKernel::GemvNormRopeKv(dt) => {
                format!("gemv_norm_rope_kv_{}", float_name("gemv", dt)?)
            }
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = Vec::new();
        for dtype in DType::ALL {
            for (vectorized, single_row) in [(false, false), (true, false), (true, true)] {
                v.push(GemvKernel::Gemv {
                    dtype,
                    vectorized,
                    single_row,
                });
            }
            for rows in [1, 2, 4, 8] {
                v.push(GemvKernel::GemvRing { dtype, rows });
            }
            v.extend([
                GemvKernel::GemvSwiglu(dtype),
                GemvKernel::GemvSwigluNorm(dtype),
                GemvKernel::GemvNormRopeKv(dtype),
                GemvKernel::GemvNorm {
                    dtype,
                    argmax: false,
                },
                GemvKernel::GemvNorm {
                    dtype,
                    argmax: true,
                },
            ]);
        }
        v
    }
}

/// Warps splitting one weight row of `k` elements: the largest power of two ≤ row bytes / 2 KiB
/// (a warp's pass: 32 lanes × four 16-byte loads), between 1 and `max`.
fn warps_per_row(k: usize, elem_bytes: usize, max: usize) -> u32 {
    1u32 << (k.saturating_mul(elem_bytes) / 2048).clamp(1, max).ilog2()
}

/// Blocks of [`BLOCK_THREADS`] of `per_block` outputs covering `n`; returns the launch and
/// `per_block`.
fn blocks_of(n: usize, per_block: u32) -> Result<(LaunchConfig, u32)> {
    let grid = u32::try_from(n.div_ceil(per_block as usize).max(1))
        .map_err(|_| Error::InvalidArgument(format!("{n} GEMV outputs exceed the grid")))?;
    Ok((LaunchConfig::new(grid, BLOCK_THREADS), per_block))
}

/// The block-per-columns GEMV (`gemv_<dt>[_vec]`, several rows of x): 256-thread blocks of
/// `rows` output columns each, `8 / rows` warps per column splitting K (the largest power of
/// two ≤ column bytes / 2 KiB, 1 to 8). 2 KiB per warp was the fastest of 2, 4 and 6 KiB in the decode steps of Llama-3.2-1B and
/// Qwen2.5-0.5B on an H200 with programmatic dependent launch, and within 5% of the best at
/// every bench shape. Returns the launch and `rows`.
///
/// # Errors
/// [`Error::InvalidArgument`] for more blocks than a grid holds.
pub fn blocks(n: usize, k: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
    blocks_of(n, 8 / warps_per_row(k, elem_bytes, 8))
}

/// The SwiGLU GEMV: like [`blocks`] with each output needing two weight rows, so a block
/// computes `8 / (2 · warps per row)` outputs (warps per row at most 4). Returns the launch and
/// that count.
///
/// # Errors
/// As [`blocks`].
pub fn swiglu_blocks(n: usize, k: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
    blocks_of(n, 4 / warps_per_row(k, elem_bytes, 4))
}

/// The persistent decode GEMVs (single-row [`GemvKernel::Gemv`], [`GemvKernel::GemvNorm`],
/// [`GemvKernel::GemvSwigluNorm`], [`GemvKernel::GemvNormRopeKv`]): 256-thread blocks of `8 /
/// split` groups of `split` warps, a group owning one output unit (a weight row, or two) at a
/// time and striding over the `units`, as a grid of at most `resident` blocks (one wave: the
/// device's multiprocessors × the kernel's occupancy), with `smem_bytes` of dynamic shared
/// memory (the normalised row of the pre-norm kernels; 0 otherwise). `split` comes from
/// [`split`].
///
/// # Errors
/// [`Error::InvalidArgument`] for a split other than 1, 2, 4 or 8, or sizes beyond a launch.
pub fn persistent(
    units: usize,
    split: u32,
    smem_bytes: usize,
    resident: usize,
) -> Result<LaunchConfig> {
    if !matches!(split, 1 | 2 | 4 | 8) {
        return Err(Error::InvalidArgument(format!(
            "{split} warps per GEMV row (1, 2, 4 or 8)"
        )));
    }
    let groups = (BLOCK_THREADS / 32 / split) as usize;
    let blocks = units.div_ceil(groups).clamp(1, resident.max(1));
    let grid = u32::try_from(blocks)
        .map_err(|_| Error::InvalidArgument(format!("{units} GEMV outputs exceed the grid")))?;
    let smem = u32::try_from(smem_bytes)
        .map_err(|_| Error::InvalidArgument(format!("{smem_bytes} bytes of shared memory")))?;
    Ok(LaunchConfig::new(grid, BLOCK_THREADS).shared_mem(smem))
}

/// Warps sharing each weight row in the persistent decode GEMVs ([`persistent`]) for a `[rows,
/// k]` weight: as for [`blocks`], the largest power of two ≤ row bytes / 2 KiB, between 1 and 8,
/// and at least 2 below 4096 rows (so a small matrix still spreads over every multiprocessor).
/// Of 1, 2, 4 and 8 warps per row at the decode shapes of Llama-3.2-1B, Qwen2.5-0.5B and
/// Llama-3.1-8B (H200, with PDL) this rule was the fastest at 9 of 12 shapes and within 8% at
/// the others. It depends on the shape only, so results do not depend on the device.
pub fn split(rows: usize, k: usize, elem_bytes: usize) -> u32 {
    let split = warps_per_row(k, elem_bytes, 8);
    if rows < 4096 { split.max(2) } else { split }
}

/// Weight matrices below this many bytes stay on the persistent kernel ([`persistent`]). From
/// here to [`RING_SMALL_BELOW`], for rows of at most 8 KiB, the ring's blocks fit twice on a
/// multiprocessor; on an H200 they beat the persistent kernel by 8–9% at 4 MiB ((k, n) = (2048,
/// 1024)) and 11–26% at 6–9 MiB.
pub const RING_MIN_BYTES: usize = 4 << 20;

/// Weight matrices below this many bytes get the small-matrix ring of [`ring`] where their rows
/// are at most 8 KiB: stages of at most 20 KiB and at most 4 rows in a ring of at most 96 KiB,
/// so two blocks (kernels of 2 or 4 rows a stage: at most 94 registers) fit on a
/// multiprocessor.
pub const RING_SMALL_BELOW: usize = 16 << 20;

/// Largest stage of the large ring: 32 KiB.
const STAGE_MAX: usize = 32 << 10;
/// Largest stage of the small ring: 20 KiB.
const SMALL_STAGE_MAX: usize = 20 << 10;
/// Longest row the small ring takes: 8 KiB. Qwen2.5-0.5B's down_proj (9.5 KiB rows) took 3.6 µs
/// on it against 4.7 alone but made the decode step 3% slower, so longer rows stay on the
/// persistent kernel.
const SMALL_ROW_MAX: usize = 8 << 10;

/// Weight rows per stage of the ring for a `[n, k]` weight of `elem_bytes`-byte elements, or
/// `None` where the matrix takes no ring (below [`RING_MIN_BYTES`], a row not a multiple of 16
/// bytes, or too long for a stage). The ring's kernel ([`GemvKernel::GemvRing`]) is chosen by
/// it, before [`ring`] plans the launch with that kernel's static shared memory.
pub fn ring_rows(n: usize, k: usize, elem_bytes: usize) -> Option<u32> {
    let row = k.saturating_mul(elem_bytes);
    let bytes = n.saturating_mul(row);
    if bytes < RING_MIN_BYTES || row > STAGE_MAX || !row.is_multiple_of(16) {
        return None;
    }
    if bytes < RING_SMALL_BELOW {
        (row <= SMALL_ROW_MAX).then(|| 1 << (SMALL_STAGE_MAX / row).min(4).ilog2())
    } else {
        Some(1 << (STAGE_MAX / row).min(8).ilog2())
    }
}

/// The Hopper bulk-copy ring GEMV ([`GemvKernel::GemvRing`]) for one row of x against a `[n,
/// k]` weight of `elem_bytes`-byte elements (k a multiple of 16 bytes), on `sms`
/// multiprocessors with `smem_optin` bytes of shared memory a block may opt into, for a kernel
/// of `static_smem` bytes of static shared memory (its barriers and partial sums, as the
/// compiled kernel reports it; the 128-byte aligned ring starts at the next 128-byte boundary).
/// Blocks of 9 warps (8 consumers, a producer) whose consumer warps form groups of 2 (4 groups)
/// or 4 (2 groups), stages of [`ring_rows`] whole rows, a ring that holds all of a block's
/// stages or a multiple of the groups' count of them, and x after the ring (the producer copies
/// it too). Returns the launch and the kernel's (warps per group, rows per stage, stages, stages
/// prefetched), or `None` where [`ring_rows`] is `None` or the ring does not fit (the caller
/// then uses [`persistent`]).
///
/// - From [`RING_SMALL_BELOW`] up: a ring of about 128 KiB (one block per multiprocessor), 2
///   warps per group for 8-row stages, else 4; before the PDL wait the producer asks L2 for its
///   first 64 KiB of stages (at least one). As few blocks as give none more stages than a block
///   per multiprocessor would.
/// - Below it: stages of at most 20 KiB and 2 or 4 rows, 4 warps per group for stages of 16 KiB
///   or more, else 2; as many stages as a block has (at most 96 KiB of them, rounded down to a
///   multiple of the groups, at least one a group; all of them where that would leave one a
///   group and they fit), the whole ring asked of L2 before the PDL wait, and at most 110 KiB
///   of shared memory a block, so two fit on a multiprocessor and the next launch's blocks
///   start beside the previous launch's. At (k, n) = (896, 4864) on an H200: 3.6–3.7 µs against
///   4.2 for the persistent kernel and 4.0 for the large ring.
///
/// The sums depend on the shape only (not on `sms`), so results are deterministic.
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a launch.
pub fn ring(
    n: usize,
    k: usize,
    elem_bytes: usize,
    sms: usize,
    smem_optin: usize,
    static_smem: usize,
) -> Result<Option<(LaunchConfig, [u32; 4])>> {
    const RING: usize = 128 << 10;
    // L2 prefetch before the PDL wait. Of 0, 64, 128, 256 and 512 KiB, 64 was the fastest at
    // the 32 MiB shapes (9.1 / 9.3 µs against 9.7 / 10.0 with 128) and in Llama-3.1-8B's decode
    // step (1–2% faster than 128); 128 was 1–1.5% faster at the 117 MB shapes alone; 256 and
    // more were slower everywhere.
    const PREFETCH: usize = 64 << 10;
    const SMALL_RING: usize = 96 << 10;
    // Two blocks of this much (dynamic and static) fit the 228 KiB of a Hopper multiprocessor
    // with the 1 KiB the hardware reserves for each.
    const SMALL_BLOCK_SMEM: usize = 110 << 10;
    let Some(rows) = ring_rows(n, k, elem_bytes) else {
        return Ok(None);
    };
    let rows = rows as usize;
    let reserved = static_smem.next_multiple_of(128);
    let row = k * elem_bytes;
    let sms = sms.max(1);
    let small = n.saturating_mul(row) < RING_SMALL_BELOW;
    let stage = rows * row;
    let (s, stages, prefetch) = if small {
        let s: u32 = if stage >= 16 << 10 { 4 } else { 2 };
        let groups = (GEMV_RING_WARPS / s) as usize;
        let budget = SMALL_RING.min(SMALL_BLOCK_SMEM.saturating_sub(reserved + row));
        let per_block = n.div_ceil(rows).div_ceil(sms);
        let fit = (budget / stage).min(GEMV_RING_MAX_STAGES);
        // A multiple of the groups, so that slot t mod nst is always group t mod G's.
        let ring = (fit.min(per_block) / groups * groups).max(groups);
        // Where that leaves one slot a group and the block more stages, a group's next stage
        // would wait for its slot to be read and then come from HBM; the ring then holds all of
        // the block's stages where they fit (each slot filled once, so no phase can alias).
        // H200: (k, n) = (2048, 1536) 3.5–3.7 → 2.8 µs (3 stages, not 2), (3072, 1536) 4.2 → 3.8
        // (6, not 4). With two slots a group the refills overlap the group's other stage:
        // (896, 4864) on 10 stages was 1–2% slower than on 8.
        let stages = if ring < 2 * groups && per_block > ring && per_block <= fit {
            per_block
        } else {
            ring
        };
        (s, stages, stages)
    } else {
        // Warps per group: 2 (4 groups) for 8-row stages, else 4 (2 groups). H200: (k, n) =
        // (2048, 8192) 10.2 → 9.6 µs with 2 (14% slower with 8); the 1-, 2- and 4-row shapes
        // were 1.5–7% slower with 2, and with 8 4–7% slower at 2 and 4 rows, no faster at 1.
        let s: u32 = if rows == 8 { 2 } else { 4 };
        let groups = (GEMV_RING_WARPS / s) as usize;
        let stages = (RING / stage).min(GEMV_RING_MAX_STAGES) / groups * groups;
        (s, stages, (PREFETCH / stage).max(1))
    };
    let smem = stages * stage + row;
    if smem + reserved > smem_optin {
        return Ok(None);
    }
    // Block b takes stages b, b + grid, …. The large ring launches the fewest blocks that give
    // none more stages than a block per multiprocessor would, ⌈stages / ⌈stages / SMs⌉⌉ (1024
    // stages on 132 SMs: 128 blocks of 8, not 100 of 8 and 32 of 7). The small ring keeps a
    // block per multiprocessor, which its overlap with the next launch relies on.
    let total = n.div_ceil(rows);
    let blocks = if small {
        total.min(sms)
    } else {
        total.div_ceil(total.div_ceil(sms))
    };
    let grid = u32::try_from(blocks)
        .map_err(|_| Error::InvalidArgument(format!("{n} GEMV outputs exceed the grid")))?;
    let cfg = LaunchConfig::new(grid, (GEMV_RING_WARPS + 1) * 32).shared_mem(smem as u32);
    Ok(Some((
        cfg,
        [s, rows as u32, stages as u32, prefetch as u32],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring kernels' static shared memory as the compiled kernels report it (barriers and
    /// partial sums): the plans below assume the 128-byte aligned ring starts at 1152.
    const STATIC: usize = 1032;

    #[test]
    fn entry_points_follow_the_naming_convention() {
        let ring = |rows| GemvKernel::GemvRing {
            dtype: DType::BF16,
            rows,
        };
        assert_eq!(ring(4).entry_point().unwrap(), "gemv_ring_bf16_r4");
        assert!(matches!(
            ring(3).entry_point(),
            Err(Error::InvalidArgument(_))
        ));
        let m1 = GemvKernel::Gemv {
            dtype: DType::F16,
            vectorized: true,
            single_row: true,
        };
        assert_eq!(m1.entry_point().unwrap(), "gemv_f16_vec_m1");
    }

    /// Arguments no kernel is built for are errors, and sizes that overflow are refused rather
    /// than wrapped into small launches.
    #[test]
    fn launch_helpers_refuse_bad_arguments() {
        for split in [0, 3, 16] {
            assert!(persistent(10, split, 0, 132).is_err(), "{split}");
        }
        assert!(persistent(10, 8, 0, 132).is_ok());
        // Rows too wide for the ring's stages, even where k × element size overflows.
        assert!(
            ring(8, usize::MAX, 2, 132, 227 << 10, STATIC)
                .unwrap()
                .is_none()
        );
        assert!(blocks(8, usize::MAX, 2).is_ok());
    }

    #[test]
    fn ring_stages_follow_the_row_size() {
        let optin = 227 << 10;
        let plan = |n, k, eb| {
            ring(n, k, eb, 132, optin, STATIC)
                .unwrap()
                .map(|(cfg, p)| (cfg.grid.x, cfg.block.x, cfg.shared_mem_bytes, p))
        };
        // The bench's large shapes (k, n) in bf16: 32 KiB stages of whole rows, a 128 KiB ring,
        // 64 KiB of it (two stages; one 28 KiB row a stage: two) asked of L2 before the PDL wait.
        let row = |k: u32, rows: u32, stages: u32| stages * rows * 2 * k + 2 * k;
        assert_eq!(
            plan(14336, 4096, 2),
            Some((128, 288, row(4096, 4, 4), [4, 4, 4, 2]))
        );
        assert_eq!(
            plan(4096, 14336, 2),
            Some((128, 288, row(14336, 1, 4), [4, 1, 4, 2]))
        );
        assert_eq!(
            plan(8192, 2048, 2),
            Some((128, 288, row(2048, 8, 4), [2, 8, 4, 2]))
        );
        assert_eq!(
            plan(2048, 8192, 2),
            Some((128, 288, row(8192, 2, 4), [4, 2, 4, 2]))
        );
        // 8-row stages of 16 KiB: 8 of them, a multiple of the 4 groups of 2 warps; 4 prefetched.
        assert_eq!(
            plan(16384, 1024, 2),
            Some((128, 288, row(1024, 8, 8), [2, 8, 8, 4]))
        );
        // 8-row stages of 20 KiB: 6 fit the ring, rounded down to 4 for the 4 groups (6 would
        // leave the groups waiting on aliased phases); 3 (60 KiB) prefetched.
        assert_eq!(
            plan(8192, 1280, 2),
            Some((128, 288, row(1280, 8, 4), [2, 8, 4, 3]))
        );
        // From 4 MiB to 16 MiB with rows of at most 8 KiB, the small-matrix ring: (k, n) =
        // (896, 4864) in 4-row stages of 7 KiB, 2 warps per group, 8 stages (10 a block,
        // rounded down to the 4 groups: two a group), all prefetched; (3072, 1024) in 2-row
        // stages of 12 KiB, the 4 a block has; (2048, 2048): 4-row stages of 16 KiB, 4 warps
        // per group.
        assert_eq!(
            plan(4864, 896, 2),
            Some((132, 288, row(896, 4, 8), [2, 4, 8, 8]))
        );
        assert_eq!(
            plan(1024, 3072, 2),
            Some((132, 288, row(3072, 2, 4), [2, 2, 4, 4]))
        );
        assert_eq!(
            plan(2048, 2048, 2),
            Some((132, 288, row(2048, 4, 4), [4, 4, 4, 4]))
        );
        // (1536, 1400): 3 stages a block, fewer than the 4 groups: one a group.
        assert_eq!(
            plan(1400, 1536, 2),
            Some((132, 288, row(1536, 4, 4), [2, 4, 4, 4]))
        );
        // All of a block's stages where they fit and a multiple of the groups would leave one a
        // group: (2048, 1536) 3 stages of 16 KiB for 2 groups; (3072, 1536) 6 of 12 KiB for 4.
        assert_eq!(
            plan(1536, 2048, 2),
            Some((132, 288, row(2048, 4, 3), [4, 4, 3, 3]))
        );
        assert_eq!(
            plan(1536, 3072, 2),
            Some((132, 288, row(3072, 2, 6), [2, 2, 6, 6]))
        );
        // The ops test's shapes for the 4-row kernel's x in registers (at most two 16-byte packs
        // of a row a lane: 4-row stages with 2 warps a group): (1000, 2503) in bf16, 5 stages a
        // block; (512, 2101) in f32 (2 KiB rows, 4 stages a block).
        assert_eq!(
            plan(2503, 1000, 2),
            Some((132, 288, row(1000, 4, 5), [2, 4, 5, 5]))
        );
        assert_eq!(
            plan(2101, 512, 4),
            Some((132, 288, 4 * 4 * 2048 + 2048, [2, 4, 4, 4]))
        );
        // Two blocks fit on a multiprocessor, the ring holds all of a block's stages or is a
        // multiple of the groups, and the kernel's rows and warps per group do not depend on
        // the multiprocessor count.
        for (n, k, eb) in [
            (4864, 896, 2),
            (1024, 3072, 2),
            (600, 4096, 2),
            (1024, 2048, 2),
            (262144, 8, 2),
            (5000, 600, 4),
        ] {
            let (cfg, [s, rows, stages, pre]) =
                ring(n, k, eb, 132, optin, STATIC).unwrap().unwrap();
            assert_eq!(Some(rows), ring_rows(n, k, eb));
            assert!(cfg.shared_mem_bytes as usize + 1152 <= 110 << 10, "{n}x{k}");
            let per_block = n.div_ceil(rows as usize).div_ceil(132) as u32;
            let whole = stages >= per_block.max(8 / s);
            assert!(rows <= 4 && (whole || stages % (8 / s) == 0) && stages <= 32 && pre == stages);
            for sms in [1, 78, 144] {
                let p = ring(n, k, eb, sms, optin, STATIC).unwrap().unwrap().1;
                assert_eq!((p[0], p[1]), (s, rows), "{n}x{k} on {sms} SMs");
            }
        }
        // The large ring's grid: no block has more stages than with one per multiprocessor, and
        // one block fewer would give some block more.
        for (n, k, sms) in [
            (8192, 2048, 132),
            (8200, 2048, 132),
            (1600, 8192, 132),
            (4096, 14336, 78),
        ] {
            let (cfg, [_, rows, ..]) = ring(n, k, 2, sms, optin, STATIC).unwrap().unwrap();
            let (total, grid) = (n.div_ceil(rows as usize), cfg.grid.x as usize);
            assert_eq!(total.div_ceil(grid), total.div_ceil(sms), "{n}x{k}");
            assert!(total.div_ceil(grid - 1) > total.div_ceil(sms), "{n}x{k}");
        }
        // Below 4 MiB, rows above 32 KiB (8 KiB below 16 MiB: Qwen2.5-0.5B's down_proj), or a
        // ring beyond the opt-in: the persistent kernel.
        assert_eq!(plan(1023, 2048, 2), None);
        assert!(plan(1024, 2048, 2).is_some());
        assert_eq!(plan(896, 4864, 2), None);
        assert_eq!(plan(1024, 4104, 2), None);
        assert_eq!(plan(4096, 14336, 4), None);
        assert_eq!(ring(8192, 2048, 2, 132, 64 << 10, STATIC).unwrap(), None);
        // The ring leaves room for the kernel's static shared memory, the ring aligned to 128:
        // 1032 bytes put it at 1152.
        let need = 4 * 32768 + 8192;
        let fits = |optin| {
            ring(4096 * 4, 4096, 2, 132, optin, STATIC)
                .unwrap()
                .is_some()
        };
        assert!(!fits(need));
        assert!(!fits(need + 1151));
        assert!(fits(need + 1152));
    }
}
