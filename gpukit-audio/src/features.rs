//! Spectral features and emphasis filters (`librosa.feature.spectral_centroid`,
//! `spectral_bandwidth`, `spectral_flatness`, `spectral_rolloff`, `spectral_contrast`,
//! `librosa.effects.preemphasis` / `deemphasis`), composed from tensor ops on the
//! spectrogram's device.

use gpukit_ops::ops;
use gpukit_ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
use gpukit_ops::{Device, Tensor};

use gpukit_ops::signal;

use crate::mel::{DbRef, fft_frequencies, power_to_db};
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

/// The roll-off frequency `[.., 1, n_frames]` in Hz of a magnitude spectrogram `s`
/// `[.., 1 + n_fft/2, n_frames]`: the lowest bin frequency at which the cumulative magnitude
/// (an in-order f32 prefix sum over the bins, as numpy's `cumsum`) reaches `roll_percent` of
/// the frame's total (`librosa.feature.spectral_rolloff`, default 0.85).
///
/// # Errors
/// [`Error::Invalid`] for `roll_percent` outside (0, 1) or `s` without `n_fft`'s bins; tensor
/// errors.
pub fn spectral_rolloff(s: &Tensor, sr: f64, n_fft: usize, roll_percent: f32) -> Result<Tensor> {
    let axis = bins_axis("spectral_rolloff", s, n_fft)?;
    if !(roll_percent > 0.0 && roll_percent < 1.0) {
        return Err(Error::invalid(
            "spectral_rolloff",
            format!("roll_percent must be in (0, 1), got {roll_percent}"),
        ));
    }
    let total = signal::cumsum(s, axis)?;
    let bins = s.shape()[axis];
    let threshold = ops::scalar(
        ScalarOp::Mul,
        &total.narrow(axis, bins - 1, 1)?,
        roll_percent,
    )?;
    // The prefix sums are non-decreasing, so the bins below the threshold are a prefix: their
    // count is the index of the first bin that reaches it.
    let below = ops::binary(BinaryOp::Lt, &total, &threshold)?;
    Ok(ops::scalar(
        ScalarOp::Mul,
        &sum_keep(&below, axis)?,
        (sr / n_fft as f64) as f32,
    )?)
}

/// Parameters of [`spectral_contrast`] (librosa's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contrast {
    /// Lower edge of the first octave band, Hz (200).
    pub fmin: f64,
    /// Octave bands above the first sub-band (6; `n_bands + 1` rows come out).
    pub n_bands: usize,
    /// Fraction of a band's bins averaged for its peak and its valley (0.02).
    pub quantile: f64,
    /// Peak − valley in magnitude instead of in dB.
    pub linear: bool,
}

impl Default for Contrast {
    fn default() -> Self {
        Contrast {
            fmin: 200.0,
            n_bands: 6,
            quantile: 0.02,
            linear: false,
        }
    }
}

