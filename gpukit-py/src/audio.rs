//! `gpukit-audio` for Python: the functions behind `gpukit.audio` (`python/gpukit/audio.py`
//! wraps them with librosa's signatures, numpy in and out). They take and return `gk.Tensor`s,
//! run where their inputs are, and release the GIL.

use gpukit_audio::cqt::Cqt;
use gpukit_audio::effects::{self, Hpss};
use gpukit_audio::features::{self, Contrast};
use gpukit_audio::mel::{self, DbRef, Mel, MelNorm, MelScale};
use gpukit_audio::pitch::{self, Piptrack, Yin};
use gpukit_audio::resample::ResType;
use gpukit_audio::spectrum::{self, PhaseInit};
use gpukit_audio::wav::{self, WavFormat};
use gpukit_audio::{PadMode, Stft, Window};
use gpukit_ops::Tensor;
use pyo3::prelude::*;

use crate::errors::{self, value};
use crate::tensor::PyTensor;

/// Runs `f` without the GIL, its audio error as the matching exception.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> gpukit_audio::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(errors::audio)
}

/// A numpy `np.pad` mode name.
fn pad_mode_of(name: &str) -> PyResult<PadMode> {
    Ok(match name {
        "constant" => PadMode::Constant,
        "edge" => PadMode::Edge,
        "reflect" => PadMode::Reflect,
        "symmetric" => PadMode::Symmetric,
        other => {
            return Err(value(format!(
                "pad_mode {other:?}: gpukit pads with \"constant\" (zeros), \"edge\", \"reflect\" \
                 or \"symmetric\""
            )));
        }
    })
}

fn stft_params(
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
) -> PyResult<Stft> {
    let window = Window::from_name(window).ok_or_else(|| {
        value(format!(
            "window {window:?}: gpukit has hann, hamming, blackman and boxcar"
        ))
    })?;
    let pad_mode = pad_mode_of(pad_mode)?;
    Ok(Stft {
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        pad_mode,
    })
}

fn mel_params(
    sr: f64,
    n_mels: usize,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&str>,
) -> PyResult<Mel> {
    let norm = match norm {
        Some("slaney") => MelNorm::Slaney,
        None => MelNorm::None,
        Some(other) => {
            return Err(value(format!(
                "norm {other:?}: gpukit's mel filters take \"slaney\" or None"
            )));
        }
    };
    Ok(Mel {
        sr,
        n_mels,
        fmin,
        fmax,
        scale: if htk { MelScale::Htk } else { MelScale::Slaney },
        norm,
    })
}

fn t(x: &Bound<'_, PyTensor>) -> Tensor {
    x.get().t.clone()
}

/// Complex STFT `[.., 1 + n_fft/2, n_frames, 2]` of `y [.., samples]` (float32).
#[pyfunction]
#[pyo3(signature = (y, n_fft, hop_length, win_length, window, center, pad_mode))]
pub fn stft(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let y = t(y);
    Ok(PyTensor::new(run(py, move || gpukit_audio::stft(&y, &p))?))
}

/// `|STFT|^power` `[.., 1 + n_fft/2, n_frames]`.
#[pyfunction]
#[pyo3(signature = (y, n_fft, hop_length, win_length, window, center, pad_mode, power))]
pub fn spectrogram(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
    power: f32,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        gpukit_audio::spectrogram(&y, &p, power)
    })?))
}

/// The signal of a complex STFT `[.., bins, n_frames, 2]`.
#[pyfunction]
#[pyo3(signature = (s, n_fft, hop_length, win_length, window, center, length))]
pub fn istft(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    length: Option<usize>,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, "constant")?;
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        gpukit_audio::istft(&s, &p, length)
    })?))
}

/// The mel filter bank `[n_mels, 1 + n_fft/2]` (float32, CPU).
#[pyfunction]
#[pyo3(signature = (sr, n_fft, n_mels, fmin, fmax, htk, norm))]
pub fn mel_filters(
    sr: f64,
    n_fft: usize,
    n_mels: usize,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&str>,
) -> PyResult<PyTensor> {
    let m = mel_params(sr, n_mels, fmin, fmax, htk, norm)?;
    let w = m.filters(n_fft).map_err(errors::audio)?;
    let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let t = Tensor::from_slice(&w, &[n_mels, n_fft / 2 + 1], &gpukit_ops::Device::Cpu)
        .map_err(errors::ops)?;
    Ok(PyTensor::new(t))
}

