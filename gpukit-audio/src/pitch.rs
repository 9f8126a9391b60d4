//! Pitch: YIN fundamental-frequency estimation (de Cheveigné & Kawahara 2002; `librosa.yin`),
//! parabolic-interpolation pitch tracking (`librosa.piptrack`) and tuning estimation
//! (`librosa.estimate_tuning`), composed from tensor ops on the signal's device.

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
    (n.max(1)..).find(|&m| signal::smooth(m)).unwrap_or(n)
}

/// The view `[.., start..start + len]` of `t`'s last axis.
fn lags(t: &Tensor, start: usize, len: usize) -> Result<Tensor> {
    Ok(t.narrow(t.rank() - 1, start, len)?)
}

/// The views of `x` at positions 0..n−2, 1..n−1 and 2..n along `axis` (n ≥ 3): each interior
/// position's previous, own and next values.
fn neighbours(x: &Tensor, axis: usize) -> Result<(Tensor, Tensor, Tensor)> {
    let n = x.shape()[axis] - 2;
    Ok((
        x.narrow(axis, 0, n)?,
        x.narrow(axis, 1, n)?,
        x.narrow(axis, 2, n)?,
    ))
}

/// The offset of the vertex of the parabola through each position and its two neighbours along
/// `axis` (librosa's `_parabolic_interpolation`): `−b / a` with `a = x₊ + x₋ − 2x`,
/// `b = (x₊ − x₋) / 2`; 0 where the vertex would lie a position or more away, and at both ends.
fn parabolic_shifts(x: &Tensor, axis: usize) -> Result<Tensor> {
    let (prev, mid, next) = neighbours(x, axis)?;
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
    // a is replaced by 1 outside, so nothing divides by zero.
    let outside = sc(ScalarOp::RSub, &inside, 1.0)?;
    let safe_a = bin(BinaryOp::Add, &bin(BinaryOp::Mul, &inside, &a)?, &outside)?;
    let shift = bin(
        BinaryOp::Mul,
        &inside,
        &ops::unary(UnaryOp::Neg, &bin(BinaryOp::Div, &b, &safe_a)?)?,
    )?;
    let edge = Tensor::zeros(x.narrow(axis, 0, 1)?.shape(), DType::F32, &x.device())?;
    Ok(ops::concat(&[&edge, &shift, &edge], axis)?)
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

    let last = cmnd.rank() - 1;
    let shifts = parabolic_shifts(&cmnd, last)?;
    let (prev, mid, next) = neighbours(&cmnd, last)?;

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

/// Pitch-tracking parameters (librosa's `piptrack` names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piptrack {
    /// Sample rate, Hz (22 050).
    pub sr: f64,
    /// Lowest bin frequency considered, Hz (150).
    pub fmin: f64,
    /// Bin frequencies must lie below this, Hz (4000; at most `sr / 2`).
    pub fmax: f64,
    /// A peak must exceed this fraction of its frame's maximum (0.1).
    pub threshold: f32,
}

impl Default for Piptrack {
    fn default() -> Self {
        Piptrack {
            sr: 22050.0,
            fmin: 150.0,
            fmax: 4000.0,
            threshold: 0.1,
        }
    }
}

