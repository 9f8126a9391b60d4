//! The attention family (`cuda/attention.cu`): scaled dot-product attention on the tensor
//! cores, f16/bf16 in, f32 accumulation, online softmax (FlashAttention-2, Dao 2023), with GQA,
//! the offset causal mask, sliding windows and ALiBi (Press et al. 2022). Arguments in
//! [`AttentionArgs`].
//!
//! How a variant is chosen:
//! - Prefill on Hopper at head_dim 64 or 128 ([`WGMMA_HEAD_DIMS`]): the warpgroup-MMA kernel
//!   ([`prefill_wgmma`]), a ring of three K/V tiles; 1.1–1.5× torch's FlashAttention-2 on an
//!   H200. Elsewhere the portable `mma.sync` kernel ([`prefill`]).
//! - Decode on Hopper at head_dim 64 or 128 ([`RING_HEAD_DIMS`]): the decode ring
//!   ([`decode_ring`]), a persistent grid streaming 64-key K/V tiles through a shared-memory
//!   ring (tensor copies, or 1-d bulk copies of a pre-swizzled cache) that merges the splits in
//!   the same kernel; at 1k–4k keys 4.6–8.4 µs against 5.9–10.5 for the portable kernel and its
//!   combine. Elsewhere the split-K kernel ([`decode`]) and the combine ([`combine`]).
//!
//! Splits follow from the shape alone, and every merge runs in a fixed order without float
//! atomics, so results are bitwise the same on every run and every device.
//!
//! Tried and slower: thread-block clusters for decode (faster alone, slower in the decode
//! step), warpgroup ping-pong in the prefill (22–35% slower), persistent prefill blocks, ring
//! consumers each holding a quarter of the head dimension, dynamic unit scheduling, and
//! flagged partials or ticket-drawn merges in place of the counted split merge.

use gpukit_driver::{DeviceCopy, LaunchConfig};

use crate::grid::dim;
use crate::kernel::{KernelFamily, half_name};
pub use crate::shared::AttentionArgs;
use crate::shared::{
    SDPA_COMBINE_UNROLL, SDPA_DECODE_KEYS, SDPA_DECODE_ROWS, SDPA_PREFILL_KEYS,
    SDPA_PREFILL_KEYS_SHORT, SDPA_PREFILL_Q_TILES, SDPA_PREFILL_WARPS, SDPA_RING_CONSUMERS,
    SDPA_RING_MAX_STAGES, SDPA_THREADS, SDPA_TILE_PAD, SDPA_WGMMA_KEYS, SDPA_WGMMA_KEYS_D64,
    sdpa_merge_bytes,
};
use crate::{DType, Error, Result};

// SAFETY: `repr(C)`, integers, floats and device addresses, no implicit padding (`reserved`
// keeps `partial` 8-byte aligned).
unsafe impl DeviceCopy for AttentionArgs {}

/// The attention kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionKernel {
    /// `sdpa_prefill_<dt>_d<head_dim>` / `sdpa_decode_<dt>_d<head_dim>` (f16/bf16; head_dim in
    /// [`HEAD_DIMS`]).
    Sdpa {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
        /// The split-K decode kernel (else the prefill kernel).
        decode: bool,
    },
    /// `sdpa_prefill_wgmma_<dt>_d<head_dim>` (f16/bf16; head_dim 64 and 128): the prefill
    /// kernel on Hopper's warpgroup MMA. Only the sm_90a image has its body (elsewhere the entry
    /// point traps): launch it only where the registry's target is `sm_90a`.
    SdpaPrefillWgmma {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
    },
    /// `sdpa_combine_<dt>`: merges the splits of the decode kernel.
    SdpaCombine(DType),
    /// `sdpa_decode_ring_<dt>_d<head_dim>[_swz]` (f16/bf16; head_dim 64 and 128): decode
    /// attention on Hopper ([`decode_ring`]): with the tensor memory accelerator through two
    /// tensor maps (arguments q, out, args, K map, V map, counters, batch), or, `_swz`, by 1-d
    /// bulk copies from K/V laid out pre-swizzled with contiguous rows (q, out, args, k, v,
    /// counters, batch). Only sm_90+ images have its body (elsewhere the entry point traps):
    /// launch it only where the registry's target is `sm_90a`.
    SdpaDecodeRing {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
        /// K and V laid out pre-swizzled (`AttentionArgs::kv_swizzled`), copied by 1-d bulk
        /// copies (the `_swz` entry point).
        swizzled_kv: bool,
    },
}

