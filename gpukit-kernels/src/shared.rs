//! Values and layouts that the Rust side and the CUDA sources both need, defined once, here.
//!
//! The build script includes this file and writes the header `gpukit_shared.cuh` from
//! `cuda_header`: a `#define` per constant and op code, and a C `struct` per argument block.
//! Every `.cu` file includes it (through `common.cuh`), so no value or layout is written a second
//! time on the CUDA side. The run-time NVRTC fallback compiles against the same generated text.

use gpukit_driver::DevicePtr;

/// A Rust type's spelling in the generated C header: the base type and the array suffix.
pub trait CType {
    /// The C base type (`unsigned int`, `long long`, …).
    fn c_base() -> String;
    /// The array dimensions after the field name (`[3]`, `[3][6]`), empty for a scalar.
    fn c_dims() -> String {
        String::new()
    }
}

macro_rules! c_scalars {
    ($($t:ty => $c:literal),* $(,)?) => {
        $(impl CType for $t {
            fn c_base() -> String {
                $c.into()
            }
        })*
    };
}

c_scalars!(u32 => "unsigned int", i32 => "int", u64 => "unsigned long long", i64 => "long long",
           f32 => "float");

impl<T: CType, const N: usize> CType for [T; N] {
    fn c_base() -> String {
        T::c_base()
    }
    fn c_dims() -> String {
        format!("[{N}]{}", T::c_dims())
    }
}

