//! `KernelRegistry`: typed kernel ids → loaded functions, per device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use gpukit_driver::{
    Arch, Device, DeviceProperties, Function, LaunchConfig, Module, ModuleImage, Nvrtc, Output,
};

use crate::targets::{TARGETS, compile_options};
use crate::{DType, Error, QuantFormat, Result};

include!(concat!(env!("OUT_DIR"), "/prebuilt.rs"));

/// A CUDA source file of `gpukit-kernels/cuda/`: the unit that is compiled and loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelModule {
    /// `elementwise.cu`: binary, unary, scalar, clamp, where, copy, cast.
    Elementwise,
    /// `reduce.cu`: sum, mean, max, min, argmax, softmax, log-softmax.
    Reduce,
    /// `norm.cu`: rms_norm, layer_norm, add_rms_norm.
    Norm,
    /// `gather.cu`: index_select (embedding lookup) and gather along an axis.
    Gather,
    /// `gemv.cu`: matrix-vector products for M ≤ 8.
    Gemv,
    /// `rope.cu`: rotary position embeddings.
    Rope,
    /// `quant.cu`: dequantization of GGML block formats and the quantized GEMV.
    Quant,
    /// `kv.cu`: KV-cache append.
    Kv,
    /// `attention.cu`: scaled dot-product attention (flash prefill, split-K decode).
    Attention,
    /// `sampling.cu`: token sampling (Philox, penalties, temperature, top-k/p, min-p).
    Sampling,
}

impl KernelModule {
    /// Every module.
    pub const ALL: [KernelModule; 10] = [
        KernelModule::Elementwise,
        KernelModule::Reduce,
        KernelModule::Norm,
        KernelModule::Gather,
        KernelModule::Gemv,
        KernelModule::Rope,
        KernelModule::Quant,
        KernelModule::Kv,
        KernelModule::Attention,
        KernelModule::Sampling,
    ];

    /// The file stem.
    pub fn name(self) -> &'static str {
        match self {
            KernelModule::Elementwise => "elementwise",
            KernelModule::Reduce => "reduce",
            KernelModule::Norm => "norm",
            KernelModule::Gather => "gather",
            KernelModule::Gemv => "gemv",
            KernelModule::Rope => "rope",
            KernelModule::Quant => "quant",
            KernelModule::Kv => "kv",
            KernelModule::Attention => "attention",
            KernelModule::Sampling => "sampling",
        }
    }

    /// The CUDA source, embedded for run-time compilation.
    pub fn source(self) -> &'static str {
        match self {
            KernelModule::Elementwise => include_str!("../cuda/elementwise.cu"),
            KernelModule::Reduce => include_str!("../cuda/reduce.cu"),
            KernelModule::Norm => include_str!("../cuda/norm.cu"),
            KernelModule::Gather => include_str!("../cuda/gather.cu"),
            KernelModule::Gemv => include_str!("../cuda/gemv.cu"),
            KernelModule::Rope => include_str!("../cuda/rope.cu"),
            KernelModule::Quant => include_str!("../cuda/quant.cu"),
            KernelModule::Kv => include_str!("../cuda/kv.cu"),
            KernelModule::Attention => include_str!("../cuda/attention.cu"),
            KernelModule::Sampling => include_str!("../cuda/sampling.cu"),
        }
    }
}

/// Headers the sources include, embedded for run-time compilation.
const HEADERS: &[(&str, &str)] = &[("common.cuh", include_str!("../cuda/common.cuh"))];

/// The block formats [`Kernel::QGemvRing`] streams: the subset of [`QuantFormat`] it has
/// entry points for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingFormat {
    /// [`QuantFormat::Q4_0`].
    Q4_0,
    /// [`QuantFormat::Q4K`].
    Q4K,
    /// [`QuantFormat::Q5K`].
    Q5K,
}

impl RingFormat {
    /// The ring's format for `format`, or `None` for a format it does not stream.
    pub const fn of(format: QuantFormat) -> Option<RingFormat> {
        match format {
            QuantFormat::Q4_0 => Some(RingFormat::Q4_0),
            QuantFormat::Q4K => Some(RingFormat::Q4K),
            QuantFormat::Q5K => Some(RingFormat::Q5K),
            QuantFormat::Q8_0 | QuantFormat::Q4_1 | QuantFormat::Q6K => None,
        }
    }

    /// The block format.
    pub const fn format(self) -> QuantFormat {
        match self {
            RingFormat::Q4_0 => QuantFormat::Q4_0,
            RingFormat::Q4K => QuantFormat::Q4K,
            RingFormat::Q5K => QuantFormat::Q5K,
        }
    }

    /// Bytes and values of the unit the ring's chunks count (a block or a super-block).
    pub const fn unit(self) -> (usize, usize) {
        (self.format().block_bytes(), self.format().block_values())
    }
}

/// A kernel entry point, by what it computes. The entry-point name is derived from it
/// (`<op>_<dtype>[_<variant>]`), never written by hand at a call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `binary_<dt>_contig` / `binary_<dt>_strided`.
    Binary {
        /// Element type (float).
        dtype: DType,
        /// Dense, same-shape operands.
        contiguous: bool,
    },
    /// `unary_<dt>_contig` / `unary_<dt>_strided`.
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
    /// `reduce_<dt>_rows` (reduction over a contiguous last axis).
    ReduceRows(DType),
    /// `reduce_<dt>_cols` (reduction over an inner axis).
    ReduceCols(DType),
    /// `argmax_<dt>_rows`.
    ArgmaxRows(DType),
    /// `argmax_<dt>_cols`.
    ArgmaxCols(DType),
    /// `softmax_<dt>_rows`.
    SoftmaxRows(DType),
    /// `softmax_<dt>_cols`.
    SoftmaxCols(DType),
    /// `rms_norm_<dt>`.
    RmsNorm(DType),
    /// `add_rms_norm_<dt>`.
    AddRmsNorm(DType),
    /// `layer_norm_<dt>`.
    LayerNorm(DType),
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
    /// `rope_<dt>` (in place, positions from device memory).
    Rope(DType),
    /// `dequantize_<output dt>` (the block format is a launch argument).
    Dequantize(DType),
    /// `qgemv_<dt>` (one row of x against quantized weight rows of a 32-value format: Q8_0,
    /// Q4_0, Q4_1; format as an argument).
    QGemv(DType),
    /// `qgemv_k_<dt>` (the same for the K-quants Q4_K, Q5_K, Q6_K; format as an argument).
    QGemvK(DType),
    /// `qgemv_rows_<dt>`: [`Kernel::QGemv`] for 1 to [`launch::QGEMV_MAX_ROWS`] rows of x (their
    /// count M the last argument; row r of the output equals a one-row call's, bit for bit).
    QGemvRows(DType),
    /// `qgemv_k_rows_<dt>`: [`Kernel::QGemvK`] for 1 to [`launch::QGEMV_MAX_ROWS`] rows of x.
    QGemvKRows(DType),
    /// `qgemv_ring_<dt>` (Q4_0) / `qgemv_ring_q4k_<dt>` (Q4_K) / `qgemv_ring_q5k_<dt>` (Q5_K),
    /// f16/bf16: one row of x against
    /// quantized weight rows on Hopper, streamed through a shared-memory ring by bulk
    /// asynchronous copies, block sums on the tensor cores ([`launch::qgemv_ring`]); arguments
    /// (w, x, out, N, K, units per chunk, row pitch, stages, stages prefetched). Only the sm_90+
    /// images have its body (elsewhere the entry point traps): launch it only where
    /// [`KernelRegistry::target`] is `sm_90a`.
    QGemvRing {
        /// Element type of x and the output.
        dtype: DType,
        /// The weights' block format.
        format: RingFormat,
    },
    /// `qgemv_ring_rows_<dt>` / `qgemv_ring_rows_q4k_<dt>` / `qgemv_ring_rows_q5k_<dt>`:
    /// [`Kernel::QGemvRing`] for up to [`launch::QGEMV_MAX_ROWS`] rows of x, row r in column r of
    /// the MMAs' B (row r of the output bitwise a one-row call's); its count M the last
    /// argument, and [`launch::qgemv_ring`] planned for it.
    QGemvRingRows {
        /// Element type of x and the output.
        dtype: DType,
        /// The weights' block format.
        format: RingFormat,
    },
    /// `kv_append_<dt>` (position from device memory).
    KvAppend(DType),
    /// `sdpa_prefill_<dt>_d<head_dim>` / `sdpa_decode_<dt>_d<head_dim>` (f16/bf16; head_dim
    /// 64, 80, 96, 128 or 256).
    Sdpa {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
        /// The split-K decode kernel (else the prefill kernel).
        decode: bool,
    },
    /// `sdpa_prefill_wgmma_<dt>_d<head_dim>` (f16/bf16; head_dim 64 and 128): the prefill kernel
    /// on Hopper's warpgroup MMA. Only the sm_90a image has its body (elsewhere the entry point
    /// traps): launch it only where [`KernelRegistry::target`] is `sm_90a`.
    SdpaPrefillWgmma {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
    },
    /// `sdpa_combine_<dt>`: merges the splits of the decode kernel.
    SdpaCombine(DType),
    /// `sdpa_decode_ring_<dt>_d<head_dim>[_swz]` (f16/bf16; head_dim 64 and 128): decode
    /// attention on Hopper, a persistent grid whose blocks stream K/V tiles through a
    /// shared-memory ring and merge the splits in the same kernel
    /// ([`launch::sdpa_decode_ring`]): with the tensor memory accelerator through two tensor
    /// maps (arguments q, out, args, K map, V map, counters, batch), or, `_swz`, by 1-d bulk
    /// copies from K/V laid out pre-swizzled with contiguous rows (q, out, args, k, v,
    /// counters, batch). Only sm_90+ images have its body (elsewhere the entry point traps):
    /// launch it only where [`KernelRegistry::target`] is `sm_90a`.
    SdpaDecodeRing {
        /// Element type of Q, K, V and the output.
        dtype: DType,
        /// Values per head.
        head_dim: u32,
        /// K and V laid out pre-swizzled (`AttentionArgs::kv_swizzled`), copied by 1-d bulk
        /// copies (the `_swz` entry point).
        swizzled_kv: bool,
    },
    /// `sample_greedy_<dt>`, first stage of a draw at temperature 0: each chunk's first maximum
    /// of the penalised logits (grid [`launch::sampler_grid`]).
    SampleGreedy(DType),
    /// `sample_greedy_merge`: each row's first maximum of its chunks' (grid
    /// [`launch::sampler_merge_grid`]).
    SampleGreedyMerge,
    /// `sample_scale_<dt>`, first stage of a draw at a temperature above 0: z = penalised
    /// logit / temperature into the workspace and each chunk's maximum (grid
    /// [`launch::sampler_grid`], as every stage below).
    SampleScale(DType),
    /// `sample_exp`: e = exp(z − max), the total fixed-point weight and the first histogram.
    SampleExp,
    /// `sample_refine`: rounds 2 and 3 of the top-k / top-p radix select.
    SampleRefine,
    /// `sample_theta`: the filters' threshold and each chunk's kept weight.
    SampleTheta,
    /// `sample_draw`: the uniform draw over the kept weight, one id per row.
    SampleDraw,
    /// `decode_advance`: a decode step's device position, step and recent-id window, moved on
    /// by one token.
    DecodeAdvance,
    /// `gemv_swiglu_<dt>`: SwiGLU's gate and up projections of one row with silu(gate)·up
    /// (weights `[2N, K]`, gate rows first; K a multiple of 16 bytes, rows aligned).
    GemvSwiglu(DType),
    /// `rope_kv_append_<dt>`: a fused QKV projection's output → optional per-head q/k RMSNorm,
    /// RoPE, queries out and keys/values into the caches at the device position.
    RopeKvAppend(DType),
    /// `gemv_norm_<dt>` / `gemv_norm_argmax_<dt>`: one row's RMSNorm (after an optional
    /// residual add) then its GEMV, on a persistent grid; `argmax` also writes each block's
    /// first maximum (the LM head with greedy sampling).
    GemvNorm {
        /// Element type (float).
        dtype: DType,
        /// Per-block first maxima for [`Kernel::SampleArgmaxParts`].
        argmax: bool,
    },
    /// `gemv_swiglu_norm_<dt>`: [`Kernel::GemvSwiglu`] with the pre-norm of
    /// [`Kernel::GemvNorm`].
    GemvSwigluNorm(DType),
    /// `gemv_norm_rope_kv_<dt>`: [`Kernel::GemvNorm`] for a fused QKV projection whose
    /// epilogue applies RoPE and writes the queries out and the keys and values into the KV
    /// cache at the device position (what [`Kernel::RopeKvAppend`] does, without q/k norms).
    GemvNormRopeKv(DType),
    /// `sample_argmax_parts`: the greedy token from [`Kernel::GemvNorm`]'s per-block maxima.
    SampleArgmaxParts,
    /// `gemv_ring_<dt>_r<rows>`: one row of x against a weight matrix of 4 MiB or more on
    /// Hopper, streamed
    /// through a shared-memory ring by bulk asynchronous copies ([`launch::gemv_ring`]) in
    /// stages of `rows` whole rows (1, 2, 4 or 8), arguments (x, w, bias, out, N, K, warps per
    /// group, stages, stages prefetched). Only the sm_90+ images have its body (elsewhere the
    /// entry point traps): launch it only where [`KernelRegistry::target`] is `sm_90a`.
    GemvRing {
        /// Element type (float).
        dtype: DType,
        /// Weight rows per ring stage: 1, 2, 4 or 8.
        rows: u32,
    },
    /// `gemv_<dt>` / `gemv_<dt>_vec` / `gemv_<dt>_vec_m1`.
    Gemv {
        /// Element type (float).
        dtype: DType,
        /// 16-byte vector loads (K a multiple of 16 bytes, rows aligned).
        vectorized: bool,
        /// Exactly one row of x (the decode case): the persistent kernel of
        /// [`launch::gemv_persistent`], arguments (x, w, bias, out, N, K, warps per row). Only
        /// with `vectorized`.
        single_row: bool,
    },
}