/// A spectrogram `[.., 1 + n_fft/2, n_frames]` projected on the mel filter bank.
#[pyfunction]
#[pyo3(signature = (s, n_fft, sr, n_mels, fmin, fmax, htk, norm))]
pub fn mel_project(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    n_fft: usize,
    sr: f64,
    n_mels: usize,
    fmin: f64,
    fmax: Option<f64>,
    htk: bool,
    norm: Option<&str>,
) -> PyResult<PyTensor> {
    let m = mel_params(sr, n_mels, fmin, fmax, htk, norm)?;
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        mel::mel_project(&s, n_fft, &m)
    })?))
}

fn db_ref(reference: Option<f32>) -> DbRef {
    reference.map_or(DbRef::Max, DbRef::Value)
}

/// `power_to_db` (`reference` None: the maximum).
#[pyfunction]
#[pyo3(signature = (s, reference, amin, top_db))]
pub fn power_to_db(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    reference: Option<f32>,
    amin: f32,
    top_db: Option<f32>,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        mel::power_to_db(&s, db_ref(reference), amin, top_db)
    })?))
}

/// `amplitude_to_db` (`reference` None: the maximum).
#[pyfunction]
#[pyo3(signature = (s, reference, amin, top_db))]
pub fn amplitude_to_db(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    reference: Option<f32>,
    amin: f32,
    top_db: Option<f32>,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        mel::amplitude_to_db(&s, db_ref(reference), amin, top_db)
    })?))
}

/// MFCCs `[.., n_mfcc, n_frames]` of a log-power mel spectrogram.
#[pyfunction]
#[pyo3(signature = (db, n_mfcc, lifter))]
pub fn mfcc_from_db(
    py: Python<'_>,
    db: &Bound<'_, PyTensor>,
    n_mfcc: usize,
    lifter: f64,
) -> PyResult<PyTensor> {
    let db = t(db);
    Ok(PyTensor::new(run(py, move || {
        mel::mfcc_from_db(&db, n_mfcc, lifter)
    })?))
}

/// Spectral centroid `[.., 1, n_frames]` of a magnitude spectrogram.
#[pyfunction]
pub fn spectral_centroid(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    n_fft: usize,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        features::spectral_centroid(&s, sr, n_fft)
    })?))
}

/// Spectral bandwidth `[.., 1, n_frames]` of a magnitude spectrogram.
#[pyfunction]
pub fn spectral_bandwidth(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    n_fft: usize,
    p: f32,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        features::spectral_bandwidth(&s, sr, n_fft, p)
    })?))
}

/// Spectral flatness `[.., 1, n_frames]` of a magnitude spectrogram.
#[pyfunction]
pub fn spectral_flatness(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    amin: f32,
    power: f32,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        features::spectral_flatness(&s, amin, power)
    })?))
}

/// Pre-emphasis along the last axis.
#[pyfunction]
pub fn preemphasis(py: Python<'_>, y: &Bound<'_, PyTensor>, coef: f32) -> PyResult<PyTensor> {
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        features::preemphasis(&y, coef)
    })?))
}

/// Griffin-Lim phase reconstruction of a magnitude spectrogram (`seed` None: zero phases).
#[pyfunction]
#[pyo3(signature = (s, n_iter, n_fft, hop_length, win_length, window, center, pad_mode, momentum, seed, length))]
pub fn griffin_lim(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    n_iter: usize,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
    momentum: f32,
    seed: Option<u64>,
    length: Option<usize>,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let init = seed.map_or(PhaseInit::Zero, PhaseInit::Random);
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        spectrum::griffin_lim(&s, &p, n_iter, momentum, init, length)
    })?))
}

/// The chroma filter bank `[n_chroma, 1 + n_fft/2]` (float32, CPU).
#[pyfunction]
pub fn chroma_filters(sr: f64, n_fft: usize, n_chroma: usize, tuning: f64) -> PyResult<PyTensor> {
    let w = features::chroma_filters(sr, n_fft, n_chroma, tuning).map_err(errors::audio)?;
    let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let t = Tensor::from_slice(&w, &[n_chroma, n_fft / 2 + 1], &gpukit_ops::Device::Cpu)
        .map_err(errors::ops)?;
    Ok(PyTensor::new(t))
}

/// The chromagram `[.., n_chroma, n_frames]` of a power spectrogram.
#[pyfunction]
pub fn chroma(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    n_fft: usize,
    n_chroma: usize,
    tuning: f64,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        features::chroma(&s, sr, n_fft, n_chroma, tuning)
    })?))
}

