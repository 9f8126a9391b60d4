//! The paged KV-cache family (`cuda/paged.cu`): `paged_kv_write` stores a batch's new keys and
//! values in their cache slots, `paged_attention` attends each token of a batch of sequences over
//! its own sequence's keys and values through the block table, one block per partition of
//! [`PAGED_PART_KEYS`] key positions and group of [`PAGED_GROUP`] query heads, and
//! `paged_merge` combines the partitions of tokens that have several. For f16/bf16 at the sdpa
//! kernels' head dims the attention runs on the tensor cores (`paged_attention_mma`, the same
//! partitions and partial states). All are batch invariant: a token's result depends on its own
//! inputs only.

use gpukit_driver::LaunchConfig;

use crate::attention::{HEAD_DIMS, check_head_dim, decode_tiles};
use crate::kernel::{KernelFamily, float_name, half_name};
use crate::shared::{
    PAGED_GROUP, PAGED_MERGE_WARPS, PAGED_PART_KEYS, PAGED_WARPS, SDPA_DECODE_ROWS, SDPA_THREADS,
};
use crate::{DType, Error, Result};

/// The paged KV-cache kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PagedKernel {
    /// `paged_kv_write_<dt>`: new keys and values into their slots.
    KvWrite(DType),
    /// `paged_attention_<dt>`: a block per (token, KV head, query-head group, partition).
    Attention(DType),
    /// `paged_attention_mma_<dt>_d<head_dim>` (f16/bf16; head_dim in [`HEAD_DIMS`]): the same
    /// on the tensor cores, a block per (token, KV head, up to 16 query heads, partition).
    AttentionMma {
        /// Element type of q, the caches and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
    },
    /// `paged_merge_<dt>`: the partitions of tokens with several, a warp per token and head.
    Merge(DType),
}

impl KernelFamily for PagedKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            PagedKernel::KvWrite(dt) => format!("paged_kv_write_{}", float_name("paged kv", dt)?),
            PagedKernel::Attention(dt) => {
                format!("paged_attention_{}", float_name("paged attention", dt)?)
            }
            PagedKernel::AttentionMma { dtype, head_dim } => {
                check_head_dim(head_dim as usize)?;
                format!(
                    "paged_attention_mma_{}_d{head_dim}",
                    half_name("paged attention (tensor cores)", dtype)?
                )
            }
            PagedKernel::Merge(dt) => format!("paged_merge_{}", float_name("paged merge", dt)?),
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL
            .into_iter()
            .flat_map(|d| {
                [
                    PagedKernel::KvWrite(d),
                    PagedKernel::Attention(d),
                    PagedKernel::Merge(d),
                ]
                .into_iter()
                .chain(HEAD_DIMS.map(|head_dim| PagedKernel::AttentionMma { dtype: d, head_dim }))
            })
            .collect()
    }
}

/// Partitions of at most `positions` key positions ([`PAGED_PART_KEYS`] each).
pub fn partitions(positions: usize) -> usize {
    positions.div_ceil(PAGED_PART_KEYS).max(1)
}

/// Both attention kernels' grid: (token, KV head, chunk of query heads) blocks in x, partitions
/// in y.
fn attention_blocks(
    tokens: usize,
    kv_heads: usize,
    chunks: usize,
    max_parts: usize,
) -> Result<(u32, u32)> {
    let too_many = || {
        Error::InvalidArgument(format!(
            "{tokens} tokens × {kv_heads} KV heads × {max_parts} partitions exceed the grid limit"
        ))
    };
    let x = tokens
        .checked_mul(kv_heads)
        .and_then(|n| n.checked_mul(chunks))
        .and_then(|n| u32::try_from(n.max(1)).ok())
        .filter(|&x| x <= i32::MAX as u32)
        .ok_or_else(too_many)?;
    let y = u32::try_from(max_parts.max(1))
        .ok()
        .filter(|&y| y <= 65_535)
        .ok_or_else(too_many)?;
    Ok((x, y))
}

/// The attention grid: a block per (token, KV head, group of up to [`PAGED_GROUP`] query heads)
/// in x and per partition in y (`max_parts`, the most any token of the batch has), blocks of
/// [`PAGED_WARPS`] warps.
///
/// # Errors
/// [`Error::InvalidArgument`] for more blocks than a grid holds.
pub fn attention_grid(
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    max_parts: usize,
) -> Result<LaunchConfig> {
    let group = heads / kv_heads.max(1);
    let chunks = group.div_ceil(PAGED_GROUP as usize).max(1);
    let (x, y) = attention_blocks(tokens, kv_heads, chunks, max_parts)?;
    Ok(LaunchConfig::new((x, y, 1), PAGED_WARPS * 32))
}

