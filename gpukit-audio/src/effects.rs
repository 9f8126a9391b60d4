//! Time and pitch effects and harmonic–percussive separation (`librosa.phase_vocoder`,
//! `librosa.effects.time_stretch` / `pitch_shift`, `librosa.decompose.hpss`,
//! `librosa.util.softmask`), composed from tensor ops on the spectrogram's device.

use std::f64::consts::PI;

use gpukit_ops::signal::{self, PadMode};
use gpukit_ops::{BinaryOp, ScalarOp, UnaryOp, ops};
use gpukit_ops::{DType, Tensor};

use crate::resample::{ResType, resample};
use crate::spectrum::{Stft, istft, stft};
use crate::{Error, Result};

/// The phase `[..]` in (−π, π] of complex values `[.., 2]` (`np.angle`).
fn angle(z: &Tensor) -> Result<Tensor> {
    let (re, im) = signal::complex_parts(z)?;
    Ok(ops::binary(BinaryOp::Atan2, &im, &re)?)
}

/// The STFT `[.., bins, n_frames, 2]` sped up by `rate` (> 1 shorter, < 1 longer) with the phase
/// vocoder (Flanagan & Golden 1966; `librosa.phase_vocoder`): `ceil(n_frames / rate)` frames
/// at times `t · rate`, magnitudes interpolated linearly between the two frames around each
/// time, phases advanced by each bin's measured instantaneous frequency. The phase
/// accumulation is an in-order f32 prefix sum of advances taken modulo 2π, so it stays accurate
/// where librosa's float32 path (whose phases grow by hop·π a frame) drifts from its own
/// float64 result. `hop_length` defaults to `n_fft / 4`, `n_fft` to `2·(bins − 1)`.
///
/// # Errors
/// [`Error::Invalid`] for a rate that is not positive and finite or a matrix that is not a
/// complex STFT; tensor errors.
pub fn phase_vocoder(d: &Tensor, rate: f64, hop_length: Option<usize>) -> Result<Tensor> {
    const F: &str = "phase_vocoder";
    let s = d.shape();
    if s.len() < 3 || s[s.len() - 1] != 2 || s[s.len() - 3] < 2 || s[s.len() - 2] == 0 {
        return Err(Error::invalid(
            F,
            format!("needs a complex STFT [.., bins ≥ 2, n_frames ≥ 1, 2], got {s:?}"),
        ));
    }
    if !rate.is_finite() || rate <= 0.0 {
        return Err(Error::invalid(
            F,
            format!("rate must be positive, got {rate}"),
        ));
    }
    let dev = d.device();
    let (bins, n_frames) = (s[s.len() - 3], s[s.len() - 2]);
    let n_fft = 2 * (bins - 1);
    let hop = hop_length.unwrap_or(n_fft / 4);
    let time_axis = d.rank() - 2;
    // np.arange(0, n_frames, rate): the float steps, their frames and fractions.
    let steps: Vec<f64> = (0..)
        .map(|t| t as f64 * rate)
        .take_while(|&x| x < n_frames as f64)
        .collect();
    let first: Vec<i64> = steps.iter().map(|&x| x.floor() as i64).collect();
    let second: Vec<i64> = first.iter().map(|&i| i + 1).collect();
    let alpha: Vec<f32> = steps.iter().map(|&x| (x - x.floor()) as f32).collect();
    let beta: Vec<f32> = steps
        .iter()
        .map(|&x| (1.0 - (x - x.floor())) as f32)
        .collect();
    let t = steps.len();
    // Two frames of zeros after the last, as librosa pads.
    let mut zshape = s.to_vec();
    zshape[time_axis] = 2;
    let padded = ops::concat(&[d, &Tensor::zeros(&zshape, DType::F32, &dev)?], time_axis)?;
    let ids = |v: &[i64]| Tensor::from_slice(v, &[v.len()], &dev);
    let c0 = ops::index_select(&padded, time_axis, &ids(&first)?)?;
    let c1 = ops::index_select(&padded, time_axis, &ids(&second)?)?;
    let weight = |w: &[f32]| Tensor::from_slice(w, &[t], &dev);
    let mag = ops::binary(
        BinaryOp::Add,
        &ops::binary(BinaryOp::Mul, &weight(&beta)?, &signal::complex_abs(&c0)?)?,
        &ops::binary(BinaryOp::Mul, &weight(&alpha)?, &signal::complex_abs(&c1)?)?,
    )?;
    // The expected phase advance per hop of each bin, hop·2πk/n_fft, taken modulo 2π (as
    // 2π·((hop·k) mod n_fft)/n_fft, exact in integers) as a column [bins, 1]: the phases then
    // differ from librosa's by whole turns only, and stay small enough that f32 keeps them
    // accurate (hop·2πk/n_fft itself reaches hop·π, whose f32 rounding would drift every step).
    let advance: Vec<f32> = (0..bins)
        .map(|k| (2.0 * PI * ((hop * k) % n_fft) as f64 / n_fft as f64) as f32)
        .collect();
    let advance = Tensor::from_slice(&advance, &[bins, 1], &dev)?;
    let (a0, a1) = (angle(&c0)?, angle(&c1)?);
    let dphase = ops::binary(
        BinaryOp::Sub,
        &ops::binary(BinaryOp::Sub, &a1, &a0)?,
        &advance,
    )?;
    // Wrapped to [−π, π]: dphase − 2π·round(dphase / 2π).
    let turns = ops::unary(
        UnaryOp::Round,
        &ops::scalar(ScalarOp::Div, &dphase, std::f32::consts::TAU)?,
    )?;
    let dphase = ops::binary(
        BinaryOp::Sub,
        &dphase,
        &ops::scalar(ScalarOp::Mul, &turns, std::f32::consts::TAU)?,
    )?;
    let step = ops::binary(BinaryOp::Add, &advance, &dphase)?;
    // phase[t] = angle(D[.., 0]) + Σ_{s<t} step[s], accumulated in order.
    let increments = ops::concat(
        &[
            &a0.narrow(time_axis, 0, 1)?,
            &step.narrow(time_axis, 0, t - 1)?,
        ],
        time_axis,
    )?;
    let phase = signal::cumsum(&increments, time_axis)?;
    Ok(signal::complex_from_parts(
        &ops::binary(BinaryOp::Mul, &mag, &ops::unary(UnaryOp::Cos, &phase)?)?,
        &ops::binary(BinaryOp::Mul, &mag, &ops::unary(UnaryOp::Sin, &phase)?)?,
    )?)
}