/// Delta features along the last axis.
#[pyfunction]
pub fn delta(
    py: Python<'_>,
    data: &Bound<'_, PyTensor>,
    width: usize,
    order: usize,
) -> PyResult<PyTensor> {
    let data = t(data);
    Ok(PyTensor::new(run(py, move || {
        features::delta(&data, width, order)
    })?))
}

/// Zero-crossing rate `[.., 1, n_frames]`.
#[pyfunction]
pub fn zero_crossing_rate(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    frame_length: usize,
    hop_length: usize,
    center: bool,
) -> PyResult<PyTensor> {
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        features::zero_crossing_rate(&y, frame_length, hop_length, center)
    })?))
}

/// An audio file of any format gpukit decodes as (`[channels, frames]` float32 on `device`,
/// sample rate).
#[pyfunction]
#[pyo3(signature = (path, device=None))]
pub fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<(PyTensor, u32)> {
    let device = crate::device::resolve(device)?;
    let a = run(py, move || gpukit_audio::decode::load(&path, &device))?;
    Ok((PyTensor::new(a.samples), a.sample_rate))
}

/// Writes `[frames]` or `[channels, frames]` float32 samples as 16-bit PCM or 32-bit float.
#[pyfunction]
#[pyo3(signature = (path, y, sr, float32=false))]
pub fn write_wav(
    py: Python<'_>,
    path: std::path::PathBuf,
    y: &Bound<'_, PyTensor>,
    sr: u32,
    float32: bool,
) -> PyResult<()> {
    let y = t(y);
    let format = if float32 {
        WavFormat::Float32
    } else {
        WavFormat::Pcm16
    };
    run(py, move || wav::write_wav(&path, &y, sr, format))
}

/// Spectral roll-off `[.., 1, n_frames]` of a magnitude spectrogram.
#[pyfunction]
pub fn spectral_rolloff(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    n_fft: usize,
    roll_percent: f32,
) -> PyResult<PyTensor> {
    let s = t(s);
    Ok(PyTensor::new(run(py, move || {
        features::spectral_rolloff(&s, sr, n_fft, roll_percent)
    })?))
}

/// Spectral contrast `[.., n_bands + 1, n_frames]` of a magnitude spectrogram.
#[pyfunction]
#[pyo3(signature = (s, sr, n_fft, fmin, n_bands, quantile, linear))]
pub fn spectral_contrast(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    n_fft: usize,
    fmin: f64,
    n_bands: usize,
    quantile: f64,
    linear: bool,
) -> PyResult<PyTensor> {
    let s = t(s);
    let p = Contrast {
        fmin,
        n_bands,
        quantile,
        linear,
    };
    Ok(PyTensor::new(run(py, move || {
        features::spectral_contrast(&s, sr, n_fft, &p)
    })?))
}

/// De-emphasis along the last axis.
#[pyfunction]
pub fn deemphasis(py: Python<'_>, y: &Bound<'_, PyTensor>, coef: f32) -> PyResult<PyTensor> {
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        features::deemphasis(&y, coef)
    })?))
}

fn res_type_of(name: &str) -> PyResult<ResType> {
    match name {
        "polyphase" => Ok(ResType::Polyphase),
        "fft" | "scipy" => Ok(ResType::Fft),
        other => Err(value(format!(
            "res_type {other:?}: gpukit resamples with \"polyphase\" (integer rates) or \"fft\" \
             (\"scipy\"); soxr, resampy and samplerate filters are not implemented"
        ))),
    }
}

/// The signal resampled along its last axis.
#[pyfunction]
pub fn resample(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    orig_sr: f64,
    target_sr: f64,
    res_type: &str,
    fix: bool,
    scale: bool,
) -> PyResult<PyTensor> {
    let kind = res_type_of(res_type)?;
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        gpukit_audio::resample(&y, orig_sr, target_sr, kind, fix, scale)
    })?))
}

/// The phase vocoder on a complex STFT `[.., bins, n_frames, 2]`.
#[pyfunction]
#[pyo3(signature = (d, rate, hop_length))]
pub fn phase_vocoder(
    py: Python<'_>,
    d: &Bound<'_, PyTensor>,
    rate: f64,
    hop_length: Option<usize>,
) -> PyResult<PyTensor> {
    let d = t(d);
    Ok(PyTensor::new(run(py, move || {
        effects::phase_vocoder(&d, rate, hop_length)
    })?))
}