/// Constants: `pub const NAME: T = value;` here, `#define NAME value` in the header.
macro_rules! shared_constants {
    ($($(#[$m:meta])* $name:ident: $t:ty = $v:expr;)*) => {
        $($(#[$m])* pub const $name: $t = $v;)*
        /// Every shared constant by name, for the header.
        const CONSTANTS: &[(&str, i64)] = &[$((stringify!($name), $name as i64)),*];
    };
}

/// A C-like enum of op codes: the Rust enum (its discriminants are the codes the kernels take),
/// and `#define <PREFIX><NAME> <code>` per variant in the header.
macro_rules! shared_enum {
    ($(#[$m:meta])* pub enum $name:ident: $prefix:literal {
        $($(#[$vm:meta])* $var:ident = $val:literal => $cname:literal,)*
    }) => {
        $(#[$m])*
        #[repr(i32)]
        pub enum $name {
            $($(#[$vm])* $var = $val,)*
        }

        impl $name {
            /// The header's `#define`s for this enum's codes.
            pub(crate) const CUDA_CODES: &[(&str, i64)] = &[$((concat!($prefix, $cname), $val)),*];

            /// The code the kernels take.
            pub const fn code(self) -> i32 {
                self as i32
            }
        }
    };
}

/// An argument block passed to kernels by value: the `#[repr(C)]` Rust struct, and the C
/// `struct` of the same fields in the header. A field's C type follows from its Rust type
/// (`CType`); a device pointer names its C pointer type (`=> "float*"`).
macro_rules! shared_struct {
    ($(#[$m:meta])* pub struct $name:ident as $cname:literal {
        $($(#[$fm:meta])* pub $f:ident: $t:ty $(=> $c:literal)?,)*
    }) => {
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        impl $name {
            /// The C declaration of this struct for the header.
            pub(crate) fn c_struct() -> String {
                let mut s = format!("struct {} {{\n", $cname);
                $(s.push_str(&shared_struct!(@field $f, $t $(, $c)?));)*
                s.push_str("};\n");
                s
            }
        }
    };
    (@field $f:ident, $t:ty, $c:literal) => {
        format!("    {} {};\n", $c, stringify!($f))
    };
    (@field $f:ident, $t:ty) => {
        format!(
            "    {} {}{};\n",
            <$t as CType>::c_base(),
            stringify!($f),
            <$t as CType>::c_dims()
        )
    };
}

shared_constants! {
    /// Threads per block of the grid-stride elementwise kernels and the one-block-per-row
    /// reductions (a power of two: the block reductions halve it).
    BLOCK_THREADS: u32 = 256;
    /// Most dimensions a strided (broadcasting, non-contiguous) kernel handles.
    MAX_DIMS: usize = 6;
    /// 16-byte vectors of a row each lane of `rms_norm` / `add_rms_norm` holds.
    NORM_VEC: usize = 2;
    /// Most rows of x the small-M GEMV kernels take.
    GEMV_MAX_M: usize = 8;
    /// Consumer warps of the Hopper ring GEMV; its blocks have one more, the producer.
    GEMV_RING_WARPS: u32 = 8;
    /// Most stages the ring GEMV has barriers for.
    GEMV_RING_MAX_STAGES: usize = 32;
    /// Most rows of x the quantized GEMV kernels take.
    QGEMV_MAX_ROWS: usize = 8;
    /// Consumer warps of the Hopper quantized-GEMV ring; its blocks have one more, the producer.
    QGEMV_RING_WARPS: u32 = 8;
    /// Weight rows per tile of the quantized-GEMV ring (one MMA's 16).
    QGEMV_RING_ROWS: usize = 16;
    /// Most stages the quantized-GEMV ring has barriers for.
    QGEMV_RING_MAX_STAGES: usize = 8;
    /// Threads per attention block (four warps).
    SDPA_THREADS: u32 = 128;
    /// Elements each row of a Q, K or V tile in shared memory is padded by (so that ldmatrix
    /// reads rows free of bank conflicts); the decode merge area pads its f32 rows alike.
    SDPA_TILE_PAD: usize = 8;
    /// Keys per K/V tile of the decode kernels (the portable one and the Hopper ring).
    SDPA_DECODE_KEYS: usize = 64;
    /// Consumer warps of the Hopper decode ring; its blocks have one more, the producer.
    SDPA_RING_CONSUMERS: u32 = 4;
    /// Warps per block of the portable prefill kernel.
    SDPA_PREFILL_WARPS: usize = 4;
    /// Keys per K/V tile of the portable prefill kernel up to head_dim 128.
    SDPA_PREFILL_KEYS: usize = 64;
    /// Keys per K/V tile at head_dim 256, and of head_dim 128's short-tile variant (for GPUs
    /// whose shared memory cannot hold the long tiles).
    SDPA_PREFILL_KEYS_SHORT: usize = 32;
    /// 16-row mma tiles of queries per warp of the portable prefill kernel up to head_dim 128
    /// (one at head_dim 256, where the registers hold no more).
    SDPA_PREFILL_Q_TILES: usize = 2;
    /// Query rows one decode block handles (GQA group × queries per sequence).
    SDPA_DECODE_ROWS: usize = 16;
    /// Splits each group of the decode combine kernel loads at once.
    SDPA_COMBINE_UNROLL: usize = 8;
    /// Most K/V slots the Hopper decode ring has barriers for.
    SDPA_RING_MAX_STAGES: usize = 8;
    /// Keys per K/V tile of the Hopper prefill kernel at head_dim 64 (two blocks then fit an
    /// SM's registers and shared memory).
    SDPA_WGMMA_KEYS_D64: usize = 64;
    /// Keys per K/V tile of the Hopper prefill kernel at the other head dims.
    SDPA_WGMMA_KEYS: usize = 128;
    /// Threads per block of `rope_kv_append` (one block per token and head).
    ROPE_KV_THREADS: u32 = 128;
    /// Threads per block of the sampler's stages.
    SAMPLE_THREADS: u32 = 256;
    /// Vocabulary ids per block of the sampler's stages (4 consecutive ids per thread).
    SAMPLE_CHUNK: usize = 1024;
    /// Bins of each round of the sampler's radix select.
    SAMPLE_BINS: usize = 1024;
    /// Bytes of a sampler workspace row before its histograms: the total weight (8), the
    /// threshold (4, padded to 8) and two 32-byte radix-select records.
    SAMPLE_HEAD_BYTES: usize = 80;
    /// Threads of the one-block kernels that merge first maxima into a greedy pick
    /// (`sample_greedy_merge` per row, `sample_argmax_parts`).
    ARGMAX_PARTS_THREADS: u32 = 1024;
    /// Depth of the K segments of the batch-invariant linear: each output element is the sum
    /// of its segments' sums, in order (whole pipeline stages of both kernels).
    LINEAR_KSEG: usize = 2048;
    /// Below this many blocks, a row tiling of the batch-invariant linear for few rows gives
    /// way to the narrow one (the projections of few outputs, such as keys and values).
    LINEAR_NARROW_BELOW_BLOCKS: usize = 128;
    /// Below this many blocks, a fused tiling of the batch-invariant linear gives way to the
    /// widest split one, whose K segments run as separate blocks (about two per SM of an H100).
    LINEAR_SPLIT_BELOW_BLOCKS: usize = 256;
    /// Warps per block of the paged attention (a block: one partition of one token's keys,
    /// for up to PAGED_GROUP query heads of one KV head).
    PAGED_WARPS: u32 = 8;
    /// Query heads of one KV head a paged-attention block computes together.
    PAGED_GROUP: u32 = 4;
    /// Key positions per partition of the paged attention (a multiple of 32 ·
    /// PAGED_WARPS): a token whose keys span more partitions is computed by more blocks, whose
    /// results `paged_merge` combines.
    PAGED_PART_KEYS: usize = 1024;
    /// Warps per block of `paged_merge` (one warp per token and query head).
    PAGED_MERGE_WARPS: u32 = 4;
    /// Largest head dimension the paged attention takes (each lane keeps
    /// `PAGED_MAX_HEAD_DIM / 32` query and output values in registers).
    PAGED_MAX_HEAD_DIM: usize = 256;
    /// Most points of a complex FFT one block transforms in shared memory (a Stockham
    /// transform, or Bluestein's padded length).
    FFT_MAX_POINTS: usize = 8192;
    /// Most threads one transform takes (at least `FFT_MAX_POINTS / 16`, so that a thread
    /// holds at most 16 points of a radix-2 stage).
    FFT_MAX_THREADS: u32 = 512;
    /// Fewest threads one transform takes (a warp).
    FFT_MIN_THREADS: u32 = 32;
    /// Threads of a block of the FFT kernel when its transforms are small (several transforms
    /// share the block).
    FFT_BLOCK_THREADS: u32 = 256;
    /// Largest window of the median filter (a thread holds its window in local memory).
    MEDIAN_MAX_SIZE: usize = 255;
    /// Longest row the sort kernel sorts (a block sorts a row in shared memory).
    SORT_MAX_POINTS: usize = 8192;
}

shared_enum! {
    /// Binary elementwise operations.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum BinaryOp: "OP_" {
        /// a + b
        Add = 0 => "ADD",
        /// a - b
        Sub = 1 => "SUB",
        /// a * b
        Mul = 2 => "MUL",
        /// a / b
        Div = 3 => "DIV",
        /// max(a, b) (IEEE fmax: a NaN operand is ignored)
        Maximum = 4 => "MAX",
        /// min(a, b) (IEEE fmin)
        Minimum = 5 => "MIN",
        /// a ^ b
        Pow = 6 => "POW",
        /// atan2(a, b): the angle of the point (b, a) in radians, in [−π, π]
        Atan2 = 7 => "ATAN2",
        /// 1 where a < b, else 0 (0 when either is NaN)
        Lt = 8 => "LT",
    }
}

shared_enum! {
    /// Unary elementwise operations.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum UnaryOp: "U_" {
        /// -x
        Neg = 0 => "NEG",
        /// |x|
        Abs = 1 => "ABS",
        /// e^x
        Exp = 2 => "EXP",
        /// ln x
        Log = 3 => "LOG",
        /// √x
        Sqrt = 4 => "SQRT",
        /// 1/√x
        Rsqrt = 5 => "RSQRT",
        /// sin x
        Sin = 6 => "SIN",
        /// cos x
        Cos = 7 => "COS",
        /// tanh x
        Tanh = 8 => "TANH",
        /// 1 / (1 + e^-x)
        Sigmoid = 9 => "SIGMOID",
        /// max(x, 0)
        Relu = 10 => "RELU",
        /// max(x, 0)² (So et al., "Primer", 2021)
        Relu2 = 11 => "RELU2",
        /// x·Φ(x), exact erf form (Hendrycks & Gimpel 2016)
        GeluErf = 12 => "GELU_ERF",
        /// 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), the tanh approximation
        GeluTanh = 13 => "GELU_TANH",
        /// x·sigmoid(x) (SiLU / Swish)
        Silu = 14 => "SILU",
        /// x²
        Square = 15 => "SQUARE",
        /// 1/x
        Recip = 16 => "RECIP",
        /// x rounded to the nearest integer, ties to even (numpy's `round`)
        Round = 17 => "ROUND",
    }
}

shared_enum! {
    /// Scalar operations: `x op s` or `s op x`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ScalarOp: "S_" {
        /// x + s
        Add = 0 => "ADD",
        /// x · s
        Mul = 1 => "MUL",
        /// x − s
        Sub = 2 => "SUB",
        /// s − x
        RSub = 3 => "RSUB",
        /// x / s
        Div = 4 => "DIV",
        /// s / x
        RDiv = 5 => "RDIV",
        /// x ^ s
        Pow = 6 => "POW",
        /// max(x, s)
        Maximum = 7 => "MAX",
        /// min(x, s)
        Minimum = 8 => "MIN",
    }
}

shared_enum! {
    /// Reductions. Max and min propagate NaN.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ReduceOp: "R_" {
        /// Σ
        Sum = 0 => "SUM",
        /// Σ / n
        Mean = 1 => "MEAN",
        /// max
        Max = 2 => "MAX",
        /// min
        Min = 3 => "MIN",
    }
}

shared_enum! {
    /// A GGML block quantization format (ggml's `ggml_type`): the layouts GGUF files store
    /// weights in. Its code is what the quantized kernels take (`QFMT_*` in the header). The
    /// CPU reference dequantization and quantizers live in `gpukit_ops::quant`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum QuantFormat: "QFMT_" {
        /// 8-bit values, one f16 scale per 32.
        Q8_0 = 0 => "Q8_0",
        /// 4-bit values offset by 8, one f16 scale per 32.
        Q4_0 = 1 => "Q4_0",
        /// 4-bit values, f16 scale and f16 minimum per 32.
        Q4_1 = 2 => "Q4_1",
        /// 4-bit values in 256-value super-blocks of eight 32-value sub-blocks (6-bit
        /// scales/mins).
        Q4K = 3 => "Q4_K",
        /// 5-bit values, laid out like Q4_K plus a plane of fifth bits.
        Q5K = 4 => "Q5_K",
        /// 6-bit values in 256-value super-blocks of sixteen 16-value sub-blocks (8-bit scales).
        Q6K = 5 => "Q6_K",
    }
}

shared_struct! {
    /// The output shape and the element strides of up to three operands, for the `_strided`
    /// kernels. A stride of 0 broadcasts.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct StridedIndex as "StridedIndex" {
        /// Number of dimensions used.
        pub ndim: u32,
        /// Padding (keeps `shape` 8-byte aligned, as in C).
        pub pad: u32,
        /// Output shape.
        pub shape: [u64; MAX_DIMS],
        /// Element strides of operands 0, 1, 2.
        pub stride: [[i64; MAX_DIMS]; 3],
    }
}

shared_struct! {
    /// Arguments of the attention kernels. Strides are in elements, for the batch, head and row
    /// dimensions of `[batch, heads, len, head_dim]` operands (the head dimension is
    /// contiguous).
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct AttentionArgs as "AttnArgs" {
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
        /// `attention::prefill` chose.
        pub chunk: u32,
        /// Decode: splits per (batch, KV head).
        pub splits: u32,
        /// Decode: K/V tiles in flight (1 to 3), as
        /// `attention::decode` sized the shared memory for.
        pub stages: u32,
        /// 1 where K and V are laid out pre-swizzled (gpukit-ops' `KvLayout::Swizzled`: within
        /// each whole 128-byte block of a key's row, 16-byte chunk `j` lies at `j ^ (key mod
        /// 8)`, the key counted from the operand's first).
        pub kv_swizzled: u32,
        /// Zero (keeps `partial` 8-byte aligned without implicit padding).
        pub reserved: u32,
        /// Decode with `splits > 1`: the f32 workspace of per-split partial results.
        pub partial: DevicePtr => "float*",
        /// Decode: when not null, an i32 on the device holding the first query's position; the
        /// kernel then attends `min(kv_len, position + q_len)` keys (`kv_len` is the capacity).
        pub position: DevicePtr => "const int*",
    }
}

shared_struct! {
    /// Arguments of the sampler's stages.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct SamplerArgs as "SamplerArgs" {
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
        /// (`sampling::chunks`).
        pub chunks: u32,
        /// The request's seed.
        pub seed: u64,
        /// Workspace bytes per row (`sampling::row_bytes`).
        pub row_bytes: u64,
    }
}

shared_enum! {
    /// What the FFT kernel transforms.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum FftMode: "FFT_" {
        /// Complex to complex.
        C2c = 0 => "C2C",
        /// Real to the `n / 2 + 1` non-negative-frequency bins.
        R2c = 1 => "R2C",
        /// `n / 2 + 1` bins of a Hermitian spectrum to `n` real samples.
        C2r = 2 => "C2R",
    }
}

shared_enum! {
    /// What a real-to-complex transform writes per bin.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum FftOutput: "FFT_OUT_" {
        /// The complex value (two f32).
        Complex = 0 => "COMPLEX",
        /// Its magnitude |X| (one f32).
        Magnitude = 1 => "MAGNITUDE",
        /// Its power |X|² (one f32).
        Power = 2 => "POWER",
    }
}

shared_enum! {
    /// A window function the FFT kernel computes as it loads (periodic, as for spectral
    /// analysis: period `win_length`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum WindowFn: "WIN_" {
        /// No analytic window (the `window` pointer, or none).
        None = 0 => "NONE",
        /// Hann: 0.5 − 0.5·cos(2πk/N).
        Hann = 1 => "HANN",
        /// Hamming: 0.54 − 0.46·cos(2πk/N).
        Hamming = 2 => "HAMMING",
        /// Blackman: 0.42 − 0.5·cos(2πk/N) + 0.08·cos(4πk/N).
        Blackman = 3 => "BLACKMAN",
        /// Ones.
        Rectangular = 4 => "RECTANGULAR",
    }
}

shared_enum! {
    /// How `pad` fills the samples outside a signal (numpy's `np.pad` modes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum PadMode: "PAD_" {
        /// A constant value.
        Constant = 0 => "CONSTANT",
        /// The edge sample repeated.
        Edge = 1 => "EDGE",
        /// Mirrored about the edge sample, which is not repeated (`[3 2 | 1 2 3 | 2 1]`).
        Reflect = 2 => "REFLECT",
        /// Mirrored with the edge sample repeated (`[2 1 | 1 2 3 | 3 2]`; numpy's
        /// `"symmetric"`, scipy.ndimage's `"reflect"`).
        Symmetric = 3 => "SYMMETRIC",
    }
}

