//! GGUF reader (versions 2 and 3, little-endian), as llama.cpp's `ggml/docs/gguf.md` defines it:
//!
//! ```text
//! "GGUF" u32 version u64 tensor_count u64 metadata_kv_count
//! metadata_kv_count × (string key, u32 value_type, value)
//! tensor_count × (string name, u32 n_dims, n_dims × u64 ne, u32 ggml_type, u64 offset)
//! padding to general.alignment (default 32), then the tensor data
//! ```
//!
//! Strings are a u64 length and UTF-8 bytes; arrays a u32 element type, a u64 count and the
//! elements. `ne[0]` is the fastest-varying dimension. Tensor offsets are relative to the start
//! of the data section and aligned.
//!
//! Every length, count, dimension, offset and size is checked against the file before it is
//! used, so a malformed or truncated file is an error naming the file (and the tensor), never a
//! panic, a huge allocation or a read out of bounds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Most dimensions of a GGML tensor.
pub const MAX_DIMS: usize = 4;

/// The default `general.alignment`.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// A GGML tensor type (the ids of `enum ggml_type`) with a known block layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// 4-bit, one f16 scale per 32.
    Q4_0,
    /// 4-bit, f16 scale and min per 32.
    Q4_1,
    /// 5-bit, one f16 scale per 32.
    Q5_0,
    /// 5-bit, f16 scale and min per 32.
    Q5_1,
    /// 8-bit, one f16 scale per 32.
    Q8_0,
    /// 8-bit, f16 scale and sum per 32.
    Q8_1,
    /// 2-bit K-quant (256-value super-blocks).
    Q2K,
    /// 3-bit K-quant.
    Q3K,
    /// 4-bit K-quant.
    Q4K,
    /// 5-bit K-quant.
    Q5K,
    /// 6-bit K-quant.
    Q6K,
    /// 8-bit K-quant (intermediate format).
    Q8K,
    /// 8-bit integer.
    I8,
    /// 16-bit integer.
    I16,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 64-bit float.
    F64,
    /// bfloat16.
    BF16,
}

impl GgmlType {
    /// The type of GGML id `id`, if its layout is known here.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            9 => GgmlType::Q8_1,
            10 => GgmlType::Q2K,
            11 => GgmlType::Q3K,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            15 => GgmlType::Q8K,
            24 => GgmlType::I8,
            25 => GgmlType::I16,
            26 => GgmlType::I32,
            27 => GgmlType::I64,
            28 => GgmlType::F64,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    /// GGML's name (`f32`, `q4_K`, …).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q8_1 => "q8_1",
            GgmlType::Q2K => "q2_K",
            GgmlType::Q3K => "q3_K",
            GgmlType::Q4K => "q4_K",
            GgmlType::Q5K => "q5_K",
            GgmlType::Q6K => "q6_K",
            GgmlType::Q8K => "q8_K",
            GgmlType::I8 => "i8",
            GgmlType::I16 => "i16",
            GgmlType::I32 => "i32",
            GgmlType::I64 => "i64",
            GgmlType::F64 => "f64",
            GgmlType::BF16 => "bf16",
        }
    }

    /// (values per block, bytes per block).
    pub fn block(self) -> (u64, u64) {
        match self {
            GgmlType::F32 | GgmlType::I32 => (1, 4),
            GgmlType::F16 | GgmlType::BF16 | GgmlType::I16 => (1, 2),
            GgmlType::I8 => (1, 1),
            GgmlType::I64 | GgmlType::F64 => (1, 8),
            GgmlType::Q4_0 => (32, 18),
            GgmlType::Q4_1 => (32, 20),
            GgmlType::Q5_0 => (32, 22),
            GgmlType::Q5_1 => (32, 24),
            GgmlType::Q8_0 => (32, 34),
            GgmlType::Q8_1 => (32, 36),
            GgmlType::Q2K => (256, 84),
            GgmlType::Q3K => (256, 110),
            GgmlType::Q4K => (256, 144),
            GgmlType::Q5K => (256, 176),
            GgmlType::Q6K => (256, 210),
            GgmlType::Q8K => (256, 292),
        }
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `float32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `array` (of one element type).
    Array(Vec<Value>),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float64`.
    F64(f64),
}