/// Time stretching of a signal.
#[pyfunction]
#[pyo3(signature = (y, rate, n_fft, hop_length, win_length, window, center, pad_mode))]
pub fn time_stretch(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    rate: f64,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        effects::time_stretch(&y, rate, &p)
    })?))
}

/// Pitch shifting of a signal.
#[pyfunction]
#[pyo3(signature = (y, sr, n_steps, bins_per_octave, res_type, scale, n_fft, hop_length, win_length, window, center, pad_mode))]
pub fn pitch_shift(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    sr: f64,
    n_steps: f64,
    bins_per_octave: usize,
    res_type: &str,
    scale: bool,
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
) -> PyResult<PyTensor> {
    let p = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let kind = res_type_of(res_type)?;
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        effects::pitch_shift(&y, sr, n_steps, bins_per_octave, kind, scale, &p)
    })?))
}

/// Harmonic–percussive separation: of a complex STFT `[.., bins, n_frames, 2]` (`complex`),
/// or its masks (`complex_mask`), else the masks of a magnitude spectrogram (`mask`); or,
/// with `stft` parameters, of a signal (`signal`).
#[pyfunction]
#[pyo3(signature = (x, kind, kernel_size, power, margin, n_fft, hop_length, win_length, window, center, pad_mode))]
pub fn hpss(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    kind: &str,
    kernel_size: (usize, usize),
    power: f32,
    margin: (f32, f32),
    n_fft: usize,
    hop_length: Option<usize>,
    win_length: Option<usize>,
    window: &str,
    center: bool,
    pad_mode: &str,
) -> PyResult<(PyTensor, PyTensor)> {
    let p = Hpss {
        kernel_size,
        power,
        margin,
    };
    let st = stft_params(n_fft, hop_length, win_length, window, center, pad_mode)?;
    let x = t(x);
    let (h, q) = match kind {
        "complex" => run(py, move || effects::hpss(&x, &p))?,
        "complex_mask" => run(py, move || {
            effects::hpss_masks(&gpukit_ops::signal::complex_abs(&x)?, &p)
        })?,
        "mask" => run(py, move || effects::hpss_masks(&x, &p))?,
        "signal" => run(py, move || effects::hpss_signal(&x, &st, &p))?,
        other => return Err(value(format!("hpss kind {other:?}"))),
    };
    Ok((PyTensor::new(h), PyTensor::new(q)))
}

/// The soft mask of two non-negative tensors.
#[pyfunction]
pub fn softmask(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    x_ref: &Bound<'_, PyTensor>,
    power: f32,
    split_zeros: bool,
) -> PyResult<PyTensor> {
    let (x, x_ref) = (t(x), t(x_ref));
    Ok(PyTensor::new(run(py, move || {
        effects::softmask(&x, &x_ref, power, split_zeros)
    })?))
}

/// YIN fundamental frequency `[.., n_frames]` in Hz.
#[pyfunction]
#[pyo3(signature = (y, fmin, fmax, sr, frame_length, hop_length, trough_threshold, center, pad_mode))]
pub fn yin(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    fmin: f64,
    fmax: f64,
    sr: f64,
    frame_length: usize,
    hop_length: Option<usize>,
    trough_threshold: f32,
    center: bool,
    pad_mode: &str,
) -> PyResult<PyTensor> {
    let p = Yin {
        sr,
        frame_length,
        hop_length,
        trough_threshold,
        center,
        pad_mode: pad_mode_of(pad_mode)?,
        ..Yin::new(fmin, fmax)
    };
    let y = t(y);
    Ok(PyTensor::new(run(py, move || pitch::yin(&y, &p))?))
}

/// Pitches and magnitudes `[.., bins, n_frames]` of a magnitude spectrogram.
#[pyfunction]
pub fn piptrack(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    fmin: f64,
    fmax: f64,
    threshold: f32,
) -> PyResult<(PyTensor, PyTensor)> {
    let p = Piptrack {
        sr,
        fmin,
        fmax,
        threshold,
    };
    let s = t(s);
    let (f, m) = run(py, move || pitch::piptrack(&s, &p))?;
    Ok((PyTensor::new(f), PyTensor::new(m)))
}

