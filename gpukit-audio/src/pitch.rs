//! Fundamental-frequency estimation: YIN (de Cheveigné & Kawahara 2002) as `librosa.yin`
//! computes it, composed from tensor ops on the signal's device.

use gpukit_ops::signal::{self, FftOutput, PadMode};
use gpukit_ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp, ops};
use gpukit_ops::{DType, Tensor};

use crate::{Error, Result};

/// YIN parameters (librosa's names and defaults; `fmin` and `fmax` have none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yin {
    /// Lowest frequency searched, Hz.
    pub fmin: f64,
    /// Highest frequency searched, Hz (at most `sr / 2`).
    pub fmax: f64,
    /// Sample rate, Hz (22 050).
    pub sr: f64,
    /// Samples per analysis frame (2048); one period of `fmin` must fit.
    pub frame_length: usize,
    /// Samples between frames (`None`: `frame_length / 4`).
    pub hop_length: Option<usize>,
    /// A trough of the normalised difference below this counts as a period (0.1).
    pub trough_threshold: f32,
    /// Centre frame t on sample `t · hop` by padding `frame_length / 2` each side.
    pub center: bool,
    /// How `center` pads (zeros by default).
    pub pad_mode: PadMode,
}

impl Yin {
    /// Defaults for the search range `fmin..fmax` Hz.
    pub fn new(fmin: f64, fmax: f64) -> Yin {
        Yin {
            fmin,
            fmax,
            sr: 22050.0,
            frame_length: 2048,
            hop_length: None,
            trough_threshold: 0.1,
            center: true,
            pad_mode: PadMode::Constant,
        }
    }
}

/// The smallest 2^a·3^b·5^c ≥ n (`scipy.fft.next_fast_len(n, real=True)`).
fn next_fast_len(n: usize) -> usize {
    let smooth = |mut m: usize| {
        for p in [2, 3, 5] {
            while m.is_multiple_of(p) {
                m /= p;
            }
        }
        m == 1
    };
    (n.max(1)..).find(|&m| smooth(m)).unwrap_or(n)
}

/// The view `[.., start..start + len]` of `t`'s last axis.
fn lags(t: &Tensor, start: usize, len: usize) -> Result<Tensor> {
    Ok(t.narrow(t.rank() - 1, start, len)?)
}

/// One binary op.
fn bin(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(ops::binary(op, a, b)?)
}

/// One scalar op.
fn sc(op: ScalarOp, a: &Tensor, s: f32) -> Result<Tensor> {
    Ok(ops::scalar(op, a, s)?)
}