/// `y` `[.., n]` played `rate` times faster at the same pitch (`librosa.effects.time_stretch`):
/// STFT with `p`, [`phase_vocoder`], ISTFT to `round(n / rate)` samples.
///
/// # Errors
/// As [`stft`], [`phase_vocoder`] and [`istft`].
pub fn time_stretch(y: &Tensor, rate: f64, p: &Stft) -> Result<Tensor> {
    let n = y.shape().last().copied().unwrap_or(0);
    let d = stft(y, p)?;
    let stretched = phase_vocoder(&d, rate, Some(p.hop_length()))?;
    istft(
        &stretched,
        p,
        Some((n as f64 / rate).round_ties_even() as usize),
    )
}

/// `y` `[.., n]` shifted by `n_steps` steps of `1/bins_per_octave` octave at the same speed
/// (`librosa.effects.pitch_shift`): [`time_stretch`] by 2^(−n_steps/bins_per_octave), then
/// [`resample`] from `sr / rate` to `sr` (`res_type`; librosa's default soxr is not
/// implemented, and polyphase needs integer rates, so [`ResType::Fft`] is the usual choice),
/// trimmed or zero-padded to n samples.
///
/// # Errors
/// [`Error::Invalid`] for `bins_per_octave` of 0; as [`time_stretch`] and [`resample`].
pub fn pitch_shift(
    y: &Tensor,
    sr: f64,
    n_steps: f64,
    bins_per_octave: usize,
    res_type: ResType,
    scale: bool,
    p: &Stft,
) -> Result<Tensor> {
    if bins_per_octave == 0 || !n_steps.is_finite() {
        return Err(Error::invalid(
            "pitch_shift",
            format!(
                "needs bins_per_octave ≥ 1 and a finite n_steps, got {bins_per_octave} and {n_steps}"
            ),
        ));
    }
    let n = y.shape().last().copied().unwrap_or(0);
    let rate = 2f64.powf(-n_steps / bins_per_octave as f64);
    let stretched = time_stretch(y, rate, p)?;
    let shifted = resample(&stretched, sr / rate, sr, res_type, true, scale)?;
    let axis = shifted.rank() - 1;
    let len = shifted.shape()[axis];
    Ok(if len >= n {
        shifted.narrow(axis, 0, n)?
    } else {
        signal::pad(&shifted, 0, n - len, PadMode::Constant, 0.0)?
    })
}

