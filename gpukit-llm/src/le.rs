//! Little-endian element decoding shared by the model-file loaders.

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
