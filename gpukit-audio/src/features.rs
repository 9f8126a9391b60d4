//! Spectral features and emphasis filters (`librosa.feature.spectral_centroid`,
//! `spectral_bandwidth`, `spectral_flatness`, `librosa.effects.preemphasis`), composed from
//! tensor ops on the spectrogram's device.

use gpukit_ops::ops;
use gpukit_ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
use gpukit_ops::{Device, Tensor};

use crate::mel::fft_frequencies;
use crate::spectrum::{self, Stft};
use crate::{Error, Result};

/// The bin frequencies `[bins, 1]` f32 on `device`.
fn frequencies(sr: f64, n_fft: usize, device: &Device) -> Result<Tensor> {
    let f: Vec<f32> = fft_frequencies(sr, n_fft)
        .iter()
        .map(|&x| x as f32)
        .collect();
    Ok(Tensor::from_slice(&f, &[f.len(), 1], device)?)
}

/// The bins axis of a magnitude spectrogram `[.., bins, n_frames]`, checked against `n_fft`.
fn bins_axis(function: &'static str, s: &Tensor, n_fft: usize) -> Result<usize> {
    let r = s.rank();
    if r < 2 || s.shape()[r - 2] != n_fft / 2 + 1 {
        return Err(Error::invalid(
            function,
            format!(
                "a spectrogram for n_fft = {n_fft} is [.., {}, n_frames], got {:?}",
                n_fft / 2 + 1,
                s.shape()
            ),
        ));
    }
    Ok(r - 2)
}

/// The sum over `axis`, kept as an axis of 1.
fn sum_keep(t: &Tensor, axis: usize) -> Result<Tensor> {
    Ok(ops::sum(t, axis)?.unsqueeze(axis)?)
}

/// Each frame's magnitudes divided by their sum (frames summing to less than f32's smallest
/// normal value are left as they are, as librosa's `util.normalize(norm=1)` leaves them).
fn normalise_frames(s: &Tensor, axis: usize) -> Result<Tensor> {
    let total = sum_keep(s, axis)?;
    let safe = ops::scalar(ScalarOp::Maximum, &total, f32::MIN_POSITIVE)?;
    Ok(ops::binary(BinaryOp::Div, s, &safe)?)
}

/// The spectral centroid `[.., 1, n_frames]` of a magnitude spectrogram `s`
/// `[.., 1 + n_fft/2, n_frames]` at sample rate `sr`: each frame's magnitude-weighted mean
/// frequency in Hz.
///
/// # Errors
/// [`Error::Invalid`] when `s` does not have `n_fft`'s bins; tensor errors.
pub fn spectral_centroid(s: &Tensor, sr: f64, n_fft: usize) -> Result<Tensor> {
    let axis = bins_axis("spectral_centroid", s, n_fft)?;
    let weighted = ops::binary(
        BinaryOp::Mul,
        &normalise_frames(s, axis)?,
        &frequencies(sr, n_fft, &s.device())?,
    )?;
    sum_keep(&weighted, axis)
}

/// The spectral bandwidth of order `p` `[.., 1, n_frames]` of a magnitude spectrogram:
/// `(Σ_f S_norm · |f − centroid|^p)^(1/p)`.
///
/// # Errors
/// As [`spectral_centroid`]; [`Error::Invalid`] for `p ≤ 0`.
pub fn spectral_bandwidth(s: &Tensor, sr: f64, n_fft: usize, p: f32) -> Result<Tensor> {
    let axis = bins_axis("spectral_bandwidth", s, n_fft)?;
    if p.is_nan() || p <= 0.0 {
        return Err(Error::invalid(
            "spectral_bandwidth",
            format!("p must be positive, got {p}"),
        ));
    }
    let centroid = spectral_centroid(s, sr, n_fft)?;
    let deviation = ops::unary(
        UnaryOp::Abs,
        &ops::binary(
            BinaryOp::Sub,
            &frequencies(sr, n_fft, &s.device())?,
            &centroid,
        )?,
    )?;
    let powered = ops::scalar(ScalarOp::Pow, &deviation, p)?;
    let weighted = ops::binary(BinaryOp::Mul, &normalise_frames(s, axis)?, &powered)?;
    Ok(ops::scalar(
        ScalarOp::Pow,
        &sum_keep(&weighted, axis)?,
        1.0 / p,
    )?)
}

