//! The gather family (`cuda/gather.cu`): `index_select` (the embedding lookup) and `gather`
//! along an axis, as grid-stride loops. An index outside the indexed dimension is never read
//! from: its output is zero-filled and the device's error flag set, which the host reports at
//! its next synchronising call.

use crate::kernel::{KernelFamily, indexed_name};
use crate::{DType, Result};

/// The indexing kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GatherKernel {
    /// `index_select_<dt>_<index dt>`.
    IndexSelect {
        /// Element type.
        dtype: DType,
        /// Index type (i32 or i64).
        index: DType,
    },
    /// `gather_<dt>_<index dt>` (torch.gather along an axis).
    Gather {
        /// Element type.
        dtype: DType,
        /// Index type (i32 or i64).
        index: DType,
    },
}

impl KernelFamily for GatherKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match *self {
            GatherKernel::IndexSelect { dtype, index } => format!(
                "index_select_{}",
                indexed_name("index_select", dtype, index)?
            ),
            GatherKernel::Gather { dtype, index } => {
                format!("gather_{}", indexed_name("gather", dtype, index)?)
            }
        })
    }

    /// `index_select` (the decode step's embedding lookup).
    fn programmatic(&self) -> bool {
        matches!(self, GatherKernel::IndexSelect { .. })
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = Vec::new();
        for dtype in DType::ALL {
            for index in [DType::I32, DType::I64] {
                v.push(GatherKernel::IndexSelect { dtype, index });
                v.push(GatherKernel::Gather { dtype, index });
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_name_both_types() {
        let k = GatherKernel::IndexSelect {
            dtype: DType::F16,
            index: DType::I64,
        };
        assert_eq!(k.entry_point().unwrap(), "index_select_f16_i64");
        let bad = GatherKernel::Gather {
            dtype: DType::F32,
            index: DType::F32,
        };
        assert!(bad.entry_point().is_err());
    }
}