fn float(op: &'static str, dt: DType) -> Result<&'static str> {
    if dt.is_float() {
        Ok(dt.name())
    } else {
        Err(Error::Unsupported { op, dtype: dt })
    }
}

/// Head dimensions the attention kernels are built for.
pub const SDPA_HEAD_DIMS: [u32; 5] = [64, 80, 96, 128, 256];

/// `head_dim` is one the attention kernels are built for ([`SDPA_HEAD_DIMS`]).
fn check_sdpa_head_dim(head_dim: usize) -> Result<()> {
    if u32::try_from(head_dim).is_ok_and(|d| SDPA_HEAD_DIMS.contains(&d)) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "sdpa kernels exist for head_dim {SDPA_HEAD_DIMS:?}, not {head_dim}"
        )))
    }
}

/// Head dimensions of the Hopper prefill kernel ([`Kernel::SdpaPrefillWgmma`]); both beat the
/// portable kernel and torch's FlashAttention-2 on an H200 (docs/RESULTS.md, session 12).
pub const SDPA_WGMMA_HEAD_DIMS: [u32; 2] = [64, 128];

/// Head dimensions of the Hopper decode ring ([`Kernel::SdpaDecodeRing`]): 64-element boxes of
/// the tensor memory accelerator's 128-byte swizzle tile them.
pub const SDPA_RING_HEAD_DIMS: [u32; 2] = [64, 128];

/// f16 or bf16 only (tensor-core kernels).
fn half_float(op: &'static str, dt: DType) -> Result<&'static str> {
    if matches!(dt, DType::F16 | DType::BF16) {
        Ok(dt.name())
    } else {
        Err(Error::Unsupported { op, dtype: dt })
    }
}

/// `<dtype>_<index dtype>` for the indexing kernels (any dtype but u8; i32 or i64 indices).
fn indexed_names(op: &'static str, dtype: DType, index: DType) -> Result<String> {
    if dtype == DType::U8 {
        return Err(Error::Unsupported { op, dtype });
    }
    if !matches!(index, DType::I32 | DType::I64) {
        return Err(Error::Unsupported {
            op: "indices",
            dtype: index,
        });
    }
    Ok(format!("{}_{}", dtype.name(), index.name()))
}

impl Kernel {
    /// The source module.
    pub fn module(&self) -> KernelModule {
        match self {
            Kernel::Binary { .. }
            | Kernel::Unary { .. }
            | Kernel::Scalar(_)
            | Kernel::Clamp(_)
            | Kernel::Where(_)
            | Kernel::Copy(_)
            | Kernel::Cast { .. } => KernelModule::Elementwise,
            Kernel::ReduceRows(_)
            | Kernel::ReduceCols(_)
            | Kernel::ArgmaxRows(_)
            | Kernel::ArgmaxCols(_)
            | Kernel::SoftmaxRows(_)
            | Kernel::SoftmaxCols(_) => KernelModule::Reduce,
            Kernel::RmsNorm(_) | Kernel::AddRmsNorm(_) | Kernel::LayerNorm(_) => KernelModule::Norm,
            Kernel::IndexSelect { .. } | Kernel::Gather { .. } => KernelModule::Gather,
            Kernel::Gemv { .. }
            | Kernel::GemvRing { .. }
            | Kernel::GemvSwiglu(_)
            | Kernel::GemvNorm { .. }
            | Kernel::GemvSwigluNorm(_)
            | Kernel::GemvNormRopeKv(_) => KernelModule::Gemv,
            Kernel::Rope(_) | Kernel::RopeKvAppend(_) => KernelModule::Rope,
            Kernel::Dequantize(_)
            | Kernel::QGemv(_)
            | Kernel::QGemvK(_)
            | Kernel::QGemvRows(_)
            | Kernel::QGemvKRows(_)
            | Kernel::QGemvRing { .. }
            | Kernel::QGemvRingRows { .. } => KernelModule::Quant,
            Kernel::KvAppend(_) => KernelModule::Kv,
            Kernel::Sdpa { .. }
            | Kernel::SdpaPrefillWgmma { .. }
            | Kernel::SdpaCombine(_)
            | Kernel::SdpaDecodeRing { .. } => KernelModule::Attention,
            Kernel::SampleGreedy(_)
            | Kernel::SampleGreedyMerge
            | Kernel::SampleScale(_)
            | Kernel::SampleExp
            | Kernel::SampleRefine
            | Kernel::SampleTheta
            | Kernel::SampleDraw
            | Kernel::DecodeAdvance
            | Kernel::SampleArgmaxParts => KernelModule::Sampling,
        }
    }

    /// Whether the kernel supports programmatic dependent launch: it executes
    /// `griddepcontrol.wait` before touching memory that earlier kernels read or write (the
    /// decode step's kernels). Launches of these kernels may set
    /// `LaunchConfig::programmatic` on sm_90+.
    pub fn programmatic(&self) -> bool {
        matches!(
            self,
            Kernel::Binary { .. }
                | Kernel::Unary { .. }
                | Kernel::RmsNorm(_)
                | Kernel::AddRmsNorm(_)
                | Kernel::LayerNorm(_)
                | Kernel::IndexSelect { .. }
                | Kernel::Rope(_)
                | Kernel::RopeKvAppend(_)
                | Kernel::QGemv(_)
                | Kernel::QGemvK(_)
                | Kernel::QGemvRows(_)
                | Kernel::QGemvKRows(_)
                | Kernel::QGemvRing { .. }
                | Kernel::QGemvRingRows { .. }
                | Kernel::KvAppend(_)
                | Kernel::SdpaCombine(_)
                | Kernel::SdpaDecodeRing { .. }
                | Kernel::Gemv { .. }
                | Kernel::GemvRing { .. }
                | Kernel::GemvSwiglu(_)
                | Kernel::GemvNorm { .. }
                | Kernel::GemvSwigluNorm(_)
                | Kernel::GemvNormRopeKv(_)
        ) || matches!(self, Kernel::Sdpa { decode: true, .. })
            // Every kernel of sampling.cu (the sampler's stages, the decode state's advance).
            || self.module() == KernelModule::Sampling
    }

    /// The `extern "C"` entry point.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a dtype the kernel does not exist for.
    pub fn entry_point(&self) -> Result<String> {
        let variant = |c: bool| if c { "contig" } else { "strided" };
        Ok(match *self {
            Kernel::Binary { dtype, contiguous } => {
                format!(
                    "binary_{}_{}",
                    float("binary op", dtype)?,
                    variant(contiguous)
                )
            }
            Kernel::Unary { dtype, contiguous } => {
                format!(
                    "unary_{}_{}",
                    float("unary op", dtype)?,
                    variant(contiguous)
                )
            }
            Kernel::Scalar(dt) => format!("scalar_{}_strided", float("scalar op", dt)?),
            Kernel::Clamp(dt) => format!("clamp_{}_strided", float("clamp", dt)?),
            Kernel::Where(dt) => format!("where_{}_strided", float("where", dt)?),
            Kernel::Copy(dt) => format!("copy_{}_strided", dt.name()),
            Kernel::Cast { from, to } => {
                format!("cast_{}_{}", float("cast", from)?, float("cast", to)?)
            }
            Kernel::ReduceRows(dt) => format!("reduce_{}_rows", float("reduction", dt)?),
            Kernel::ReduceCols(dt) => format!("reduce_{}_cols", float("reduction", dt)?),
            Kernel::ArgmaxRows(dt) => format!("argmax_{}_rows", float("argmax", dt)?),
            Kernel::ArgmaxCols(dt) => format!("argmax_{}_cols", float("argmax", dt)?),
            Kernel::SoftmaxRows(dt) => format!("softmax_{}_rows", float("softmax", dt)?),
            Kernel::SoftmaxCols(dt) => format!("softmax_{}_cols", float("softmax", dt)?),
            Kernel::RmsNorm(dt) => format!("rms_norm_{}", float("rms_norm", dt)?),
            Kernel::AddRmsNorm(dt) => format!("add_rms_norm_{}", float("add_rms_norm", dt)?),
            Kernel::LayerNorm(dt) => format!("layer_norm_{}", float("layer_norm", dt)?),
            Kernel::IndexSelect { dtype, index } => {
                format!(
                    "index_select_{}",
                    indexed_names("index_select", dtype, index)?
                )
            }
            Kernel::Gather { dtype, index } => {
                format!("gather_{}", indexed_names("gather", dtype, index)?)
            }
            Kernel::Rope(dt) => format!("rope_{}", float("rope", dt)?),
            Kernel::Dequantize(dt) => format!("dequantize_{}", float("dequantize", dt)?),
            Kernel::QGemv(dt) => format!("qgemv_{}", float("quantized gemv", dt)?),
            Kernel::QGemvK(dt) => format!("qgemv_k_{}", float("quantized gemv", dt)?),
            Kernel::QGemvRows(dt) => format!("qgemv_rows_{}", float("quantized gemv", dt)?),
            Kernel::QGemvKRows(dt) => format!("qgemv_k_rows_{}", float("quantized gemv", dt)?),
            Kernel::QGemvRing { dtype, format } | Kernel::QGemvRingRows { dtype, format } => {
                format!(
                    "qgemv_ring_{}{}{}",
                    if matches!(self, Kernel::QGemvRingRows { .. }) {
                        "rows_"
                    } else {
                        ""
                    },
                    match format {
                        RingFormat::Q4_0 => "",
                        RingFormat::Q4K => "q4k_",
                        RingFormat::Q5K => "q5k_",
                    },
                    half_float("quantized gemv ring", dtype)?
                )
            }
            Kernel::KvAppend(dt) => format!("kv_append_{}", float("kv cache", dt)?),
            Kernel::Sdpa {
                dtype,
                head_dim,
                decode,
            } => {
                check_sdpa_head_dim(head_dim as usize)?;
                format!(
                    "sdpa_{}_{}_d{head_dim}",
                    if decode { "decode" } else { "prefill" },
                    half_float("sdpa", dtype)?
                )
            }
            Kernel::SampleGreedy(dt) => format!("sample_greedy_{}", float("sampling", dt)?),
            Kernel::SampleScale(dt) => format!("sample_scale_{}", float("sampling", dt)?),
            Kernel::SampleGreedyMerge => "sample_greedy_merge".into(),
            Kernel::SampleExp => "sample_exp".into(),
            Kernel::SampleRefine => "sample_refine".into(),
            Kernel::SampleTheta => "sample_theta".into(),
            Kernel::SampleDraw => "sample_draw".into(),
            Kernel::DecodeAdvance => "decode_advance".into(),
            Kernel::GemvSwiglu(dt) => format!("gemv_swiglu_{}", float("gemv", dt)?),
            Kernel::GemvSwigluNorm(dt) => format!("gemv_swiglu_norm_{}", float("gemv", dt)?),
            Kernel::GemvNormRopeKv(dt) => format!("gemv_norm_rope_kv_{}", float("gemv", dt)?),
            Kernel::SdpaPrefillWgmma { dtype, head_dim } => {
                if !SDPA_WGMMA_HEAD_DIMS.contains(&head_dim) {
                    return Err(Error::InvalidArgument(format!(
                        "the wgmma prefill kernels exist for head_dim {SDPA_WGMMA_HEAD_DIMS:?}, \
                         not {head_dim}"
                    )));
                }
                format!(
                    "sdpa_prefill_wgmma_{}_d{head_dim}",
                    half_float("sdpa", dtype)?
                )
            }
            Kernel::SdpaCombine(dt) => format!("sdpa_combine_{}", half_float("sdpa", dt)?),
            Kernel::SdpaDecodeRing {
                dtype,
                head_dim,
                swizzled_kv,
            } => {
                if !SDPA_RING_HEAD_DIMS.contains(&head_dim) {
                    return Err(Error::InvalidArgument(format!(
                        "the decode ring kernels exist for head_dim {SDPA_RING_HEAD_DIMS:?}, \
                         not {head_dim}"
                    )));
                }
                format!(
                    "sdpa_decode_ring_{}_d{head_dim}{}",
                    half_float("sdpa", dtype)?,
                    if swizzled_kv { "_swz" } else { "" }
                )
            }
            Kernel::GemvNorm { dtype, argmax } => format!(
                "gemv_norm_{}{}",
                if argmax { "argmax_" } else { "" },
                float("gemv", dtype)?
            ),
            Kernel::SampleArgmaxParts => "sample_argmax_parts".into(),
            Kernel::GemvRing { dtype, rows } => {
                if !matches!(rows, 1 | 2 | 4 | 8) {
                    return Err(Error::InvalidArgument(format!(
                        "the ring GEMV kernels exist for 1, 2, 4 or 8 rows a stage, not {rows}"
                    )));
                }
                format!("gemv_ring_{}_r{rows}", float("gemv", dtype)?)
            }
            Kernel::RopeKvAppend(dt) => format!("rope_kv_append_{}", float("rope", dt)?),
            Kernel::Gemv {
                dtype,
                vectorized,
                single_row,
            } => format!(
                "gemv_{}{}",
                float("gemv", dtype)?,
                match (vectorized, single_row) {
                    (true, true) => "_vec_m1",
                    (true, false) => "_vec",
                    (false, _) => "",
                }
            ),
        })
    }
}

/// The image target for a device: its own cubin where one is built, the PTX fallback for newer
/// architectures, an error for older ones.
fn target_for(props: &DeviceProperties) -> Result<(&'static str, Arch, Output)> {
    let sm = props.compute_capability.sm();
    target_index(sm)
        .map(|i| TARGETS[i])
        .ok_or_else(|| Error::UnsupportedDevice {
            device: props.name.clone(),
            sm,
        })
}

/// The index in [`TARGETS`] of the image for SM `sm`: a cubin runs on its own SM and later
/// minor versions of the same major one (sm_80's on 8.0–8.5, sm_86's on 8.6–8.8), sm_90a's
/// only on 9.0, and the PTX on anything newer; `None` below 8.0.
fn target_index(sm: u32) -> Option<usize> {
    match sm {
        80..=85 => Some(0),
        86..=88 => Some(1),
        89 => Some(2),
        90 => Some(3),
        s if s > 90 => Some(4),
        _ => None,
    }
}

/// Where a module's image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageSource {
    /// Compiled when gpukit was built and embedded in the binary.
    Prebuilt,
    /// Compiled at run time with NVRTC (and cached on disk).
    Nvrtc,
}

