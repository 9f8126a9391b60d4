//! Kernel argument structures shared with the CUDA sources.

use gpukit_driver::{DeviceCopy, DevicePtr};

use crate::{Error, Result};

/// Most dimensions a strided kernel handles (`GPUKIT_MAX_DIMS` in `cuda/common.cuh`).
pub const MAX_DIMS: usize = 6;

/// The output shape and the element strides of up to three operands, for the `_strided` kernels
/// (`StridedIndex` in `cuda/common.cuh`; the layouts must match). A stride of 0 broadcasts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct StridedIndex {
    /// Number of dimensions used.
    pub ndim: u32,
    /// Padding (keeps `shape` 8-byte aligned, as in C).
    pub pad: u32,
    /// Output shape.
    pub shape: [u64; MAX_DIMS],
    /// Element strides of operands 0, 1, 2.
    pub stride: [[i64; MAX_DIMS]; 3],
}

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

/// Arguments of the attention kernels (`AttnArgs` in `cuda/attention.cu`; the layouts must
/// match). Strides are in elements, for the batch, head and row dimensions of
/// `[batch, heads, len, head_dim]` operands (the head dimension is contiguous).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct AttentionArgs {
    /// Q strides (batch, head, row).
    pub q_stride: [i64; 3],
    /// K strides.
    pub k_stride: [i64; 3],
    /// V strides.
    pub v_stride: [i64; 3],
    /// Output strides.
    pub o_stride: [i64; 3],
    /// Query heads.
    pub q_heads: u32,
    /// Key/value heads (divides `q_heads`).
    pub kv_heads: u32,
    /// Queries per sequence.
    pub q_len: u32,
    /// Keys per sequence.
    pub kv_len: u32,
    /// Softmax scale × log2(e) (the kernels work in base 2).
    pub scale_log2: f32,
    /// 1 for the offset causal mask.
    pub causal: u32,
    /// Sliding window in positions (0: none).
    pub window: u32,
    /// 1 to add the ALiBi bias.
    pub alibi: u32,
    /// Decode: the first key any query sees (a multiple of 64).
    pub key_begin: u32,
    /// Decode: keys per split (a multiple of 64). Prefill: the key-tile width
    /// [`registry::launch::sdpa_prefill`](crate::registry::launch::sdpa_prefill) chose.
    pub chunk: u32,
    /// Decode: splits per (batch, KV head).
    pub splits: u32,
    /// Decode: K/V tiles in flight (1 to 3), as
    /// [`registry::launch::sdpa_decode`](crate::registry::launch::sdpa_decode) sized the shared
    /// memory for.
    pub stages: u32,
    /// 1 where K and V are laid out pre-swizzled (gpukit-ops' `KvLayout::Swizzled`: within
    /// each whole 128-byte block of a key's row, 16-byte chunk `j` lies at `j ^ (key mod 8)`,
    /// the key counted from the operand's first).
    pub kv_swizzled: u32,
    /// Zero (keeps `partial` 8-byte aligned without implicit padding).
    pub reserved: u32,
    /// Decode with `splits > 1`: the f32 workspace of per-split partial results.
    pub partial: DevicePtr,
    /// Decode: when not null, an i32 on the device holding the first query's position; the
    /// kernel then attends `min(kv_len, position + q_len)` keys (`kv_len` is the capacity).
    pub position: DevicePtr,
}

// SAFETY: `repr(C)`, integers, floats and a device address, no implicit padding (`reserved`
// keeps `partial` 8-byte aligned).
unsafe impl DeviceCopy for AttentionArgs {}

/// Arguments of the sampler (`SamplerArgs` in `cuda/sampling.cu`; the layouts must match).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct SamplerArgs {
    /// 0 = greedy.
    pub temperature: f32,
    /// Top-p mass (1 = off).
    pub top_p: f32,
    /// Min-p fraction of the largest probability (0 = off).
    pub min_p: f32,
    /// Repetition penalty (1 = off).
    pub penalty: f32,
    /// Top-k (0 = off; also pass 0 when it is not below the vocabulary).
    pub top_k: u32,
    /// Vocabulary size (logits per row).
    pub vocab: u32,
    /// Recent ids per row.
    pub window: u32,
    /// Blocks per row of the stages at a temperature above 0
    /// ([`registry::launch::sampler_chunks`](crate::registry::launch::sampler_chunks)).
    pub chunks: u32,
    /// The request's seed.
    pub seed: u64,
    /// Workspace bytes per row
    /// ([`registry::launch::sampler_row_bytes`](crate::registry::launch::sampler_row_bytes)).
    pub row_bytes: u64,
}

// SAFETY: `repr(C)`, integers and floats, no implicit padding (seed falls on offset 32).
unsafe impl DeviceCopy for SamplerArgs {}

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

    #[test]
    fn attention_args_match_the_c_struct() {
        // long long strides[4][3]; unsigned ×4; float; unsigned ×9; float* partial;
        // const int* position
        assert_eq!(
            std::mem::size_of::<AttentionArgs>(),
            96 + 16 + 4 + 36 + 8 + 8
        );
        assert_eq!(std::mem::offset_of!(AttentionArgs, partial), 152);
        assert_eq!(std::mem::offset_of!(AttentionArgs, position), 160);
        assert_eq!(std::mem::size_of::<SamplerArgs>(), 48);
    }
}
