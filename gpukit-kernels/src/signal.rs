//! The signal family (`cuda/signal.cu`): batched f32 FFTs of our own (no cuFFT, so a machine
//! with only the driver runs them), padding, overlap-add, zero-crossing rates, first-order
//! recurrences (prefix sums, IIR filters), polyphase resampling (`upfirdn`), median filters and
//! row sorts — what `gpukit-audio`'s STFT, ISTFT, resampling and spectral features are built
//! from — and 1-D convolutions (direct and transposed), what its text-to-speech networks are
//! built from.
//!
//! `fft_f32` takes one transform per `threads` threads, several transforms per block when they
//! are small, each in shared memory: a Stockham autosort FFT (radix 8, 4, 2, 3, 5) for lengths
//! 2^a·3^b·5^c, Bluestein's algorithm over a power-of-two length for any other. Real transforms
//! of even length run a complex FFT of half the length. [`fft`] plans a launch; its limits
//! ([`FFT_MAX_POINTS`] complex points in shared memory, so real lengths up to 16 384 that are
//! 2^a·3^b·5^c, and other lengths up to 4096) come from a block's shared memory.

use gpukit_driver::{DeviceCopy, LaunchConfig};

use crate::kernel::KernelFamily;
use crate::shared::{FFT_BLOCK_THREADS, FFT_MAX_POINTS, FFT_MAX_THREADS, FFT_MIN_THREADS};
pub use crate::shared::{FftArgs, FftMode, FftOutput, PadMode, WindowFn};
use crate::{Error, Result};

// SAFETY: `repr(C)`, pointers, integers and floats, no implicit padding (136 bytes, every
// 8-byte field on an 8-byte offset).
unsafe impl DeviceCopy for FftArgs {}

/// The signal kernels (f32 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignalKernel {
    /// `fft_f32`: batched complex, real-to-complex and complex-to-real FFTs ([`FftArgs`]).
    Fft,
    /// `pad_f32`: pads the last axis with a constant, the edge sample or its mirror image.
    Pad,
    /// `overlap_add_f32`: sums overlapping frames into a signal, in frame order.
    OverlapAdd,
    /// `zero_crossing_rate_f32`: the fraction of sign changes per frame, a warp per frame.
    ZeroCrossingRate,
    /// `linear_recurrence_f32`: `y[n] = x[n] + a·y[n − 1]` along an axis (a prefix sum for
    /// a = 1), a thread per line.
    LinearRecurrence,
    /// `upfirdn_f32`: upsample, FIR filter and downsample (polyphase), a thread per output.
    Upfirdn,
    /// `median_filter_f32`: a sliding median along an axis, a thread per output.
    MedianFilter,
    /// `sort_f32`: sorts rows ascending, a block per row (bitonic, in shared memory).
    Sort,
    /// `conv1d_f32`: PyTorch's grouped, strided, dilated `Conv1d`, a thread per output.
    Conv1d,
    /// `conv1d_ob8_f32`: the same convolution, a thread per 8 output channels of one group at
    /// one position (each group's output channels a multiple of 8); the same bits.
    Conv1dOb8,
    /// `conv_transpose1d_f32`: PyTorch's `ConvTranspose1d` (grouped, strided, dilated), a
    /// thread per output gathering its taps.
    ConvTranspose1d,
}

impl KernelFamily for SignalKernel {
    fn entry_point(&self) -> Result<String> {
        Ok(match self {
            SignalKernel::Fft => "fft_f32",
            SignalKernel::Pad => "pad_f32",
            SignalKernel::OverlapAdd => "overlap_add_f32",
            SignalKernel::ZeroCrossingRate => "zero_crossing_rate_f32",
            SignalKernel::LinearRecurrence => "linear_recurrence_f32",
            SignalKernel::Upfirdn => "upfirdn_f32",
            SignalKernel::MedianFilter => "median_filter_f32",
            SignalKernel::Sort => "sort_f32",
            SignalKernel::Conv1d => "conv1d_f32",
            SignalKernel::Conv1dOb8 => "conv1d_ob8_f32",
            SignalKernel::ConvTranspose1d => "conv_transpose1d_f32",
        }
        .into())
    }

    fn programmatic(&self) -> bool {
        false
    }

    #[cfg(test)]
    fn every() -> Vec<Self> {
        vec![
            SignalKernel::Fft,
            SignalKernel::Pad,
            SignalKernel::OverlapAdd,
            SignalKernel::ZeroCrossingRate,
            SignalKernel::LinearRecurrence,
            SignalKernel::Upfirdn,
            SignalKernel::MedianFilter,
            SignalKernel::Sort,
            SignalKernel::Conv1d,
            SignalKernel::Conv1dOb8,
            SignalKernel::ConvTranspose1d,
        ]
    }
}

impl WindowFn {
    /// Sample `k` of the periodic window of `length` samples, in f64 (what the kernel computes
    /// in f32): Hann 0.5 − 0.5·cos(2πk/N), Hamming 0.54 − 0.46·cos(2πk/N), Blackman 0.42 −
    /// 0.5·cos(2πk/N) + 0.08·cos(4πk/N), rectangular (and `None`) 1.
    pub fn value(self, k: usize, length: usize) -> f64 {
        let phase = 2.0 * std::f64::consts::PI * k as f64 / length.max(1) as f64;
        match self {
            WindowFn::Hann => 0.5 - 0.5 * phase.cos(),
            WindowFn::Hamming => 0.54 - 0.46 * phase.cos(),
            WindowFn::Blackman => 0.42 - 0.5 * phase.cos() + 0.08 * (2.0 * phase).cos(),
            WindowFn::Rectangular | WindowFn::None => 1.0,
        }
    }
}