/// The fundamental frequency `[.., n_frames]` in Hz of signals `y` `[.., samples]` by YIN
/// (`librosa.yin`): per frame, the cumulative-mean-normalised difference function over periods
/// `floor(sr / fmax) ..= ceil(sr / fmin)` (autocorrelations by FFT), the first local minimum
/// below `trough_threshold` (else the global minimum), refined by parabolic interpolation.
///
/// # Errors
/// [`Error::Invalid`] for a range outside `0 < fmin < fmax ≤ sr/2`, a frame too short for one
/// period of `fmin`, or a signal shorter than a frame; tensor errors.
pub fn yin(y: &Tensor, p: &Yin) -> Result<Tensor> {
    const F: &str = "yin";
    let (sr, fl) = (p.sr, p.frame_length);
    if !(p.fmin > 0.0 && p.fmin < p.fmax && p.fmax <= sr / 2.0) {
        return Err(Error::invalid(
            F,
            format!(
                "needs 0 < fmin < fmax ≤ sr/2, got fmin {}, fmax {}, sr {sr}",
                p.fmin, p.fmax
            ),
        ));
    }
    if sr / p.fmin >= fl as f64 - 1.0 {
        return Err(Error::invalid(
            F,
            format!(
                "a frame of {fl} samples holds no period of fmin = {} Hz at {sr} Hz: use \
                 fmin ≥ {:.3} or frame_length ≥ {}",
                p.fmin,
                sr / (fl as f64 - 1.0),
                (sr / p.fmin).ceil() as usize + 1
            ),
        ));
    }
    let hop = p.hop_length.unwrap_or(fl / 4);
    let n = y.shape().last().copied().unwrap_or(0);
    if hop == 0 || y.rank() == 0 {
        return Err(Error::invalid(
            F,
            "needs a signal [.., samples] and a hop ≥ 1",
        ));
    }
    let padded = if p.center {
        signal::pad(y, fl / 2, fl / 2, p.pad_mode, 0.0)?
    } else {
        y.clone()
    };
    let len = padded.shape()[padded.rank() - 1];
    if len < fl {
        return Err(Error::invalid(
            F,
            format!("a signal of {n} samples is shorter than a frame of {fl}"),
        ));
    }
    // [.., n_frames, frame_length], contiguous for the FFT's zero padding.
    let frames = padded.unfold(padded.rank() - 1, fl, hop)?.contiguous()?;
    let min_period = (sr / p.fmax).floor() as usize;
    let max_period = ((sr / p.fmin).ceil() as usize).min(fl - 1);
    let count = max_period - min_period + 1;
    if count < 3 {
        return Err(Error::invalid(
            F,
            format!("fmin..fmax spans {count} periods; YIN needs at least 3"),
        ));
    }

    // Autocorrelation r[τ], τ = 0..=max_period: the inverse FFT of the power spectrum of the
    // frame zero-padded to a fast length ≥ 2·frame_length − 1 (librosa.autocorrelate).
    let n_pad = next_fast_len(2 * fl - 1);
    let zero_padded = signal::pad(&frames, 0, n_pad - fl, PadMode::Constant, 0.0)?;
    let mut shape = zero_padded.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = n_pad / 2 + 1;
    let power = Tensor::empty(&shape, DType::F32, &y.device())?;
    signal::rfft_into(&zero_padded, None, FftOutput::Power, &power)?;
    let r = power.rank();
    let power_c = ops::concat(
        &[
            &power.unsqueeze(r)?,
            &Tensor::zeros(power.shape(), DType::F32, &y.device())?.unsqueeze(r)?,
        ],
        r,
    )?;
    let acf = lags(&signal::irfft(&power_c, n_pad, None)?, 0, max_period + 1)?;

    // d[τ] = 2·(r[0] − r[τ]) − E[τ − 1] for τ = 1..=max_period, E the running energy with
    // E[0] taken as 0 (librosa zeroes it before using it).
    let energy = signal::cumsum(&ops::unary(UnaryOp::Square, &frames)?, frames.rank() - 1)?;
    let energy = ops::concat(
        &[
            &Tensor::zeros(lags(&energy, 0, 1)?.shape(), DType::F32, &y.device())?,
            &lags(&energy, 1, max_period - 1)?,
        ],
        energy.rank() - 1,
    )?;
    let d = bin(
        BinaryOp::Sub,
        &sc(
            ScalarOp::Mul,
            &bin(
                BinaryOp::Sub,
                &lags(&acf, 0, 1)?,
                &lags(&acf, 1, max_period)?,
            )?,
            2.0,
        )?,
        &energy,
    )?;
    // Normalised by the cumulative mean of d over 1..=τ, for τ = min_period..=max_period.
    let taus: Vec<f32> = (1..=max_period).map(|t| t as f32).collect();
    let taus = Tensor::from_slice(&taus, &[max_period], &y.device())?;
    let cmean = bin(BinaryOp::Div, &signal::cumsum(&d, d.rank() - 1)?, &taus)?;
    let numerator = lags(&d, min_period - 1, count)?;
    let denominator = sc(
        ScalarOp::Add,
        &lags(&cmean, min_period - 1, count)?,
        f32::MIN_POSITIVE,
    )?;
    let cmnd = bin(BinaryOp::Div, &numerator, &denominator)?;

    // Parabolic-interpolation shifts at interior lags (0 at both ends, and where the parabola's
    // vertex would lie more than a lag away).
    let (prev, mid, next) = (
        lags(&cmnd, 0, count - 2)?,
        lags(&cmnd, 1, count - 2)?,
        lags(&cmnd, 2, count - 2)?,
    );
    let a = bin(
        BinaryOp::Sub,
        &bin(BinaryOp::Add, &next, &prev)?,
        &sc(ScalarOp::Mul, &mid, 2.0)?,
    )?;
    let b = sc(ScalarOp::Div, &bin(BinaryOp::Sub, &next, &prev)?, 2.0)?;
    let inside = bin(
        BinaryOp::Lt,
        &ops::unary(UnaryOp::Abs, &b)?,
        &ops::unary(UnaryOp::Abs, &a)?,
    )?;
    let outside = sc(ScalarOp::RSub, &inside, 1.0)?;
    let safe_a = bin(BinaryOp::Add, &bin(BinaryOp::Mul, &inside, &a)?, &outside)?;
    let shift = bin(
        BinaryOp::Mul,
        &inside,
        &ops::unary(UnaryOp::Neg, &bin(BinaryOp::Div, &b, &safe_a)?)?,
    )?;
    let edge = Tensor::zeros(lags(&cmnd, 0, 1)?.shape(), DType::F32, &y.device())?;
    let last = cmnd.rank() - 1;
    let shifts = ops::concat(&[&edge, &shift, &edge], last)?;

    // Troughs: the first lag below its successor; interior local minima (x < left, x ≤ right);
    // the last lag below its predecessor.
    let not_above_next = sc(ScalarOp::RSub, &bin(BinaryOp::Lt, &next, &mid)?, 1.0)?;
    let interior = bin(
        BinaryOp::Mul,
        &bin(BinaryOp::Lt, &mid, &prev)?,
        &not_above_next,
    )?;
    let trough = ops::concat(
        &[
            &bin(BinaryOp::Lt, &lags(&cmnd, 0, 1)?, &lags(&cmnd, 1, 1)?)?,
            &interior,
            &bin(
                BinaryOp::Lt,
                &lags(&cmnd, count - 1, 1)?,
                &lags(&cmnd, count - 2, 1)?,
            )?,
        ],
        last,
    )?;
    let threshold = Tensor::full(&[1], f64::from(p.trough_threshold), DType::F32, &y.device())?;
    let below = bin(
        BinaryOp::Mul,
        &trough,
        &bin(BinaryOp::Lt, &cmnd, &threshold)?,
    )?;
    // The first trough below the threshold (score 2), else the first global minimum (score 1):
    // argmax takes the first of equal scores.
    let minimum = ops::reduce(ReduceOp::Min, &cmnd, last)?.unsqueeze(last)?;
    let at_minimum = sc(ScalarOp::RSub, &bin(BinaryOp::Lt, &minimum, &cmnd)?, 1.0)?;
    let score = bin(
        BinaryOp::Maximum,
        &sc(ScalarOp::Mul, &below, 2.0)?,
        &at_minimum,
    )?;
    let pick = ops::argmax(&score, last)?.unsqueeze(last)?;
    // Period in samples: min_period + lag + shift.
    let offsets: Vec<f32> = (0..count).map(|i| (min_period + i) as f32).collect();
    let offsets = Tensor::from_slice(&offsets, &[count], &y.device())?;
    let period = ops::gather(&bin(BinaryOp::Add, &shifts, &offsets)?, last, &pick)?;
    Ok(ops::scalar(
        ScalarOp::RDiv,
        &period.squeeze(last)?,
        sr as f32,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_lengths_are_5_smooth() {
        assert_eq!(next_fast_len(4095), 4096);
        assert_eq!(next_fast_len(1001), 1024);
        assert_eq!(next_fast_len(97), 100);
        assert_eq!(next_fast_len(1), 1);
    }
}
