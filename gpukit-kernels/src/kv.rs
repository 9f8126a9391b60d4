//! The KV-cache family (`cuda/kv.cu`): `kv_append` writes a step's keys and values into the
//! preallocated caches at a position read from device memory, so a captured decode step replays
//! with the next position.

use crate::kernel::{KernelFamily, float_name};
use crate::{DType, Result};

/// The KV-cache kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KvKernel {
    /// `kv_append_<dt>` (position from device memory).
    KvAppend(DType),
}

impl KernelFamily for KvKernel {
    fn entry_point(&self) -> Result<String> {
        let KvKernel::KvAppend(dt) = *self;
        Ok(format!("kv_append_{}", float_name("kv cache", dt)?))
    }

    fn programmatic(&self) -> bool {
        true
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL.into_iter().map(KvKernel::KvAppend).collect()
    }
}
