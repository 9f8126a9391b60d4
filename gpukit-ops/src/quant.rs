//! GGML block quantization formats — Q8_0, Q4_0, Q4_1 and the K-quants Q4_K, Q5_K, Q6_K — as
//! stored in GGUF files: layout, dequantization, and reference quantizers for the first three.
//!
//! Definitions follow ggml's reference C (`ggml-quants.c`: `quantize_row_q*_ref`,
//! `dequantize_row_q*`). The simple formats pack 32 values per block behind f16 scale(s):
//!
//! | format | block bytes | value |
//! |---|---|---|
//! | Q8_0 | 2 (d) + 32 × i8 | `q · d` |
//! | Q4_0 | 2 (d) + 16 (two 4-bit values per byte) | `(q − 8) · d` |
//! | Q4_1 | 2 (d) + 2 (m) + 16 | `q · d + m` |
//!
//! In a 4-bit block, byte `j` holds value `j` in its low nibble and value `j + 16` in its high
//! nibble. The K-quants pack 256 values in super-blocks of 16 or 32-value sub-blocks with
//! quantized sub-block scales:
//!
//! | format | block bytes | value |
//! |---|---|---|
//! | Q4_K | d, dmin (f16) + 12 (8 × 6-bit scale and min) + 128 (4-bit q) | `(d·sc)·q − dmin·m` |
//! | Q5_K | as Q4_K + 32 (fifth bits) before the 4-bit part | `(d·sc)·q − dmin·m` |
//! | Q6_K | 128 (low 4 bits) + 64 (high 2 bits) + 16 × i8 scales + d (f16) | `(d·sc)·(q − 32)` |
//!
//! Dequantization is computed in f32 exactly as written (each product and sum rounded, never
//! fused), so it is reproducible bit for bit on any machine and by the CUDA kernels; the
//! K-quants are checked against gguf-py (llama.cpp's Python package) on fixed blocks.

use gpukit_driver::KernelArgs;
use gpukit_kernels::grid;
use gpukit_kernels::quant::{self as kernels, QuantKernel, RingFormat};
use gpukit_kernels::shared::QGEMV_MAX_ROWS;
use half::f16;
use rayon::prelude::*;

use crate::ops::{
    check_out_blocks, dptr, dptr_blocks, float_only, need_contiguous, u32_dim, write_host,
};
use crate::tensor::storage_bytes;
use crate::{DType, Device, Error, HostData, Result, Tensor};

pub use gpukit_kernels::QuantFormat;

/// Values per block of Q8_0, Q4_0 and Q4_1.
pub const BLOCK: usize = QuantFormat::Q8_0.block_values();

/// Values per super-block of the K-quants.
pub const QK_K: usize = QuantFormat::Q4K.block_values();

/// Bytes of `n` values of `format` in a flat run of blocks, for `op`.
///
/// # Errors
/// [`Error::Shape`] unless `n` is whole blocks whose bytes fit a `usize`.
fn run_bytes(op: &'static str, format: QuantFormat, n: usize) -> Result<usize> {
    DType::Quant(format).bytes_for(n).ok_or_else(|| {
        Error::shape(
            op,
            format!(
                "{n} {format} values are not whole {}-value blocks, or overflow a byte count",
                format.block_values()
            ),
        )
    })
}

/// Refuses the formats without a reference quantizer here (the K-quants).
fn has_quantizer(op: &'static str, format: QuantFormat) -> Result<()> {
    if format.block_values() == BLOCK {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!(
                "no reference quantizer for {format} (gpukit reads the K-quants; it does not make them)"
            ),
        ))
    }
}