shared_struct! {
    /// Arguments of the FFT kernel. A transform's elements are `elem` f32 apart (complex values
    /// are two adjacent f32); transform `t` of `count` starts at `(t / inner) · stride[0] +
    /// (t % inner) · stride[1]` f32 from the base, on both sides.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct FftArgs as "FftArgs" {
        /// The input.
        pub input: DevicePtr => "const float*",
        /// The output.
        pub output: DevicePtr => "float*",
        /// Null, or `n` f32 that multiply the real input (R2C) or the real output (C2R).
        pub window: DevicePtr => "const float*",
        /// Input strides (outer, inner) between transforms, in f32.
        pub in_stride: [i64; 2],
        /// Output strides (outer, inner) between transforms, in f32.
        pub out_stride: [i64; 2],
        /// Input stride between a transform's elements, in f32.
        pub in_elem: i64,
        /// Output stride between a transform's elements, in f32.
        pub out_elem: i64,
        /// Transforms per outer index.
        pub inner: u32,
        /// Transforms.
        pub count: u32,
        /// The transform's length (of the real signal for R2C and C2R).
        pub n: u32,
        /// The complex FFT run in shared memory: `n` (C2C, or R2C/C2R of odd `n`), `n / 2`
        /// (R2C/C2R of even `n`), or Bluestein's padded length.
        pub points: u32,
        /// 1 when `points` is Bluestein's padded length (the length is not 2^a·3^b·5^c).
        pub bluestein: u32,
        /// [`FftMode`] code.
        pub mode: u32,
        /// [`FftOutput`] code (R2C only).
        pub out_kind: u32,
        /// −1 for the forward transform (e^(−2πi jk/n)), +1 for the inverse (unnormalised).
        pub sign: i32,
        /// Multiplies every output value.
        pub scale: f32,
        /// Transforms per block.
        pub per_block: u32,
        /// Threads per transform (a power of two).
        pub threads: u32,
        /// [`WindowFn`] code: when not `None` (and `window` is null), the kernel computes the
        /// window, `win_length` samples long starting at sample `win_offset`, zero elsewhere.
        pub window_fn: u32,
        /// The analytic window's length.
        pub win_length: u32,
        /// Where the analytic window starts within the `n` samples.
        pub win_offset: u32,
        /// Zero (keeps the struct a multiple of 8 bytes without implicit padding).
        pub reserved: u32,
    }
}