/// Head dimensions the attention kernels are built for.
pub const HEAD_DIMS: [u32; 5] = [64, 80, 96, 128, 256];

/// Head dimensions of the Hopper prefill kernel ([`AttentionKernel::SdpaPrefillWgmma`]): both
/// beat the portable kernel and torch's FlashAttention-2 on an H200.
pub const WGMMA_HEAD_DIMS: [u32; 2] = [64, 128];

/// Head dimensions of the Hopper decode ring ([`AttentionKernel::SdpaDecodeRing`]): 64-element
/// boxes of the tensor memory accelerator's 128-byte swizzle tile them.
pub const RING_HEAD_DIMS: [u32; 2] = [64, 128];

/// `head_dim` is one the attention kernels are built for ([`HEAD_DIMS`]).
pub(crate) fn check_head_dim(head_dim: usize) -> Result<()> {
    if u32::try_from(head_dim).is_ok_and(|d| HEAD_DIMS.contains(&d)) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "sdpa kernels exist for head_dim {HEAD_DIMS:?}, not {head_dim}"
        )))
    }
}

impl KernelFamily for AttentionKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            AttentionKernel::Sdpa {
                dtype,
                head_dim,
                decode,
            } => {
                check_head_dim(head_dim as usize)?;
                format!(
                    "sdpa_{}_{}_d{head_dim}",
                    if decode { "decode" } else { "prefill" },
                    half_name("sdpa", dtype)?
                )
            }
            AttentionKernel::SdpaPrefillWgmma { dtype, head_dim } => {
                if !WGMMA_HEAD_DIMS.contains(&head_dim) {
                    return Err(Error::InvalidArgument(format!(
                        "the wgmma prefill kernels exist for head_dim {WGMMA_HEAD_DIMS:?}, not \
                         {head_dim}"
                    )));
                }
                format!(
                    "sdpa_prefill_wgmma_{}_d{head_dim}",
                    half_name("sdpa", dtype)?
                )
            }
            AttentionKernel::SdpaCombine(dt) => format!("sdpa_combine_{}", half_name("sdpa", dt)?),
            AttentionKernel::SdpaDecodeRing {
                dtype,
                head_dim,
                swizzled_kv,
            } => {
                if !RING_HEAD_DIMS.contains(&head_dim) {
                    return Err(Error::InvalidArgument(format!(
                        "the decode ring kernels exist for head_dim {RING_HEAD_DIMS:?}, not \
                         {head_dim}"
                    )));
                }
                format!(
                    "sdpa_decode_ring_{}_d{head_dim}{}",
                    half_name("sdpa", dtype)?,
                    if swizzled_kv { "_swz" } else { "" }
                )
            }
        })
    }

    /// The decode kernels and the combine (the decode step's); not the prefill kernels.
    fn programmatic(&self) -> bool {
        match self {
            AttentionKernel::Sdpa { decode, .. } => *decode,
            AttentionKernel::SdpaPrefillWgmma { .. } => false,
            AttentionKernel::SdpaCombine(_) | AttentionKernel::SdpaDecodeRing { .. } => true,
        }
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = Vec::new();
        for dtype in DType::ALL {
            v.push(AttentionKernel::SdpaCombine(dtype));
            for head_dim in WGMMA_HEAD_DIMS {
                v.push(AttentionKernel::SdpaPrefillWgmma { dtype, head_dim });
            }
            for head_dim in RING_HEAD_DIMS {
                for swizzled_kv in [false, true] {
                    v.push(AttentionKernel::SdpaDecodeRing {
                        dtype,
                        head_dim,
                        swizzled_kv,
                    });
                }
            }
            for head_dim in HEAD_DIMS {
                for decode in [false, true] {
                    v.push(AttentionKernel::Sdpa {
                        dtype,
                        head_dim,
                        decode,
                    });
                }
            }
        }
        v
    }
}

