//! The RoPE family (`cuda/rope.cu`): rotary position embeddings in place (Su et al. 2021; the
//! half-split and adjacent-pair layouts, positions from device memory), and `rope_kv_append`,
//! which takes a fused QKV projection's output through the optional per-head q/k RMSNorm
//! (Qwen3), RoPE, and writes the queries out and the keys and values into the caches at the
//! device position: one block per (token, head).

use gpukit_driver::LaunchConfig;

use crate::kernel::{KernelFamily, float_name};
use crate::shared::ROPE_KV_THREADS;
use crate::{DType, Error, Result};

/// The RoPE kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeKernel {
    /// `rope_<dt>` (in place, positions from device memory).
    Rope(DType),
    /// `rope_kv_append_<dt>`: a fused QKV projection's output → optional per-head q/k RMSNorm,
    /// RoPE, queries out and keys/values into the caches at the device position.
    RopeKvAppend(DType),
}

impl KernelFamily for RopeKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            RopeKernel::Rope(dt) => format!("rope_{}", float_name("rope", dt)?),
            RopeKernel::RopeKvAppend(dt) => format!("rope_kv_append_{}", float_name("rope", dt)?),
        })
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL
            .into_iter()
            .flat_map(|dt| [RopeKernel::Rope(dt), RopeKernel::RopeKvAppend(dt)])
            .collect()
    }
}

/// `rope_kv_append`: one block of [`ROPE_KV_THREADS`] per (token, query or key/value head).
///
/// # Errors
/// [`Error::InvalidArgument`] for more blocks than a grid holds.
pub fn kv_append(tokens: usize, heads: usize) -> Result<LaunchConfig> {
    let grid = tokens
        .checked_mul(heads)
        .and_then(|n| u32::try_from(n.max(1)).ok())
        .ok_or_else(|| Error::InvalidArgument(format!("{tokens}×{heads} heads exceed the grid")))?;
    Ok(LaunchConfig::new(grid, ROPE_KV_THREADS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_append_takes_a_block_per_head() {
        assert!(kv_append(1 << 32, 1 << 32).is_err());
        assert_eq!(kv_append(7, 40).unwrap().grid.x, 280);
    }
}
