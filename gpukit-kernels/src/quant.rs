//! The quantized family (`cuda/quant.cu`): dequantization of the GGML block formats, and GEMV
//! against quantized weight rows (the format's code an argument, [`QuantFormat::code`]).
//!
//! The one-warp-per-row kernels (`qgemv_*`, `qgemv_k_*`, and their `_rows` forms for up to
//! [`QGEMV_MAX_ROWS`] rows of x) take every format on every GPU. On Hopper, Q4_0, Q4_K and Q5_K
//! matrices of [`RING_MIN_BYTES`] or more with f16/bf16 x stream through a shared-memory ring
//! by bulk asynchronous copies with the block sums on the tensor cores ([`ring`]): on an H200
//! Q4_0 at (k, n) = (4096, 14336) took 12.0 µs against the one-warp kernel's 21.4. Several rows
//! of x ride as the MMAs' columns, so each output row is bitwise a one-row call's.
//!
//! Tried and slower: 20 KiB stages (2.1–2.6 µs), asking L2 for 2 or 3 stages before the PDL wait
//! (0.3–1.8 µs), 16 consumer warps (no faster), and x staged in shared memory for the one-warp
//! kernels (twice as slow).

use gpukit_driver::LaunchConfig;

use crate::kernel::{KernelFamily, float_name, half_name};
use crate::shared::{QGEMV_MAX_ROWS, QGEMV_RING_MAX_STAGES, QGEMV_RING_ROWS, QGEMV_RING_WARPS};
use crate::{DType, Error, QuantFormat, Result};

/// The block formats the Hopper ring ([`QuantKernel::QGemvRing`]) streams: the subset of
/// [`QuantFormat`] it has entry points for.
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

/// The quantized kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantKernel {
    /// `dequantize_<output dt>` (the block format is a launch argument).
    Dequantize(DType),
    /// `qgemv_<dt>` (one row of x against quantized weight rows of a 32-value format: Q8_0,
    /// Q4_0, Q4_1; format as an argument).
    QGemv(DType),
    /// `qgemv_k_<dt>` (the same for the K-quants Q4_K, Q5_K, Q6_K; format as an argument).
    QGemvK(DType),
    /// `qgemv_rows_<dt>`: [`QuantKernel::QGemv`] for 1 to [`QGEMV_MAX_ROWS`] rows of x (their
    /// count M the last argument; row r of the output equals a one-row call's, bit for bit).
    QGemvRows(DType),
    /// `qgemv_k_rows_<dt>`: [`QuantKernel::QGemvK`] for 1 to [`QGEMV_MAX_ROWS`] rows of x.
    QGemvKRows(DType),
    /// `qgemv_ring_<dt>` (Q4_0) / `qgemv_ring_q4k_<dt>` (Q4_K) / `qgemv_ring_q5k_<dt>` (Q5_K),
    /// f16/bf16: one row of x against quantized weight rows on Hopper ([`ring`]); arguments (w,
    /// x, out, N, K, units per chunk, row pitch, stages, stages prefetched). Only the sm_90+
    /// images have its body (elsewhere the entry point traps): launch it only where the
    /// registry's target is `sm_90a`.
    QGemvRing {
        /// Element type of x and the output.
        dtype: DType,
        /// The weights' block format.
        format: RingFormat,
    },
    /// `qgemv_ring_rows_<dt>` / `qgemv_ring_rows_q4k_<dt>` / `qgemv_ring_rows_q5k_<dt>`:
    /// [`QuantKernel::QGemvRing`] for up to [`QGEMV_MAX_ROWS`] rows of x, row r in column r of
    /// the MMAs' B (row r of the output bitwise a one-row call's); its count M the last
    /// argument, and [`ring`] planned for it.
    QGemvRingRows {
        /// Element type of x and the output.
        dtype: DType,
        /// The weights' block format.
        format: RingFormat,
    },
}

