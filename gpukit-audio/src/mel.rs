//! Mel scale, mel filter banks, mel spectrograms, decibels and MFCCs, as librosa defines them
//! (`librosa.hz_to_mel`, `filters.mel`, `feature.melspectrogram`, `power_to_db`,
//! `amplitude_to_db`, `feature.mfcc`). Filter banks and DCT matrices are built on the host in
//! f64 and rounded to f32 (as librosa builds them in f64 and casts); the projections run as
//! matrix products on the tensors' device.

use std::f64::consts::{LN_10, PI};
use std::sync::{Mutex, PoisonError};

use gpukit_ops::ops;
use gpukit_ops::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};
use gpukit_ops::{Device, Tensor};

use crate::spectrum::{self, Stft};
use crate::{Error, Result};

/// The mel scale's formula.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MelScale {
    /// Slaney's (the Auditory Toolbox's): linear below 1 kHz, logarithmic above (librosa's
    /// default).
    #[default]
    Slaney,
    /// HTK's: 2595 · log10(1 + f / 700).
    Htk,
}

/// How each mel filter is scaled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MelNorm {
    /// Unit area (Slaney's): each triangle divided by its width in Hz over 2 (librosa's
    /// default).
    #[default]
    Slaney,
    /// Peak 1.
    None,
}

const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

/// Hertz to mels.
pub fn hz_to_mel(hz: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 2595.0 * (1.0 + hz / 700.0).log10(),
        MelScale::Slaney if hz >= MIN_LOG_HZ => MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step(),
        MelScale::Slaney => hz / F_SP,
    }
}

/// Mels to hertz.
pub fn mel_to_hz(mel: f64, scale: MelScale) -> f64 {
    match scale {
        MelScale::Htk => 700.0 * (10f64.powf(mel / 2595.0) - 1.0),
        MelScale::Slaney if mel >= MIN_LOG_MEL => {
            MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
        }
        MelScale::Slaney => F_SP * mel,
    }
}

/// `n` frequencies evenly spaced in mels from `fmin` to `fmax` (`librosa.mel_frequencies`).
pub fn mel_frequencies(n: usize, fmin: f64, fmax: f64, scale: MelScale) -> Vec<f64> {
    let (lo, hi) = (hz_to_mel(fmin, scale), hz_to_mel(fmax, scale));
    (0..n)
        .map(|i| {
            let t = if n > 1 {
                i as f64 / (n - 1) as f64
            } else {
                0.0
            };
            mel_to_hz(lo + (hi - lo) * t, scale)
        })
        .collect()
}

/// The centre frequencies of an `n_fft`-point FFT's bins at `sr` Hz (`librosa.fft_frequencies`).
pub fn fft_frequencies(sr: f64, n_fft: usize) -> Vec<f64> {
    (0..=n_fft / 2)
        .map(|k| k as f64 * sr / n_fft as f64)
        .collect()
}

/// Mel filter bank parameters (librosa's names and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mel {
    /// Sample rate in Hz.
    pub sr: f64,
    /// Mel bands (librosa's default 128).
    pub n_mels: usize,
    /// Lowest frequency in Hz.
    pub fmin: f64,
    /// Highest frequency in Hz (`None`: `sr / 2`).
    pub fmax: Option<f64>,
    /// The mel formula.
    pub scale: MelScale,
    /// The filters' scaling.
    pub norm: MelNorm,
}

impl Mel {
    /// librosa's defaults at sample rate `sr`.
    pub fn new(sr: f64) -> Mel {
        Mel {
            sr,
            n_mels: 128,
            fmin: 0.0,
            fmax: None,
            scale: MelScale::Slaney,
            norm: MelNorm::Slaney,
        }
    }

    /// The filter bank `[n_mels, 1 + n_fft/2]` in f64, row-major (`librosa.filters.mel`):
    /// triangles between adjacent mel frequencies over the FFT bins.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a sample rate, band count or frequency range out of range.
    pub fn filters(&self, n_fft: usize) -> Result<Vec<f64>> {
        let fmax = self.fmax.unwrap_or(self.sr / 2.0);
        if self.sr.is_nan()
            || self.sr <= 0.0
            || self.n_mels == 0
            || n_fft == 0
            || !(0.0..fmax).contains(&self.fmin)
        {
            return Err(Error::invalid(
                "mel filters",
                format!(
                    "needs sr > 0, n_mels ≥ 1, n_fft ≥ 1 and 0 ≤ fmin < fmax; got sr {}, n_mels \
                     {}, n_fft {n_fft}, fmin {}, fmax {fmax}",
                    self.sr, self.n_mels, self.fmin
                ),
            ));
        }
        let bins = fft_frequencies(self.sr, n_fft);
        let mel_f = mel_frequencies(self.n_mels + 2, self.fmin, fmax, self.scale);
        let mut w = vec![0.0; self.n_mels * bins.len()];
        for i in 0..self.n_mels {
            let (d0, d1) = (mel_f[i + 1] - mel_f[i], mel_f[i + 2] - mel_f[i + 1]);
            let enorm = match self.norm {
                MelNorm::Slaney => 2.0 / (mel_f[i + 2] - mel_f[i]),
                MelNorm::None => 1.0,
            };
            for (k, &f) in bins.iter().enumerate() {
                let lower = (f - mel_f[i]) / d0;
                let upper = (mel_f[i + 2] - f) / d1;
                w[i * bins.len() + k] = lower.min(upper).max(0.0) * enorm;
            }
        }
        Ok(w)
    }

