//! [`StridedIndex`], the argument block of the strided kernels (its layout is generated into
//! the CUDA header from [`crate::shared`]).

use gpukit_driver::DeviceCopy;

pub use crate::shared::{MAX_DIMS, StridedIndex};
use crate::{Error, Result};

// SAFETY: `repr(C)`, integers only, no implicit padding (the explicit `pad` field fills it).
unsafe impl DeviceCopy for StridedIndex {}

impl StridedIndex {
    /// Index over `shape` for up to three operands with the given element strides (each the same
    /// length as `shape`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with more than [`MAX_DIMS`] dimensions or mismatched lengths.
    pub fn new(shape: &[usize], strides: &[&[isize]]) -> Result<Self> {
        if shape.len() > MAX_DIMS || strides.len() > 3 {
            return Err(Error::InvalidArgument(format!(
                "strided kernels handle at most {MAX_DIMS} dimensions and 3 operands; got {} and {}",
                shape.len(),
                strides.len()
            )));
        }
        let mut ix = StridedIndex {
            ndim: shape.len() as u32,
            ..Default::default()
        };
        for (d, &n) in shape.iter().enumerate() {
            ix.shape[d] = n as u64;
        }
        for (op, s) in strides.iter().enumerate() {
            if s.len() != shape.len() {
                return Err(Error::InvalidArgument(format!(
                    "operand {op} has {} strides for a {}-d shape",
                    s.len(),
                    shape.len()
                )));
            }
            for (d, &st) in s.iter().enumerate() {
                ix.stride[op][d] = st as i64;
            }
        }
        Ok(ix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_c_struct() {
        // unsigned ndim, pad; u64 shape[6]; i64 stride[3][6]
        assert_eq!(std::mem::size_of::<StridedIndex>(), 8 + 8 * 6 + 8 * 18);
        assert_eq!(std::mem::align_of::<StridedIndex>(), 8);
        let ix = StridedIndex::new(&[2, 3], &[&[3, 1], &[0, 1]]).unwrap();
        assert_eq!(ix.ndim, 2);
        assert_eq!(ix.stride[1][..2], [0, 1]);
        assert!(StridedIndex::new(&[1; 7], &[]).is_err());
    }
}
