//! The paged KV-cache family (`cuda/paged.cu`): `paged_kv_write` stores a batch's new keys and
//! values in their cache slots, `paged_attention` attends each token of a batch of sequences over
//! its own sequence's keys and values through the block table. Both are batch invariant: a
//! token's result depends on its own inputs only.

use gpukit_driver::LaunchConfig;

use crate::kernel::{KernelFamily, float_name};
use crate::shared::PAGED_WARPS;
use crate::{DType, Error, Result};

/// The paged KV-cache kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PagedKernel {
    /// `paged_kv_write_<dt>`: new keys and values into their slots.
    KvWrite(DType),
    /// `paged_attention_<dt>`: one warp per token and query head.
    Attention(DType),
}

impl KernelFamily for PagedKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            PagedKernel::KvWrite(dt) => format!("paged_kv_write_{}", float_name("paged kv", dt)?),
            PagedKernel::Attention(dt) => {
                format!("paged_attention_{}", float_name("paged attention", dt)?)
            }
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL
            .into_iter()
            .flat_map(|d| [PagedKernel::KvWrite(d), PagedKernel::Attention(d)])
            .collect()
    }
}

/// The paged attention's launch: one warp per (token, query head), [`PAGED_WARPS`] per block.
///
/// # Errors
/// [`Error::InvalidArgument`] for more warps than a grid holds.
pub fn attention_grid(tokens: usize, heads: usize) -> Result<LaunchConfig> {
    let warps = tokens.saturating_mul(heads).max(1);
    let blocks = u32::try_from(warps.div_ceil(PAGED_WARPS as usize)).map_err(|_| {
        Error::InvalidArgument(format!(
            "{tokens} tokens × {heads} heads exceed the grid limit"
        ))
    })?;
    Ok(LaunchConfig::new(blocks, PAGED_WARPS * 32))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_warp_per_token_and_head() {
        let cfg = attention_grid(5, 3).unwrap();
        assert_eq!(cfg.grid.x * cfg.block.x / 32, 16);
        assert!(cfg.grid.x * PAGED_WARPS >= 15);
        assert_eq!(attention_grid(0, 4).unwrap().grid.x, 1);
    }
}