    /// The filter bank transposed, `[1 + n_fft/2, n_mels]` f32 on `device` (the right operand
    /// of the projection from frames stored one after another), made once ([`device_matrix`]).
    fn filters_t(&self, n_fft: usize, device: &Device) -> Result<Tensor> {
        device_matrix(Matrix::Mel(*self, n_fft), device, || {
            let w = self.filters(n_fft)?;
            let bins = n_fft / 2 + 1;
            let t: Vec<f32> = (0..bins * self.n_mels)
                .map(|i| w[(i % self.n_mels) * bins + i / self.n_mels] as f32)
                .collect();
            Ok(Tensor::from_slice(&t, &[bins, self.n_mels], device)?)
        })
    }
}

/// A constant matrix of the mel and MFCC pipelines, by what determines it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Matrix {
    /// The transposed filter bank of these parameters at this `n_fft`.
    Mel(Mel, usize),
    /// The transposed DCT of `n_mfcc` outputs over `n_mels` bands with this lifter.
    Dct {
        n_mfcc: usize,
        n_mels: usize,
        lifter: f64,
    },
}

/// Matrices kept on their devices (the most recently made ones).
const MATRICES_KEPT: usize = 16;

/// The device copies of the matrices made so far, oldest first.
static MATRICES: Mutex<Vec<(Matrix, Device, Tensor)>> = Mutex::new(Vec::new());

/// `which` on `device`: made by `make` the first time, then the same tensor (read only) — as
/// torchaudio's transforms keep theirs as module buffers. Uploading the filter bank on every
/// call took longer than the projection itself at speech shapes.
fn device_matrix(
    which: Matrix,
    device: &Device,
    make: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    let mut kept = MATRICES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, _, t)) = kept.iter().find(|(m, d, _)| *m == which && d.same(device)) {
        return Ok(t.clone());
    }
    let t = make()?;
    if kept.len() == MATRICES_KEPT {
        kept.remove(0);
    }
    kept.push((which, device.clone(), t.clone()));
    Ok(t)
}

/// `S · filters` for `S` `[.., bins, n_frames]` laid out as [`spectrum`] makes it (a transposed
/// view of contiguous frames): `[.., n_mels, n_frames]`, again a transposed view.
fn project(s: &Tensor, filters_t: &Tensor) -> Result<Tensor> {
    let r = s.rank();
    let frames = s.transpose(r - 2, r - 1)?;
    Ok(ops::matmul(&frames, filters_t)?.transpose(r - 2, r - 1)?)
}

/// The mel spectrogram `[.., n_mels, n_frames]` of `y` `[.., samples]`
/// (`librosa.feature.melspectrogram`): the mel filter bank applied to `|STFT|^power`.
///
/// # Errors
/// As [`spectrum::spectrogram`] and [`Mel::filters`].
pub fn melspectrogram(y: &Tensor, stft: &Stft, mel: &Mel, power: f32) -> Result<Tensor> {
    let s = spectrum::spectrogram(y, stft, power)?;
    project(&s, &mel.filters_t(stft.n_fft, &y.device())?)
}

/// The mel spectrogram of a spectrogram `s` `[.., 1 + n_fft/2, n_frames]` already computed.
///
/// # Errors
/// [`Error::Invalid`] when `s`'s bins do not match `n_fft`; as [`Mel::filters`].
pub fn mel_project(s: &Tensor, n_fft: usize, mel: &Mel) -> Result<Tensor> {
    let r = s.rank();
    if r < 2 || s.shape()[r - 2] != n_fft / 2 + 1 {
        return Err(Error::invalid(
            "mel",
            format!(
                "a spectrogram for n_fft = {n_fft} is [.., {}, n_frames], got {:?}",
                n_fft / 2 + 1,
                s.shape()
            ),
        ));
    }
    project(s, &mel.filters_t(n_fft, &s.device())?)
}

/// The reference `power_to_db` measures against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DbRef {
    /// A fixed value (librosa's default 1.0).
    Value(f32),
    /// The largest value of the input (librosa's `ref=np.max`), over the whole tensor.
    Max,
}