/// Bytes of the decode attention kernels' four-warp merge area at `head_dim`: per warp and
/// query row, `head_dim + SDPA_TILE_PAD` f32 of the output (padded rows), then per row and warp its
/// running maximum and sum. The header defines `SDPA_MERGE_BYTES(D)` by the same formula and
/// checks it against this function at each built head dim.
pub const fn sdpa_merge_bytes(head_dim: usize) -> usize {
    (4 * SDPA_DECODE_ROWS * (head_dim + SDPA_TILE_PAD) + 2 * 4 * SDPA_DECODE_ROWS) * 4
}

/// One tiling of the batch-invariant linear (`cuda/linear.cu`, kernel `linear_t<i>_<dtype>` for
/// entry `i` of [`LINEAR_TILES`]). Every tiling sums an output element the same way, so which
/// one runs changes the speed, never the bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearTile {
    /// Rows of x this tiling is chosen up to (the last entry: any).
    pub max_rows: usize,
    /// Rows of x per block.
    pub rows: usize,
    /// Outputs (weight rows) per block.
    pub cols: usize,
    /// Reduction depth of one pipeline stage.
    pub depth: usize,
    /// cp.async pipeline stages (x and weight tiles in shared memory at once).
    pub stages: usize,
    /// Rows of one warp's tile (a multiple of 16, the mma's).
    pub warp_rows: usize,
    /// Outputs of one warp's tile (8, or a multiple of 16).
    pub warp_cols: usize,
    /// A block walks every K segment (keeping the finished segments' sum in registers); else
    /// each block sums one segment and a reduction adds them up.
    pub fused: bool,
    /// Not chosen by rows: taken instead of the row tiling for up to `max_rows` rows when that
    /// one would launch fewer than `LINEAR_NARROW_BELOW_BLOCKS` blocks.
    pub narrow: bool,
}

