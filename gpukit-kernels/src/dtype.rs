//! Element types, and the GGML block formats a tensor may be kept in.

pub use crate::shared::QuantFormat;

/// The element type of a tensor: a plain element type, or a GGML block format
/// ([`DType::Quant`]) whose elements are stored in blocks behind shared scales.
///
/// Floats compute in f32 inside every kernel and round once on store (round to nearest even).
/// A quantized tensor's elements are read only through dequantization and the quantized GEMV;
/// every other op refuses it with an error that says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Byte (also used for booleans: 0 is false).
    U8,
    /// Values kept in a GGML block format: [`QuantFormat::block_values`] consecutive values of
    /// the last dimension share a block of [`QuantFormat::block_bytes`] bytes.
    Quant(QuantFormat),
}

impl DType {
    /// Bytes per element; for a block format, bytes per block of [`DType::block_values`]
    /// elements (use [`DType::bytes_for`] for a count of elements).
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I64 => 8,
            DType::U8 => 1,
            DType::Quant(f) => f.block_bytes(),
        }
    }

    /// Elements per storage unit: 1, or a block format's values per block (32 or 256).
    pub const fn block_values(self) -> usize {
        match self {
            DType::Quant(f) => f.block_values(),
            _ => 1,
        }
    }

    /// Bytes holding `n` elements; `None` when `n` is not a whole number of blocks or the count
    /// overflows a `usize`.
    pub const fn bytes_for(self, n: usize) -> Option<usize> {
        let bv = self.block_values();
        if !n.is_multiple_of(bv) {
            return None;
        }
        (n / bv).checked_mul(self.size_in_bytes())
    }

    /// The short name used in kernel entry points: `f32`, `f16`, `bf16`, `i32`, `i64`, `u8`;
    /// for a block format its GGML name (`q8_0`, …, `q6_K`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Quant(f) => f.name(),
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Whether this is a GGML block format ([`DType::Quant`]).
    pub const fn is_quantized(self) -> bool {
        matches!(self, DType::Quant(_))
    }

    /// The block format, for a quantized dtype.
    pub const fn quant_format(self) -> Option<QuantFormat> {
        match self {
            DType::Quant(f) => Some(f),
            _ => None,
        }
    }

    /// Every element (not block-quantized) dtype.
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
    ];
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl QuantFormat {
    /// Every format.
    pub const ALL: [QuantFormat; 6] = [
        QuantFormat::Q8_0,
        QuantFormat::Q4_0,
        QuantFormat::Q4_1,
        QuantFormat::Q4K,
        QuantFormat::Q5K,
        QuantFormat::Q6K,
    ];

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4_1 => 20,
            QuantFormat::Q4K => 144,
            QuantFormat::Q5K => 176,
            QuantFormat::Q6K => 210,
        }
    }

    /// Values per block (32, or 256 for the K-quants).
    pub const fn block_values(self) -> usize {
        match self {
            QuantFormat::Q8_0 | QuantFormat::Q4_0 | QuantFormat::Q4_1 => 32,
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => 256,
        }
    }

    /// The GGML type name (`q8_0`, …, `q4_K`).
    pub const fn name(self) -> &'static str {
        match self {
            QuantFormat::Q8_0 => "q8_0",
            QuantFormat::Q4_0 => "q4_0",
            QuantFormat::Q4_1 => "q4_1",
            QuantFormat::Q4K => "q4_K",
            QuantFormat::Q5K => "q5_K",
            QuantFormat::Q6K => "q6_K",
        }
    }
}

impl std::fmt::Display for QuantFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