/// The largest element, as a tensor of one element on the device: the maxima of the rows of
/// the last axis first (a block per row), then of those — one block over every element of a
/// spectrogram batch would take milliseconds.
fn max_all(t: &Tensor) -> Result<Tensor> {
    if t.rank() < 2 {
        return Ok(ops::reduce_all(ReduceOp::Max, t)?);
    }
    let rows = ops::reduce(ReduceOp::Max, t, t.rank() - 1)?;
    Ok(ops::reduce_all(ReduceOp::Max, &rows)?)
}

/// Decibels `10 · log10(max(amin, S) / max(amin, ref))`, floored at `top_db` below the
/// largest (over the whole tensor) when given (`librosa.power_to_db`; defaults: ref 1, amin
/// 1e-10, top_db 80).
///
/// # Errors
/// [`Error::Invalid`] for `amin ≤ 0` or a negative `top_db`; tensor errors.
pub fn power_to_db(s: &Tensor, reference: DbRef, amin: f32, top_db: Option<f32>) -> Result<Tensor> {
    if amin.is_nan() || amin <= 0.0 || top_db.is_some_and(|t| t.is_nan() || t < 0.0) {
        return Err(Error::invalid(
            "power_to_db",
            format!("needs amin > 0 and top_db ≥ 0, got {amin} and {top_db:?}"),
        ));
    }
    let db = |t: &Tensor| -> Result<Tensor> {
        let clamped = ops::scalar(ScalarOp::Maximum, t, amin)?;
        let ln = ops::unary(UnaryOp::Log, &clamped)?;
        Ok(ops::scalar(ScalarOp::Mul, &ln, (10.0 / LN_10) as f32)?)
    };
    let mut log_spec = db(s)?;
    match reference {
        DbRef::Value(v) => {
            let r = 10.0 * f64::from(v.abs().max(amin)).log10();
            log_spec = ops::scalar(ScalarOp::Sub, &log_spec, r as f32)?;
        }
        DbRef::Max => {
            let peak = max_all(s)?;
            log_spec = ops::binary(BinaryOp::Sub, &log_spec, &db(&peak)?)?;
        }
    }
    if let Some(top) = top_db {
        // On the device: no read-back of the maximum.
        let floor = ops::scalar(ScalarOp::Sub, &max_all(&log_spec)?, top)?;
        log_spec = ops::binary(BinaryOp::Maximum, &log_spec, &floor)?;
    }
    Ok(log_spec)
}

/// Decibels of an amplitude spectrogram: [`power_to_db`] of `S²` with `ref²` and `amin²`
/// (`librosa.amplitude_to_db`; defaults: ref 1, amin 1e-5, top_db 80).
///
/// # Errors
/// As [`power_to_db`].
pub fn amplitude_to_db(
    s: &Tensor,
    reference: DbRef,
    amin: f32,
    top_db: Option<f32>,
) -> Result<Tensor> {
    let magnitude = ops::unary(UnaryOp::Abs, s)?;
    let power = ops::unary(UnaryOp::Square, &magnitude)?;
    let reference = match reference {
        DbRef::Value(v) => DbRef::Value(v * v),
        DbRef::Max => DbRef::Max,
    };
    power_to_db(&power, reference, amin * amin, top_db)
}

/// The orthonormal DCT-II matrix `[n_out, n]` (rows 0..n_out of scipy's `dct(type=2,
/// norm="ortho")`), each row k scaled by `1 + lifter/2 · sin(π(k+1)/lifter)` when `lifter > 0`
/// (`librosa.feature.mfcc`'s liftering).
pub fn dct_matrix(n_out: usize, n: usize, lifter: f64) -> Vec<f64> {
    let mut m = vec![0.0; n_out * n];
    for k in 0..n_out {
        let norm = if k == 0 {
            (1.0 / n as f64).sqrt()
        } else {
            (2.0 / n as f64).sqrt()
        };
        let lift = if lifter > 0.0 {
            1.0 + lifter / 2.0 * (PI * (k as f64 + 1.0) / lifter).sin()
        } else {
            1.0
        };
        for j in 0..n {
            m[k * n + j] =
                norm * lift * (PI * k as f64 * (2.0 * j as f64 + 1.0) / (2.0 * n as f64)).cos();
        }
    }
    m
}

/// MFCCs `[.., n_mfcc, n_frames]` of `y` `[.., samples]` (`librosa.feature.mfcc`): the
/// orthonormal DCT-II over the mel axis of `power_to_db` of the power mel spectrogram
/// (ref 1, amin 1e-10, top_db 80), optionally liftered.
///
/// # Errors
/// [`Error::Invalid`] for `n_mfcc` of 0 or above `n_mels`; as [`melspectrogram`].
pub fn mfcc(y: &Tensor, stft: &Stft, mel: &Mel, n_mfcc: usize, lifter: f64) -> Result<Tensor> {
    if n_mfcc == 0 || n_mfcc > mel.n_mels {
        return Err(Error::invalid(
            "mfcc",
            format!(
                "n_mfcc must be in 1..={} (n_mels), got {n_mfcc}",
                mel.n_mels
            ),
        ));
    }
    let s = melspectrogram(y, stft, mel, 2.0)?;
    let db = power_to_db(&s, DbRef::Value(1.0), 1e-10, Some(80.0))?;
    mfcc_from_db(&db, n_mfcc, lifter)
}