impl KernelFamily for QuantKernel {
    fn entry_point(&self) -> Result<String> {
        let q = |dt| float_name("quantized gemv", dt);
        Ok(match *self {
            QuantKernel::Dequantize(dt) => format!("dequantize_{}", float_name("dequantize", dt)?),
            QuantKernel::QGemv(dt) => format!("qgemv_{}", q(dt)?),
            QuantKernel::QGemvK(dt) => format!("qgemv_k_{}", q(dt)?),
            QuantKernel::QGemvRows(dt) => format!("qgemv_rows_{}", q(dt)?),
            QuantKernel::QGemvKRows(dt) => format!("qgemv_k_rows_{}", q(dt)?),
            QuantKernel::QGemvRing { dtype, format }
            | QuantKernel::QGemvRingRows { dtype, format } => format!(
                "qgemv_ring_{}{}{}",
                if matches!(self, QuantKernel::QGemvRingRows { .. }) {
                    "rows_"
                } else {
                    ""
                },
                match format {
                    RingFormat::Q4_0 => "",
                    RingFormat::Q4K => "q4k_",
                    RingFormat::Q5K => "q5k_",
                },
                half_name("quantized gemv ring", dtype)?
            ),
        })
    }

    /// Every kernel but the dequantization.
    fn programmatic(&self) -> bool {
        !matches!(self, QuantKernel::Dequantize(_))
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        let mut v = Vec::new();
        for dtype in DType::ALL {
            v.extend([
                QuantKernel::Dequantize(dtype),
                QuantKernel::QGemv(dtype),
                QuantKernel::QGemvK(dtype),
                QuantKernel::QGemvRows(dtype),
                QuantKernel::QGemvKRows(dtype),
            ]);
            if matches!(dtype, DType::F16 | DType::BF16) {
                for format in [RingFormat::Q4_0, RingFormat::Q4K, RingFormat::Q5K] {
                    v.push(QuantKernel::QGemvRing { dtype, format });
                    v.push(QuantKernel::QGemvRingRows { dtype, format });
                }
            }
        }
        v
    }
}

/// Quantized matrices below this many bytes stay on the one-warp-per-row kernel
/// ([`QuantKernel::QGemv`]), which spreads a small matrix over more multiprocessors.
pub const RING_MIN_BYTES: usize = 1 << 20;

