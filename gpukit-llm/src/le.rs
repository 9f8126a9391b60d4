//! Little-endian element decoding shared by the model-file loaders, and the upload of decoded
//! values in a compute dtype.

use gpukit_ops::{DType, Device, Tensor};
use half::{bf16, f16};

/// A stored float format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Float {
    F32,
    F16,
    BF16,
}

/// 16-bit words of `b` (little-endian).
pub(crate) fn u16s(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// The values of `b`, stored as `kind`, as f32 (exact: every f16/bf16 value is an f32).
pub(crate) fn f32s(kind: Float, b: &[u8]) -> Vec<f32> {
    match kind {
        Float::F32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Float::F16 => u16s(b)
            .into_iter()
            .map(|w| f16::from_bits(w).to_f32())
            .collect(),
        Float::BF16 => u16s(b)
            .into_iter()
            .map(|w| bf16::from_bits(w).to_f32())
            .collect(),
    }
}

/// f32 `values` uploaded as a `dtype` tensor (rounded to nearest even when narrowing); `None`
/// for a dtype that is not f32, f16 or bf16.
pub(crate) fn upload(
    values: &[f32],
    shape: &[usize],
    dtype: DType,
    device: &Device,
) -> Option<gpukit_ops::Result<Tensor>> {
    Some(match dtype {
        DType::F32 => Tensor::from_slice(values, shape, device),
        DType::BF16 => {
            let v: Vec<bf16> = values.iter().map(|&x| bf16::from_f32(x)).collect();
            Tensor::from_slice(&v, shape, device)
        }
        DType::F16 => {
            let v: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
            Tensor::from_slice(&v, shape, device)
        }
        _ => return None,
    })
}