/// MFCCs `[.., n_mfcc, n_frames]` of a log-power mel spectrogram `db` `[.., n_mels, n_frames]`.
///
/// # Errors
/// [`Error::Invalid`] for `n_mfcc` of 0 or above the mel bands; tensor errors.
pub fn mfcc_from_db(db: &Tensor, n_mfcc: usize, lifter: f64) -> Result<Tensor> {
    let r = db.rank();
    let n_mels = if r >= 2 { db.shape()[r - 2] } else { 0 };
    if n_mfcc == 0 || n_mfcc > n_mels {
        return Err(Error::invalid(
            "mfcc",
            format!(
                "needs [.., n_mels, n_frames] with 1 ≤ n_mfcc ≤ n_mels, got {:?} and {n_mfcc}",
                db.shape()
            ),
        ));
    }
    let device = db.device();
    let which = Matrix::Dct {
        n_mfcc,
        n_mels,
        lifter,
    };
    let dct_t = device_matrix(which, &device, || {
        let m = dct_matrix(n_mfcc, n_mels, lifter);
        // Transposed: [n_mels, n_mfcc], the right operand for frames stored one after another.
        let t: Vec<f32> = (0..n_mels * n_mfcc)
            .map(|i| m[(i % n_mfcc) * n_mels + i / n_mfcc] as f32)
            .collect();
        Ok(Tensor::from_slice(&t, &[n_mels, n_mfcc], &device)?)
    })?;
    project(db, &dct_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mel_scales_invert_and_match_known_values() {
        for scale in [MelScale::Slaney, MelScale::Htk] {
            for hz in [0.0, 440.0, 1000.0, 8000.0] {
                assert!((mel_to_hz(hz_to_mel(hz, scale), scale) - hz).abs() < 1e-9);
            }
        }
        // librosa.hz_to_mel(440) = 6.6, (htk=True) = 549.638675…
        assert!((hz_to_mel(440.0, MelScale::Slaney) - 6.6).abs() < 1e-12);
        assert!((hz_to_mel(440.0, MelScale::Htk) - 549.638_675_381_149_9).abs() < 1e-9);
    }

    #[test]
    fn slaney_filters_have_unit_area_in_hz() {
        let mel = Mel {
            n_mels: 10,
            ..Mel::new(16000.0)
        };
        let w = mel.filters(4096).unwrap();
        let df = 16000.0 / 4096.0;
        for row in w.chunks(2049) {
            let area: f64 = row.iter().sum::<f64>() * df;
            assert!((area - 1.0).abs() < 0.02, "{area}");
        }
        assert!(
            Mel {
                fmin: 9000.0,
                ..mel
            }
            .filters(512)
            .is_err()
        );
    }

    #[test]
    fn matrices_are_made_once_per_parameters_and_device() {
        let mel = Mel::new(16_000.0);
        let a = mel.filters_t(512, &Device::Cpu).unwrap();
        let b = mel.filters_t(512, &Device::Cpu).unwrap();
        assert_eq!(a.to_vec_f32().unwrap(), b.to_vec_f32().unwrap());
        let kept = |m: Matrix| {
            MATRICES
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _, _)| *k == m)
                .count()
        };
        assert_eq!(kept(Matrix::Mel(mel, 512)), 1);
        // Other parameters are another matrix.
        let other = Mel { n_mels: 40, ..mel };
        let c = other.filters_t(512, &Device::Cpu).unwrap();
        assert_eq!(c.shape(), &[257, 40]);
        assert_eq!(kept(Matrix::Mel(other, 512)), 1);
        // Never more than MATRICES_KEPT.
        for n in 1..=MATRICES_KEPT + 2 {
            Mel { n_mels: n, ..mel }
                .filters_t(64, &Device::Cpu)
                .unwrap();
        }
        assert!(MATRICES.lock().unwrap().len() <= MATRICES_KEPT);
    }

    #[test]
    fn the_dct_is_orthonormal() {
        let n = 12;
        let m = dct_matrix(n, n, 0.0);
        for a in 0..n {
            for b in 0..n {
                let dot: f64 = (0..n).map(|j| m[a * n + j] * m[b * n + j]).sum();
                assert!((dot - f64::from(u8::from(a == b))).abs() < 1e-12);
            }
        }
    }
}