fn scale(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Sub-block `j` (0..8) scale and min of a Q4_K/Q5_K super-block's 12 packed bytes (ggml's
/// `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q4_K (`FIVE = false`) or Q5_K super-block → 256 values.
fn dequantize_q45k<const FIVE: bool>(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (scale(b, 0), scale(b, 2));
    let scales = &b[4..16];
    let (qh, qs) = if FIVE {
        (&b[16..48], &b[48..176])
    } else {
        (&b[0..0], &b[16..144])
    };
    for c in 0..4 {
        let q = &qs[32 * c..32 * c + 32];
        for half in 0..2 {
            let (sc, m) = scale_min_k4(2 * c + half, scales);
            let (d1, m1) = (d * f32::from(sc), dmin * f32::from(m));
            for l in 0..32 {
                let mut v = if half == 0 { q[l] & 0x0F } else { q[l] >> 4 };
                if FIVE && qh[l] & (1 << (2 * c + half)) != 0 {
                    v += 16;
                }
                y[64 * c + 32 * half + l] = d1 * f32::from(v) - m1;
            }
        }
    }
}

/// Q6_K super-block → 256 values.
fn dequantize_q6k(b: &[u8], y: &mut [f32]) {
    let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = scale(b, 208);
    for n in 0..2 {
        let (ql, qh, sc, y) = (
            &ql[64 * n..],
            &qh[32 * n..],
            &sc[8 * n..],
            &mut y[128 * n..],
        );
        for l in 0..32 {
            let is = l / 16;
            let q =
                |low: u8, shift: u32| f32::from(((low | (((qh[l] >> shift) & 3) << 4)) as i8) - 32);
            let s = |i: usize| d * f32::from(sc[is + i] as i8);
            y[l] = s(0) * q(ql[l] & 0x0F, 0);
            y[l + 32] = s(2) * q(ql[l + 32] & 0x0F, 2);
            y[l + 64] = s(4) * q(ql[l] >> 4, 4);
            y[l + 96] = s(6) * q(ql[l + 32] >> 4, 6);
        }
    }
}

/// One block of `format` (`format.block_bytes()` bytes) → `format.block_values()` values.
fn dequantize_block(format: QuantFormat, b: &[u8], y: &mut [f32]) {
    match format {
        QuantFormat::Q8_0 => {
            let d = scale(b, 0);
            for j in 0..BLOCK {
                y[j] = f32::from(b[2 + j] as i8) * d;
            }
        }
        QuantFormat::Q4_0 => {
            let d = scale(b, 0);
            for j in 0..BLOCK / 2 {
                let q = b[2 + j];
                y[j] = f32::from(i16::from(q & 0x0F) as i8 - 8) * d;
                y[j + BLOCK / 2] = f32::from((q >> 4) as i8 - 8) * d;
            }
        }
        QuantFormat::Q4_1 => {
            let (d, m) = (scale(b, 0), scale(b, 2));
            for j in 0..BLOCK / 2 {
                let q = b[4 + j];
                y[j] = f32::from(q & 0x0F) * d + m;
                y[j + BLOCK / 2] = f32::from(q >> 4) * d + m;
            }
        }
        QuantFormat::Q4K => dequantize_q45k::<false>(b, y),
        QuantFormat::Q5K => dequantize_q45k::<true>(b, y),
        QuantFormat::Q6K => dequantize_q6k(b, y),
    }
}

/// Dequantizes `bytes` (whole blocks) into `out` ([`QuantFormat::block_values`] per block).
///
/// # Errors
/// [`Error::Shape`] if `bytes` is not whole blocks or `out` has the wrong length.
pub fn dequantize(format: QuantFormat, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let (bb, bv) = (format.block_bytes(), format.block_values());
    if !bytes.len().is_multiple_of(bb) || bytes.len() / bb * bv != out.len() {
        return Err(Error::shape(
            "dequantize",
            format!(
                "{} bytes of {} for {} values (blocks of {bb} bytes hold {bv} values)",
                bytes.len(),
                format.name(),
                out.len()
            ),
        ));
    }
    // In parallel over runs of blocks (each block is independent).
    const BLOCKS: usize = 512;
    out.par_chunks_mut(BLOCKS * bv)
        .zip(bytes.par_chunks(BLOCKS * bb))
        .for_each(|(y, b)| {
            for (b, y) in b.chunks_exact(bb).zip(y.chunks_exact_mut(bv)) {
                dequantize_block(format, b, y);
            }
        });
    Ok(())
}

/// Random blocks of `format` holding `values` values, for tests and benchmarks of the formats
/// that have no quantizer here (the K-quants) and of block layouts in general: random quant bytes
/// (seeded, reproducible) and every f16 scale and minimum of block i set to
/// `scale · (((i · 7 + at) mod 13) / 13 − 0.4)` (at = the field's byte offset), finite and of
/// either sign, so sums stay finite for a chosen `scale`.
///
/// # Errors
/// [`Error::Shape`] unless `values` is a whole number of blocks.
pub fn random_blocks(format: QuantFormat, values: usize, seed: u64, scale: f32) -> Result<Vec<u8>> {
    let bytes = run_bytes("random_blocks", format, values)?;
    let mut raw: Vec<u8> = Tensor::rand(&[bytes], 0.0, 255.99, DType::F32, seed, &Device::Cpu)?
        .to_vec::<f32>()?
        .iter()
        .map(|&v| v as u8)
        .collect();
    let scales: &[usize] = match format {
        QuantFormat::Q8_0 | QuantFormat::Q4_0 => &[0],
        QuantFormat::Q4_1 | QuantFormat::Q4K | QuantFormat::Q5K => &[0, 2],
        QuantFormat::Q6K => &[208],
    };
    for (i, b) in raw.chunks_exact_mut(format.block_bytes()).enumerate() {
        for &at in scales {
            let v = f16::from_f32(scale * (((i * 7 + at) % 13) as f32 / 13.0 - 0.4));
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(raw)
}

/// Quantizes `x` (a multiple of 32 values) with ggml's reference quantizer for `format`
/// (Q8_0, Q4_0, Q4_1).
///
/// # Errors
/// [`Error::Shape`] unless `x.len()` is a multiple of [`BLOCK`]; [`Error::DType`] for the
/// K-quants (gpukit reads them; it has no quantizer for them).
pub fn quantize(format: QuantFormat, x: &[f32]) -> Result<Vec<u8>> {
    has_quantizer("quantize", format)?;
    let mut out = Vec::with_capacity(run_bytes("quantize", format, x.len())?);
    for v in x.chunks_exact(BLOCK) {
        match format {
            QuantFormat::Q8_0 => {
                let amax = v.iter().fold(0f32, |a, &x| a.max(x.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(v.iter().map(|&x| (x * id).round() as i8 as u8));
            }
            QuantFormat::Q4_0 => {
                // The value of largest magnitude, with its sign, maps to -8.
                let (mut amax, mut max) = (0f32, 0f32);
                for &x in v {
                    if amax < x.abs() {
                        amax = x.abs();
                        max = x;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                let q = |x: f32| ((x * id + 8.5) as i8).min(15) as u8;
                out.extend((0..BLOCK / 2).map(|j| q(v[j]) | (q(v[j + BLOCK / 2]) << 4)));
            }
            QuantFormat::Q4_1 => {
                let min = v.iter().fold(f32::MAX, |a, &x| a.min(x));
                let max = v.iter().fold(-f32::MAX, |a, &x| a.max(x));
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                let q = |x: f32| (((x - min) * id + 0.5) as i8).min(15) as u8;
                out.extend((0..BLOCK / 2).map(|j| q(v[j]) | (q(v[j + BLOCK / 2]) << 4)));
            }
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => {
                unreachable!("refused above")
            }
        }
    }
    Ok(out)
}

/// `out` = the values of the block-quantized tensor `q`, in `out`'s float dtype (same shape,
/// same device; rounded once from f32). f32 output is bit for bit ggml's dequantization, on the
/// CPU and on CUDA (one thread a value, each block's scales read as stored).
///
/// # Errors
/// [`Error::DType`] unless `q` is block-quantized and `out` float; shape and device errors
/// for the wrong `out` (a CUDA `out` must be contiguous).
pub fn dequantize_into(q: &Tensor, out: &Tensor) -> Result<()> {
    let format = q.quant_format("dequantize")?;
    float_only("dequantize", out)?;
    let dev = q.device();
    check_out_blocks("dequantize", out, q.shape(), out.dtype(), &dev, &[q])?;
    let n = q.numel();
    if n == 0 {
        return Ok(());
    }
    match &dev {
        Device::Cpu => {
            let blocks = q.host_blocks("dequantize")?;
            if out.is_contiguous() && out.dtype() == DType::F32 {
                let at = out.layout().offset();
                let mut data = out.host_mut("dequantize")?;
                let HostData::F32(v) = &mut *data else {
                    return Err(Error::dtype("dequantize", "f32 output without f32 storage"));
                };
                return dequantize(format, blocks.bytes(), &mut v[at..at + n]);
            }
            let mut v = vec![0f32; n];
            dequantize(format, blocks.bytes(), &mut v)?;
            write_host(out, v.into_iter().map(f64::from))
        }
        Device::Cuda(c) => {
            need_contiguous("dequantize", out, "the output")?;
            let args = KernelArgs::new()
                .arg(dptr_blocks(q)?)
                .arg(dptr(out)?)
                .arg(n as u64)
                .arg(format.code());
            // SAFETY: q holds n / block_values whole blocks of `format` (its views keep whole
            // blocks); out holds n contiguous elements.
            unsafe {
                c.launch(
                    QuantKernel::Dequantize(out.dtype()),
                    &grid::elementwise(n, c.sm_count()),
                    &args,
                )
            }
        }
    }
}

/// The values of the block-quantized tensor `q` as a new tensor of float `dtype`, same shape,
/// same device ([`dequantize_into`]; also reached through [`crate::ops::to_dtype`]).
///
/// # Errors
/// As [`dequantize_into`]; memory errors.
pub fn dequantize_tensor(q: &Tensor, dtype: DType) -> Result<Tensor> {
    q.quant_format("dequantize")?;
    if !dtype.is_float() {
        return Err(Error::dtype(
            "dequantize",
            format!("needs a float output dtype, got {dtype}"),
        ));
    }
    let out = Tensor::empty(q.shape(), dtype, &q.device())?;
    dequantize_into(q, &out)?;
    Ok(out)
}

/// A `format` tensor of `x`'s shape and device holding `x`'s values quantized with ggml's
/// reference quantizer ([`quantize`]: Q8_0, Q4_0 and Q4_1; the last dimension whole 32-value
/// blocks). Computed on the host: a CUDA `x` is downloaded and the blocks uploaded. Also
/// reached through [`crate::ops::to_dtype`].
///
/// # Errors
/// [`Error::DType`] for a non-float `x` or a K-quant `format`; [`Error::Shape`] for a last
/// dimension that is not one or more whole blocks; memory and transfer errors.
pub fn quantize_tensor(x: &Tensor, format: QuantFormat) -> Result<Tensor> {
    float_only("quantize", x)?;
    has_quantizer("quantize", format)?;
    storage_bytes("quantize", x.shape(), DType::Quant(format))?;
    let blocks = quantize(format, &x.to_vec_f32()?)?;
    Tensor::from_blocks(&blocks, format, x.shape(), &x.device())
}

/// `ys[r] = Σ_c W[r, c]·x[c]` for consecutive rows of blocks (the CPU quantized GEMV), with the
/// widest vector unit the CPU has. Results do not depend on it: the lanes are the same and no
/// multiply-add is contracted.
fn cpu_rows_dot(
    format: QuantFormat,
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    xsum: &[f32],
    ys: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { cpu_rows_dot_avx2(format, rows, row_bytes, x, xsum, ys) };
    }
    cpu_rows_dot_portable(format, rows, row_bytes, x, xsum, ys);
}

/// [`cpu_rows_dot_portable`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn cpu_rows_dot_avx2(
    format: QuantFormat,
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    xsum: &[f32],
    ys: &mut [f32],
) {
    cpu_rows_dot_portable(format, rows, row_bytes, x, xsum, ys);
}

/// The body of [`cpu_rows_dot`]. The 32-value formats keep one f32 accumulator per position in
/// the block (32 independent lanes, which vectorise without reassociating anything), scaled per
/// block; Q4_1's min is applied once per block through the block sum of x. The lanes are summed
/// in order at the end of the row. Each row's f16 scales are converted first, so the inner loop
/// makes no calls and its accumulators stay in registers.
#[inline(always)]
fn cpu_rows_dot_portable(
    format: QuantFormat,
    rows: &[u8],
    row_bytes: usize,
    x: &[f32],
    xsum: &[f32],
    ys: &mut [f32],
) {
    use half::slice::HalfFloatSliceExt;
    let (bb, bv) = (format.block_bytes(), format.block_values());
    let blocks = row_bytes / bb;
    let (mut d, mut d16) = (vec![0f32; blocks], vec![f16::ZERO; blocks]);
    for (row, y) in rows.chunks_exact(row_bytes).zip(ys.iter_mut()) {
        let mut acc = [0f32; BLOCK];
        // The f16 scales (the first two bytes of every block), converted together.
        let f16_at = |at: usize, d16: &mut [f16], d: &mut [f32]| {
            for (h, b) in d16.iter_mut().zip(row.chunks_exact(bb)) {
                *h = f16::from_le_bytes([b[at], b[at + 1]]);
            }
            d16.convert_to_f32_slice(d);
        };
        f16_at(0, &mut d16, &mut d);
        let blocks = row
            .chunks_exact(bb)
            .zip(x.chunks_exact(bv))
            .zip(d.iter().copied());
        let offset = match format {
            QuantFormat::Q8_0 => {
                for ((b, xb), d) in blocks {
                    let (qs, xb) = (&b[2..2 + BLOCK], &xb[..BLOCK]);
                    for j in 0..BLOCK {
                        acc[j] += d * (f32::from(qs[j] as i8) * xb[j]);
                    }
                }
                0.0
            }
            QuantFormat::Q4_0 => {
                // Values (q − 8)·d.
                for ((b, xb), d) in blocks {
                    nibbles_dot(&mut acc, d, 8.0, &b[2..2 + BLOCK / 2], xb);
                }
                0.0
            }
            QuantFormat::Q4_1 => {
                // Values q·d + m: the m part is m · Σx over the block.
                for ((b, xb), d) in blocks {
                    nibbles_dot(&mut acc, d, 0.0, &b[4..4 + BLOCK / 2], xb);
                }
                f16_at(2, &mut d16, &mut d);
                d.iter().zip(xsum).map(|(m, s)| m * s).sum()
            }
            QuantFormat::Q4K | QuantFormat::Q5K | QuantFormat::Q6K => {
                let mut tmp = [0f32; QK_K];
                for ((b, xb), _) in blocks {
                    dequantize_block(format, b, &mut tmp[..bv]);
                    for (t, xc) in tmp[..bv].chunks_exact(BLOCK).zip(xb.chunks_exact(BLOCK)) {
                        for j in 0..BLOCK {
                            acc[j] += t[j] * xc[j];
                        }
                    }
                }
                0.0
            }
        };
        *y = acc.iter().sum::<f32>() + offset;
    }
}

/// `acc[j] += d·((q_j − bias)·x_j)` for one block of 4-bit values: the low nibbles of `qs` are
/// positions 0..16, the high nibbles 16..32 (ggml's layout).
#[inline(always)]
fn nibbles_dot(acc: &mut [f32; BLOCK], d: f32, bias: f32, qs: &[u8], xb: &[f32]) {
    let (qs, xb) = (&qs[..BLOCK / 2], &xb[..BLOCK]);
    for j in 0..BLOCK / 2 {
        let lo = f32::from(qs[j] & 0x0F) - bias;
        let hi = f32::from(qs[j] >> 4) - bias;
        acc[j] += d * (lo * xb[j]);
        acc[j + BLOCK / 2] += d * (hi * xb[j + BLOCK / 2]);
    }
}

/// `out [m, rows] = x [m, cols] · Wᵀ` for a block-quantized weight `w [rows, cols]` (how GGUF
/// stores a linear layer's weight) and 1 ≤ m ≤ [`QGEMV_MAX_ROWS`] (8) rows of x,
/// reading the quantized blocks directly (no dequantized copy of W). On CUDA: on Hopper, Q4_0,
/// Q4_K and Q5_K weights of at least 1 MiB with f16/bf16 x and cols a multiple of 256 stream
/// through a shared-memory ring with the block sums on the tensor cores
/// ([`ring`](gpukit_kernels::quant::ring); several rows of x as the MMAs' columns, where they fit its shared
/// memory); other Q8_0, Q4_0 and Q4_1 weights take one warp per output, four lanes per 32-value
/// block; other K-quants one warp per output, a half-warp per 256-value super-block and 16
/// values per lane, several rows of x those kernels' `rows` variants, which decode each block
/// once for all of them. Where the one-row call and the several-row call take the same kind of
/// kernel (the ring, or the one-warp kernels), output row r is bitwise what a one-row call on
/// x's row r gives; where x's rows do not fit the ring's shared memory but one row does (at
/// k = 14336, three rows or more), the several-row call sums in the one-warp kernels' order. On the CPU, weight rows in parallel, each block's
/// values expanded in registers (Q8_0, Q4_0, Q4_1) or into a small buffer (K-quants) and dotted
/// with x in f32.
///
/// # Errors
/// [`Error::DType`] unless `w` is block-quantized and x float; shape (`w` not 2-D, x not
/// `[m, cols]` with m in 1..=8, or the wrong `out`) and device errors.
pub fn qgemv_into(x: &Tensor, w: &Tensor, out: &Tensor) -> Result<()> {
    let format = w.quant_format("qgemv")?;
    let &[rows, cols] = w.shape() else {
        return Err(Error::shape(
            "qgemv",
            format!(
                "the weights {:?} {format} must be a matrix [n, k]",
                w.shape()
            ),
        ));
    };
    let dev = crate::ops::same_device("qgemv", &[x, w])?;
    float_only("qgemv", x)?;
    let m = if x.rank() == 2 { x.shape()[0] } else { 0 };
    if x.rank() != 2 || x.shape()[1] != cols || !(1..=QGEMV_MAX_ROWS).contains(&m) {
        return Err(Error::shape(
            "qgemv",
            format!(
                "x {:?} {} must be [m, {cols}] with m from 1 to {}",
                x.shape(),
                x.dtype(),
                QGEMV_MAX_ROWS
            ),
        ));
    }
    check_out_blocks("qgemv", out, &[m, rows], x.dtype(), &dev, &[x, w])?;
    match &dev {
        Device::Cpu => {
            // Row by row, block by block, in parallel over rows: each block is expanded into a
            // small buffer and dotted with x; the matrix is never expanded whole.
            let xv: Vec<f32> = x.to_vec_f32()?;
            let blocks = w.host_blocks("qgemv")?;
            let raw = blocks.bytes();
            let row_bytes = raw.len() / rows.max(1);
            let bv = format.block_values();
            let mut y = vec![0f32; m * rows];
            for (xr, yr) in xv.chunks_exact(cols).zip(y.chunks_exact_mut(rows.max(1))) {
                // Per-block sums of x, for the formats whose blocks carry an offset (Q4_1's
                // min).
                let xsum: Vec<f32> = xr.chunks_exact(bv).map(|b| b.iter().sum()).collect();
                yr.par_chunks_mut(16).enumerate().for_each(|(c, ys)| {
                    let rows = &raw[c * 16 * row_bytes..][..ys.len() * row_bytes];
                    cpu_rows_dot(format, rows, row_bytes, xr, &xsum, ys);
                });
            }
            write_host(out, y.into_iter().map(f64::from))
        }
        Device::Cuda(c) => {
            let x = x.contiguous()?;
            need_contiguous("qgemv", out, "the output")?;
            if dptr_blocks(w)?.0 % 4 != 0 {
                return Err(Error::shape(
                    "qgemv",
                    "quantized weights must start at a 4-byte aligned address (GGUF aligns \
                     tensor data to 32 bytes)",
                ));
            }
            // The ring's format and launch, where it takes this call.
            let ring = if let Some(format) = RingFormat::of(format)
                && matches!(x.dtype(), DType::F16 | DType::BF16)
                && c.kernels().target() == "sm_90a"
                && dptr_blocks(w)?.0 % 16 == 0
                && dptr(&x)?.0 % 16 == 0
            {
                let props = c.props();
                let dtype = x.dtype();
                let kernel = if m == 1 {
                    QuantKernel::QGemvRing { dtype, format }
                } else {
                    QuantKernel::QGemvRingRows { dtype, format }
                };
                kernels::ring(
                    format,
                    rows,
                    cols,
                    m,
                    dtype.size_in_bytes(),
                    c.sm_count() as usize,
                    props.shared_memory_per_block_optin_bytes as usize,
                    c.kernels().function(kernel)?.static_shared_mem_bytes() as usize,
                )?
                .map(|plan| (kernel, plan))
            } else {
                None
            };
            // (w, x, out, N, K), then the kernel's own arguments.
            let args = KernelArgs::new()
                .arg(dptr_blocks(w)?)
                .arg(dptr(&x)?)
                .arg(dptr(out)?)
                .arg(u32_dim("qgemv", rows)?)
                .arg(u32_dim("qgemv", cols)?);
            if let Some((kernel, (cfg, [chunk, pitch, stages, prefetch]))) = ring {
                let args = args.arg(chunk).arg(pitch).arg(stages).arg(prefetch);
                let args = if m == 1 { args } else { args.arg(m as u32) };
                // SAFETY: w holds rows rows of cols values in the format's blocks from a
                // 16-byte aligned address (cols a multiple of 256, so every row is too), x holds
                // m rows of cols values from a 16-byte aligned address, out m rows of rows
                // values; the chunking, stages and shared memory come from kernels::ring
                // for this shape, m and format.
                return unsafe { c.launch(kernel, &cfg, &args) };
            }
            // Vector loads of x where its start is aligned (its rows, cols apart, a multiple of
            // 32 values, are then too).
            let args = args.arg(format.code()).arg(i32::from(
                dptr(&x)?.0 % (4 * x.dtype().size_in_bytes()) as u64 == 0,
            ));
            let (kernel, args) = match (format.block_values() == BLOCK, m) {
                (true, 1) => (QuantKernel::QGemv(x.dtype()), args),
                (false, 1) => (QuantKernel::QGemvK(x.dtype()), args),
                (true, _) => (QuantKernel::QGemvRows(x.dtype()), args.arg(m as u32)),
                (false, _) => (QuantKernel::QGemvKRows(x.dtype()), args.arg(m as u32)),
            };
            // SAFETY: w holds rows × cols/block_values blocks of the format, contiguous (as every
            // quantized tensor and view is), from a 4-byte aligned address (checked above, as
            // the kernel's 2-byte loads need), x holds m rows of cols values (vector loads only
            // when aligned), out m rows of rows values; m ≤ QGEMV_MAX_ROWS.
            unsafe { c.launch(kernel, &grid::threads(rows * 32)?, &args) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_q8(d: f32, qs: [i8; 32]) -> Vec<u8> {
        let mut b = f16::from_f32(d).to_le_bytes().to_vec();
        b.extend(qs.iter().map(|&q| q as u8));
        b
    }

    #[test]
    fn random_blocks_are_reproducible_and_finite() {
        for f in QuantFormat::ALL {
            let n = 2 * 256;
            let a = random_blocks(f, n, 7, 0.5).unwrap();
            assert_eq!(Some(a.len()), DType::Quant(f).bytes_for(n));
            assert_eq!(a, random_blocks(f, n, 7, 0.5).unwrap(), "{}", f.name());
            assert_ne!(a, random_blocks(f, n, 8, 0.5).unwrap(), "{}", f.name());
            let mut y = vec![0f32; n];
            dequantize(f, &a, &mut y).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{}", f.name());
        }
        assert!(random_blocks(QuantFormat::Q4K, 100, 1, 1.0).is_err());
    }

    #[test]
    fn hand_built_blocks_dequantize_as_defined() {
        // Q8_0: d = 0.5, q = -16..16 → q/2.
        let mut qs = [0i8; 32];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = j as i8 - 16;
        }
        let mut y = [0f32; 32];
        dequantize(QuantFormat::Q8_0, &block_q8(0.5, qs), &mut y).unwrap();
        for (j, v) in y.iter().enumerate() {
            assert_eq!(*v, (j as f32 - 16.0) * 0.5);
        }
        // Q4_0: d = 2, byte j = (lo = j % 16, hi = 15 - j % 16) → (lo - 8)·2 and (hi - 8)·2.
        let mut b = f16::from_f32(2.0).to_le_bytes().to_vec();
        b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
        dequantize(QuantFormat::Q4_0, &b, &mut y).unwrap();
        for j in 0..16 {
            assert_eq!(y[j], (j as f32 - 8.0) * 2.0);
            assert_eq!(y[j + 16], (7.0 - j as f32) * 2.0);
        }
        // Q4_1: d = 0.25, m = -1: q·0.25 - 1.
        let mut b = f16::from_f32(0.25).to_le_bytes().to_vec();
        b.extend_from_slice(&f16::from_f32(-1.0).to_le_bytes());
        b.extend((0..16u8).map(|j| j | (j << 4)));
        dequantize(QuantFormat::Q4_1, &b, &mut y).unwrap();
        for j in 0..16 {
            assert_eq!(y[j], j as f32 * 0.25 - 1.0);
            assert_eq!(y[j + 16], y[j]);
        }
    }

    #[test]
    fn reference_quantizers_round_trip_within_a_step() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let x: Vec<f32> = (0..32 * 64).map(|_| rng.random_range(-3.0..3.0)).collect();
        for f in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1] {
            let q = quantize(f, &x).unwrap();
            assert_eq!(Some(q.len()), DType::Quant(f).bytes_for(x.len()));
            let mut y = vec![0f32; x.len()];
            dequantize(f, &q, &mut y).unwrap();
            for (b, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
                let bytes = &q[b * f.block_bytes()..];
                let d = f16::from_le_bytes([bytes[0], bytes[1]]).to_f32().abs();
                for (xv, yv) in xs.iter().zip(ys) {
                    // Half a quantization step, plus the f16 rounding of the scale(s). Q4_0's
                    // range is [-8, 7]·d with the largest magnitude at -8: values at the other
                    // end clamp at 7 and may be off by a whole step.
                    let steps = if f == QuantFormat::Q4_0 { 1.0 } else { 0.5 };
                    let tol = d * steps + d * 8.0 * 1e-3 + 1e-3;
                    assert!((xv - yv).abs() <= tol, "{f:?}: {xv} vs {yv} (d {d})");
                }
            }
        }
        // A zero block quantizes to zeros and back.
        for f in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1] {
            let q = quantize(f, &[0.0; 32]).unwrap();
            let mut y = [1f32; 32];
            dequantize(f, &q, &mut y).unwrap();
            assert!(y.iter().all(|&v| v == 0.0), "{f:?}");
        }
    }

    #[test]
    fn bad_sizes_are_errors() {
        let mut y = [0f32; 32];
        assert!(dequantize(QuantFormat::Q8_0, &[0u8; 33], &mut y).is_err());
        assert!(dequantize(QuantFormat::Q4_0, &[0u8; 18], &mut y[..16]).is_err());
        assert!(quantize(QuantFormat::Q4_1, &[0.0; 31]).is_err());
        assert!(quantize(QuantFormat::Q4K, &[0.0; 256]).is_err());
        assert_eq!(DType::Quant(QuantFormat::Q6K).bytes_for(512), Some(420));
        assert_eq!(DType::Quant(QuantFormat::Q5K).bytes_for(32), None);
        assert_eq!(DType::Quant(QuantFormat::Q4_1).bytes_for(64), Some(40));
        assert_eq!(
            DType::Quant(QuantFormat::Q8_0).bytes_for(usize::MAX - 31),
            None
        );
    }
}