/// Pitches and their magnitudes `[.., bins, n_frames]` (zero elsewhere) of a magnitude (or
/// power) spectrogram `s` `[.., 1 + n_fft/2, n_frames]` (`librosa.piptrack` on `S`): at each
/// local maximum along frequency above `threshold` times its frame's maximum and with its bin
/// frequency in `[fmin, fmax)`, the frequency `(k + shift)·sr/n_fft` of the parabola through
/// the peak and its neighbours, and the magnitude `S + ½·gradient·shift` there.
///
/// # Errors
/// [`Error::Invalid`] for fewer than 3 bins or a threshold that is not finite; tensor errors.
pub fn piptrack(s: &Tensor, p: &Piptrack) -> Result<(Tensor, Tensor)> {
    const F: &str = "piptrack";
    let r = s.rank();
    if r < 2 || s.shape()[r - 2] < 3 || !p.threshold.is_finite() || p.sr.is_nan() || p.sr <= 0.0 {
        return Err(Error::invalid(
            F,
            format!(
                "needs a spectrogram [.., bins ≥ 3, n_frames], sr > 0 and a finite threshold; \
                 got {:?}, {}, {}",
                s.shape(),
                p.sr,
                p.threshold
            ),
        ));
    }
    let axis = r - 2;
    let bins = s.shape()[axis];
    let n_fft = 2 * (bins - 1);
    let dev = s.device();
    let s = ops::unary(UnaryOp::Abs, s)?;
    // np.gradient: central differences inside, one-sided at the ends.
    let (prev, _, next) = neighbours(&s, axis)?;
    let edge = |a: usize, b: usize| {
        bin(
            BinaryOp::Sub,
            &s.narrow(axis, a, 1)?,
            &s.narrow(axis, b, 1)?,
        )
    };
    let gradient = ops::concat(
        &[
            &edge(1, 0)?,
            &sc(ScalarOp::Div, &bin(BinaryOp::Sub, &next, &prev)?, 2.0)?,
            &edge(bins - 1, bins - 2)?,
        ],
        axis,
    )?;
    let shift = parabolic_shifts(&s, axis)?;
    let skew = sc(ScalarOp::Mul, &bin(BinaryOp::Mul, &gradient, &shift)?, 0.5)?;
    // Peaks of S where S exceeds threshold · (its frame's maximum).
    let reference = sc(
        ScalarOp::Mul,
        &ops::reduce(ReduceOp::Max, &s, axis)?.unsqueeze(axis)?,
        p.threshold,
    )?;
    let loud = bin(BinaryOp::Mul, &s, &bin(BinaryOp::Lt, &reference, &s)?)?;
    let (lp, lm, ln) = neighbours(&loud, axis)?;
    let interior = bin(
        BinaryOp::Mul,
        &bin(BinaryOp::Lt, &lp, &lm)?,
        &sc(ScalarOp::RSub, &bin(BinaryOp::Lt, &lm, &ln)?, 1.0)?,
    )?;
    let first = Tensor::zeros(loud.narrow(axis, 0, 1)?.shape(), DType::F32, &dev)?;
    let last = bin(
        BinaryOp::Lt,
        &loud.narrow(axis, bins - 2, 1)?,
        &loud.narrow(axis, bins - 1, 1)?,
    )?;
    let peak = ops::concat(&[&first, &interior, &last], axis)?;
    // Bin frequencies in [fmin, fmax), and each bin's index, as columns [bins, 1].
    let (fmin, fmax) = (p.fmin.max(0.0), p.fmax.min(p.sr / 2.0));
    let column = |f: &dyn Fn(usize) -> f32| {
        let v: Vec<f32> = (0..bins).map(f).collect();
        Tensor::from_slice(&v, &[bins, 1], &dev)
    };
    let freqs = crate::mel::fft_frequencies(p.sr, n_fft);
    let in_range = column(&|k| f32::from(u8::from(fmin <= freqs[k] && freqs[k] < fmax)))?;
    let index = column(&|k| k as f32)?;
    let chosen = bin(BinaryOp::Mul, &peak, &in_range)?;
    let pitches = bin(
        BinaryOp::Mul,
        &chosen,
        &sc(
            ScalarOp::Mul,
            &bin(BinaryOp::Add, &index, &shift)?,
            (p.sr / n_fft as f64) as f32,
        )?,
    )?;
    let mags = bin(BinaryOp::Mul, &chosen, &bin(BinaryOp::Add, &s, &skew)?)?;
    Ok((pitches, mags))
}