impl Value {
    /// An unsigned integer of any width (non-negative signed ones too).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(u64::from(v)),
            Value::U16(v) => Some(u64::from(v)),
            Value::U32(v) => Some(u64::from(v)),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float of either width.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(f64::from(v)),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor's description.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name.
    pub name: String,
    /// Dimensions, `ne[0]` (fastest-varying) first.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section (aligned).
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
}

impl TensorInfo {
    /// Number of values.
    pub fn numel(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Dimensions in row-major order (slowest first, as a `Tensor` shape).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed GGUF header: metadata and tensor infos (no tensor data).
#[derive(Clone, Debug)]
pub struct GgufHeader {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment`.
    pub alignment: u64,
    /// Offset of the data section in the file.
    pub data_offset: u64,
    index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
}

impl GgufHeader {
    /// Parses the header of a file of `bytes` (the whole file: tensor extents are checked
    /// against its length). `file` names it in errors.
    ///
    /// # Errors
    /// [`Error::Format`] for anything malformed, truncated or out of bounds.
    pub fn parse(bytes: &[u8], file: &Path) -> Result<GgufHeader> {
        let mut r = Reader {
            bytes,
            pos: 0,
            file,
            elements: 0,
        };
        let magic = r.take(4, "the magic")?;
        if magic != b"GGUF" {
            return Err(r.err(format!(
                "not a GGUF file (starts with {magic:02x?}, expected \"GGUF\")"
            )));
        }
        let version = r.u32("the version")?;
        if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
            return Err(r.err("a big-endian GGUF file; only little-endian files are supported"));
        }
        if !(2..=3).contains(&version) {
            return Err(r.err(format!(
                "GGUF version {version}; versions 2 and 3 are supported"
            )));
        }
        let n_tensors = r.u64("the tensor count")?;
        let n_kv = r.u64("the metadata count")?;
        // Each metadata entry takes at least 12 bytes and each tensor info at least 24.
        r.fits(n_kv, 12, "metadata entries")?;
        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut index = HashMap::new();
        for i in 0..n_kv {
            let key = r.string(&format!("metadata key {i}"))?;
            let ty = r.u32(&format!("the type of `{key}`"))?;
            let value = r.value(ty, &key, 0)?;
            if index.insert(key.clone(), metadata.len()).is_some() {
                return Err(r.err(format!("metadata key `{key}` appears twice")));
            }
            metadata.push((key, value));
        }
        let alignment = match index.get("general.alignment") {
            Some(&i) => {
                let a = metadata[i].1.as_u64().unwrap_or(0);
                if a == 0 || !a.is_power_of_two() {
                    return Err(r.err(format!(
                        "general.alignment {:?} is not a power of two",
                        metadata[i].1
                    )));
                }
                a
            }
            None => DEFAULT_ALIGNMENT,
        };
        r.fits(n_tensors, 24, "tensor infos")?;
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut tensor_index = HashMap::new();
        for i in 0..n_tensors {
            let name = r.string(&format!("the name of tensor {i}"))?;
            let n_dims = r.u32(&format!("the rank of `{name}`"))? as usize;
            if n_dims > MAX_DIMS {
                return Err(
                    r.tensor_err(&name, format!("{n_dims} dimensions (at most {MAX_DIMS})"))
                );
            }
            let mut dims = Vec::with_capacity(n_dims);
            for _ in 0..n_dims {
                dims.push(r.u64(&format!("the dimensions of `{name}`"))?);
            }
            let type_id = r.u32(&format!("the type of `{name}`"))?;
            let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| {
                r.tensor_err(&name, format!("unknown or unsupported GGML type {type_id}"))
            })?;
            let offset = r.u64(&format!("the offset of `{name}`"))?;
            let numel = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| r.tensor_err(&name, format!("dimensions {dims:?} overflow")))?;
            let (bv, bb) = ggml_type.block();
            let row = dims.first().copied().unwrap_or(1);
            if row % bv != 0 {
                return Err(r.tensor_err(
                    &name,
                    format!(
                        "row length {row} is not a whole number of {bv}-value {} blocks",
                        ggml_type.name()
                    ),
                ));
            }
            let bytes = (numel / bv)
                .checked_mul(bb)
                .ok_or_else(|| r.tensor_err(&name, "size overflows".into()))?;
            if offset % alignment != 0 {
                return Err(r.tensor_err(
                    &name,
                    format!("data offset {offset} is not aligned to {alignment}"),
                ));
            }
            if tensor_index.insert(name.clone(), tensors.len()).is_some() {
                return Err(r.tensor_err(&name, "appears twice".into()));
            }
            tensors.push(TensorInfo {
                name,
                dims,
                ggml_type,
                offset,
                bytes,
            });
        }
        let data_offset = (r.pos as u64).next_multiple_of(alignment);
        let file_len = bytes.len() as u64;
        for t in &tensors {
            let end = data_offset
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(t.bytes));
            if end.is_none_or(|e| e > file_len) {
                return Err(r.tensor_err(
                    &t.name,
                    format!(
                        "data at {} + {} bytes runs past the end of the file ({file_len} bytes)",
                        data_offset.saturating_add(t.offset),
                        t.bytes
                    ),
                ));
            }
        }
        Ok(GgufHeader {
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
            index,
            tensor_index,
        })
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// A tensor's description.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }
}

/// A GGUF file, memory-mapped: its header and its tensors' bytes.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    header: GgufHeader,
    map: memmap2::Mmap,
}

impl GgufFile {
    /// Opens and parses `path` (the data is mapped, not read).
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or mapped; [`Error::Format`] if it is not a
    /// valid GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref().to_path_buf();
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::open(&path).map_err(io)?;
        // SAFETY: the map is read-only; gpukit never writes the file, and a file changed by
        // another process while mapped is outside what any mmap-based loader can defend against
        // (the same contract as safetensors' and llama.cpp's loaders).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let header = GgufHeader::parse(&map, &path)?;
        Ok(GgufFile { path, header, map })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// A tensor's description and bytes.
    ///
    /// # Errors
    /// [`Error::Missing`] if the file has no such tensor.
    pub fn tensor(&self, name: &str) -> Result<(&TensorInfo, &[u8])> {
        let t = self.header.tensor(name).ok_or_else(|| Error::Missing {
            file: self.path.clone(),
            what: format!("tensor `{name}`"),
        })?;
        // In bounds: checked when the header was parsed.
        let start = (self.header.data_offset + t.offset) as usize;
        Ok((t, &self.map[start..start + t.bytes as usize]))
    }
}

/// A bounds-checked little-endian cursor.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a Path,
    /// Metadata array elements read so far (all arrays).
    elements: u64,
}

/// Arrays nest at most this deep (GGUF writers produce depth 1).
const MAX_ARRAY_DEPTH: usize = 4;

/// Metadata array elements a header may hold in all (2^24; a tokenizer's vocabulary, scores,
/// types and merges come to a few million at most). Each element becomes a [`Value`] several
/// times its size in the file, so this bounds the memory a header can ask for.
const MAX_METADATA_ELEMENTS: u64 = 1 << 24;

impl<'a> Reader<'a> {
    fn err(&self, detail: impl Into<String>) -> Error {
        Error::Format {
            file: self.file.to_path_buf(),
            detail: format!("{} (at byte {})", detail.into(), self.pos),
        }
    }

    fn tensor_err(&self, name: &str, detail: String) -> Error {
        self.err(format!("tensor `{name}`: {detail}"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() - self.pos < n {
            return Err(self.err(format!(
                "the file ends inside {what} ({n} bytes needed, {} left)",
                self.bytes.len() - self.pos
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Refuses a count of items of at least `min_bytes` each that the rest of the file cannot
    /// hold (so nothing is allocated for it).
    fn fits(&self, count: u64, min_bytes: u64, what: &str) -> Result<()> {
        let left = (self.bytes.len() - self.pos) as u64;
        if count.checked_mul(min_bytes).is_none_or(|n| n > left) {
            return Err(self.err(format!(
                "{count} {what} cannot fit in the {left} bytes left"
            )));
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let len = self.u64(what)?;
        self.fits(len, 1, "string bytes")?;
        let s = self.take(len as usize, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| self.err(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, key: &str, depth: usize) -> Result<Value> {
        Ok(match ty {
            0 => Value::U8(u8::from_le_bytes(self.array(key)?)),
            1 => Value::I8(i8::from_le_bytes(self.array(key)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(u32::from_le_bytes(self.array(key)?)),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.err(format!("`{key}`: bool byte {b}"))),
            },
            8 => Value::String(self.string(key)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.err(format!("`{key}`: arrays nested too deep")));
                }
                let elem = self.u32(key)?;
                let count = self.u64(key)?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    _ => {
                        return Err(self.err(format!("`{key}`: unknown array element type {elem}")));
                    }
                };
                self.fits(count, min, "array elements")?;
                self.elements = self.elements.saturating_add(count);
                if self.elements > MAX_METADATA_ELEMENTS {
                    return Err(self.err(format!(
                        "`{key}`: metadata arrays of more than {MAX_METADATA_ELEMENTS} elements \
                         in all"
                    )));
                }
                let mut v = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    v.push(self.value(elem, key, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(u64::from_le_bytes(self.array(key)?)),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            _ => return Err(self.err(format!("`{key}`: unknown value type {ty}"))),
        })
    }
}

/// A minimal GGUF v3 writer: metadata values and tensors, aligned to 32 bytes. gpukit does not
/// convert models; this builds small files for tests and tools.
#[derive(Debug, Default)]
pub struct GgufWriter {
    kv: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
}

impl GgufWriter {
    /// A GGUF string: u64 length, then UTF-8 bytes.
    pub fn string(s: &str) -> Vec<u8> {
        let mut out = (s.len() as u64).to_le_bytes().to_vec();
        out.extend(s.as_bytes());
        out
    }

    /// A metadata entry of GGUF value type `ty` (0 u8 … 12 f64) with its encoded `value`.
    pub fn kv(&mut self, key: &str, ty: u32, value: &[u8]) -> &mut Self {
        self.kv.extend(Self::string(key));
        self.kv.extend(ty.to_le_bytes());
        self.kv.extend(value);
        self.n_kv += 1;
        self
    }

    /// A string entry.
    pub fn kv_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.kv(key, 8, &Self::string(value))
    }

    /// A u32 entry.
    pub fn kv_u32(&mut self, key: &str, value: u32) -> &mut Self {
        self.kv(key, 4, &value.to_le_bytes())
    }

    /// An f32 entry.
    pub fn kv_f32(&mut self, key: &str, value: f32) -> &mut Self {
        self.kv(key, 6, &value.to_le_bytes())
    }

    /// An array-of-strings entry.
    pub fn kv_strings(&mut self, key: &str, values: &[String]) -> &mut Self {
        let mut v = 8u32.to_le_bytes().to_vec();
        v.extend((values.len() as u64).to_le_bytes());
        for s in values {
            v.extend(Self::string(s));
        }
        self.kv(key, 9, &v)
    }

    /// A tensor: `dims` in GGML order (innermost first), GGML type id `ty`, raw `data`.
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, data: &[u8]) -> &mut Self {
        let offset = self.data.len() as u64;
        self.infos.extend(Self::string(name));
        self.infos.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(ty.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.data.extend(data);
        self.data.resize(
            self.data.len().next_multiple_of(DEFAULT_ALIGNMENT as usize),
            0,
        );
        self.n_tensors += 1;
        self
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(self.n_tensors.to_le_bytes());
        out.extend(self.n_kv.to_le_bytes());
        out.extend(&self.kv);
        out.extend(&self.infos);
        out.resize(out.len().next_multiple_of(DEFAULT_ALIGNMENT as usize), 0);
        out.extend(&self.data);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = GgufWriter::default();
        let mut arr = 8u32.to_le_bytes().to_vec();
        arr.extend(2u64.to_le_bytes());
        arr.extend(GgufWriter::string("hello"));
        arr.extend(GgufWriter::string("wörld"));
        let name = GgufWriter::string("llama");
        w.kv("general.architecture", 8, &name)
            .kv("u8", 0, &[7])
            .kv("i8", 1, &[0xff])
            .kv("u16", 2, &500u16.to_le_bytes())
            .kv("i16", 3, &(-500i16).to_le_bytes())
            .kv("llama.block_count", 4, &30u32.to_le_bytes())
            .kv("i32", 5, &(-7i32).to_le_bytes())
            .kv("llama.rope.freq_base", 6, &100000f32.to_le_bytes())
            .kv("bool", 7, &[1])
            .kv("tokenizer.ggml.tokens", 9, &arr)
            .kv("u64", 10, &(1u64 << 40).to_le_bytes())
            .kv("i64", 11, &(-1i64).to_le_bytes())
            .kv("f64", 12, &0.5f64.to_le_bytes());
        let f32s: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        w.tensor("norm.weight", &[6], 0, &f32s);
        w.tensor("blk.0.attn_q.weight", &[64, 2], 8, &[3u8; 2 * 2 * 34]);
        w.bytes()
    }

    #[test]
    fn every_value_type_and_tensor_info_is_read() {
        let b = sample();
        let h = GgufHeader::parse(&b, Path::new("sample.gguf")).unwrap();
        assert_eq!(h.version, 3);
        assert_eq!(
            h.get("general.architecture").unwrap().as_str(),
            Some("llama")
        );
        assert_eq!(h.get("llama.block_count").unwrap().as_u64(), Some(30));
        assert_eq!(
            h.get("llama.rope.freq_base").unwrap().as_f64(),
            Some(100000.0)
        );
        assert_eq!(h.get("i8"), Some(&Value::I8(-1)));
        assert_eq!(h.get("i16"), Some(&Value::I16(-500)));
        assert_eq!(h.get("i64").unwrap().as_u64(), None);
        assert_eq!(h.get("u64").unwrap().as_u64(), Some(1 << 40));
        assert_eq!(h.get("bool"), Some(&Value::Bool(true)));
        let tokens = h.get("tokenizer.ggml.tokens").unwrap().as_array().unwrap();
        assert_eq!(tokens[1].as_str(), Some("wörld"));
        let q = h.tensor("blk.0.attn_q.weight").unwrap();
        assert_eq!(
            (q.ggml_type, q.bytes, q.numel()),
            (GgmlType::Q8_0, 136, 128)
        );
        assert_eq!(q.shape(), vec![2, 64]);
        assert_eq!(q.offset % 32, 0);
        assert_eq!(h.data_offset % 32, 0);
        assert!(h.tensor("missing").is_none());
    }

    #[test]
    fn a_mapped_file_gives_tensor_bytes_and_names_missing_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, sample()).unwrap();
        let f = GgufFile::open(&path).unwrap();
        let (t, data) = f.tensor("norm.weight").unwrap();
        assert_eq!(t.dims, vec![6]);
        assert_eq!(&data[4..8], &1f32.to_le_bytes());
        let e = f.tensor("output.weight").unwrap_err().to_string();
        assert!(e.contains("output.weight") && e.contains("m.gguf"), "{e}");
        let e = GgufFile::open(dir.path().join("absent.gguf")).unwrap_err();
        assert!(e.to_string().contains("absent.gguf"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = sample();
        let full = GgufHeader::parse(&b, Path::new("full.gguf")).unwrap();
        let end = full
            .tensors
            .iter()
            .map(|t| full.data_offset + t.offset + t.bytes)
            .max()
            .unwrap() as usize;
        // Cut anywhere in the header or the data: an error (only trailing padding may go).
        for n in 0..end {
            assert!(
                GgufHeader::parse(&b[..n], Path::new("cut.gguf")).is_err(),
                "truncated to {n} of {end} bytes yet accepted"
            );
        }
        assert!(GgufHeader::parse(&b[..end], Path::new("cut.gguf")).is_ok());
    }

    #[test]
    fn malformed_headers_are_clear_errors() {
        let b = sample();
        let check = |bytes: &[u8], needle: &str| {
            let e = GgufHeader::parse(bytes, Path::new("bad.gguf"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle) && e.contains("bad.gguf"), "{e}");
        };
        check(b"GGML\x03\0\0\0", "not a GGUF file");
        let mut v = b.clone();
        v[4..8].copy_from_slice(&1u32.to_le_bytes());
        check(&v, "version 1");
        let mut v = b.clone();
        v[4..8].copy_from_slice(&3u32.to_be_bytes());
        check(&v, "big-endian");
        let mut v = b.clone();
        v[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        check(&v, "tensor infos cannot fit");
        let mut v = b.clone();
        v[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
        check(&v, "metadata entries cannot fit");
        // An unknown tensor type and a tensor running past the end.
        let mut w = GgufWriter::default();
        w.tensor("t", &[4], 99, &[0; 16]);
        check(&w.bytes(), "unknown or unsupported GGML type 99");
        let mut w = GgufWriter::default();
        w.tensor("big", &[1 << 20], 0, &[0; 16]);
        check(&w.bytes(), "runs past the end");
        let mut w = GgufWriter::default();
        w.tensor("odd", &[33], 8, &[0; 64]);
        check(&w.bytes(), "not a whole number of 32-value q8_0 blocks");
        let mut w = GgufWriter::default();
        w.tensor("overflow", &[1 << 40, 1 << 40], 0, &[]);
        check(&w.bytes(), "overflow");
        let mut w = GgufWriter::default();
        w.kv("general.alignment", 4, &24u32.to_le_bytes());
        check(&w.bytes(), "not a power of two");
        // Arrays whose elements would take many times their bytes in memory, in all (refused
        // before the second array's elements are allocated).
        let u8_array = |n: usize| {
            let mut array = 0u32.to_le_bytes().to_vec();
            array.extend((n as u64).to_le_bytes());
            array.resize(array.len() + n, 0);
            array
        };
        let mut w = GgufWriter::default();
        w.kv("a", 9, &u8_array(1000));
        GgufHeader::parse(&w.bytes(), Path::new("ok.gguf")).unwrap();
        w.kv("b", 9, &u8_array(MAX_METADATA_ELEMENTS as usize - 999));
        check(&w.bytes(), "metadata arrays of more than");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Mutated files never panic, allocate wildly or read out of bounds: they parse or fail.
        #[test]
        fn mutated_files_parse_or_fail_cleanly(
            edits in proptest::collection::vec((0usize..1000, proptest::prelude::any::<u8>()), 1..8),
            cut in 0usize..1000,
        ) {
            let mut b = sample();
            for (at, v) in edits {
                let i = at % b.len();
                b[i] = v;
            }
            b.truncate(b.len() - cut % b.len().max(1));
            if let Ok(h) = GgufHeader::parse(&b, Path::new("fuzz.gguf")) {
                for t in &h.tensors {
                    proptest::prop_assert!(h.data_offset + t.offset + t.bytes <= b.len() as u64);
                }
            }
        }
    }
}