/// The spectral contrast `[.., n_bands + 1, n_frames]` of a magnitude spectrogram `s`
/// `[.., 1 + n_fft/2, n_frames]` (Jiang et al. 2002; `librosa.feature.spectral_contrast`):
/// per octave band (below `fmin`, then `fmin·2^k … fmin·2^(k+1)`, the last one to Nyquist,
/// each with librosa's edge bins), the mean of the largest `quantile` of its bins' magnitudes
/// (peak) against the mean of the smallest (valley), in dB (`power_to_db` of each, top_db 80)
/// or linear. Each band's bins are sorted per frame by the sort kernel.
///
/// # Errors
/// [`Error::Invalid`] for parameters out of range (a band edge at or above Nyquist, `quantile`
/// outside (0, 1), `fmin ≤ 0`, no bands) or `s` without `n_fft`'s bins; tensor errors.
pub fn spectral_contrast(s: &Tensor, sr: f64, n_fft: usize, p: &Contrast) -> Result<Tensor> {
    const F: &str = "spectral_contrast";
    let axis = bins_axis(F, s, n_fft)?;
    if p.n_bands == 0 || !(p.quantile > 0.0 && p.quantile < 1.0) || p.fmin.is_nan() || p.fmin <= 0.0
    {
        return Err(Error::invalid(
            F,
            format!(
                "needs n_bands ≥ 1, 0 < quantile < 1 and fmin > 0; got {}, {}, {}",
                p.n_bands, p.quantile, p.fmin
            ),
        ));
    }
    let mut octa = vec![0.0];
    octa.extend((0..=p.n_bands).map(|k| p.fmin * 2f64.powi(k as i32)));
    if octa[..octa.len() - 1].iter().any(|&f| f >= 0.5 * sr) {
        return Err(Error::invalid(
            F,
            format!(
                "the band edges fmin·2^k reach Nyquist ({} Hz): lower fmin or n_bands",
                0.5 * sr
            ),
        ));
    }
    let freq = fft_frequencies(sr, n_fft);
    let bins = freq.len();
    let mut valleys = Vec::with_capacity(p.n_bands + 1);
    let mut peaks = Vec::with_capacity(p.n_bands + 1);
    for k in 0..=p.n_bands {
        let (lo_hz, hi_hz) = (octa[k], octa[k + 1]);
        let inside: Vec<usize> = (0..bins)
            .filter(|&i| freq[i] >= lo_hz && freq[i] <= hi_hz)
            .collect();
        let (Some(&first), Some(&last)) = (inside.first(), inside.last()) else {
            return Err(Error::invalid(
                F,
                format!("no FFT bin lies in the band {lo_hz}–{hi_hz} Hz: raise n_fft or fmin"),
            ));
        };
        // librosa adds the bin below each band but the first, extends the last band to
        // Nyquist, and leaves out the top bin of every band but the last.
        let lo = if k > 0 {
            first.saturating_sub(1)
        } else {
            first
        };
        let hi = if k == p.n_bands { bins } else { last + 1 };
        let rows = hi - lo - usize::from(k < p.n_bands);
        let q = ((p.quantile * (hi - lo) as f64).round_ties_even() as usize).max(1);
        if rows == 0 || q > rows {
            return Err(Error::invalid(
                F,
                format!("the band {lo_hz}–{hi_hz} Hz holds too few bins: raise n_fft"),
            ));
        }
        // [.., n_frames, rows], each frame's magnitudes sorted ascending.
        let band = s.narrow(axis, lo, rows)?.transpose(axis, axis + 1)?;
        let sorted = signal::sort(&band)?;
        let last_axis = sorted.rank() - 1;
        valleys.push(ops::mean(&sorted.narrow(last_axis, 0, q)?, last_axis)?.unsqueeze(axis)?);
        peaks.push(ops::mean(&sorted.narrow(last_axis, rows - q, q)?, last_axis)?.unsqueeze(axis)?);
    }
    let valley = ops::concat(&valleys.iter().collect::<Vec<_>>(), axis)?;
    let peak = ops::concat(&peaks.iter().collect::<Vec<_>>(), axis)?;
    if p.linear {
        return Ok(ops::binary(BinaryOp::Sub, &peak, &valley)?);
    }
    let db = |t: &Tensor| power_to_db(t, DbRef::Value(1.0), 1e-10, Some(80.0));
    Ok(ops::binary(BinaryOp::Sub, &db(&peak)?, &db(&valley)?)?)
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

/// De-emphasis, the inverse of [`preemphasis`]: `y_out[n] = y[n] + coef · y_out[n − 1]` along
/// the last axis (`librosa.effects.deemphasis` with its default initial state: the zero-state
/// filter minus `((2 − coef)·y[0] − y[1]) / (3 − coef) · coef^n`), run by the first-order
/// recurrence kernel.
///
/// # Errors
/// [`Error::Invalid`] for a signal of fewer than 2 samples or a coefficient that is not
/// finite; tensor errors.
pub fn deemphasis(y: &Tensor, coef: f32) -> Result<Tensor> {
    let axis = y
        .rank()
        .checked_sub(1)
        .ok_or_else(|| Error::invalid("deemphasis", "needs a signal [.., samples]"))?;
    let len = y.shape()[axis];
    if len < 2 || !coef.is_finite() {
        return Err(Error::invalid(
            "deemphasis",
            format!("needs at least 2 samples and a finite coef, got {len} and {coef}"),
        ));
    }
    // K = ((2 − coef)·y[0] − y[1]) / (3 − coef), per row.
    let k = ops::scalar(
        ScalarOp::Div,
        &ops::binary(
            BinaryOp::Sub,
            &ops::scalar(ScalarOp::Mul, &y.narrow(axis, 0, 1)?, 2.0 - coef)?,
            &y.narrow(axis, 1, 1)?,
        )?,
        3.0 - coef,
    )?;
    if coef == 0.0 {
        // The filter is the identity; the correction K·0^n touches the first sample only.
        let first = ops::binary(BinaryOp::Sub, &y.narrow(axis, 0, 1)?, &k)?;
        return Ok(ops::concat(&[&first, &y.narrow(axis, 1, len - 1)?], axis)?);
    }
    // Starting the recurrence from y_out[−1] = −K / coef adds −K·coef^n to every output.
    let init = ops::scalar(ScalarOp::Div, &k, -coef)?;
    Ok(signal::linear_recurrence(y, axis, coef, Some(&init))?)
}

/// The chroma filter bank `[n_chroma, 1 + n_fft/2]` in f64, row-major (`librosa.filters.chroma`
/// with its defaults: Gaussian bumps per pitch class, each FFT bin's column of unit L2 norm,
/// weighted by a Gaussian over octaves centred on octave 5 with a width of 2, rows starting at
/// C). `tuning` is in fractions of a chroma bin.
///
/// # Errors
/// [`Error::Invalid`] for `sr ≤ 0`, `n_fft < 2` or no chroma bins.
pub fn chroma_filters(sr: f64, n_fft: usize, n_chroma: usize, tuning: f64) -> Result<Vec<f64>> {
    if sr.is_nan() || sr <= 0.0 || n_fft < 2 || n_chroma == 0 {
        return Err(Error::invalid(
            "chroma filters",
            format!("needs sr > 0, n_fft ≥ 2 and n_chroma ≥ 1; got {sr}, {n_fft}, {n_chroma}"),
        ));
    }
    let nc = n_chroma as f64;
    let a440 = 440.0 * 2f64.powf(tuning / nc);
    // Bins 1.. in chroma units; bin 0 placed 1.5 octaves below bin 1.
    let mut frqbins: Vec<f64> = (1..n_fft)
        .map(|k| nc * ((k as f64 * sr / n_fft as f64) / (a440 / 16.0)).log2())
        .collect();
    frqbins.insert(0, frqbins[0] - 1.5 * nc);
    let mut width: Vec<f64> = frqbins.windows(2).map(|w| (w[1] - w[0]).max(1.0)).collect();
    width.push(1.0);
    let half = (nc / 2.0).round();
    let bins = n_fft / 2 + 1;
    let mut w = vec![0.0; n_chroma * bins];
    for k in 0..bins {
        let column: Vec<f64> = (0..n_chroma)
            .map(|c| {
                let d = (frqbins[k] - c as f64 + half + 10.0 * nc).rem_euclid(nc) - half;
                (-0.5 * (2.0 * d / width[k]).powi(2)).exp()
            })
            .collect();
        let norm = column.iter().map(|v| v * v).sum::<f64>().sqrt();
        let norm = if norm < f64::MIN_POSITIVE { 1.0 } else { norm };
        let octave = (-0.5 * ((frqbins[k] / nc - 5.0) / 2.0).powi(2)).exp();
        for (c, v) in column.iter().enumerate() {
            // Rolled so that row 0 is C (3 semitone-classes after A).
            let row = (c + n_chroma - 3 * (n_chroma / 12) % n_chroma) % n_chroma;
            w[row * bins + k] = v / norm * octave;
        }
    }
    Ok(w)
}

/// The chromagram `[.., n_chroma, n_frames]` of a power spectrogram `s` `[.., 1 + n_fft/2,
/// n_frames]` (`librosa.feature.chroma_stft` with `tuning` given: librosa estimates it when
/// not), each frame divided by its largest value.
///
/// # Errors
/// As [`chroma_filters`]; [`Error::Invalid`] when `s` does not have `n_fft`'s bins.
pub fn chroma(s: &Tensor, sr: f64, n_fft: usize, n_chroma: usize, tuning: f64) -> Result<Tensor> {
    let axis = bins_axis("chroma", s, n_fft)?;
    let w = chroma_filters(sr, n_fft, n_chroma, tuning)?;
    let bins = n_fft / 2 + 1;
    // Transposed [bins, n_chroma]: the right operand over frames stored one after another.
    let t: Vec<f32> = (0..bins * n_chroma)
        .map(|i| w[(i % n_chroma) * bins + i / n_chroma] as f32)
        .collect();
    let fb = Tensor::from_slice(&t, &[bins, n_chroma], &s.device())?;
    let frames = s.transpose(axis, axis + 1)?;
    let raw = ops::matmul(&frames, &fb)?.transpose(axis, axis + 1)?;
    let peak = ops::reduce(ReduceOp::Max, &ops::unary(UnaryOp::Abs, &raw)?, axis)?;
    let safe = ops::scalar(ScalarOp::Maximum, &peak, f32::MIN_POSITIVE)?;
    Ok(ops::binary(BinaryOp::Div, &raw, &safe.unsqueeze(axis)?)?)
}

/// Savitzky–Golay weights `c` of the `order`-th derivative of a polynomial of degree `order`
/// fitted over `width` points: `y[t] = Σ_j c[j] · x[t − width/2 + j]` (Savitzky & Golay 1964;
/// scipy's `savgol_coeffs(width, order, deriv=order, use="dot")`).
fn savgol(width: usize, order: usize) -> Vec<f64> {
    // Least squares: A[j, i] = (j − half)^i; weights = order! · row `order` of (AᵀA)⁻¹Aᵀ.
    let half = (width / 2) as f64;
    let n = order + 1;
    let a = |j: usize, i: usize| (j as f64 - half).powi(i as i32);
    let mut m = vec![vec![0.0; 2 * n]; n];
    for (r, row) in m.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().take(n).enumerate() {
            *v = (0..width).map(|j| a(j, r) * a(j, c)).sum();
        }
        row[n + r] = 1.0;
    }
    // Gauss–Jordan with partial pivoting on the small normal matrix.
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&x, &y| m[x][col].abs().total_cmp(&m[y][col].abs()))
            .unwrap_or(col);
        m.swap(col, pivot);
        let p = m[col][col];
        for v in m[col].iter_mut() {
            *v /= p;
        }
        for r in 0..n {
            if r != col {
                let f = m[r][col];
                let pivot_row = m[col].clone();
                for (v, pv) in m[r].iter_mut().zip(pivot_row) {
                    *v -= f * pv;
                }
            }
        }
    }
    let factorial: f64 = (1..=order).map(|k| k as f64).product();
    (0..width)
        .map(|j| factorial * (0..n).map(|c| m[order][n + c] * a(j, c)).sum::<f64>())
        .collect()
}