/// The tuning deviation from A440, in fractions of a bin of `bins_per_octave` per octave, of
/// the pitches in `frequencies` Hz (`librosa.pitch_tuning`): the histogram of each positive
/// frequency's offset from the nearest bin, in [−0.5, 0.5) with bins of `resolution`, and the
/// lower edge of its fullest bin (0 with no positive frequency).
pub fn pitch_tuning(frequencies: &[f64], resolution: f64, bins_per_octave: usize) -> f64 {
    let n_bins = (1.0 / resolution).ceil() as usize;
    let mut counts = vec![0usize; n_bins];
    // np.linspace(−0.5, 0.5, n_bins + 1), computed as numpy does.
    let step = 1.0 / n_bins as f64;
    let edges: Vec<f64> = (0..=n_bins)
        .map(|i| {
            if i == n_bins {
                0.5
            } else {
                i as f64 * step - 0.5
            }
        })
        .collect();
    let mut any = false;
    for &f in frequencies.iter().filter(|&&f| f > 0.0) {
        any = true;
        let octs = (f / (440.0 / 16.0)).log2();
        let mut residual = (bins_per_octave as f64 * octs).rem_euclid(1.0);
        if residual >= 0.5 {
            residual -= 1.0;
        }
        // np.histogram: half-open bins, the last one closed.
        let i = edges.partition_point(|&e| e <= residual).saturating_sub(1);
        counts[i.min(n_bins - 1)] += 1;
    }
    if !any {
        return 0.0;
    }
    let best = counts
        .iter()
        .enumerate()
        .fold(0, |best, (i, &c)| if c > counts[best] { i } else { best });
    edges[best]
}

/// The tuning of a spectrogram `s` `[.., 1 + n_fft/2, n_frames]` in fractions of a bin
/// (`librosa.estimate_tuning` on `S`): [`piptrack`], then [`pitch_tuning`] of the pitches whose
/// magnitude reaches the median magnitude of all tracked pitches. The pitches come to the host
/// for the median and the histogram.
///
/// # Errors
/// As [`piptrack`].
pub fn estimate_tuning(
    s: &Tensor,
    p: &Piptrack,
    resolution: f64,
    bins_per_octave: usize,
) -> Result<f64> {
    if !(resolution > 0.0 && resolution <= 1.0) || bins_per_octave == 0 {
        return Err(Error::invalid(
            "estimate_tuning",
            format!(
                "needs 0 < resolution ≤ 1 and bins_per_octave ≥ 1, got {resolution} and {bins_per_octave}"
            ),
        ));
    }
    let (pitches, mags) = piptrack(s, p)?;
    let pitches = pitches.to_vec::<f32>()?;
    let mags = mags.to_vec::<f32>()?;
    let mut tracked: Vec<f32> = pitches
        .iter()
        .zip(&mags)
        .filter(|(f, _)| **f > 0.0)
        .map(|(_, m)| *m)
        .collect();
    let threshold = if tracked.is_empty() {
        0.0
    } else {
        tracked.sort_by(f32::total_cmp);
        let n = tracked.len();
        if n % 2 == 1 {
            tracked[n / 2]
        } else {
            // numpy's median of float32: the mean of the middle two, in float32.
            (tracked[n / 2 - 1] + tracked[n / 2]) / 2.0
        }
    };
    let selected: Vec<f64> = pitches
        .iter()
        .zip(&mags)
        .filter(|(f, m)| **f > 0.0 && **m >= threshold)
        .map(|(f, _)| f64::from(*f))
        .collect();
    Ok(pitch_tuning(&selected, resolution, bins_per_octave))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pitch_tuning_finds_the_offset_of_detuned_pitches() {
        // A440 and its octaves a quarter of a semitone sharp.
        let sharp: Vec<f64> = [220.0, 440.0, 880.0]
            .iter()
            .map(|f| f * 2f64.powf(0.25 / 12.0))
            .collect();
        assert!((pitch_tuning(&sharp, 0.01, 12) - 0.25).abs() < 0.011);
        assert_eq!(pitch_tuning(&[], 0.01, 12), 0.0);
        assert_eq!(pitch_tuning(&[0.0, -3.0], 0.01, 12), 0.0);
    }

    #[test]
    fn fast_lengths_are_5_smooth() {
        assert_eq!(next_fast_len(4095), 4096);
        assert_eq!(next_fast_len(1001), 1024);
        assert_eq!(next_fast_len(97), 100);
        assert_eq!(next_fast_len(1), 1);
    }
}