/// Launch geometry per kernel family, in one place.
pub mod launch {
    use super::*;

    /// Threads per block of elementwise and reduction kernels (a power of two: the block
    /// reductions need it).
    pub const BLOCK: u32 = 256;

    /// A grid-stride launch over `n` elements: enough blocks to fill the device several times
    /// over, never more than needed.
    pub fn elementwise(n: usize, props: &DeviceProperties) -> LaunchConfig {
        let needed = n.div_ceil(BLOCK as usize).max(1);
        let cap = props.multiprocessor_count as usize * 16;
        LaunchConfig::new(needed.min(cap).max(1) as u32, BLOCK)
    }

    /// One block per row.
    pub fn rows(rows: usize) -> Result<LaunchConfig> {
        let grid = u32::try_from(rows.max(1))
            .map_err(|_| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))?;
        Ok(LaunchConfig::new(grid, BLOCK))
    }

    /// 16-byte vectors per lane in `rms_norm` / `add_rms_norm` (`NORM_VEC` in norm.cu).
    const NORM_VEC: usize = 2;

    /// rms_norm rows: groups of `group` threads (a power of two, 32 to 1024) per row, each lane
    /// holding up to two 16-byte vectors of it, in blocks of at least 128 threads
    /// (`128 / group` rows per block for short rows). Swept on an H200 (docs/RESULTS.md,
    /// session 13): two vectors per lane at 32 registers (full occupancy) streamed 80-99% of
    /// copy at hidden 1024-8192, against 54-70% for the earlier block per row with up to four.
    /// Returns the launch and `group`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an element size outside 1..=16 bytes or too many rows.
    pub fn norm_rows(rows: usize, hidden: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
        if !(1..=16).contains(&elem_bytes) {
            return Err(Error::InvalidArgument(format!(
                "rms_norm rows of {elem_bytes}-byte elements"
            )));
        }
        let nvec = hidden.div_ceil(16 / elem_bytes);
        let group = nvec.div_ceil(NORM_VEC).next_power_of_two().clamp(32, 1024);
        let block = group.max(128);
        let per_block = block / group;
        let grid = u32::try_from(rows.div_ceil(per_block).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))?;
        Ok((LaunchConfig::new(grid, block as u32), group as u32))
    }

    /// One thread per item.
    pub fn threads(items: usize) -> Result<LaunchConfig> {
        Ok(LaunchConfig::for_elements(items, BLOCK)?)
    }

    /// GEMV: 256-thread blocks of `rows` output columns each, `8 / rows` warps per column
    /// splitting K: warps per column = the largest power of two ≤ column bytes / 2 KiB (a
    /// warp's pass: 32 lanes × four 16-byte loads), between 1 and 8. Swept on an H200 with
    /// programmatic dependent launch (docs/RESULTS.md, 2 / 4 / 6 KiB per warp): 2 KiB was
    /// fastest in the decode step of Llama-3.2-1B and Qwen2.5-0.5B and within 5% of the best at
    /// every bench shape. (An earlier H100 sweep without PDL had put it at 6 KiB.) Returns the
    /// launch and `rows`.
    pub fn gemv(n: usize, k: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
        gemv_blocks(n, 8 / gemv_warps_per_row(k, elem_bytes, 8))
    }

    /// The SwiGLU GEMV: like [`gemv`] with each output needing two weight rows, so a block
    /// computes `8 / (2 · warps per row)` outputs (warps per row at most 4). Returns the launch
    /// and that count.
    pub fn gemv_swiglu(n: usize, k: usize, elem_bytes: usize) -> Result<(LaunchConfig, u32)> {
        gemv_blocks(n, 4 / gemv_warps_per_row(k, elem_bytes, 4))
    }

    /// The persistent decode GEMVs (the single-row [`Kernel::Gemv`], [`Kernel::GemvNorm`],
    /// [`Kernel::GemvSwigluNorm`], [`Kernel::GemvNormRopeKv`]): 256-thread blocks of `8 / split`
    /// groups of `split` warps, a group owning one output unit (a weight row, or two) at a
    /// time and striding over the `units`, as a grid of at most `resident` blocks (one wave:
    /// the device's multiprocessors × the kernel's occupancy), with `smem_bytes` of dynamic
    /// shared memory (the normalised row of the pre-norm kernels; 0 otherwise). `split` comes
    /// from [`gemv_split`].
    pub fn gemv_persistent(
        units: usize,
        split: u32,
        smem_bytes: usize,
        resident: usize,
    ) -> Result<LaunchConfig> {
        if !matches!(split, 1 | 2 | 4 | 8) {
            return Err(Error::InvalidArgument(format!(
                "{split} warps per GEMV row (1, 2, 4 or 8)"
            )));
        }
        let groups = (BLOCK / 32 / split) as usize;
        let blocks = units.div_ceil(groups).clamp(1, resident.max(1));
        let grid = u32::try_from(blocks)
            .map_err(|_| Error::InvalidArgument(format!("{units} GEMV outputs exceed the grid")))?;
        let smem = u32::try_from(smem_bytes)
            .map_err(|_| Error::InvalidArgument(format!("{smem_bytes} bytes of shared memory")))?;
        Ok(LaunchConfig::new(grid, BLOCK).shared_mem(smem))
    }

    /// Warps sharing each weight row in the persistent decode GEMVs ([`gemv_persistent`]) for
    /// a `[rows, k]` weight: as for [`gemv`], the largest power of two ≤ row bytes / 2 KiB,
    /// between 1 and 8, and at least 2 below 4096 rows (so a small matrix still spreads over
    /// every multiprocessor). A sweep on an H200 with PDL (docs/RESULTS.md, session 8; 1, 2, 4,
    /// 8 warps per row at the decode shapes of Llama-3.2-1B, Qwen2.5-0.5B and Llama-3.1-8B):
    /// the row-size rule was the fastest at 9 of the 12 shapes and within 8% at the others. It
    /// depends on the shape only, so results do not depend on the device.
    pub fn gemv_split(rows: usize, k: usize, elem_bytes: usize) -> u32 {
        let split = gemv_warps_per_row(k, elem_bytes, 8);
        if rows < 4096 { split.max(2) } else { split }
    }

    /// Consumer warps of [`Kernel::GemvRing`] (`GEMV_RING_WARPS` in gemv.cu); its blocks have
    /// one more, the producer.
    const GEMV_RING_WARPS: u32 = 8;
    /// Most ring stages the kernel has barriers for (`GEMV_RING_MAX_STAGES`).
    const GEMV_RING_MAX_STAGES: usize = 32;
    /// The kernel's static shared memory (its full and empty barriers, x's barrier and the
    /// batch partial sums: 1032 bytes; the dynamic ring, aligned to 128, starts at 1152), which
    /// the ring must leave room for.
    const GEMV_RING_STATIC_SMEM: usize = 1152;
    /// Weight matrices below this many bytes stay on the persistent kernel
    /// ([`gemv_persistent`]). From here to [`GEMV_RING_SMALL_BELOW`], for rows of at most 8 KiB,
    /// the ring's blocks fit twice on a multiprocessor; on an H200 (docs/RESULTS.md, session
    /// 37) they beat the persistent kernel by 8–9% at 4 MiB ((k, n) = (2048, 1024)) and 11–26%
    /// at 6–9 MiB.
    pub const GEMV_RING_MIN_BYTES: usize = 4 << 20;
    /// Weight matrices below this many bytes get the small-matrix ring of
    /// [`gemv_ring`] where their rows are at most 8 KiB: stages of at most 20 KiB and at most 4
    /// rows in a ring of at most 96 KiB, so two blocks (kernels of 2 or 4 rows a stage: at most
    /// 94 registers) fit on a multiprocessor.
    pub const GEMV_RING_SMALL_BELOW: usize = 16 << 20;

    /// The Hopper bulk-copy ring GEMV ([`Kernel::GemvRing`]) for one row of x against a
    /// `[n, k]` weight of `elem_bytes`-byte elements (k a multiple of 16 bytes): blocks of 9
    /// warps, at most one per multiprocessor (`sms`; from [`GEMV_RING_SMALL_BELOW`] up, as
    /// few as give each the same number of stages, ± 1), whose consumer warps form groups of 2
    /// (4 groups) or 4 (2 groups), stages of R whole rows (a power of two), a ring that holds
    /// all of a block's stages or a multiple of the groups' count of them, and x after the ring
    /// (the producer copies it too). Returns the launch and the kernel's (warps per group, rows
    /// per stage, stages, stages prefetched), or `None` where the matrix is below
    /// [`GEMV_RING_MIN_BYTES`], a row does not fit a stage or the ring does not fit
    /// `smem_optin` (the caller then uses [`gemv_persistent`]).
    ///
    /// - From [`GEMV_RING_SMALL_BELOW`] up: R the largest power of two ≤ 8 whose rows fit 32
    ///   KiB, a ring of about 128 KiB (one block per multiprocessor), 2 warps per group for
    ///   8-row stages, else 4; before the PDL wait the producer asks L2 for its first 64 KiB of
    ///   stages (at least one). On an H200 (docs/RESULTS.md, session 16) the ops bench's
    ///   alternatives — 8 or 16 KiB stages, a 192 KiB ring, two blocks per SM — were each slower
    ///   at one or more of its GEMV shapes, by up to 30%, and faster by at most 1%.
    /// - Below it (small matrices, from [`GEMV_RING_MIN_BYTES`], rows of at most 8 KiB): R of 2
    ///   or 4 rows in stages of at most 20 KiB, 4 warps per group for stages of 16 KiB or more,
    ///   else 2; as many stages as a block has (at most 96 KiB of them, rounded down to a
    ///   multiple of the groups, at least one a group; all of them where that would leave one a
    ///   group and they fit), the whole ring asked of L2 before the PDL wait, and at most 110
    ///   KiB of shared memory a block, so two fit on a multiprocessor: the next launch's blocks
    ///   start beside the previous launch's and ask L2 for their stages before it ends. H200,
    ///   session 37: at
    ///   (k, n) = (896, 4864) 3.6–3.7 µs against 4.2 for the persistent kernel and 4.0 for the
    ///   large-matrix ring (one block per multiprocessor). In the decode bench it made
    ///   Qwen3-0.6B's step 7–9% faster (o_proj (2048, 1024), down_proj (3072, 1024)) and left
    ///   Llama-3.2-1B's within 1% (o_proj (2048, 2048)); Qwen2.5-0.5B's down_proj (4864, 896:
    ///   9.5 KiB rows) made its step 3% slower though it took 3.6 µs against 4.7 alone, so
    ///   rows above 8 KiB stay on the persistent kernel.
    ///
    /// The sums depend on the shape only (not the device's multiprocessor count), so results
    /// are deterministic.
    pub fn gemv_ring(
        n: usize,
        k: usize,
        elem_bytes: usize,
        sms: usize,
        smem_optin: usize,
    ) -> Result<Option<(LaunchConfig, [u32; 4])>> {
        const STAGE_MAX: usize = 32 << 10;
        const RING: usize = 128 << 10;
        // L2 prefetch before the PDL wait: H200, session 24 (docs/RESULTS.md), 0, 64, 128, 256
        // and 512 KiB. 64 KiB was the fastest at the 32 MiB shapes (9.1 / 9.3 µs against 9.7 /
        // 10.0 with 128) and in Llama-3.1-8B's decode step (1–2% faster than 128); 128
        // was 1–1.5% faster at the 117 MB shapes alone; 256 and more were slower everywhere.
        // Since session 36 the kernel asks for them line by line at the block's entry, where
        // 96 and 128 KiB were still slower at the 32 MiB shapes.
        const PREFETCH: usize = 64 << 10;
        const SMALL_STAGE_MAX: usize = 20 << 10;
        const SMALL_ROW_MAX: usize = 8 << 10;
        const SMALL_RING: usize = 96 << 10;
        // Two blocks of this much (dynamic and static) fit the 228 KiB of a Hopper
        // multiprocessor with the 1 KiB the hardware reserves for each.
        const SMALL_BLOCK_SMEM: usize = 110 << 10;
        let row = k.saturating_mul(elem_bytes);
        let bytes = n.saturating_mul(row);
        if bytes < GEMV_RING_MIN_BYTES || row > STAGE_MAX || !row.is_multiple_of(16) {
            return Ok(None);
        }
        let sms = sms.max(1);
        let small = bytes < GEMV_RING_SMALL_BELOW;
        let (s, rows, stages, prefetch) = if small {
            if row > SMALL_ROW_MAX {
                return Ok(None);
            }
            let rows = 1usize << (SMALL_STAGE_MAX / row).min(4).ilog2();
            let stage = rows * row;
            let s: u32 = if stage >= 16 << 10 { 4 } else { 2 };
            let groups = (GEMV_RING_WARPS / s) as usize;
            let budget = SMALL_RING.min(SMALL_BLOCK_SMEM - GEMV_RING_STATIC_SMEM - row);
            let per_block = n.div_ceil(rows).div_ceil(sms);
            let fit = (budget / stage).min(GEMV_RING_MAX_STAGES);
            // A multiple of the groups, so that slot t mod nst is always group t mod G's.
            let ring = (fit.min(per_block) / groups * groups).max(groups);
            // Where that leaves one slot a group and the block more stages, a group's next
            // stage waits for its slot to be read and then comes from HBM; the ring then holds
            // all of the block's stages where they fit (each slot filled once, so no phase can
            // alias). H200, session 39: (k, n) = (2048, 1536) 3.5–3.7 → 2.8 µs (3 stages, not
            // 2), (3072, 1536) 4.2 → 3.8 (6, not 4). With two slots a group the refills overlap
            // the group's other stage: (896, 4864) on 10 stages was 1–2% slower than on 8.
            let stages = if ring < 2 * groups && per_block > ring && per_block <= fit {
                per_block
            } else {
                ring
            };
            (s, rows, stages, stages)
        } else {
            let rows = 1usize << (STAGE_MAX / row).min(8).ilog2();
            // Warps per group: 2 (4 groups) for 8-row stages, else 4 (2 groups). H200, session
            // 19 (docs/RESULTS.md): (k, n) = (2048, 8192) 10.2 → 9.6 µs with 2 (14% slower with
            // 8); the 1-, 2- and 4-row shapes were 1.5–7% slower with 2, and with 8 4–7% slower
            // at 2 and 4 rows, no faster at 1.
            let s: u32 = if rows == 8 { 2 } else { 4 };
            let groups = (GEMV_RING_WARPS / s) as usize;
            let stage = rows * row;
            let stages = (RING / stage).min(GEMV_RING_MAX_STAGES) / groups * groups;
            (s, rows, stages, (PREFETCH / stage).max(1))
        };
        let smem = stages * rows * row + row;
        if smem + GEMV_RING_STATIC_SMEM > smem_optin {
            return Ok(None);
        }
        // Block b takes stages b, b + grid, …. The large ring launches the fewest blocks that
        // give none more stages than a block per multiprocessor would, ⌈stages / ⌈stages /
        // SMs⌉⌉ (1024 stages on 132 SMs: 128 blocks of 8, not 100 of 8 and 32 of 7). H200,
        // session 38: 0.05 µs faster at (k, n) = (8192, 2048), the other shapes the same. The
        // small ring keeps a block per multiprocessor, which its overlap with the next launch
        // relies on.
        let total = n.div_ceil(rows);
        let blocks = if small {
            total.min(sms)
        } else {
            total.div_ceil(total.div_ceil(sms))
        };
        let grid = u32::try_from(blocks)
            .map_err(|_| Error::InvalidArgument(format!("{n} GEMV outputs exceed the grid")))?;
        let cfg = LaunchConfig::new(grid, (GEMV_RING_WARPS + 1) * 32).shared_mem(smem as u32);
        Ok(Some((
            cfg,
            [s, rows as u32, stages as u32, prefetch as u32],
        )))
    }

    /// Consumer warps of [`Kernel::QGemvRing`] (`QGEMV_RING_WARPS` in quant.cu); its blocks
    /// have one more, the producer.
    const QGEMV_RING_WARPS: u32 = 8;
    /// Rows per tile of [`Kernel::QGemvRing`] (`QGEMV_RING_ROWS`: one MMA's 16).
    const QGEMV_RING_ROWS: usize = 16;
    /// Most ring stages [`Kernel::QGemvRing`] has barriers for (`QGEMV_RING_MAX_STAGES`).
    const QGEMV_RING_MAX_STAGES: usize = 8;
    /// [`Kernel::QGemvRing`]'s static shared memory as ptxas reports it (barriers and the
    /// tiles' partial sums, 1160 bytes, rounded up to where the 128-byte aligned ring starts).
    const QGEMV_RING_STATIC_SMEM: usize = 1280;
    /// Rows of x [`Kernel::QGemvRows`] and [`Kernel::QGemvKRows`] take (`QGEMV_MAX_ROWS` in
    /// quant.cu).
    pub const QGEMV_MAX_ROWS: usize = 8;
    /// Quantized matrices below this many bytes stay on the one-warp-per-row kernel
    /// ([`Kernel::QGemv`]), which spreads a small matrix over more multiprocessors.
    pub const QGEMV_RING_MIN_BYTES: usize = 1 << 20;

    /// The Hopper ring for Q4_0, Q4_K or Q5_K weights ([`Kernel::QGemvRing`], or
    /// [`Kernel::QGemvRingRows`] for `m` > 1) for `m` rows of x (1 to [`QGEMV_MAX_ROWS`];
    /// f16/bf16, `x_bytes` per element) against `n` rows of `k` values (a multiple of 256, so
    /// that every row is a whole number of 16-byte units): a block of 9 warps per
    /// multiprocessor (`sms`), tiles of 16 rows streamed as stages of at most 40 KiB (chunks of
    /// a multiple of 8 units — blocks or super-blocks — of each row, as even as the row
    /// allows), each row's chunk in a slot of `pitch` bytes (an odd multiple of 16, so that the
    /// 8 rows one load of a warp reads fall in different banks), a ring of about 160 KiB of
    /// stages (2 to 8), and after it, for each row of x, x, x laid out for the MMAs and the sums
    /// of x per 32 values (4 bytes each for Q4_0, 8 for the K-quants), then (m > 1) 8 KiB of
    /// partial sums; before the PDL wait the producer asks L2 for the first stage only. Returns
    /// the launch and the kernel's (units per chunk, pitch, stages, stages prefetched), or
    /// `None` where k is not a multiple of 256, m is out of range, the matrix is below
    /// [`QGEMV_RING_MIN_BYTES`] or two stages do not fit `smem_optin`. Measured on an H200
    /// (docs/RESULTS.md, session 32, Q4_0): 12.0 µs at (k, n) = (4096, 14336) and 12.1 at
    /// (14336, 4096), against the one-warp-per-row kernel's 21.4 and 27.3; 20 KiB stages were
    /// 2.1–2.6 µs slower, asking L2 for 2 or 3 stages before the wait 0.3–1.8 µs slower than 1,
    /// and 16 consumer warps no faster. The sums depend on the shape only (not the device), so
    /// results are deterministic.
    pub fn qgemv_ring(
        format: RingFormat,
        n: usize,
        k: usize,
        m: usize,
        x_bytes: usize,
        sms: usize,
        smem_optin: usize,
    ) -> Result<Option<(LaunchConfig, [u32; 4])>> {
        const STAGE_MAX: usize = 40 << 10;
        const RING: usize = 160 << 10;
        let (unit_bytes, unit_values) = format.unit();
        let units = k / unit_values;
        if !k.is_multiple_of(256)
            || k == 0
            || !(1..=QGEMV_MAX_ROWS).contains(&m)
            || n.saturating_mul(units).saturating_mul(unit_bytes) < QGEMV_RING_MIN_BYTES
        {
            return Ok(None);
        }
        let most = ((STAGE_MAX / (QGEMV_RING_ROWS * unit_bytes)) / 8 * 8).max(8);
        let chunks = units.div_ceil(most);
        let chunk = units.div_ceil(chunks).next_multiple_of(8);
        let mut pitch = chunk * unit_bytes;
        if (pitch / 16).is_multiple_of(2) {
            pitch += 16;
        }
        let stage = QGEMV_RING_ROWS * pitch;
        // For each row of x: x as copied, x laid out for the MMAs (16 bytes per lane and 32
        // values: 2k bytes), and the sums of x per 32 values; with several rows, then the tiles'
        // partial sums (two tiles of QGEMV_MAX_ROWS × 16 f32 per consumer warp).
        let sums = if format == RingFormat::Q4_0 { 4 } else { 8 };
        let parts = if m > 1 {
            2 * QGEMV_RING_WARPS as usize * QGEMV_MAX_ROWS * QGEMV_RING_ROWS * 4
        } else {
            0
        };
        let extra = m.saturating_mul(k.saturating_mul(x_bytes) + 2 * k + sums * (k / 32)) + parts;
        let fits = |stages: usize| stages * stage + extra + QGEMV_RING_STATIC_SMEM <= smem_optin;
        let mut stages = (RING / stage).clamp(2, QGEMV_RING_MAX_STAGES);
        while stages > 2 && !fits(stages) {
            stages -= 1;
        }
        if !fits(stages) {
            return Ok(None);
        }
        let grid = u32::try_from(n.div_ceil(QGEMV_RING_ROWS).min(sms.max(1))).map_err(|_| {
            Error::InvalidArgument(format!("{n} quantized GEMV outputs exceed the grid"))
        })?;
        let smem = u32::try_from(stages * stage + extra)
            .map_err(|_| Error::InvalidArgument(format!("a {k}-value row's ring")))?;
        let cfg = LaunchConfig::new(grid, (QGEMV_RING_WARPS + 1) * 32).shared_mem(smem);
        let as_u32 = |v: usize| {
            u32::try_from(v).map_err(|_| Error::InvalidArgument(format!("ring parameter {v}")))
        };
        Ok(Some((
            cfg,
            [as_u32(chunk)?, as_u32(pitch)?, as_u32(stages)?, 1],
        )))
    }

    /// Splits each group of the decode combine kernel takes at once (`COMBINE_UNROLL` in
    /// attention.cu).
    const SDPA_COMBINE_UNROLL: usize = 8;

    /// The decode combine kernel for `splits` splits: one block per (row, KV head, batch) of
    /// groups of `head_dim` threads, each group summing every such split — as many groups as
    /// give each at most 8 splits (one round of loads), up to 1024
    /// threads, rounded so the block is whole warps (at the kernel's head dims 64, 80, 96, 128
    /// and 256). On an H200 (docs/RESULTS.md, session 13) a 1024-thread block at every length
    /// was 0.6 µs slower at 16 splits than 512 threads, and faster at 33 and 66.
    pub fn sdpa_combine(
        batch: usize,
        kv_heads: usize,
        head_dim: usize,
        splits: usize,
    ) -> Result<LaunchConfig> {
        let grid = (
            SDPA_DECODE_ROWS as u32,
            grid_dim("KV heads", kv_heads)?,
            grid_dim("sequences", batch)?,
        );
        let d = head_dim.clamp(1, 1024);
        // Groups per whole warp: 32 / gcd(d, 32).
        let unit = 32 >> d.trailing_zeros().min(5);
        let most = (1024 / d).max(1);
        let groups = splits
            .div_ceil(SDPA_COMBINE_UNROLL)
            .next_multiple_of(unit)
            .clamp(unit.min(most), most);
        Ok(LaunchConfig::new(grid, (groups * d) as u32))
    }

    /// Threads of [`Kernel::SampleArgmaxParts`]'s single block.
    pub const ARGMAX_PARTS_THREADS: u32 = 1024;

    /// Warps splitting one weight row of `k` elements: the largest power of two ≤ row bytes /
    /// 2 KiB, between 1 and `max`.
    fn gemv_warps_per_row(k: usize, elem_bytes: usize, max: usize) -> u32 {
        1u32 << (k.saturating_mul(elem_bytes) / 2048).clamp(1, max).ilog2()
    }

    /// 256-thread blocks of `per_block` outputs covering `n`; returns the launch and `per_block`.
    fn gemv_blocks(n: usize, per_block: u32) -> Result<(LaunchConfig, u32)> {
        let grid = u32::try_from(n.div_ceil(per_block as usize).max(1))
            .map_err(|_| Error::InvalidArgument(format!("{n} GEMV outputs exceed the grid")))?;
        Ok((LaunchConfig::new(grid, BLOCK), per_block))
    }

    /// Threads per block of `rope_kv_append` (one block per token and head).
    pub const ROPE_KV_THREADS: u32 = 128;

    /// `rope_kv_append`: one block per (token, query or key/value head).
    pub fn rope_kv_append(tokens: usize, heads: usize) -> Result<LaunchConfig> {
        let grid = tokens
            .checked_mul(heads)
            .and_then(|n| u32::try_from(n.max(1)).ok())
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{tokens}×{heads} heads exceed the grid"))
            })?;
        Ok(LaunchConfig::new(grid, ROPE_KV_THREADS))
    }

    /// Threads per decode attention block (four warps).
    pub const SDPA_THREADS: u32 = 128;
    /// Query rows one decode block handles (GQA group × queries per sequence).
    pub const SDPA_DECODE_ROWS: usize = 16;
    /// Decode blocks aimed at across the whole call: one full wave on a 132-SM H100/H200 (two
    /// blocks per SM, each with three K/V tiles in flight). Nsight Compute showed 512 blocks
    /// running as 1.29 waves, the partial wave idling most of the GPU. The split count follows
    /// from the shape alone, so results do not depend on the device.
    const SDPA_DECODE_BLOCKS: usize = 264;

    fn grid_dim(what: &str, n: usize) -> Result<u32> {
        u32::try_from(n)
            .ok()
            .filter(|&v| v <= 65_535)
            .ok_or_else(|| Error::InvalidArgument(format!("{n} {what} exceed the grid limit")))
    }

    /// The prefill attention kernel: blocks of 4 warps × query heads × batch, a warp taking 32
    /// queries (16 for head_dim 256), with shared memory for the block's Q tile (not for head_dim
    /// 256, whose Q stays in registers) and two K/V tiles of 64 keys (32 for head_dim 256), rows
    /// padded by 8 elements. At head_dim 128 that is 102 KiB; where a block may have less
    /// (`smem_optin`: 99 KiB on sm_86/89) the tiles hold 32 keys. Returns the launch and the
    /// key-tile width (`AttentionArgs::chunk` for the kernel).
    pub fn sdpa_prefill(
        batch: usize,
        q_heads: usize,
        q_len: usize,
        head_dim: usize,
        smem_optin: usize,
    ) -> Result<(LaunchConfig, u32)> {
        check_sdpa_head_dim(head_dim)?;
        let (mut bn, warps, mt) = if head_dim > 128 {
            (32, 4, 1)
        } else {
            (64, 4, 2)
        };
        let rows = 16 * mt * warps;
        let q_tile = if mt > 1 { rows * (head_dim + 8) * 2 } else { 0 };
        let bytes = |bn: usize| q_tile + 2 * 2 * bn * (head_dim + 8) * 2;
        if head_dim > 96 && head_dim <= 128 && bytes(bn) > smem_optin {
            bn = 32; // the kernel's short-tile variant at head_dim 128
        }
        let grid = (
            u32::try_from(q_len.div_ceil(rows).max(1))
                .map_err(|_| Error::InvalidArgument(format!("{q_len} queries")))?,
            grid_dim("query heads", q_heads)?,
            grid_dim("sequences", batch)?,
        );
        Ok((
            LaunchConfig::new(grid, 32 * warps as u32).shared_mem(bytes(bn) as u32),
            bn as u32,
        ))
    }

    /// The Hopper prefill kernel ([`Kernel::SdpaPrefillWgmma`]): blocks of 2 warpgroups (256
    /// threads, 128 queries) × query heads × batch, with shared memory for the block's Q tile
    /// and a ring of 3 K/V tiles of `sdpa_prefill_wgmma_keys` keys (224 KiB at head_dim 128;
    /// 64 KiB at 64, where two blocks share an SM). `None` for head dims outside
    /// [`SDPA_WGMMA_HEAD_DIMS`] or where the shared memory exceeds `smem_optin` (the caller then
    /// uses [`sdpa_prefill`]).
    pub fn sdpa_prefill_wgmma(
        batch: usize,
        q_heads: usize,
        q_len: usize,
        head_dim: usize,
        smem_optin: usize,
    ) -> Result<Option<LaunchConfig>> {
        if !u32::try_from(head_dim).is_ok_and(|d| SDPA_WGMMA_HEAD_DIMS.contains(&d)) {
            return Ok(None);
        }
        let bytes = (128 * head_dim + 3 * 2 * sdpa_prefill_wgmma_keys(head_dim) * head_dim) * 2;
        if bytes > smem_optin {
            return Ok(None);
        }
        let grid = (
            u32::try_from(q_len.div_ceil(128).max(1))
                .map_err(|_| Error::InvalidArgument(format!("{q_len} queries")))?,
            grid_dim("query heads", q_heads)?,
            grid_dim("sequences", batch)?,
        );
        Ok(Some(LaunchConfig::new(grid, 256).shared_mem(bytes as u32)))
    }

    /// Keys per K/V tile of the Hopper prefill kernel at `head_dim` (`SDPA_WGMMA_BN` in
    /// attention.cu): 64 at head_dim 64, so that two blocks fit an SM's registers (126 per
    /// thread) and shared memory; 128 otherwise.
    fn sdpa_prefill_wgmma_keys(head_dim: usize) -> usize {
        if head_dim == 64 { 64 } else { 128 }
    }

    /// How the decode kernel splits `keys` keys (a multiple of 64 per split):
    /// `(keys per split, splits)`, from the shape only.
    pub fn sdpa_decode_splits(keys: usize, batch_kv_heads: usize) -> (usize, usize) {
        split_keys(keys, SDPA_DECODE_BLOCKS.div_ceil(batch_kv_heads.max(1)))
    }

    /// `keys` keys in about `wanted` splits (at least 1, at most one per 64-key tile) of a
    /// multiple of 64 keys each: `(keys per split, splits)`.
    fn split_keys(keys: usize, wanted: usize) -> (usize, usize) {
        let tiles = keys.div_ceil(64).max(1);
        let splits = wanted.clamp(1, tiles);
        let chunk = tiles.div_ceil(splits) * 64;
        (chunk, keys.div_ceil(chunk).max(1))
    }

    /// Shared memory of the decode kernels' four-warp merge at `head_dim`: o [4 × 16 rows]
    /// [head_dim + 8] f32, then per row and warp m and l (`merge_warps` in attention.cu; the
    /// ring kernel's `RING_RED_BYTES` is the same size).
    fn sdpa_merge_bytes(head_dim: usize) -> usize {
        (4 * 16 * (head_dim + 8) + 2 * 64) * 4
    }

    /// The decode attention kernel: splits × KV heads × batch blocks; shared memory for a ring
    /// of K/V tiles of 64 keys or the four warps' merge, whichever is larger. The ring has the
    /// most tiles (up to 3) with which two blocks still fit `smem_per_sm`, else the most that
    /// fit one block's `smem_optin` (on an H100/H200: 3 below head_dim 256, 1 at 256; on an
    /// A100 2 at head_dim 128; on sm_86/89 1 at head_dim 96 and above). Returns the launch and the ring's length (`AttentionArgs::stages`).
    pub fn sdpa_decode(
        batch: usize,
        kv_heads: usize,
        splits: usize,
        head_dim: usize,
        smem_per_sm: usize,
        smem_optin: usize,
    ) -> Result<(LaunchConfig, u32)> {
        check_sdpa_head_dim(head_dim)?;
        let merge = sdpa_merge_bytes(head_dim);
        let bytes = |stages: usize| (stages * 2 * 64 * (head_dim + 8) * 2).max(merge);
        // Per block the driver reserves 1 KiB of shared memory beside the kernel's own.
        let stages = (1..=3usize)
            .rev()
            .find(|&s| 2 * (bytes(s) + 1024) <= smem_per_sm)
            .or_else(|| (1..=3usize).rev().find(|&s| bytes(s) <= smem_optin))
            .unwrap_or(1);
        let tiles = bytes(stages);
        let grid = (
            u32::try_from(splits)
                .map_err(|_| Error::InvalidArgument(format!("{splits} splits")))?,
            grid_dim("KV heads", kv_heads)?,
            grid_dim("sequences", batch)?,
        );
        Ok((
            LaunchConfig::new(grid, SDPA_THREADS).shared_mem(tiles as u32),
            stages as u32,
        ))
    }

    /// Work units (batch, KV head, split) the Hopper decode ring aims at: one per multiprocessor
    /// of a 132-SM H100/H200. The split count follows from it and the shape alone, so results
    /// do not depend on the device.
    pub const SDPA_RING_UNITS: usize = 132;
    /// Keys per head from which decode attention takes the ring: any (session 40, H200,
    /// docs/RESULTS.md: in the ops bench the ring took 4.6–8.4 µs at 1k–4k keys, GQA 4 and 8,
    /// against 5.9–10.5 µs for the portable kernel and its combine, on both K/V layouts. In
    /// the decode bench, whose caches hold fewer than 4096 keys, Llama-3.2-1B's and Qwen3-0.6B's
    /// steps were 1–4% faster at prompts of 128 and 2048 tokens, Qwen2.5-0.5B's 1% faster at
    /// 2048 and 1% slower at 128, within the rounds' spread; session 41 measured the same
    /// pattern on an H100). Session 20's ring, slower at 1k keys, had set 4096.
    pub const SDPA_RING_MIN_KEYS: usize = 1;
    /// Most ring slots the decode ring kernel has barriers for (`RING_MAX_STAGES`).
    const SDPA_RING_MAX_STAGES: usize = 8;
    /// Bytes of K/V tiles the decode ring keeps in flight per multiprocessor: 128 KiB, the ring
    /// that read 32 MiB fastest in session 19's floor (docs/RESULTS.md).
    const SDPA_RING_BYTES: usize = 128 << 10;
    /// The decode ring kernel's static shared memory (its barriers and a flag: 208 bytes),
    /// rounded up.
    const SDPA_RING_STATIC_SMEM: usize = 256;

    /// How the decode ring ([`sdpa_decode_ring`]) splits `keys` keys across `batch_kv_heads`
    /// (batch × KV heads): `(keys per split, splits)`, a multiple of 64 keys per split and
    /// about [`SDPA_RING_UNITS`] units in all (whole heads per unit from 132 heads up).
    pub fn sdpa_decode_ring_splits(keys: usize, batch_kv_heads: usize) -> (usize, usize) {
        split_keys(keys, SDPA_RING_UNITS / batch_kv_heads.max(1))
    }

    /// The Hopper decode ring ([`Kernel::SdpaDecodeRing`]) for `splits` splits of each of
    /// `batch × kv_heads` heads: a block of four consumer warps and a producer warp per
    /// multiprocessor (`sms`; fewer where there are fewer units), a ring of 64-key K+V tiles
    /// holding `SDPA_RING_BYTES` (4 slots at head_dim 128, 8 at 64), then the four warps'
    /// merge area (as [`sdpa_decode`]'s), and 1024 bytes to align the ring in. Returns the launch and the slot count
    /// (`AttentionArgs::stages`), or `None` for head dims other than 64 and 128 or where it
    /// does not fit `smem_optin` (the caller then uses [`sdpa_decode`]).
    pub fn sdpa_decode_ring(
        batch: usize,
        kv_heads: usize,
        splits: usize,
        head_dim: usize,
        sms: usize,
        smem_optin: usize,
    ) -> Result<Option<(LaunchConfig, u32)>> {
        if !u32::try_from(head_dim).is_ok_and(|d| SDPA_RING_HEAD_DIMS.contains(&d)) {
            return Ok(None);
        }
        let stage = 2 * 64 * head_dim * 2;
        let stages = (SDPA_RING_BYTES / stage).min(SDPA_RING_MAX_STAGES);
        let merge = sdpa_merge_bytes(head_dim);
        // The kernel aligns the ring to 1024 bytes (the swizzle's) within the dynamic part,
        // which follows 208 bytes of barriers: up to 1024 bytes go to that.
        let smem = stages * stage + merge + 1024;
        if smem + SDPA_RING_STATIC_SMEM > smem_optin {
            return Ok(None);
        }
        let units = batch
            .checked_mul(kv_heads)
            .and_then(|n| n.checked_mul(splits))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("{batch}×{kv_heads}×{splits} decode units"))
            })?;
        let grid = u32::try_from(units.min(sms.max(1)))
            .map_err(|_| Error::InvalidArgument(format!("{units} decode units")))?;
        Ok(Some((
            LaunchConfig::new(grid, SDPA_THREADS + 32).shared_mem(smem as u32),
            stages as u32,
        )))
    }

    /// Threads per block of the sampler's stages ([`Kernel::SampleGreedy`],
    /// [`Kernel::SampleScale`] … [`Kernel::SampleDraw`]).
    pub const SAMPLE_THREADS: u32 = 256;
    /// Vocabulary ids per block of those stages (4 consecutive ids per thread).
    pub const SAMPLE_CHUNK: usize = 1024;

    /// Blocks per row of the sampler's stages: one per [`SAMPLE_CHUNK`] ids.
    pub fn sampler_chunks(vocab: usize) -> usize {
        vocab.div_ceil(SAMPLE_CHUNK).max(1)
    }

    /// Workspace bytes per row of the sampler's stages (`SampleWs` in `cuda/sampling.cu`): an
    /// 80-byte head (total weight, threshold, two radix-select records), the three rounds'
    /// histograms (1024 u64 weights each, then 1024 u32 counts each), a u64 kept weight (a
    /// greedy draw's chunk maximum) and an f32 maximum per chunk, then (16-byte aligned) one f32
    /// per id of every chunk. A multiple of 16.
    pub fn sampler_row_bytes(vocab: usize) -> usize {
        let chunks = sampler_chunks(vocab);
        (80 + 3 * 1024 * 12 + 12 * chunks).next_multiple_of(16) + 4 * SAMPLE_CHUNK * chunks
    }

    /// The grid of the sampler's stages: (chunks, rows) blocks of [`SAMPLE_THREADS`].
    pub fn sampler_grid(rows: usize, vocab: usize) -> Result<LaunchConfig> {
        let chunks = u32::try_from(sampler_chunks(vocab)).map_err(|_| {
            Error::InvalidArgument(format!("vocabulary of {vocab} too large for the sampler"))
        })?;
        Ok(LaunchConfig::new(
            (chunks, sampler_rows(rows)?),
            SAMPLE_THREADS,
        ))
    }

    /// The grid of [`Kernel::SampleGreedyMerge`]: (1, rows) blocks of 1024 threads.
    pub fn sampler_merge_grid(rows: usize) -> Result<LaunchConfig> {
        Ok(LaunchConfig::new((1, sampler_rows(rows)?), 1024))
    }

    /// The sampler grids' second dimension: one row per block row (at least 1), at most the
    /// grid's 65 535.
    fn sampler_rows(rows: usize) -> Result<u32> {
        u32::try_from(rows.max(1))
            .ok()
            .filter(|&r| r <= 65_535)
            .ok_or_else(|| Error::InvalidArgument(format!("{rows} rows exceed the grid limit")))
    }
}