/// The Hopper ring for Q4_0, Q4_K or Q5_K weights ([`QuantKernel::QGemvRing`], or
/// [`QuantKernel::QGemvRingRows`] for `m` > 1) for `m` rows of x (1 to [`QGEMV_MAX_ROWS`];
/// f16/bf16, `x_bytes` per element) against `n` rows of `k` values (a multiple of 256, so that
/// every row is a whole number of 16-byte units), on `sms` multiprocessors with `smem_optin`
/// bytes of shared memory a block may opt into, for a kernel of `static_smem` bytes of static
/// shared memory (barriers and the tiles' partial sums, as the compiled kernel reports it; the
/// 128-byte aligned ring starts at the next 128-byte boundary).
///
/// A block of 9 warps per multiprocessor, tiles of 16 rows streamed as stages of at most 40 KiB
/// (chunks of a multiple of 8 units — blocks or super-blocks — of each row, as even as the row
/// allows), each row's chunk in a slot of `pitch` bytes (an odd multiple of 16, so that the 8
/// rows one load of a warp reads fall in different banks), a ring of about 160 KiB of stages (2
/// to 8), and after it, for each row of x, x, x laid out for the MMAs and the sums of x per 32
/// values (4 bytes each for Q4_0, 8 for the K-quants), then (m > 1) 8 KiB of partial sums;
/// before the PDL wait the producer asks L2 for the first stage only. Returns the launch and the
/// kernel's (units per chunk, pitch, stages, stages prefetched), or `None` where k is not a
/// multiple of 256, m is out of range, the matrix is below [`RING_MIN_BYTES`] or two stages do
/// not fit. The sums depend on the shape only (not the device), so results are deterministic.
///
/// # Errors
/// [`Error::InvalidArgument`] for sizes beyond a launch.
#[expect(
    clippy::too_many_arguments,
    reason = "the shape, the device's limits and the kernel's static shared memory"
)]
pub fn ring(
    format: RingFormat,
    n: usize,
    k: usize,
    m: usize,
    x_bytes: usize,
    sms: usize,
    smem_optin: usize,
    static_smem: usize,
) -> Result<Option<(LaunchConfig, [u32; 4])>> {
    const STAGE_MAX: usize = 40 << 10;
    const RING: usize = 160 << 10;
    let (unit_bytes, unit_values) = format.unit();
    let units = k / unit_values;
    if !k.is_multiple_of(256)
        || k == 0
        || !(1..=QGEMV_MAX_ROWS).contains(&m)
        || n.saturating_mul(units).saturating_mul(unit_bytes) < RING_MIN_BYTES
    {
        return Ok(None);
    }
    let reserved = static_smem.next_multiple_of(128);
    let most = ((STAGE_MAX / (QGEMV_RING_ROWS * unit_bytes)) / 8 * 8).max(8);
    let chunks = units.div_ceil(most);
    let chunk = units.div_ceil(chunks).next_multiple_of(8);
    let mut pitch = chunk * unit_bytes;
    if (pitch / 16).is_multiple_of(2) {
        pitch += 16;
    }
    let stage = QGEMV_RING_ROWS * pitch;
    // For each row of x: x as copied, x laid out for the MMAs (16 bytes per lane and 32 values:
    // 2k bytes), and the sums of x per 32 values; with several rows, then the tiles' partial
    // sums (two tiles of QGEMV_MAX_ROWS × 16 f32 per consumer warp).
    let sums = if format == RingFormat::Q4_0 { 4 } else { 8 };
    let parts = if m > 1 {
        2 * QGEMV_RING_WARPS as usize * QGEMV_MAX_ROWS * QGEMV_RING_ROWS * 4
    } else {
        0
    };
    let extra = m.saturating_mul(k.saturating_mul(x_bytes) + 2 * k + sums * (k / 32)) + parts;
    let fits = |stages: usize| stages * stage + extra + reserved <= smem_optin;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring kernels' static shared memory as the compiled kernels report it: barriers and
    /// the tiles' partial sums, 1160 bytes, so the 128-byte aligned ring starts at 1280.
    const STATIC: usize = 1160;

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
        let k = QuantKernel::QGemvRingRows {
            dtype: DType::BF16,
            format: RingFormat::Q4K,
        };
        assert_eq!(k.entry_point().unwrap(), "qgemv_ring_rows_q4k_bf16");
        let f32_ring = QuantKernel::QGemvRing {
            dtype: DType::F32,
            format: RingFormat::Q4_0,
        };
        assert!(f32_ring.entry_point().is_err());
    }

    #[test]
    fn ring_chunks_rows_into_stages_of_at_most_40_kib() {
        let optin = 227 << 10;
        let plan = |n, k, optin| {
            ring(RingFormat::Q4_0, n, k, 1, 2, 132, optin, STATIC)
                .unwrap()
                .map(|(cfg, p)| (cfg.grid.x, cfg.block.x, cfg.shared_mem_bytes, p))
        };
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
            ring(RingFormat::Q4K, n, k, 1, 2, 132, optin, STATIC)
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
            ring(RingFormat::Q5K, 14336, 4096, 1, 2, 132, optin, STATIC)
                .unwrap()
                .map(|p| p.1),
            Some([8, 1424, 7, 1])
        );
        // Four rows of x at (4096, 14336): four times x's 8 + 8 KiB and 512 bytes of sums, and
        // 8 KiB of partial sums, still leave room for the 4 stages; 9 rows, or none, take no
        // ring; eight rows of a 14336-value x (about 470 KiB) do not fit.
        let rows = |m, k| {
            ring(RingFormat::Q4_0, 14336, k, m, 2, 132, optin, STATIC)
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
}