/// Whether the tensor-core kernel serves `dtype` at `head_dim` (else `paged_attention`).
pub fn has_mma(dtype: DType, head_dim: usize) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
        && u32::try_from(head_dim).is_ok_and(|d| HEAD_DIMS.contains(&d))
}

/// The tensor-core attention's launch: a block of [`SDPA_THREADS`] per (token, KV head, chunk of
/// up to 16 of its group's query heads) in x and per partition in y (`max_parts`), with shared
/// memory for a ring of 64-key K/V tiles sized as the dense decode kernel's
/// ([`decode_tiles`]). Returns the launch and the ring's length (the kernel's `stages`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a head_dim without kernels or more blocks than a grid holds.
pub fn attention_mma_grid(
    tokens: usize,
    heads: usize,
    kv_heads: usize,
    max_parts: usize,
    head_dim: usize,
    smem_per_sm: usize,
    smem_optin: usize,
) -> Result<(LaunchConfig, u32)> {
    check_head_dim(head_dim)?;
    let chunks = (heads / kv_heads.max(1)).div_ceil(SDPA_DECODE_ROWS).max(1);
    let (x, y) = attention_blocks(tokens, kv_heads, chunks, max_parts)?;
    let (bytes, stages) = decode_tiles(head_dim, smem_per_sm, smem_optin);
    Ok((
        LaunchConfig::new((x, y, 1), SDPA_THREADS).shared_mem(bytes as u32),
        stages,
    ))
}

/// The merge grid: a warp per (token, query head).
///
/// # Errors
/// [`Error::InvalidArgument`] for more warps than a grid holds.
pub fn merge_grid(tokens: usize, heads: usize) -> Result<LaunchConfig> {
    let warps = tokens.saturating_mul(heads).max(1);
    let blocks = u32::try_from(warps.div_ceil(PAGED_MERGE_WARPS as usize)).map_err(|_| {
        Error::InvalidArgument(format!(
            "{tokens} tokens × {heads} heads exceed the grid limit"
        ))
    })?;
    Ok(LaunchConfig::new(blocks, PAGED_MERGE_WARPS * 32))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_block_per_token_kv_head_group_and_partition() {
        // 8 query heads on 2 KV heads: groups of 4, one block each.
        let cfg = attention_grid(5, 8, 2, 3).unwrap();
        assert_eq!(
            (cfg.grid.x, cfg.grid.y, cfg.block.x),
            (10, 3, PAGED_WARPS * 32)
        );
        // 14 on 2: groups of 7 take two blocks of up to PAGED_GROUP heads.
        assert_eq!(attention_grid(1, 14, 2, 1).unwrap().grid.x, 4);
        assert_eq!(partitions(0), 1);
        assert_eq!(partitions(PAGED_PART_KEYS), 1);
        assert_eq!(partitions(PAGED_PART_KEYS + 1), 2);
        let m = merge_grid(5, 3).unwrap();
        assert_eq!(m.grid.x * m.block.x / 32, 16);
        assert!(attention_grid(1, 4, 1, 70_000).is_err());
    }

    #[test]
    fn the_tensor_core_grid_takes_sixteen_query_heads_a_block() {
        // 32 query heads on 8 KV heads: one chunk of 4 rows per KV head.
        let (cfg, stages) = attention_mma_grid(5, 32, 8, 3, 128, 228 << 10, 227 << 10).unwrap();
        assert_eq!((cfg.grid.x, cfg.grid.y, cfg.block.x), (40, 3, SDPA_THREADS));
        assert_eq!(stages, 3);
        // 40 query heads on 1 KV head: chunks of 16, 16 and 8.
        let (cfg, _) = attention_mma_grid(1, 40, 1, 1, 64, 228 << 10, 227 << 10).unwrap();
        assert_eq!(cfg.grid.x, 3);
        assert!(attention_mma_grid(1, 4, 1, 1, 40, 228 << 10, 227 << 10).is_err());
        assert!(has_mma(DType::BF16, 128) && !has_mma(DType::F32, 128));
        assert!(!has_mma(DType::F16, 40));
    }
}
