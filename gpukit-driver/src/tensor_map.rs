//! Tensor maps: the descriptors Hopper's tensor memory accelerator (TMA) copies tiles with
//! (`cp.async.bulk.tensor`), encoded on the host by `cuTensorMapEncodeTiled` (CUDA driver API,
//! "Tensor Map Object Management") and passed to a kernel by value as a
//! `const __grid_constant__ CUtensorMap` parameter.

use cudarc::driver::sys;

use crate::error::check;
use crate::memory::{DeviceCopy, DevicePtr};
use crate::{Error, Result};

/// Element types a [`TensorMap`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorMapElement {
    /// IEEE half precision (2 bytes).
    F16,
    /// bfloat16 (2 bytes).
    BF16,
}

/// An encoded tiled tensor map (the driver's opaque 128-byte `CUtensorMap`), a kernel argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct TensorMap([u64; 16]);

// SAFETY: plain data (the driver's opaque descriptor), passed to kernels by value.
unsafe impl DeviceCopy for TensorMap {}

impl TensorMap {
    /// A tiled map over a row-major tensor of 2-byte `element`s at `base`: `dims` from the
    /// innermost (contiguous) dimension out, `strides` the byte strides of `dims[1..]`, copied
    /// in boxes of `boxes` elements per dimension into shared memory with the 128-byte swizzle
    /// (16-byte chunk `c` of box row `r` lands at chunk `c ^ (r % 8)`; the box's innermost extent
    /// must then be 128 bytes at most). Rows outside `dims` are filled with zeros.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside 1..=5, mismatched lengths, a base not
    /// 16-byte aligned, strides that are not multiples of 16 bytes or a box wider than the
    /// swizzle, or a driver older than CUDA 12.0; the driver-missing error without one; driver
    /// errors where `cuTensorMapEncodeTiled` rejects the description.
    pub fn tiled_sw128(
        element: TensorMapElement,
        base: DevicePtr,
        dims: &[u64],
        strides: &[u64],
        boxes: &[u32],
    ) -> Result<TensorMap> {
        let rank = dims.len();
        let bad = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "tensor map of dims {dims:?}, strides {strides:?}, box {boxes:?}: {why}"
            )))
        };
        if !(1..=5).contains(&rank) || strides.len() + 1 != rank || boxes.len() != rank {
            return bad("rank 1 to 5 with one stride fewer than dims and a box per dim");
        }
        if !base.0.is_multiple_of(16) || strides.iter().any(|s| !s.is_multiple_of(16)) {
            return bad("the base and strides must be multiples of 16 bytes");
        }
        if boxes[0] as u64 * 2 > 128 || boxes.iter().any(|&b| b == 0 || b > 256) {
            return bad("boxes of 1 to 256 elements, the innermost at most 128 bytes");
        }
        // Without a driver, or one before CUDA 12.0 (no tensor maps), cudarc would panic
        // looking the symbol up.
        if crate::device::driver_version()? < (12, 0) {
            return Err(Error::InvalidArgument(
                "tensor maps need a CUDA 12.0 or newer driver".into(),
            ));
        }
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        let elem_strides = [1u32; 5];
        let dtype = match element {
            TensorMapElement::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            TensorMapElement::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        };
        // SAFETY: every array holds `rank` (strides `rank − 1`) entries as checked above and
        // outlives the call; the map is written in place; a tensor map only describes memory
        // (nothing is read until a kernel copies through it).
        let code = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                dtype,
                rank as u32,
                base.0 as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elem_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        check("cuTensorMapEncodeTiled", code)?;
        Ok(TensorMap(map.opaque))
    }
}