/// The soft mask `X^p / (X^p + X_ref^p)` of two non-negative tensors of one shape, both first
/// divided by their elementwise maximum (`librosa.util.softmask` for a finite `power`): where
/// that maximum is below f32's smallest normal value, 0.5 when `split_zeros`, else 0.
///
/// # Errors
/// [`Error::Invalid`] for a power that is not positive and finite; tensor errors (shapes).
pub fn softmask(x: &Tensor, x_ref: &Tensor, power: f32, split_zeros: bool) -> Result<Tensor> {
    if !power.is_finite() || power <= 0.0 {
        return Err(Error::invalid(
            "softmask",
            format!("power must be positive and finite, got {power}"),
        ));
    }
    if x.shape() != x_ref.shape() {
        return Err(Error::invalid(
            "softmask",
            format!(
                "X {:?} and X_ref {:?} differ in shape",
                x.shape(),
                x_ref.shape()
            ),
        ));
    }
    let z = ops::binary(BinaryOp::Maximum, x, x_ref)?;
    let tiny = Tensor::full(&[1], f64::from(f32::MIN_POSITIVE), DType::F32, &x.device())?;
    // 1 where the maximum is (numerically) zero; there Z is replaced by 1.
    let bad = ops::binary(BinaryOp::Lt, &z, &tiny)?;
    let z = ops::binary(
        BinaryOp::Add,
        &z,
        &ops::binary(BinaryOp::Mul, &bad, &ops::scalar(ScalarOp::RSub, &z, 1.0)?)?,
    )?;
    let ratio = |t: &Tensor| -> Result<Tensor> {
        Ok(ops::scalar(
            ScalarOp::Pow,
            &ops::binary(BinaryOp::Div, t, &z)?,
            power,
        )?)
    };
    let (m, r) = (ratio(x)?, ratio(x_ref)?);
    // The denominator is ≥ 1 where Z is not zero (one of the ratios is 1); 1 is added where it
    // is, so nothing divides by zero.
    let denom = ops::binary(BinaryOp::Add, &ops::binary(BinaryOp::Add, &m, &r)?, &bad)?;
    let good = ops::scalar(ScalarOp::RSub, &bad, 1.0)?;
    let mask = ops::binary(
        BinaryOp::Mul,
        &ops::binary(BinaryOp::Div, &m, &denom)?,
        &good,
    )?;
    Ok(if split_zeros {
        ops::binary(
            BinaryOp::Add,
            &mask,
            &ops::scalar(ScalarOp::Mul, &bad, 0.5)?,
        )?
    } else {
        mask
    })
}

/// Parameters of harmonic–percussive source separation (librosa's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hpss {
    /// Median filter lengths: frames for the harmonic part, bins for the percussive part
    /// (librosa's `kernel_size`, 31 and 31).
    pub kernel_size: (usize, usize),
    /// Soft-mask exponent (2).
    pub power: f32,
    /// Margins (≥ 1) for the harmonic and percussive masks (1 and 1).
    pub margin: (f32, f32),
}