/// Loaded kernels for one device. Modules are loaded on first use, once; functions are looked up
/// once and cached. Get the registry of a device with [`KernelRegistry::for_device`].
pub struct KernelRegistry {
    device: Device,
    target: (&'static str, Arch, Output),
    modules: Mutex<HashMap<KernelModule, (Module, ImageSource)>>,
    functions: Mutex<HashMap<Kernel, Function>>,
}

impl std::fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelRegistry({:?}, {})", self.device, self.target.0)
    }
}

impl KernelRegistry {
    /// The registry of `device` (one per device ordinal for the life of the process).
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] before sm_80.
    pub fn for_device(device: &Device) -> Result<Arc<KernelRegistry>> {
        static REGISTRIES: OnceLock<Mutex<HashMap<usize, Arc<KernelRegistry>>>> = OnceLock::new();
        let map = REGISTRIES.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = map.get(&device.ordinal()) {
            return Ok(r.clone());
        }
        let reg = Arc::new(KernelRegistry {
            device: device.clone(),
            target: target_for(device.properties())?,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
        });
        map.insert(device.ordinal(), reg.clone());
        Ok(reg)
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The image target chosen for this device, e.g. `sm_90a`.
    pub fn target(&self) -> &'static str {
        self.target.0
    }

    /// Whether a prebuilt image exists for `module` on this device.
    pub fn has_prebuilt(&self, module: KernelModule) -> bool {
        prebuilt(module.name(), self.target.0).is_some()
    }

    /// The function for `kernel`, loading its module if needed.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a dtype without that kernel; [`Error::NoKernelImage`] when the
    /// module has no prebuilt image and NVRTC is unavailable; driver errors.
    pub fn function(&self, kernel: Kernel) -> Result<Function> {
        if let Some(f) = lock(&self.functions).get(&kernel) {
            return Ok(f.clone());
        }
        let name = kernel.entry_point()?;
        let module = self.module(kernel.module())?;
        let f = module.function(&name)?;
        lock(&self.functions).insert(kernel, f.clone());
        Ok(f)
    }

    /// Loads `module` (once) and says where its image came from.
    ///
    /// # Errors
    /// As [`KernelRegistry::function`].
    pub fn load(&self, module: KernelModule) -> Result<ImageSource> {
        self.module(module)?;
        Ok(lock(&self.modules)
            .get(&module)
            .map(|(_, s)| *s)
            .unwrap_or(ImageSource::Prebuilt))
    }

    fn module(&self, module: KernelModule) -> Result<Module> {
        let mut modules = lock(&self.modules);
        if let Some((m, _)) = modules.get(&module) {
            return Ok(m.clone());
        }
        let (m, source) = match prebuilt(module.name(), self.target.0) {
            Some(image) => {
                let img = match self.target.2 {
                    Output::Cubin => ModuleImage::Cubin(image),
                    Output::Ptx => ModuleImage::Ptx(std::str::from_utf8(image).map_err(|e| {
                        Error::InvalidArgument(format!("prebuilt PTX is not UTF-8: {e}"))
                    })?),
                };
                (self.device.load_module(img)?, ImageSource::Prebuilt)
            }
            None => (
                compile_at_run_time(&self.device, module, self.target)?,
                ImageSource::Nvrtc,
            ),
        };
        modules.insert(module, (m.clone(), source));
        Ok(m)
    }
}