impl LinearTile {
    /// Threads per block: 32 per warp tile.
    pub const fn threads(&self) -> u32 {
        ((self.rows / self.warp_rows) * (self.cols / self.warp_cols) * 32) as u32
    }

    /// Dynamic shared memory per block for elements of `elem_bytes` bytes: every stage's x and
    /// weight tiles, rows padded by 8 elements.
    pub const fn shared_bytes(&self, elem_bytes: usize) -> u32 {
        (elem_bytes * self.stages * (self.rows + self.cols) * (self.depth + 8)) as u32
    }
}

/// The batch-invariant linear's tilings, by rows of x (measured on an H200 with Llama-3.1-8B's
/// projections): up to 64 rows the weights' bandwidth bounds the product, and narrow row tiles
/// with deep stages and one block per K segment keep the most bytes in flight; up to 256 rows
/// 8-warp 128 × 128 tiles, one segment a block (half the accumulator registers of a fused
/// tile); above that, fused 128 × 128 tiles, which need no workspace. A narrow tiling of 32
/// outputs a block serves few rows of projections with few outputs. Every tiling's shared memory
/// fits the 99 KiB a block may have on sm_86 and sm_89.
pub const LINEAR_TILES: [LinearTile; 6] = {
    const fn t(
        max_rows: usize,
        [rows, cols, depth, stages, warp_rows, warp_cols]: [usize; 6],
        fused: bool,
    ) -> LinearTile {
        LinearTile {
            max_rows,
            rows,
            cols,
            depth,
            stages,
            warp_rows,
            warp_cols,
            fused,
            narrow: false,
        }
    }
    [
        t(16, [16, 128, 64, 4, 16, 16], false),
        t(32, [32, 128, 64, 4, 32, 32], false),
        t(64, [64, 128, 64, 3, 32, 64], false),
        t(256, [128, 128, 32, 4, 64, 32], false),
        t(usize::MAX, [128, 128, 32, 4, 64, 32], true),
        LinearTile {
            narrow: true,
            ..t(16, [16, 32, 128, 3, 16, 8], false)
        },
    ]
};