/// The `order`-th delta (derivative estimate) of `data` along its last axis
/// (`librosa.feature.delta` with `mode="interp"`): a Savitzky–Golay filter of `width` points
/// (odd, ≥ 3, at most the axis' length) and polynomial degree `order`; within `width / 2` of
/// each end the derivative of the polynomial fitted to the first or last `width` points, which
/// for degree `order` is the value at the first or last full window.
///
/// # Errors
/// [`Error::Invalid`] for an even or small width, one longer than the axis, or order 0.
pub fn delta(data: &Tensor, width: usize, order: usize) -> Result<Tensor> {
    let axis = data
        .rank()
        .checked_sub(1)
        .ok_or_else(|| Error::invalid("delta", "needs [.., frames]"))?;
    let len = data.shape()[axis];
    if width < 3 || width.is_multiple_of(2) || width > len || order == 0 {
        return Err(Error::invalid(
            "delta",
            format!(
                "needs an odd width ≥ 3 and ≤ the {len} frames, and order ≥ 1; got width \
                 {width}, order {order}"
            ),
        ));
    }
    let c: Vec<f32> = savgol(width, order).iter().map(|&v| v as f32).collect();
    let weights = Tensor::from_slice(&c, &[width, 1], &data.device())?;
    // Windows [.., len − width + 1, width] · weights → [.., len − width + 1].
    let windows = data.unfold(axis, width, 1)?;
    let inner = ops::matmul(&windows, &weights)?.squeeze(axis + 1)?;
    let half = width / 2;
    Ok(gpukit_ops::signal::pad(
        &inner,
        half,
        half,
        gpukit_ops::signal::PadMode::Edge,
        0.0,
    )?)
}

