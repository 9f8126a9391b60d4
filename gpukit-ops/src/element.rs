//! Element types and typed host storage.

use gpukit_driver::DeviceCopy;
use gpukit_kernels::DType;
use half::{bf16, f16};

use crate::{Error, Result};

/// A Rust type that is the element of a tensor of dtype [`Element::DTYPE`].
pub trait Element: DeviceCopy + PartialEq + std::fmt::Debug {
    /// The tensor dtype.
    const DTYPE: DType;
    /// Exact for every type but i64 beyond 2^53.
    fn to_f64(self) -> f64;
    /// Rounds to nearest (even) for floats; saturates and truncates toward zero for integers.
    fn from_f64(v: f64) -> Self;
    /// Wraps a vector as host data.
    fn into_data(v: Vec<Self>) -> HostData;
    /// The elements, if `data` holds this type.
    fn slice(data: &HostData) -> Option<&[Self]>;
}

macro_rules! element {
    ($t:ty, $dt:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn into_data(v: Vec<Self>) -> HostData {
                HostData::$dt(v)
            }
            fn slice(data: &HostData) -> Option<&[Self]> {
                match data {
                    HostData::$dt(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

element!(f32, F32, f64::from, |v: f64| v as f32);
element!(f16, F16, |x: f16| x.to_f64(), f16::from_f64);
element!(bf16, BF16, |x: bf16| x.to_f64(), bf16::from_f64);
element!(i32, I32, f64::from, |v: f64| v as i32);
element!(i64, I64, |x: i64| x as f64, |v: f64| v as i64);
element!(u8, U8, f64::from, |v: f64| v as u8);

/// Host storage: a typed vector per dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// f32 elements.
    F32(Vec<f32>),
    /// f16 elements.
    F16(Vec<f16>),
    /// bf16 elements.
    BF16(Vec<bf16>),
    /// i32 elements.
    I32(Vec<i32>),
    /// i64 elements.
    I64(Vec<i64>),
    /// u8 elements.
    U8(Vec<u8>),
}

/// Runs `$body` with `$v` bound to the typed vector inside a `HostData`.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            HostData::F32($v) => $body,
            HostData::F16($v) => $body,
            HostData::BF16($v) => $body,
            HostData::I32($v) => $body,
            HostData::I64($v) => $body,
            HostData::U8($v) => $body,
        }
    };
}

impl HostData {
    /// `n` zeros of `dtype` (for a block-quantized dtype, the zeroed bytes of `n` values'
    /// blocks).
    ///
    /// # Errors
    /// [`Error::HostOutOfMemory`] when the allocation fails (instead of aborting the process);
    /// [`Error::Shape`] for a block-quantized dtype when `n` is not whole blocks.
    pub fn zeros(dtype: DType, n: usize) -> Result<Self> {
        // Zeroed by the allocator (calloc: untouched pages cost nothing until written, as a
        // CPU KV cache for a long context needs), failing as an error.
        fn zeroed<T: bytemuck::Zeroable>(n: usize) -> Result<Vec<T>> {
            bytemuck::allocation::try_zeroed_vec(n).map_err(|()| Error::HostOutOfMemory {
                bytes: n.saturating_mul(std::mem::size_of::<T>()),
            })
        }
        Ok(match dtype {
            DType::F32 => HostData::F32(zeroed(n)?),
            DType::F16 => HostData::F16(zeroed(n)?),
            DType::BF16 => HostData::BF16(zeroed(n)?),
            DType::I32 => HostData::I32(zeroed(n)?),
            DType::I64 => HostData::I64(zeroed(n)?),
            DType::U8 => HostData::U8(zeroed(n)?),
            // A block-quantized dtype's storage is its blocks' bytes (zeroed blocks hold zeros),
            // as is that of any dtype `DType` (non-exhaustive) gains before it has its own.
            _ => HostData::U8(zeroed(dtype.bytes_for(n).ok_or_else(|| {
                Error::shape(
                    "zeros",
                    format!("{n} {dtype} values are not whole blocks or overflow a byte count"),
                )
            })?)?),
        })
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::F32(_) => DType::F32,
            HostData::F16(_) => DType::F16,
            HostData::BF16(_) => DType::BF16,
            HostData::I32(_) => DType::I32,
            HostData::I64(_) => DType::I64,
            HostData::U8(_) => DType::U8,
        }
    }

    /// Element count.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as f64.
    pub fn get(&self, i: usize) -> f64 {
        with_data!(self, v => v[i].to_f64())
    }

    /// Sets element `i` from f64 (rounded to the dtype).
    pub fn set(&mut self, i: usize, x: f64) {
        match self {
            HostData::F32(v) => v[i] = f32::from_f64(x),
            HostData::F16(v) => v[i] = f16::from_f64(x),
            HostData::BF16(v) => v[i] = bf16::from_f64(x),
            HostData::I32(v) => v[i] = i32::from_f64(x),
            HostData::I64(v) => v[i] = i64::from_f64(x),
            HostData::U8(v) => v[i] = u8::from_f64(x),
        }
    }

    /// Copies element `src` of `from` (same dtype) to element `dst`, bit for bit.
    pub fn copy_elem(&mut self, dst: usize, from: &HostData, src: usize) {
        self.copy_range(dst, from, src, 1);
    }

    /// Copies elements `src..src + n` of `from` to `dst..dst + n`: bit for bit (one memcpy)
    /// when the dtypes match, through f64 otherwise.
    pub fn copy_range(&mut self, dst: usize, from: &HostData, src: usize, n: usize) {
        match (self, from) {
            (HostData::F32(d), HostData::F32(s)) => {
                d[dst..dst + n].copy_from_slice(&s[src..src + n])
            }
            (HostData::F16(d), HostData::F16(s)) => {
                d[dst..dst + n].copy_from_slice(&s[src..src + n])
            }
            (HostData::BF16(d), HostData::BF16(s)) => {
                d[dst..dst + n].copy_from_slice(&s[src..src + n]);
            }
            (HostData::I32(d), HostData::I32(s)) => {
                d[dst..dst + n].copy_from_slice(&s[src..src + n])
            }
            (HostData::I64(d), HostData::I64(s)) => {
                d[dst..dst + n].copy_from_slice(&s[src..src + n])
            }
            (HostData::U8(d), HostData::U8(s)) => d[dst..dst + n].copy_from_slice(&s[src..src + n]),
            (d, _) => {
                for i in 0..n {
                    d.set(dst + i, from.get(src + i));
                }
            }
        }
    }

    /// The raw bytes (for uploads).
    pub fn as_bytes(&self) -> &[u8] {
        with_data!(self, v => {
            // SAFETY: every element type is plain data without padding; the slice covers exactly
            // the vector's initialised elements.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(&v[..])) }
        })
    }

    /// Host data of `dtype` from raw bytes (a download); a block-quantized dtype's is its bytes
    /// (`U8`).
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> Self {
        fn typed<T: Element + Default>(bytes: &[u8]) -> Vec<T> {
            let n = bytes.len() / std::mem::size_of::<T>();
            let mut v = vec![T::default(); n];
            // SAFETY: `v` has room for exactly `n * size_of::<T>()` bytes; every bit pattern is a
            // valid `T` (`DeviceCopy`).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    v.as_mut_ptr().cast::<u8>(),
                    n * std::mem::size_of::<T>(),
                );
            }
            v
        }
        match dtype {
            DType::F32 => HostData::F32(typed(bytes)),
            DType::F16 => HostData::F16(typed(bytes)),
            DType::BF16 => HostData::BF16(typed(bytes)),
            DType::I32 => HostData::I32(typed(bytes)),
            DType::I64 => HostData::I64(typed(bytes)),
            _ => HostData::U8(bytes.to_vec()),
        }
    }
}