/// Compiles `module` for `target` with NVRTC (disk-cached) and loads it.
fn compile_at_run_time(
    device: &Device,
    module: KernelModule,
    target: (&'static str, Arch, Output),
) -> Result<Module> {
    let nvrtc = Nvrtc::get().map_err(|e| Error::NoKernelImage {
        module: module.name(),
        arch: target.0.into(),
        why: e.to_string(),
    })?;
    let compiled = compile(nvrtc, module, target.1, target.2)?;
    Ok(device.load_module(compiled.module_image()?)?)
}

/// Compiles one module for one target with the project's headers and flags (used at run time and
/// by the kernel check of `cargo xtask test`).
///
/// # Errors
/// [`gpukit_driver::Error::Compile`] with NVRTC's log.
pub fn compile(
    nvrtc: &Nvrtc,
    module: KernelModule,
    arch: Arch,
    output: Output,
) -> Result<gpukit_driver::Compiled> {
    let opts = compile_options(arch, output, HEADERS.iter().copied());
    Ok(nvrtc.compile(&format!("{}.cu", module.name()), module.source(), &opts)?)
}

fn prebuilt(module: &str, target: &str) -> Option<&'static [u8]> {
    PREBUILT
        .iter()
        .find(|(m, t, _)| *m == module && *t == target)
        .map(|(_, _, img)| *img)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sm_gets_its_image() {
        let name = |sm| target_index(sm).map(|i| TARGETS[i].0);
        for (sm, want) in [
            (80, Some("sm_80")),
            (86, Some("sm_86")),
            (87, Some("sm_86")),
            (89, Some("sm_89")),
            (90, Some("sm_90a")),
            (100, Some("compute_90")),
            (120, Some("compute_90")),
            (75, None),
            (70, None),
        ] {
            assert_eq!(name(sm), want, "sm {sm}");
        }
        assert_eq!(TARGETS[4].2, Output::Ptx);
    }

    #[test]
    fn entry_points_follow_the_naming_convention() {
        assert_eq!(
            Kernel::Binary {
                dtype: DType::BF16,
                contiguous: true
            }
            .entry_point()
            .unwrap(),
            "binary_bf16_contig"
        );
        assert_eq!(
            Kernel::Cast {
                from: DType::F32,
                to: DType::F16
            }
            .entry_point()
            .unwrap(),
            "cast_f32_f16"
        );
        assert_eq!(
            Kernel::IndexSelect {
                dtype: DType::F16,
                index: DType::I64
            }
            .entry_point()
            .unwrap(),
            "index_select_f16_i64"
        );
        let ring = |rows| Kernel::GemvRing {
            dtype: DType::BF16,
            rows,
        };
        assert_eq!(ring(4).entry_point().unwrap(), "gemv_ring_bf16_r4");
        assert!(matches!(
            ring(3).entry_point(),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            Kernel::RmsNorm(DType::I32).entry_point(),
            Err(Error::Unsupported { .. })
        ));
    }

    /// Arguments no kernel is built for are errors, and sizes that overflow are refused
    /// rather than wrapped into small launches.
    #[test]
    fn launch_helpers_refuse_bad_arguments() {
        assert!(launch::norm_rows(4, 4096, 32).is_err());
        assert!(launch::norm_rows(4, 4096, 0).is_err());
        assert!(launch::norm_rows(4, 4096, 2).is_ok());
        for split in [0, 3, 16] {
            assert!(
                launch::gemv_persistent(10, split, 0, 132).is_err(),
                "{split}"
            );
        }
        assert!(launch::gemv_persistent(10, 8, 0, 132).is_ok());
        assert!(launch::rope_kv_append(1 << 32, 1 << 32).is_err());
        assert!(launch::rope_kv_append(7, 40).is_ok());
        let huge_dim = (1 << 24) - 8;
        assert!(launch::sdpa_prefill(1, 1, 1, huge_dim, 227 << 10).is_err());
        assert!(launch::sdpa_decode(1, 1, 1, huge_dim, 228 << 10, 227 << 10).is_err());
        assert!(launch::sdpa_decode(1, 1, 1, 100, 228 << 10, 227 << 10).is_err());
        assert!(launch::sdpa_decode_ring(usize::MAX, 2, 2, 128, 132, 227 << 10).is_err());
        // Rows too wide for the ring's stages, even where k × element size overflows.
        assert!(
            launch::gemv_ring(8, usize::MAX, 2, 132, 227 << 10)
                .unwrap()
                .is_none()
        );
        assert!(launch::gemv(8, usize::MAX, 2).is_ok());
    }

    #[test]
    fn ring_formats_are_the_block_formats_with_ring_entry_points() {
        let ring: Vec<_> = QuantFormat::ALL
            .into_iter()
            .filter_map(RingFormat::of)
            .collect();
        assert_eq!(ring, [RingFormat::Q4_0, RingFormat::Q4K, RingFormat::Q5K]);
        for r in ring {
            assert_eq!(RingFormat::of(r.format()), Some(r));
        }
        assert_eq!(RingFormat::Q4_0.unit(), (18, 32));
        assert_eq!(RingFormat::Q4K.unit(), (144, 256));
        assert_eq!(RingFormat::Q5K.unit(), (176, 256));
    }

    #[test]
    fn qgemv_ring_chunks_rows_into_stages_of_at_most_40_kib() {
        let plan = |n, k, optin| {
            launch::qgemv_ring(RingFormat::Q4_0, n, k, 1, 2, 132, optin)
                .unwrap()
                .map(|(cfg, p)| (cfg.grid.x, cfg.block.x, cfg.shared_mem_bytes, p))
        };
        let optin = 227 << 10;
        // (k, n) = (4096, 14336): whole 2304-byte rows in 2320-byte slots (145 units of 16),
        // 4 stages of 37120 bytes, then x (8 KiB), x for the MMAs (8 KiB) and 128 block sums.
        assert_eq!(
            plan(14336, 4096, optin),
            Some((132, 288, 4 * 37120 + 8192 + 8192 + 512, [128, 2320, 4, 1]))
        );
        // (14336, 4096): 448 blocks a row in 4 chunks of 112 (2016 bytes, 2032-byte slots), 5
        // stages (the 6th would not fit beside 57 KiB of x), the first prefetched.
        assert_eq!(
            plan(4096, 14336, optin),
            Some((
                132,
                288,
                5 * 32512 + 28672 + 28672 + 1792,
                [112, 2032, 5, 1]
            ))
        );
        // Uneven chunks: 264 blocks as 136 + 128; a 2448-byte chunk is already an odd multiple.
        assert_eq!(plan(300, 8448, optin).map(|p| p.3), Some([136, 2448, 4, 1]));
        // Not a multiple of 256 values, below 1 MiB, or two stages beyond the opt-in.
        assert_eq!(plan(4864, 896, optin), None);
        assert_eq!(plan(16, 4096, optin), None);
        assert_eq!(plan(4096, 14336, 64 << 10), None);
        // Q4_K: 16 super-blocks (2304 bytes) a row at k = 4096, chunks of 16 at 14336 (the
        // last of 8), and 8 bytes of sums per 32 values.
        let q4k = |n, k| {
            launch::qgemv_ring(RingFormat::Q4K, n, k, 1, 2, 132, optin)
                .unwrap()
                .map(|(cfg, p)| (cfg.shared_mem_bytes, p))
        };
        assert_eq!(
            q4k(14336, 4096),
            Some((4 * 37120 + 8192 + 8192 + 1024, [16, 2320, 4, 1]))
        );
        assert_eq!(q4k(4096, 14336).map(|p| p.1), Some([16, 2320, 4, 1]));
        // 33 super-blocks as 16 + 16 + 1.
        assert_eq!(q4k(300, 8448).map(|p| p.1), Some([16, 2320, 4, 1]));
        assert_eq!(q4k(16, 4096), None);
        // Q5_K: 176-byte super-blocks, 14 fit 40 KiB, rounded down to 8: two chunks a row at
        // k = 4096 (1408 bytes, 1424-byte slots), 7 stages.
        assert_eq!(
            launch::qgemv_ring(RingFormat::Q5K, 14336, 4096, 1, 2, 132, optin)
                .unwrap()
                .map(|p| p.1),
            Some([8, 1424, 7, 1])
        );
        // Four rows of x at (4096, 14336): four times x's 8 + 8 KiB and 512 bytes of sums, and
        // 8 KiB of partial sums, still leave room for the 4 stages; 9 rows, or none, take no
        // ring; eight rows of a 14336-value x (about 470 KiB) do not fit.
        let rows = |m, k| {
            launch::qgemv_ring(RingFormat::Q4_0, 14336, k, m, 2, 132, optin)
                .unwrap()
                .map(|(cfg, p)| (cfg.shared_mem_bytes, p))
        };
        assert_eq!(
            rows(4, 4096),
            Some((
                4 * 37120 + 4 * (8192 + 8192 + 512) + 8192,
                [128, 2320, 4, 1]
            ))
        );
        assert_eq!(rows(9, 4096), None);
        assert_eq!(rows(0, 4096), None);
        assert_eq!(rows(8, 14336), None);
    }

    #[test]
    fn gemv_ring_stages_follow_the_row_size() {
        let optin = 227 << 10;
        let plan = |n, k, eb| {
            launch::gemv_ring(n, k, eb, 132, optin)
                .unwrap()
                .map(|(cfg, p)| (cfg.grid.x, cfg.block.x, cfg.shared_mem_bytes, p))
        };
        // The bench's large shapes (k, n) in bf16: 32 KiB stages of whole rows, a 128 KiB ring,
        // 64 KiB of it (two stages; one 28 KiB row a stage: two) asked of L2 before the PDL wait.
        let row = |k: u32, rows: u32, stages: u32| stages * rows * 2 * k + 2 * k;
        assert_eq!(
            plan(14336, 4096, 2),
            Some((128, 288, row(4096, 4, 4), [4, 4, 4, 2]))
        );
        assert_eq!(
            plan(4096, 14336, 2),
            Some((128, 288, row(14336, 1, 4), [4, 1, 4, 2]))
        );
        assert_eq!(
            plan(8192, 2048, 2),
            Some((128, 288, row(2048, 8, 4), [2, 8, 4, 2]))
        );
        assert_eq!(
            plan(2048, 8192, 2),
            Some((128, 288, row(8192, 2, 4), [4, 2, 4, 2]))
        );
        // 8-row stages of 16 KiB: 8 of them, a multiple of the 4 groups of 2 warps; 4 prefetched.
        assert_eq!(
            plan(16384, 1024, 2),
            Some((128, 288, row(1024, 8, 8), [2, 8, 8, 4]))
        );
        // 8-row stages of 20 KiB: 6 fit the ring, rounded down to 4 for the 4 groups (6 would
        // leave the groups waiting on aliased phases); 3 (60 KiB) prefetched.
        assert_eq!(
            plan(8192, 1280, 2),
            Some((128, 288, row(1280, 8, 4), [2, 8, 4, 3]))
        );
        // From 4 MiB to 16 MiB with rows of at most 8 KiB, the small-matrix ring: (k, n) =
        // (896, 4864) in 4-row stages of 7 KiB, 2 warps per group, 8 stages (10 a block,
        // rounded down to the 4 groups: two a group), all prefetched; (3072, 1024) in 2-row
        // stages of 12 KiB, the 4 a block has; (2048, 2048): 4-row stages of 16 KiB, 4 warps
        // per group.
        assert_eq!(
            plan(4864, 896, 2),
            Some((132, 288, row(896, 4, 8), [2, 4, 8, 8]))
        );
        assert_eq!(
            plan(1024, 3072, 2),
            Some((132, 288, row(3072, 2, 4), [2, 2, 4, 4]))
        );
        assert_eq!(
            plan(2048, 2048, 2),
            Some((132, 288, row(2048, 4, 4), [4, 4, 4, 4]))
        );
        // (1536, 1400): 3 stages a block, fewer than the 4 groups: one a group.
        assert_eq!(
            plan(1400, 1536, 2),
            Some((132, 288, row(1536, 4, 4), [2, 4, 4, 4]))
        );
        // All of a block's stages where they fit and a multiple of the groups would leave one a
        // group: (2048, 1536) 3 stages of 16 KiB for 2 groups; (3072, 1536) 6 of 12 KiB for 4.
        assert_eq!(
            plan(1536, 2048, 2),
            Some((132, 288, row(2048, 4, 3), [4, 4, 3, 3]))
        );
        assert_eq!(
            plan(1536, 3072, 2),
            Some((132, 288, row(3072, 2, 6), [2, 2, 6, 6]))
        );
        // The ops test's shapes for the 4-row kernel's x in registers (at most two 16-byte packs
        // of a row a lane: 4-row stages with 2 warps a group): (1000, 2503) in bf16, 5 stages a
        // block; (512, 2101) in f32 (2 KiB rows, 4 stages a block).
        assert_eq!(
            plan(2503, 1000, 2),
            Some((132, 288, row(1000, 4, 5), [2, 4, 5, 5]))
        );
        assert_eq!(
            plan(2101, 512, 4),
            Some((132, 288, 4 * 4 * 2048 + 2048, [2, 4, 4, 4]))
        );
        // Two blocks fit on a multiprocessor, the ring holds all of a block's stages or is a
        // multiple of the groups, and the kernel's rows and warps per group do not depend on
        // the multiprocessor count.
        for (n, k, eb) in [
            (4864, 896, 2),
            (1024, 3072, 2),
            (600, 4096, 2),
            (1024, 2048, 2),
            (262144, 8, 2),
            (5000, 600, 4),
        ] {
            let (cfg, [s, rows, stages, pre]) =
                launch::gemv_ring(n, k, eb, 132, optin).unwrap().unwrap();
            assert!(cfg.shared_mem_bytes as usize + 1152 <= 110 << 10, "{n}x{k}");
            let per_block = n.div_ceil(rows as usize).div_ceil(132) as u32;
            let whole = stages >= per_block.max(8 / s);
            assert!(rows <= 4 && (whole || stages % (8 / s) == 0) && stages <= 32 && pre == stages);
            for sms in [1, 78, 144] {
                let p = launch::gemv_ring(n, k, eb, sms, optin).unwrap().unwrap().1;
                assert_eq!((p[0], p[1]), (s, rows), "{n}x{k} on {sms} SMs");
            }
        }
        // The large ring's grid: no block has more stages than with one per multiprocessor, and
        // one block fewer would give some block more.
        for (n, k, sms) in [
            (8192, 2048, 132),
            (8200, 2048, 132),
            (1600, 8192, 132),
            (4096, 14336, 78),
        ] {
            let (cfg, [_, rows, ..]) = launch::gemv_ring(n, k, 2, sms, optin).unwrap().unwrap();
            let (total, grid) = (n.div_ceil(rows as usize), cfg.grid.x as usize);
            assert_eq!(total.div_ceil(grid), total.div_ceil(sms), "{n}x{k}");
            assert!(total.div_ceil(grid - 1) > total.div_ceil(sms), "{n}x{k}");
        }
        // Below 4 MiB, rows above 32 KiB (8 KiB below 16 MiB: Qwen2.5-0.5B's down_proj), or a
        // ring beyond the opt-in: the persistent kernel.
        assert_eq!(plan(1023, 2048, 2), None);
        assert!(plan(1024, 2048, 2).is_some());
        assert_eq!(plan(896, 4864, 2), None);
        assert_eq!(plan(1024, 4104, 2), None);
        assert_eq!(plan(4096, 14336, 4), None);
        assert_eq!(
            launch::gemv_ring(8192, 2048, 2, 132, 64 << 10).unwrap(),
            None
        );
        // The ring leaves room for the kernel's 1032 bytes of static shared memory, the ring
        // aligned to 128: it starts at 1152.
        let need = 4 * 32768 + 8192;
        assert_eq!(
            launch::gemv_ring(4096 * 4, 4096, 2, 132, need).unwrap(),
            None
        );
        assert_eq!(
            launch::gemv_ring(4096 * 4, 4096, 2, 132, need + 1151).unwrap(),
            None
        );
        assert!(
            launch::gemv_ring(4096 * 4, 4096, 2, 132, need + 1152)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn attention_launches_fit_the_shared_memory() {
        // (shared memory per SM, per-block opt-in) of an H200, an A100 and an sm_86 part.
        let (h200, a100, sm86) = ((233_472, 232_448), (167_936, 166_912), (102_400, 101_376));
        for ((sm, optin), head_dim, want) in [
            (h200, 128, 3),
            (h200, 64, 3),
            (h200, 256, 1),
            (a100, 128, 2),
            (sm86, 128, 1),
            (sm86, 256, 1),
        ] {
            let (cfg, stages) = launch::sdpa_decode(1, 8, 33, head_dim, sm, optin).unwrap();
            assert_eq!(stages, want, "head_dim {head_dim} on ({sm}, {optin})");
            let smem = cfg.shared_mem_bytes as usize;
            assert!(smem <= optin && smem >= stages as usize * 2 * 64 * (head_dim + 8) * 2);
        }
        // Prefill fits every part's per-block limit at every head_dim, with 32-key tiles at 128
        // where 64-key ones do not.
        for (optin, head_dim, tile) in [
            (h200.1, 128, 64),
            (sm86.1, 128, 32),
            (sm86.1, 96, 64),
            (sm86.1, 256, 32),
        ] {
            let (cfg, bn) = launch::sdpa_prefill(1, 8, 1000, head_dim, optin).unwrap();
            assert_eq!(bn, tile, "head_dim {head_dim} within {optin} bytes");
            assert!(cfg.shared_mem_bytes as usize <= optin);
        }
        for head_dim in [64, 80, 96, 128, 256] {
            let (cfg, _) = launch::sdpa_prefill(1, 8, 1000, head_dim, sm86.1).unwrap();
            assert!(
                cfg.shared_mem_bytes as usize <= sm86.1,
                "head_dim {head_dim}"
            );
        }
        // The Hopper kernel fits an H100/H200 block (224 KiB at head_dim 128), and
        // declines where the opt-in is smaller or it has no kernel for the head_dim.
        for (optin, head_dim, fits) in [
            (h200.1, 128, true),
            (h200.1, 64, true),
            (sm86.1, 128, false),
            (h200.1, 80, false),
        ] {
            let cfg = launch::sdpa_prefill_wgmma(2, 8, 1000, head_dim, optin).unwrap();
            assert_eq!(
                cfg.is_some(),
                fits,
                "head_dim {head_dim} within {optin} bytes"
            );
            if let Some(cfg) = cfg {
                assert!(cfg.shared_mem_bytes as usize <= optin);
                // 64-key tiles at head_dim 64: two blocks' 64 KiB fit an SM's shared memory.
                let kib = if head_dim == 64 { 64 } else { 224 };
                assert_eq!(cfg.shared_mem_bytes, kib << 10, "head_dim {head_dim}");
                assert_eq!(
                    (cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x),
                    (8, 8, 2, 256)
                );
            }
        }
        // Splits depend on the shape alone: 264 blocks aimed at, 64-key multiples.
        assert_eq!(launch::sdpa_decode_splits(32_768, 8), (1024, 32));
        assert_eq!(launch::sdpa_decode_splits(100, 8), (64, 2));
        // The ring: about 132 units, 64-key multiples, never more splits than the cp.async
        // kernel's (so sdpa's workspace, sized for the larger, serves both).
        assert_eq!(launch::sdpa_decode_ring_splits(8192, 8), (512, 16));
        assert_eq!(launch::sdpa_decode_ring_splits(8192, 4), (256, 32));
        assert_eq!(launch::sdpa_decode_ring_splits(32_768, 8), (2048, 16));
        assert_eq!(launch::sdpa_decode_ring_splits(100, 8), (64, 2));
        assert_eq!(launch::sdpa_decode_ring_splits(4096, 200), (4096, 1));
        for keys in [1, 63, 64, 65, 1000, 4097, 8192, 32_768, 131_072] {
            for bkv in [1, 2, 3, 4, 7, 8, 16, 33, 64, 131, 132, 133, 500] {
                let (chunk, splits) = launch::sdpa_decode_ring_splits(keys, bkv);
                assert!(chunk % 64 == 0 && chunk * splits >= keys && chunk * (splits - 1) < keys);
                assert!(
                    bkv * splits <= launch::SDPA_RING_UNITS.max(bkv),
                    "{keys} {bkv}"
                );
                assert!(
                    splits <= launch::sdpa_decode_splits(keys, bkv).1,
                    "{keys} {bkv}"
                );
            }
        }
        let ring = |d, optin| launch::sdpa_decode_ring(1, 8, 16, d, 132, optin).unwrap();
        let (cfg, stages) = ring(128, 227 << 10).unwrap();
        assert_eq!((stages, cfg.grid.x, cfg.block.x), (4, 128, 160));
        assert_eq!(
            cfg.shared_mem_bytes as usize,
            4 * 32_768 + (4 * 16 * 136 + 128) * 4 + 1024
        );
        assert_eq!(ring(64, 227 << 10).unwrap().1, 8);
        assert!(ring(80, 227 << 10).is_none());
        assert!(ring(128, 160 << 10).is_none());
        let wide = launch::sdpa_decode_ring(4, 64, 1, 128, 132, 227 << 10)
            .unwrap()
            .unwrap();
        assert_eq!(wide.0.grid.x, 132);
        // The combine: whole warps, at most 1024 threads, a group per 8 splits where they fit.
        for d in [64, 80, 96, 128, 256] {
            for splits in [2, 16, 33, 66, 264] {
                let t = launch::sdpa_combine(1, 8, d, splits).unwrap().block.x as usize;
                let groups = t / d;
                assert!(
                    t.is_multiple_of(32) && t <= 1024 && t.is_multiple_of(d),
                    "d {d} splits {splits}: {t}"
                );
                assert!(
                    groups * 8 >= splits || groups == 1024 / d,
                    "d {d} splits {splits}"
                );
            }
        }
        assert_eq!(launch::sdpa_combine(1, 8, 128, 16).unwrap().block.x, 256);
        assert_eq!(launch::sdpa_combine(1, 8, 128, 66).unwrap().block.x, 1024);
        assert_eq!(launch::sdpa_combine(1, 8, 80, 2).unwrap().block.x, 160);
    }

    /// Every module compiles for every target and exports every entry point the registry can
    /// name. This is the kernel check of CI (NVRTC from `cargo xtask setup-cuda`).
    #[test]
    fn every_kernel_compiles_for_every_architecture() {
        let nvrtc = Nvrtc::get().expect("NVRTC (run `cargo xtask setup-cuda`)");
        for module in KernelModule::ALL {
            for (_, arch, output) in TARGETS {
                compile(nvrtc, module, arch, output).unwrap_or_else(|e| panic!("{e}"));
            }
            // PTX text lists every entry point: check the registry's names exist.
            let ptx = compile(nvrtc, module, Arch::new(90), Output::Ptx).unwrap();
            let text = String::from_utf8(ptx.image).unwrap();
            for kernel in all_kernels().into_iter().filter(|k| k.module() == module) {
                if let Ok(name) = kernel.entry_point() {
                    assert!(
                        text.contains(&format!(".entry {name}(")),
                        "{name} missing from {}.cu",
                        module.name()
                    );
                }
            }
        }
    }

    fn all_kernels() -> Vec<Kernel> {
        let mut v = vec![
            Kernel::DecodeAdvance,
            Kernel::SampleArgmaxParts,
            Kernel::SampleGreedyMerge,
            Kernel::SampleExp,
            Kernel::SampleRefine,
            Kernel::SampleTheta,
            Kernel::SampleDraw,
        ];
        for dt in DType::ALL {
            for c in [true, false] {
                v.push(Kernel::Binary {
                    dtype: dt,
                    contiguous: c,
                });
                v.push(Kernel::Unary {
                    dtype: dt,
                    contiguous: c,
                });
                v.push(Kernel::Gemv {
                    dtype: dt,
                    vectorized: c,
                    single_row: c,
                });
                v.push(Kernel::Gemv {
                    dtype: dt,
                    vectorized: c,
                    single_row: false,
                });
            }
            if matches!(dt, DType::F16 | DType::BF16) {
                for format in [RingFormat::Q4_0, RingFormat::Q4K, RingFormat::Q5K] {
                    v.push(Kernel::QGemvRing { dtype: dt, format });
                    v.push(Kernel::QGemvRingRows { dtype: dt, format });
                }
            }
            for rows in [1, 2, 4, 8] {
                v.push(Kernel::GemvRing { dtype: dt, rows });
            }
            v.extend([
                Kernel::Scalar(dt),
                Kernel::Clamp(dt),
                Kernel::Where(dt),
                Kernel::Copy(dt),
                Kernel::ReduceRows(dt),
                Kernel::ReduceCols(dt),
                Kernel::ArgmaxRows(dt),
                Kernel::ArgmaxCols(dt),
                Kernel::SoftmaxRows(dt),
                Kernel::SoftmaxCols(dt),
                Kernel::RmsNorm(dt),
                Kernel::AddRmsNorm(dt),
                Kernel::LayerNorm(dt),
                Kernel::Rope(dt),
                Kernel::Dequantize(dt),
                Kernel::QGemv(dt),
                Kernel::QGemvK(dt),
                Kernel::QGemvRows(dt),
                Kernel::QGemvKRows(dt),
                Kernel::KvAppend(dt),
                Kernel::SdpaCombine(dt),
                Kernel::SampleGreedy(dt),
                Kernel::SampleScale(dt),
                Kernel::GemvSwiglu(dt),
                Kernel::GemvSwigluNorm(dt),
                Kernel::GemvNormRopeKv(dt),
                Kernel::GemvNorm {
                    dtype: dt,
                    argmax: false,
                },
                Kernel::GemvNorm {
                    dtype: dt,
                    argmax: true,
                },
                Kernel::RopeKvAppend(dt),
            ]);
            for head_dim in SDPA_WGMMA_HEAD_DIMS {
                v.push(Kernel::SdpaPrefillWgmma {
                    dtype: dt,
                    head_dim,
                });
            }
            for head_dim in SDPA_RING_HEAD_DIMS {
                for swizzled_kv in [false, true] {
                    v.push(Kernel::SdpaDecodeRing {
                        dtype: dt,
                        head_dim,
                        swizzled_kv,
                    });
                }
            }
            for head_dim in SDPA_HEAD_DIMS {
                for decode in [false, true] {
                    v.push(Kernel::Sdpa {
                        dtype: dt,
                        head_dim,
                        decode,
                    });
                }
            }
            for to in DType::ALL {
                if to != dt {
                    v.push(Kernel::Cast { from: dt, to });
                }
            }
            for index in [DType::I32, DType::I64] {
                v.push(Kernel::IndexSelect { dtype: dt, index });
                v.push(Kernel::Gather { dtype: dt, index });
            }
        }
        v
    }
}
