//! The elementwise family (`cuda/elementwise.cu`): binary and unary ops, scalar ops, clamp,
//! where, copies and casts, over dense operands (`_contig`) or any strides with broadcasting
//! (`_strided`, a [`StridedIndex`](crate::StridedIndex)). Every kernel is a grid-stride loop
//! ([`grid::elementwise`](crate::grid::elementwise)); the dense binary/unary kernels take 16-byte
//! vectors where the operands allow.

use crate::kernel::{KernelFamily, float_name};
use crate::{DType, Result};

/// The elementwise kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementwiseKernel {
    /// `binary_<dt>_contig` / `binary_<dt>_strided` (op code an argument).
    Binary {
        /// Element type (float).
        dtype: DType,
        /// Dense, same-shape operands.
        contiguous: bool,
    },
    /// `unary_<dt>_contig` / `unary_<dt>_strided` (op code an argument).
    Unary {
        /// Element type (float).
        dtype: DType,
        /// Dense operands.
        contiguous: bool,
    },
    /// `scalar_<dt>_strided`.
    Scalar(DType),
    /// `clamp_<dt>_strided`.
    Clamp(DType),
    /// `where_<dt>_strided`.
    Where(DType),
    /// `copy_<dt>_strided` (any dtype).
    Copy(DType),
    /// `cast_<from>_<to>` (float to float).
    Cast {
        /// Source type.
        from: DType,
        /// Destination type.
        to: DType,
    },
}

impl KernelFamily for ElementwiseKernel {
    fn entry_point(&self) -> Result<String> {
        let variant = |c: bool| if c { "contig" } else { "strided" };
        Ok(match *self {
            ElementwiseKernel::Binary { dtype, contiguous } => format!(
                "binary_{}_{}",
                float_name("binary op", dtype)?,
                variant(contiguous)
            ),
            ElementwiseKernel::Unary { dtype, contiguous } => format!(
                "unary_{}_{}",
                float_name("unary op", dtype)?,
                variant(contiguous)
            ),
            ElementwiseKernel::Scalar(dt) => {
                format!("scalar_{}_strided", float_name("scalar op", dt)?)
            }
            ElementwiseKernel::Clamp(dt) => format!("clamp_{}_strided", float_name("clamp", dt)?),
            ElementwiseKernel::Where(dt) => format!("where_{}_strided", float_name("where", dt)?),
            ElementwiseKernel::Copy(dt) => format!("copy_{}_strided", dt.name()),
            ElementwiseKernel::Cast { from, to } => format!(
                "cast_{}_{}",
                float_name("cast", from)?,
                float_name("cast", to)?
            ),
        })
    }

    /// The binary and unary kernels (the decode step's residual adds and activations).
    fn programmatic(&self) -> bool {
        matches!(
            self,
            ElementwiseKernel::Binary { .. } | ElementwiseKernel::Unary { .. }
        )
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = Vec::new();
        for dtype in DType::ALL {
            for contiguous in [true, false] {
                v.push(ElementwiseKernel::Binary { dtype, contiguous });
                v.push(ElementwiseKernel::Unary { dtype, contiguous });
            }
            v.extend([
                ElementwiseKernel::Scalar(dtype),
                ElementwiseKernel::Clamp(dtype),
                ElementwiseKernel::Where(dtype),
                ElementwiseKernel::Copy(dtype),
            ]);
            for to in DType::ALL {
                if to != dtype {
                    v.push(ElementwiseKernel::Cast { from: dtype, to });
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn entry_points_follow_the_naming_convention() {
        let binary = ElementwiseKernel::Binary {
            dtype: DType::BF16,
            contiguous: true,
        };
        assert_eq!(binary.entry_point().unwrap(), "binary_bf16_contig");
        let cast = ElementwiseKernel::Cast {
            from: DType::F32,
            to: DType::F16,
        };
        assert_eq!(cast.entry_point().unwrap(), "cast_f32_f16");
        assert!(matches!(
            ElementwiseKernel::Scalar(DType::I32).entry_point(),
            Err(Error::Unsupported { .. })
        ));
        assert_eq!(
            ElementwiseKernel::Copy(DType::U8).entry_point().unwrap(),
            "copy_u8_strided"
        );
    }
}