/// Decode blocks aimed at across the whole call: one full wave on a 132-SM H100/H200 (two blocks
/// per SM, each with three K/V tiles in flight). Nsight Compute showed 512 blocks running as
/// 1.29 waves, the partial wave idling most of the GPU. The split count follows from the shape
/// alone, so results do not depend on the device.
const DECODE_BLOCKS: usize = 264;

/// The prefill attention kernel: blocks of 4 warps × query heads × batch, a warp taking 32
/// queries (16 for head_dim 256), with shared memory for the block's Q tile (not for head_dim
/// 256, whose Q stays in registers) and two K/V tiles of 64 keys (32 for head_dim 256), rows
/// padded by 8 elements. At head_dim 128 that is 102 KiB; where a block may have less
/// (`smem_optin`: 99 KiB on sm_86/89) the tiles hold 32 keys. Returns the launch and the
/// key-tile width (`AttentionArgs::chunk` for the kernel).
///
/// # Errors
/// [`Error::InvalidArgument`] for a head_dim without kernels or sizes beyond a grid.
pub fn prefill(
    batch: usize,
    q_heads: usize,
    q_len: usize,
    head_dim: usize,
    smem_optin: usize,
) -> Result<(LaunchConfig, u32)> {
    check_head_dim(head_dim)?;
    let warps = SDPA_PREFILL_WARPS;
    let (mut bn, mt) = if head_dim > 128 {
        (SDPA_PREFILL_KEYS_SHORT, 1)
    } else {
        (SDPA_PREFILL_KEYS, SDPA_PREFILL_Q_TILES)
    };
    let row = head_dim + SDPA_TILE_PAD;
    let rows = 16 * mt * warps;
    let q_tile = if mt > 1 { rows * row * 2 } else { 0 };
    let bytes = |bn: usize| q_tile + 2 * 2 * bn * row * 2;
    if head_dim > 96 && head_dim <= 128 && bytes(bn) > smem_optin {
        bn = SDPA_PREFILL_KEYS_SHORT; // the kernel's short-tile variant at head_dim 128
    }
    let grid = (
        u32::try_from(q_len.div_ceil(rows).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{q_len} queries")))?,
        dim("query heads", q_heads)?,
        dim("sequences", batch)?,
    );
    Ok((
        LaunchConfig::new(grid, 32 * warps as u32).shared_mem(bytes(bn) as u32),
        bn as u32,
    ))
}

/// Keys per K/V tile of the Hopper prefill kernel at `head_dim`: 64 at head_dim 64, so that two
/// blocks fit an SM's registers (126 per thread) and shared memory; 128 otherwise.
fn wgmma_keys(head_dim: usize) -> usize {
    if head_dim == 64 {
        SDPA_WGMMA_KEYS_D64
    } else {
        SDPA_WGMMA_KEYS
    }
}

/// The Hopper prefill kernel ([`AttentionKernel::SdpaPrefillWgmma`]): blocks of 2 warpgroups
/// (256 threads, 128 queries) × query heads × batch, with shared memory for the block's Q tile
/// and a ring of 3 K/V tiles of `wgmma_keys` keys (224 KiB at head_dim 128; 64 KiB at 64,
/// where two blocks share an SM). `None` for head dims outside [`WGMMA_HEAD_DIMS`] or where the
/// shared memory exceeds `smem_optin` (the caller then uses [`prefill`]).
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a grid.
pub fn prefill_wgmma(
    batch: usize,
    q_heads: usize,
    q_len: usize,
    head_dim: usize,
    smem_optin: usize,
) -> Result<Option<LaunchConfig>> {
    if !u32::try_from(head_dim).is_ok_and(|d| WGMMA_HEAD_DIMS.contains(&d)) {
        return Ok(None);
    }
    let bytes = (128 * head_dim + 3 * 2 * wgmma_keys(head_dim) * head_dim) * 2;
    if bytes > smem_optin {
        return Ok(None);
    }
    let grid = (
        u32::try_from(q_len.div_ceil(128).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{q_len} queries")))?,
        dim("query heads", q_heads)?,
        dim("sequences", batch)?,
    );
    Ok(Some(LaunchConfig::new(grid, 256).shared_mem(bytes as u32)))
}

/// How the decode kernel splits `keys` keys (a multiple of 64 per split): `(keys per split,
/// splits)`, from the shape only.
pub fn decode_splits(keys: usize, batch_kv_heads: usize) -> (usize, usize) {
    split_keys(keys, DECODE_BLOCKS.div_ceil(batch_kv_heads.max(1)))
}

/// `keys` keys in about `wanted` splits (at least 1, at most one per 64-key tile) of a multiple
/// of 64 keys each: `(keys per split, splits)`.
fn split_keys(keys: usize, wanted: usize) -> (usize, usize) {
    let tiles = keys.div_ceil(64).max(1);
    let splits = wanted.clamp(1, tiles);
    let chunk = tiles.div_ceil(splits) * 64;
    (chunk, keys.div_ceil(chunk).max(1))
}

/// Shared memory of a decode block ([`decode`], and the paged attention's tensor-core kernel):
/// `(bytes, stages)` for a ring of K/V tiles of 64 keys or the four warps' merge, whichever is
/// larger. The ring has the most tiles (up to 3) with which two blocks still fit `smem_per_sm`,
/// else the most that fit one block's `smem_optin`.
pub fn decode_tiles(head_dim: usize, smem_per_sm: usize, smem_optin: usize) -> (usize, u32) {
    let merge = sdpa_merge_bytes(head_dim);
    let tile = SDPA_DECODE_KEYS * (head_dim + SDPA_TILE_PAD) * 2;
    let bytes = |stages: usize| (stages * 2 * tile).max(merge);
    // Per block the driver reserves 1 KiB of shared memory beside the kernel's own.
    let stages = (1..=3usize)
        .rev()
        .find(|&s| 2 * (bytes(s) + 1024) <= smem_per_sm)
        .or_else(|| (1..=3usize).rev().find(|&s| bytes(s) <= smem_optin))
        .unwrap_or(1);
    (bytes(stages), stages as u32)
}

/// The decode attention kernel: splits × KV heads × batch blocks; shared memory for a ring of
/// K/V tiles of 64 keys or the four warps' merge, whichever is larger. The ring has the most
/// tiles (up to 3) with which two blocks still fit `smem_per_sm`, else the most that fit one
/// block's `smem_optin` (on an H100/H200: 3 below head_dim 256, 1 at 256; on an A100 2 at
/// head_dim 128; on sm_86/89 1 at head_dim 96 and above). Returns the launch and the ring's
/// length (`AttentionArgs::stages`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a head_dim without kernels or sizes beyond a grid.
pub fn decode(
    batch: usize,
    kv_heads: usize,
    splits: usize,
    head_dim: usize,
    smem_per_sm: usize,
    smem_optin: usize,
) -> Result<(LaunchConfig, u32)> {
    check_head_dim(head_dim)?;
    let (tiles, stages) = decode_tiles(head_dim, smem_per_sm, smem_optin);
    let grid = (
        u32::try_from(splits).map_err(|_| Error::InvalidArgument(format!("{splits} splits")))?,
        dim("KV heads", kv_heads)?,
        dim("sequences", batch)?,
    );
    Ok((
        LaunchConfig::new(grid, SDPA_THREADS).shared_mem(tiles as u32),
        stages,
    ))
}

/// Work units (batch, KV head, split) the Hopper decode ring aims at: one per multiprocessor of
/// a 132-SM H100/H200. The split count follows from it and the shape alone, so results do not
/// depend on the device. Also the number of split counters [`decode_ring`] needs
/// (u32, zero between launches).
pub const RING_UNITS: usize = 132;

/// Keys per head from which decode attention takes the ring: any. In the ops bench the ring
/// took 4.6–8.4 µs at 1k–4k keys, GQA 4 and 8, against 5.9–10.5 µs for the portable kernel and
/// its combine, on both K/V layouts; the small models' decode steps were 1–4% faster with it.
pub const RING_MIN_KEYS: usize = 1;

/// Bytes of K/V tiles the decode ring keeps in flight per multiprocessor: 128 KiB, the ring
/// that read 32 MiB fastest in a bare-read probe.
const RING_BYTES: usize = 128 << 10;

/// How the decode ring ([`decode_ring`]) splits `keys` keys across `batch_kv_heads` (batch × KV
/// heads): `(keys per split, splits)`, a multiple of 64 keys per split and about
/// [`RING_UNITS`] units in all (whole heads per unit from 132 heads up).
pub fn decode_ring_splits(keys: usize, batch_kv_heads: usize) -> (usize, usize) {
    split_keys(keys, RING_UNITS / batch_kv_heads.max(1))
}

/// The Hopper decode ring ([`AttentionKernel::SdpaDecodeRing`]) for `splits` splits of each of
/// `batch × kv_heads` heads: a block of four consumer warps and a producer warp per
/// multiprocessor (`sms`; fewer where there are fewer units), a ring of 64-key K+V tiles
/// holding `RING_BYTES` (4 slots at head_dim 128, 8 at 64), then the four warps' merge area (as
/// [`decode`]'s), and 1024 bytes to align the ring in, beside `static_smem` bytes of static
/// shared memory (its barriers, as the compiled kernel reports it; counted up to a 128-byte
/// boundary). Returns the launch and the slot count (`AttentionArgs::stages`), or `None` for
/// head dims other than 64 and 128 or where it does not fit `smem_optin` (the caller then uses
/// [`decode`]).
///
/// # Errors
/// [`Error::InvalidArgument`] for more units than a grid holds.
pub fn decode_ring(
    batch: usize,
    kv_heads: usize,
    splits: usize,
    head_dim: usize,
    sms: usize,
    smem_optin: usize,
    static_smem: usize,
) -> Result<Option<(LaunchConfig, u32)>> {
    if !u32::try_from(head_dim).is_ok_and(|d| RING_HEAD_DIMS.contains(&d)) {
        return Ok(None);
    }
    let stage = 2 * SDPA_DECODE_KEYS * head_dim * 2;
    let stages = (RING_BYTES / stage).min(SDPA_RING_MAX_STAGES);
    // The kernel aligns the ring to 1024 bytes (the swizzle's) within the dynamic part: up to
    // 1024 bytes go to that.
    let smem = stages * stage + sdpa_merge_bytes(head_dim) + 1024;
    if smem + static_smem.next_multiple_of(128) > smem_optin {
        return Ok(None);
    }
    let units = batch
        .checked_mul(kv_heads)
        .and_then(|n| n.checked_mul(splits))
        .ok_or_else(|| {
            Error::InvalidArgument(format!("{batch}×{kv_heads}×{splits} decode units"))
        })?;
    let grid = u32::try_from(units.min(sms.max(1)))
        .map_err(|_| Error::InvalidArgument(format!("{units} decode units")))?;
    Ok(Some((
        LaunchConfig::new(grid, 32 * SDPA_RING_CONSUMERS + 32).shared_mem(smem as u32),
        stages as u32,
    )))
}

/// The decode combine kernel for `splits` splits: one block per (row, KV head, batch) of groups
/// of `head_dim` threads, each group summing every such split — as many groups as give each at
/// most [`SDPA_COMBINE_UNROLL`] splits (one round of loads), up to 1024 threads, rounded so the
/// block is whole warps (at the kernel's head dims 64, 80, 96, 128 and 256). On an H200 a
/// 1024-thread block at every length was 0.6 µs slower at 16 splits than 512 threads, and faster
/// at 33 and 66.
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a grid.
pub fn combine(
    batch: usize,
    kv_heads: usize,
    head_dim: usize,
    splits: usize,
) -> Result<LaunchConfig> {
    let grid = (
        SDPA_DECODE_ROWS as u32,
        dim("KV heads", kv_heads)?,
        dim("sequences", batch)?,
    );
    let d = head_dim.clamp(1, 1024);
    // Groups per whole warp: 32 / gcd(d, 32).
    let unit = 32 >> d.trailing_zeros().min(5);
    let most = (1024 / d).max(1);
    let groups = splits
        .div_ceil(SDPA_COMBINE_UNROLL)
        .next_multiple_of(unit)
        .clamp(unit.min(most), most);
    Ok(LaunchConfig::new(grid, (groups * d) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decode ring's static shared memory as the compiled kernel reports it (its barriers
    /// and a flag).
    const RING_STATIC: usize = 208;

    #[test]
    fn args_layout_is_the_c_structs() {
        // long long strides[4][3]; unsigned ×4; float; unsigned ×9; float* partial;
        // const int* position
        assert_eq!(
            std::mem::size_of::<AttentionArgs>(),
            96 + 16 + 4 + 36 + 8 + 8
        );
        assert_eq!(std::mem::offset_of!(AttentionArgs, partial), 152);
        assert_eq!(std::mem::offset_of!(AttentionArgs, position), 160);
        let c = AttentionArgs::c_struct();
        assert!(c.starts_with("struct AttnArgs {\n    long long q_stride[3];\n"));
    }

    #[test]
    fn launch_helpers_refuse_bad_arguments() {
        let huge_dim = (1 << 24) - 8;
        assert!(prefill(1, 1, 1, huge_dim, 227 << 10).is_err());
        assert!(decode(1, 1, 1, huge_dim, 228 << 10, 227 << 10).is_err());
        assert!(decode(1, 1, 1, 100, 228 << 10, 227 << 10).is_err());
        assert!(decode_ring(usize::MAX, 2, 2, 128, 132, 227 << 10, RING_STATIC).is_err());
        let bad = AttentionKernel::SdpaPrefillWgmma {
            dtype: DType::BF16,
            head_dim: 80,
        };
        assert!(bad.entry_point().is_err());
        let ring = AttentionKernel::SdpaDecodeRing {
            dtype: DType::F16,
            head_dim: 128,
            swizzled_kv: true,
        };
        assert_eq!(ring.entry_point().unwrap(), "sdpa_decode_ring_f16_d128_swz");
    }

    #[test]
    fn launches_fit_the_shared_memory() {
        // (shared memory per SM, per-block opt-in) of an H200, an A100 and an sm_86 part.
        let (h200, a100, sm86) = ((233_472, 232_448), (167_936, 166_912), (102_400, 101_376));
        for ((sm, optin), head_dim, want) in [
            (h200, 128, 3),
            (h200, 64, 3),
            (h200, 256, 1),
            (a100, 128, 2),
            (sm86, 128, 1),
            (sm86, 256, 1),
        ] {
            let (cfg, stages) = decode(1, 8, 33, head_dim, sm, optin).unwrap();
            assert_eq!(stages, want, "head_dim {head_dim} on ({sm}, {optin})");
            let smem = cfg.shared_mem_bytes as usize;
            assert!(smem <= optin && smem >= stages as usize * 2 * 64 * (head_dim + 8) * 2);
        }
        // Prefill fits every part's per-block limit at every head_dim, with 32-key tiles at 128
        // where 64-key ones do not.
        for (optin, head_dim, tile) in [
            (h200.1, 128, 64),
            (sm86.1, 128, 32),
            (sm86.1, 96, 64),
            (sm86.1, 256, 32),
        ] {
            let (cfg, bn) = prefill(1, 8, 1000, head_dim, optin).unwrap();
            assert_eq!(bn, tile, "head_dim {head_dim} within {optin} bytes");
            assert!(cfg.shared_mem_bytes as usize <= optin);
        }
        for head_dim in [64, 80, 96, 128, 256] {
            let (cfg, _) = prefill(1, 8, 1000, head_dim, sm86.1).unwrap();
            assert!(
                cfg.shared_mem_bytes as usize <= sm86.1,
                "head_dim {head_dim}"
            );
        }
        // The Hopper kernel fits an H100/H200 block (224 KiB at head_dim 128), and declines
        // where the opt-in is smaller or it has no kernel for the head_dim.
        for (optin, head_dim, fits) in [
            (h200.1, 128, true),
            (h200.1, 64, true),
            (sm86.1, 128, false),
            (h200.1, 80, false),
        ] {
            let cfg = prefill_wgmma(2, 8, 1000, head_dim, optin).unwrap();
            assert_eq!(
                cfg.is_some(),
                fits,
                "head_dim {head_dim} within {optin} bytes"
            );
            if let Some(cfg) = cfg {
                assert!(cfg.shared_mem_bytes as usize <= optin);
                // 64-key tiles at head_dim 64: two blocks' 64 KiB fit an SM's shared memory.
                let kib = if head_dim == 64 { 64 } else { 224 };
                assert_eq!(cfg.shared_mem_bytes, kib << 10, "head_dim {head_dim}");
                assert_eq!(
                    (cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x),
                    (8, 8, 2, 256)
                );
            }
        }
        // Splits depend on the shape alone: 264 blocks aimed at, 64-key multiples.
        assert_eq!(decode_splits(32_768, 8), (1024, 32));
        assert_eq!(decode_splits(100, 8), (64, 2));
        // The ring: about 132 units, 64-key multiples, never more splits than the cp.async
        // kernel's (so sdpa's workspace, sized for the larger, serves both).
        assert_eq!(decode_ring_splits(8192, 8), (512, 16));
        assert_eq!(decode_ring_splits(8192, 4), (256, 32));
        assert_eq!(decode_ring_splits(32_768, 8), (2048, 16));
        assert_eq!(decode_ring_splits(100, 8), (64, 2));
        assert_eq!(decode_ring_splits(4096, 200), (4096, 1));
        for keys in [1, 63, 64, 65, 1000, 4097, 8192, 32_768, 131_072] {
            for bkv in [1, 2, 3, 4, 7, 8, 16, 33, 64, 131, 132, 133, 500] {
                let (chunk, splits) = decode_ring_splits(keys, bkv);
                assert!(chunk % 64 == 0 && chunk * splits >= keys && chunk * (splits - 1) < keys);
                assert!(bkv * splits <= RING_UNITS.max(bkv), "{keys} {bkv}");
                assert!(splits <= decode_splits(keys, bkv).1, "{keys} {bkv}");
            }
        }
        let ring = |d, optin| decode_ring(1, 8, 16, d, 132, optin, RING_STATIC).unwrap();
        let (cfg, stages) = ring(128, 227 << 10).unwrap();
        assert_eq!((stages, cfg.grid.x, cfg.block.x), (4, 128, 160));
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            4 * 32_768 + (4 * 16 * 136 + 128) * 4 + 1024
        );
        assert_eq!(ring(64, 227 << 10).unwrap().1, 8);
        assert!(ring(80, 227 << 10).is_none());
        assert!(ring(128, 160 << 10).is_none());
        let wide = decode_ring(4, 64, 1, 128, 132, 227 << 10, RING_STATIC)
            .unwrap()
            .unwrap();
        assert_eq!(wide.0.grid.x, 132);
        // The combine: whole warps, at most 1024 threads, a group per 8 splits where they fit.
        for d in [64, 80, 96, 128, 256] {
            for splits in [2, 16, 33, 66, 264] {
                let t = combine(1, 8, d, splits).unwrap().block.x as usize;
                let groups = t / d;
                assert!(
                    t.is_multiple_of(32) && t <= 1024 && t.is_multiple_of(d),
                    "d {d} splits {splits}: {t}"
                );
                assert!(
                    groups * 8 >= splits || groups == 1024 / d,
                    "d {d} splits {splits}"
                );
            }
        }
        assert_eq!(combine(1, 8, 128, 16).unwrap().block.x, 256);
        assert_eq!(combine(1, 8, 128, 66).unwrap().block.x, 1024);
        assert_eq!(combine(1, 8, 80, 2).unwrap().block.x, 160);
    }
}