/// Whether `n` is 2^a·3^b·5^c (a length the Stockham stages transform directly).
pub fn smooth(mut n: usize) -> bool {
    if n == 0 {
        return false;
    }
    for p in [2, 3, 5] {
        while n.is_multiple_of(p) {
            n /= p;
        }
    }
    n == 1
}

/// A planned FFT launch: the grid and the fields of [`FftArgs`] that follow from the length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FftPlan {
    /// Grid, block and dynamic shared memory.
    pub cfg: LaunchConfig,
    /// [`FftArgs::points`].
    pub points: u32,
    /// [`FftArgs::bluestein`].
    pub bluestein: u32,
    /// [`FftArgs::per_block`].
    pub per_block: u32,
    /// [`FftArgs::threads`].
    pub threads: u32,
}

/// Plans `count` transforms of length `n` in `mode` on a device whose blocks may use
/// `smem_limit` bytes of shared memory (`DeviceProperties::shared_memory_per_block_optin_bytes`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a length of 0, a length whose transform does not fit in a
/// block's shared memory, or more blocks than a grid holds.
pub fn fft(mode: FftMode, n: usize, count: usize, smem_limit: usize) -> Result<FftPlan> {
    if n == 0 {
        return Err(Error::InvalidArgument(
            "an FFT needs at least one point".into(),
        ));
    }
    // Even real lengths run a complex FFT of half as many points.
    let direct = if mode != FftMode::C2c && n.is_multiple_of(2) {
        n / 2
    } else {
        n
    };
    let (points, bluestein) = if smooth(direct) {
        (direct, false)
    } else {
        // Bluestein pads the length-n sequence (the packing trick is not used) to a power of two
        // that holds the linear convolution.
        ((2 * n - 1).next_power_of_two(), true)
    };
    let values = if bluestein { 2 * points } else { points };
    let bytes = values * 8;
    let limit = smem_limit;
    if points > FFT_MAX_POINTS || bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "an FFT of length {n} needs {points} complex points in shared memory{} ({bytes} \
             bytes; the limit is {FFT_MAX_POINTS} points and {limit} bytes on this device): \
             use a length of the form 2^a·3^b·5^c up to {} for real transforms",
            if bluestein {
                " by Bluestein's algorithm"
            } else {
                ""
            },
            2 * FFT_MAX_POINTS.min(limit / 8),
        )));
    }
    // At least points/16 threads (the most points a thread holds in a stage), a warp at least.
    let threads =
        (points.div_ceil(16).next_power_of_two() as u32).clamp(FFT_MIN_THREADS, FFT_MAX_THREADS);
    let per_block = (FFT_BLOCK_THREADS / threads).max(1);
    let blocks = count.div_ceil(per_block as usize).max(1);
    let grid = u32::try_from(blocks)
        .map_err(|_| Error::InvalidArgument(format!("{count} transforms exceed the grid limit")))?;
    let smem = u32::try_from(bytes * per_block as usize).map_err(|_| {
        Error::InvalidArgument(format!("an FFT of length {n} needs too much shared memory"))
    })?;
    Ok(FftPlan {
        cfg: LaunchConfig::new(grid, threads * per_block).shared_mem(smem),
        points: points as u32,
        bluestein: u32::from(bluestein),
        per_block,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H200's opt-in shared memory per block.
    const H200: usize = 227 << 10;

    #[test]
    fn fft_args_have_no_padding() {
        assert_eq!(std::mem::size_of::<FftArgs>(), 136);
        assert!(crate::shared::cuda_header().contains("    unsigned int win_offset;\n"));
    }

    #[test]
    fn smooth_lengths_are_products_of_2_3_5() {
        assert!(smooth(1) && smooth(400) && smooth(2048) && smooth(3 * 5 * 5 * 8));
        assert!(!smooth(0) && !smooth(7) && !smooth(1000 + 1));
    }

    #[test]
    fn plans_pack_small_transforms_and_pad_odd_lengths() {
        let p = fft(FftMode::R2c, 512, 1000, H200).unwrap();
        assert_eq!(
            (p.points, p.bluestein, p.threads, p.per_block),
            (256, 0, 32, 8)
        );
        assert_eq!((p.cfg.grid.x, p.cfg.block.x), (125, 256));
        assert_eq!(p.cfg.shared_mem_bytes, 8 * 256 * 8);
        // 2·1001 − 1 → 2048 points, sequence and filter.
        let p = fft(FftMode::C2c, 1001, 3, H200).unwrap();
        assert_eq!((p.points, p.bluestein, p.threads), (2048, 1, 128));
        assert_eq!(p.cfg.shared_mem_bytes, 2 * 2 * 2048 * 8);
        // Real, even and smooth: half the points.
        let p = fft(FftMode::C2r, 16384, 1, H200).unwrap();
        assert_eq!((p.points, p.threads, p.per_block), (8192, 512, 1));
    }

    #[test]
    fn plans_refuse_what_shared_memory_cannot_hold() {
        assert!(fft(FftMode::C2c, 0, 1, H200).is_err());
        assert!(fft(FftMode::C2c, 16384, 1, H200).is_err());
        // 4099 is prime: Bluestein over 16384 points.
        let e = fft(FftMode::R2c, 4099, 1, H200).unwrap_err().to_string();
        assert!(e.contains("Bluestein"), "{e}");
        // An sm_86 block's 99 KiB.
        assert!(fft(FftMode::C2c, 8192, 1, 99 << 10).is_ok());
        assert!(fft(FftMode::C2c, 4001, 1, 99 << 10).is_err());
    }
}