/// The spectral flatness `[.., 1, n_frames]` of a magnitude spectrogram: the geometric mean
/// of `max(amin, S^power)` over the arithmetic mean (Dubnov 2004; librosa's defaults amin
/// 1e-10, power 2).
///
/// # Errors
/// [`Error::Invalid`] for `amin ≤ 0` or `power ≤ 0`; tensor errors.
pub fn spectral_flatness(s: &Tensor, amin: f32, power: f32) -> Result<Tensor> {
    if amin.is_nan() || power.is_nan() || amin <= 0.0 || power <= 0.0 || s.rank() < 2 {
        return Err(Error::invalid(
            "spectral_flatness",
            format!(
                "needs [.., bins, n_frames], amin > 0 and power > 0; got {:?}, {amin}, {power}",
                s.shape()
            ),
        ));
    }
    let axis = s.rank() - 2;
    let powered = ops::scalar(ScalarOp::Pow, s, power)?;
    let thresh = ops::scalar(ScalarOp::Maximum, &powered, amin)?;
    let log_mean = ops::reduce(ReduceOp::Mean, &ops::unary(UnaryOp::Log, &thresh)?, axis)?;
    let gmean = ops::unary(UnaryOp::Exp, &log_mean)?;
    let amean = ops::reduce(ReduceOp::Mean, &thresh, axis)?;
    Ok(ops::binary(BinaryOp::Div, &gmean, &amean)?.unsqueeze(axis)?)
}

/// The magnitude spectrogram and then [`spectral_centroid`] of signals `y` `[.., samples]`.
///
/// # Errors
/// As [`spectrum::spectrogram`] and [`spectral_centroid`].
pub fn spectral_centroid_of(y: &Tensor, sr: f64, stft: &Stft) -> Result<Tensor> {
    spectral_centroid(&spectrum::spectrogram(y, stft, 1.0)?, sr, stft.n_fft)
}

/// Pre-emphasis `y[n] − coef · y[n − 1]` along the last axis (`librosa.effects.preemphasis`
/// with its default initial state): the first output is `y[0] + zi` with the filter state
/// `zi = 2·y[0] − y[1]`, as librosa passes it to `scipy.signal.lfilter`.
///
/// # Errors
/// [`Error::Invalid`] for a signal of fewer than 2 samples; tensor errors.
pub fn preemphasis(y: &Tensor, coef: f32) -> Result<Tensor> {
    let axis = y
        .rank()
        .checked_sub(1)
        .ok_or_else(|| Error::invalid("preemphasis", "needs a signal [.., samples]"))?;
    let len = y.shape()[axis];
    if len < 2 {
        return Err(Error::invalid(
            "preemphasis",
            format!("needs at least 2 samples (the initial state is 2·y[0] − y[1]), got {len}"),
        ));
    }
    // out = y − [−zi, coef·y[0], …, coef·y[n−2]]
    let first = y.narrow(axis, 0, 1)?;
    let zi = ops::binary(
        BinaryOp::Sub,
        &ops::scalar(ScalarOp::Mul, &first, 2.0)?,
        &y.narrow(axis, 1, 1)?,
    )?;
    let minus_zi = ops::unary(UnaryOp::Neg, &zi)?;
    let scaled = ops::scalar(ScalarOp::Mul, &y.narrow(axis, 0, len - 1)?, coef)?;
    let previous = ops::concat(&[&minus_zi, &scaled], axis)?;
    Ok(ops::binary(BinaryOp::Sub, y, &previous)?)
}