/// The zero-crossing rate `[.., 1, n_frames]` of signals `y` `[.., samples]`
/// (`librosa.feature.zero_crossing_rate`): per frame of `frame_length` samples every
/// `hop_length`, the fraction of samples whose sign differs from the previous one's, values
/// within ±1e-10 counting as zero; `center` pads `frame_length / 2` copies of the edge samples
/// each side first (librosa's defaults: 2048, 512, centred).
///
/// # Errors
/// [`Error::Invalid`] for a frame or hop of 0 or a signal shorter than a frame; tensor errors.
pub fn zero_crossing_rate(
    y: &Tensor,
    frame_length: usize,
    hop_length: usize,
    center: bool,
) -> Result<Tensor> {
    let len = y.shape().last().copied().unwrap_or(0);
    if frame_length == 0 || hop_length == 0 || len == 0 {
        return Err(Error::invalid(
            "zero_crossing_rate",
            format!(
                "needs frame_length ≥ 1, hop_length ≥ 1 and samples; got {frame_length}, \
                 {hop_length}, {len}"
            ),
        ));
    }
    let y = if center {
        let half = frame_length / 2;
        gpukit_ops::signal::pad(y, half, half, gpukit_ops::signal::PadMode::Edge, 0.0)?
    } else {
        y.clone()
    };
    let padded = y.shape().last().copied().unwrap_or(0);
    if padded < frame_length {
        return Err(Error::invalid(
            "zero_crossing_rate",
            format!("{padded} samples are fewer than frame_length = {frame_length}"),
        ));
    }
    let mut shape = y.shape()[..y.rank() - 1].to_vec();
    shape.push((padded - frame_length) / hop_length + 1);
    let out = Tensor::empty(&shape, gpukit_ops::DType::F32, &y.device())?;
    gpukit_ops::signal::zero_crossing_rate_into(&y, frame_length, hop_length, 1e-10, &out)?;
    Ok(out.unsqueeze(out.rank() - 1)?)
}