/// The tuning of a spectrogram, in fractions of a bin.
#[pyfunction]
#[pyo3(signature = (s, sr, resolution, bins_per_octave, fmin, fmax, threshold))]
pub fn estimate_tuning(
    py: Python<'_>,
    s: &Bound<'_, PyTensor>,
    sr: f64,
    resolution: f64,
    bins_per_octave: usize,
    fmin: f64,
    fmax: f64,
    threshold: f32,
) -> PyResult<f64> {
    let p = Piptrack {
        sr,
        fmin,
        fmax,
        threshold,
    };
    let s = t(s);
    run(py, move || {
        pitch::estimate_tuning(&s, &p, resolution, bins_per_octave)
    })
}

/// The complex constant-Q transform `[.., n_bins, n_frames, 2]`.
#[pyfunction]
#[pyo3(signature = (y, sr, hop_length, fmin, n_bins, bins_per_octave, tuning, filter_scale, norm, sparsity, window, scale, pad_mode, res_type))]
pub fn cqt(
    py: Python<'_>,
    y: &Bound<'_, PyTensor>,
    sr: f64,
    hop_length: usize,
    fmin: Option<f64>,
    n_bins: usize,
    bins_per_octave: usize,
    tuning: f64,
    filter_scale: f64,
    norm: Option<f64>,
    sparsity: f64,
    window: &str,
    scale: bool,
    pad_mode: &str,
    res_type: &str,
) -> PyResult<PyTensor> {
    let p = Cqt {
        sr,
        hop_length,
        fmin,
        n_bins,
        bins_per_octave,
        tuning,
        filter_scale,
        norm,
        sparsity,
        window: Window::from_name(window).ok_or_else(|| {
            value(format!(
                "window {window:?}: gpukit has hann, hamming, blackman and boxcar"
            ))
        })?,
        scale,
        pad_mode: pad_mode_of(pad_mode)?,
        res_type: res_type_of(res_type)?,
    };
    let y = t(y);
    Ok(PyTensor::new(run(py, move || {
        gpukit_audio::cqt::cqt(&y, &p)
    })?))
}

/// The `_audio` submodule of `_gpukit`.
pub(crate) fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "_audio")?;
    m.add_function(wrap_pyfunction!(stft, &m)?)?;
    m.add_function(wrap_pyfunction!(spectrogram, &m)?)?;
    m.add_function(wrap_pyfunction!(istft, &m)?)?;
    m.add_function(wrap_pyfunction!(mel_filters, &m)?)?;
    m.add_function(wrap_pyfunction!(mel_project, &m)?)?;
    m.add_function(wrap_pyfunction!(power_to_db, &m)?)?;
    m.add_function(wrap_pyfunction!(amplitude_to_db, &m)?)?;
    m.add_function(wrap_pyfunction!(mfcc_from_db, &m)?)?;
    m.add_function(wrap_pyfunction!(spectral_centroid, &m)?)?;
    m.add_function(wrap_pyfunction!(spectral_bandwidth, &m)?)?;
    m.add_function(wrap_pyfunction!(spectral_flatness, &m)?)?;
    m.add_function(wrap_pyfunction!(preemphasis, &m)?)?;
    m.add_function(wrap_pyfunction!(griffin_lim, &m)?)?;
    m.add_function(wrap_pyfunction!(chroma_filters, &m)?)?;
    m.add_function(wrap_pyfunction!(chroma, &m)?)?;
    m.add_function(wrap_pyfunction!(delta, &m)?)?;
    m.add_function(wrap_pyfunction!(zero_crossing_rate, &m)?)?;
    m.add_function(wrap_pyfunction!(spectral_rolloff, &m)?)?;
    m.add_function(wrap_pyfunction!(spectral_contrast, &m)?)?;
    m.add_function(wrap_pyfunction!(deemphasis, &m)?)?;
    m.add_function(wrap_pyfunction!(resample, &m)?)?;
    m.add_function(wrap_pyfunction!(phase_vocoder, &m)?)?;
    m.add_function(wrap_pyfunction!(time_stretch, &m)?)?;
    m.add_function(wrap_pyfunction!(pitch_shift, &m)?)?;
    m.add_function(wrap_pyfunction!(hpss, &m)?)?;
    m.add_function(wrap_pyfunction!(softmask, &m)?)?;
    m.add_function(wrap_pyfunction!(yin, &m)?)?;
    m.add_function(wrap_pyfunction!(cqt, &m)?)?;
    m.add_function(wrap_pyfunction!(piptrack, &m)?)?;
    m.add_function(wrap_pyfunction!(estimate_tuning, &m)?)?;
    m.add_function(wrap_pyfunction!(load, &m)?)?;
    m.add_function(wrap_pyfunction!(write_wav, &m)?)?;
    Ok(m)
}