impl Default for Hpss {
    fn default() -> Self {
        Hpss {
            kernel_size: (31, 31),
            power: 2.0,
            margin: (1.0, 1.0),
        }
    }
}

/// The harmonic and percussive soft masks `[.., bins, n_frames]` of a magnitude spectrogram
/// `s` `[.., bins, n_frames]` (`librosa.decompose.hpss(mask=True)`; Fitzgerald 2010, with the
/// margins of Driedger, Müller & Disch 2014): medians across time (harmonic) and across
/// frequency (percussive), scipy's `"reflect"` boundary, then [`softmask`].
///
/// # Errors
/// [`Error::Invalid`] for margins below 1 or a spectrogram of fewer than 2 axes; as
/// [`signal::median_filter`] and [`softmask`].
pub fn hpss_masks(s: &Tensor, p: &Hpss) -> Result<(Tensor, Tensor)> {
    const F: &str = "hpss";
    if s.rank() < 2 {
        return Err(Error::invalid(
            F,
            format!(
                "needs a spectrogram [.., bins, n_frames], got {:?}",
                s.shape()
            ),
        ));
    }
    let (mh, mp) = p.margin;
    if mh.is_nan() || mp.is_nan() || mh < 1.0 || mp < 1.0 {
        return Err(Error::invalid(
            F,
            format!("margins must be ≥ 1, got {mh} and {mp}"),
        ));
    }
    let r = s.rank();
    let harm = signal::median_filter(s, r - 1, p.kernel_size.0, PadMode::Symmetric, 0.0)?;
    let perc = signal::median_filter(s, r - 2, p.kernel_size.1, PadMode::Symmetric, 0.0)?;
    let split_zeros = mh == 1.0 && mp == 1.0;
    let mask_h = softmask(
        &harm,
        &ops::scalar(ScalarOp::Mul, &perc, mh)?,
        p.power,
        split_zeros,
    )?;
    let mask_p = softmask(
        &perc,
        &ops::scalar(ScalarOp::Mul, &harm, mp)?,
        p.power,
        split_zeros,
    )?;
    Ok((mask_h, mask_p))
}

/// The harmonic and percussive parts `[.., bins, n_frames, 2]` of a complex STFT `d`
/// `[.., bins, n_frames, 2]` (`librosa.decompose.hpss` on a complex matrix): `d` times each
/// of [`hpss_masks`] of its magnitude.
///
/// # Errors
/// [`Error::Invalid`] for a matrix that is not complex; as [`hpss_masks`].
pub fn hpss(d: &Tensor, p: &Hpss) -> Result<(Tensor, Tensor)> {
    if d.rank() < 3 || d.shape()[d.rank() - 1] != 2 {
        return Err(Error::invalid(
            "hpss",
            format!(
                "needs a complex STFT [.., bins, n_frames, 2], got {:?}",
                d.shape()
            ),
        ));
    }
    let (mh, mp) = hpss_masks(&signal::complex_abs(d)?, p)?;
    let r = d.rank() - 1;
    Ok((
        ops::binary(BinaryOp::Mul, d, &mh.unsqueeze(r)?)?,
        ops::binary(BinaryOp::Mul, d, &mp.unsqueeze(r)?)?,
    ))
}

/// The harmonic and percussive signals `[.., n]` of `y` `[.., n]` (`librosa.effects.hpss`):
/// STFT with `st`, [`hpss`], and the ISTFT of each part at the input's length.
///
/// # Errors
/// As [`stft`], [`hpss`] and [`istft`].
pub fn hpss_signal(y: &Tensor, st: &Stft, p: &Hpss) -> Result<(Tensor, Tensor)> {
    let n = y.shape().last().copied().unwrap_or(0);
    let (h, q) = hpss(&stft(y, st)?, p)?;
    Ok((istft(&h, st, Some(n))?, istft(&q, st, Some(n))?))
}