/// Head dims the header checks [`sdpa_merge_bytes`] at (the attention kernels' own).
const MERGE_CHECKED_HEAD_DIMS: [usize; 5] = [64, 80, 96, 128, 256];

/// The text of `gpukit_shared.cuh`: every shared constant, op code and argument struct.
pub fn cuda_header() -> String {
    let mut h = String::from(
        "// Generated by gpukit-kernels' build script from src/shared.rs: edit that file, not \
         this one.\n#pragma once\n\n",
    );
    let codes = [
        CONSTANTS,
        BinaryOp::CUDA_CODES,
        UnaryOp::CUDA_CODES,
        ScalarOp::CUDA_CODES,
        ReduceOp::CUDA_CODES,
        QuantFormat::CUDA_CODES,
        FftMode::CUDA_CODES,
        FftOutput::CUDA_CODES,
        PadMode::CUDA_CODES,
        WindowFn::CUDA_CODES,
    ];
    for list in codes {
        for (name, value) in list {
            h.push_str(&format!("#define {name} {value}\n"));
        }
        h.push('\n');
    }
    for s in [
        StridedIndex::c_struct(),
        AttentionArgs::c_struct(),
        SamplerArgs::c_struct(),
        FftArgs::c_struct(),
    ] {
        h.push_str(&s);
        h.push('\n');
    }
    // X(index, rows, cols, depth, stages, warp_rows, warp_cols, fused) per tiling.
    h.push_str("#define LINEAR_TILES(X)");
    for (i, t) in LINEAR_TILES.iter().enumerate() {
        h.push_str(&format!(
            " \\\n    X({i}, {}, {}, {}, {}, {}, {}, {})",
            t.rows, t.cols, t.depth, t.stages, t.warp_rows, t.warp_cols, t.fused
        ));
    }
    h.push_str("\n\n");
    h.push_str("#define SDPA_MERGE_BYTES(D) ");
    h.push_str("((4 * SDPA_DECODE_ROWS * ((D) + 8) + 2 * 4 * SDPA_DECODE_ROWS) * 4)\n");
    for d in MERGE_CHECKED_HEAD_DIMS {
        h.push_str(&format!(
            "static_assert(SDPA_MERGE_BYTES({d}) == {}, \"sdpa_merge_bytes({d})\");\n",
            sdpa_merge_bytes(d)
        ));
    }
    h
}
