//! The reduction family (`cuda/reduce.cu`): sum, mean, max, min, argmax and softmax over one
//! axis of a tensor viewed as `[outer, len, inner]`. Over a contiguous last axis (`_rows`, inner
//! of 1) one block of [`BLOCK_THREADS`](crate::shared::BLOCK_THREADS) per row
//! ([`grid::rows`](crate::grid::rows)), combined in a fixed shared-memory tree; over an inner
//! axis (`_cols`) one thread per (outer, inner) pair walking the axis in order
//! ([`grid::threads`](crate::grid::threads)). Either way the order of the sums depends on the
//! shape only, so results are bitwise reproducible.

use crate::kernel::{KernelFamily, float_name};
use crate::{DType, Result};

/// The reduction kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKernel {
    /// `reduce_<dt>_rows` (op code an argument).
    ReduceRows(DType),
    /// `reduce_<dt>_cols`.
    ReduceCols(DType),
    /// `argmax_<dt>_rows`.
    ArgmaxRows(DType),
    /// `argmax_<dt>_cols`.
    ArgmaxCols(DType),
    /// `softmax_<dt>_rows` (log-softmax a flag).
    SoftmaxRows(DType),
    /// `softmax_<dt>_cols`.
    SoftmaxCols(DType),
}

impl KernelFamily for ReduceKernel {
    fn entry_point(&self) -> Result<String> {
        let (op, dt, cols) = match *self {
            ReduceKernel::ReduceRows(dt) => ("reduce", dt, false),
            ReduceKernel::ReduceCols(dt) => ("reduce", dt, true),
            ReduceKernel::ArgmaxRows(dt) => ("argmax", dt, false),
            ReduceKernel::ArgmaxCols(dt) => ("argmax", dt, true),
            ReduceKernel::SoftmaxRows(dt) => ("softmax", dt, false),
            ReduceKernel::SoftmaxCols(dt) => ("softmax", dt, true),
        };
        let axis = if cols { "cols" } else { "rows" };
        Ok(format!("{op}_{}_{axis}", float_name(op, dt)?))
    }

    fn programmatic(&self) -> bool {
        false
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        DType::ALL
            .into_iter()
            .flat_map(|dt| {
                [
                    ReduceKernel::ReduceRows(dt),
                    ReduceKernel::ReduceCols(dt),
                    ReduceKernel::ArgmaxRows(dt),
                    ReduceKernel::ArgmaxCols(dt),
                    ReduceKernel::SoftmaxRows(dt),
                    ReduceKernel::SoftmaxCols(dt),
                ]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_follow_the_naming_convention() {
        assert_eq!(
            ReduceKernel::ReduceCols(DType::F16).entry_point().unwrap(),
            "reduce_f16_cols"
        );
        assert_eq!(
            ReduceKernel::SoftmaxRows(DType::F32).entry_point().unwrap(),
            "softmax_f32_rows"
        );
        assert!(ReduceKernel::ArgmaxRows(DType::I64).entry_point().is_err());
    }
}
