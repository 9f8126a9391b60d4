"""Audio signal processing with librosa's conventions, on the CPU or a GPU.

    import numpy as np, gpukit as gk
    y, sr = gk.audio.load("speech.wav")                   # float32 [channels, frames]
    S = gk.audio.melspectrogram(y=y[0], sr=sr, n_fft=512, hop_length=128, n_mels=64)
    M = gk.audio.mfcc(y=y[0], sr=sr, device="cuda")        # computed on the GPU, numpy back

Functions take numpy arrays or `gk.Tensor`s. With numpy input they return numpy (complex64 for
`stft`) and run on `device` (default: the CPU, or the stream of an open `with stream:` block);
with a `gk.Tensor` they run where it is and return a `gk.Tensor` (complex values as a trailing
axis of 2: real, imaginary). Names, defaults and shapes follow librosa 0.10–0.11: signals
`[..., samples]`, spectrograms `[..., 1 + n_fft // 2, n_frames]`. The FFTs are gpukit's own
(no cuFFT).
"""

import numpy as np

from . import _gpukit
from ._gpukit import Tensor, asarray

_a = _gpukit._audio

__all__ = [
    "amplitude_to_db",
    "chroma_filters",
    "chroma_stft",
    "cqt",
    "deemphasis",
    "delta",
    "estimate_tuning",
    "griffinlim",
    "harmonic",
    "hpss",
    "hpss_signal",
    "istft",
    "load",
    "mel_filters",
    "melspectrogram",
    "mfcc",
    "percussive",
    "phase_vocoder",
    "piptrack",
    "pitch_shift",
    "power_to_db",
    "preemphasis",
    "resample",
    "softmask",
    "spectral_bandwidth",
    "spectral_centroid",
    "spectral_contrast",
    "spectral_flatness",
    "spectral_rolloff",
    "stft",
    "time_stretch",
    "write_wav",
    "yin",
    "zero_crossing_rate",
]


def _tensor(x, device, complex_input=False):
    """(tensor, came_from_numpy) for a gk.Tensor or anything numpy takes."""
    if isinstance(x, Tensor):
        return x, False
    arr = np.asarray(x)
    if complex_input or np.iscomplexobj(arr):
        arr = np.ascontiguousarray(arr.astype(np.complex64, copy=False))
        arr = arr.view(np.float32).reshape(arr.shape + (2,))
    else:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    return asarray(arr, device=device), True


def _out(t, as_numpy, complex_output=False):
    if not as_numpy:
        return t
    arr = t.numpy()
    if complex_output:
        arr = np.ascontiguousarray(arr).view(np.complex64)[..., 0]
    return arr


def stft(y, *, n_fft=2048, hop_length=None, win_length=None, window="hann", center=True,
         pad_mode="constant", device=None):
    """Complex short-time Fourier transform `[..., 1 + n_fft // 2, n_frames]` (`librosa.stft`).

    `window` is "hann", "hamming", "blackman" or "boxcar"; `pad_mode` (with `center`) is
    "constant" (zeros), "edge" or "reflect". numpy input gives complex64 out."""
    t, np_in = _tensor(y, device)
    r = _a.stft(t, n_fft, hop_length, win_length, window, center, pad_mode)
    return _out(r, np_in, complex_output=True)


def istft(stft_matrix, *, hop_length=None, win_length=None, n_fft=None, window="hann",
          center=True, length=None, device=None):
    """The signal of a complex STFT (`librosa.istft`): inverse FFTs, windowed, overlap-added and
    divided by the window's summed square."""
    t, np_in = _tensor(stft_matrix, device, complex_input=not isinstance(stft_matrix, Tensor))
    bins = t.shape[-3]
    if n_fft is None:
        n_fft = 2 * (bins - 1)
    return _out(_a.istft(t, n_fft, hop_length, win_length, window, center, length), np_in)


def _spectrogram(y, S, n_fft, hop_length, win_length, window, center, pad_mode, power, device):
    if S is not None:
        return _tensor(S, device)
    if y is None:
        raise ValueError("give a signal y or a spectrogram S")
    t, np_in = _tensor(y, device)
    return _a.spectrogram(t, n_fft, hop_length, win_length, window, center, pad_mode,
                          float(power)), np_in


def mel_filters(*, sr, n_fft, n_mels=128, fmin=0.0, fmax=None, htk=False, norm="slaney"):
    """The mel filter bank `[n_mels, 1 + n_fft // 2]` as a float32 numpy array
    (`librosa.filters.mel`; `norm` "slaney" or None)."""
    return _a.mel_filters(float(sr), n_fft, n_mels, float(fmin), fmax, htk, norm).numpy()


def melspectrogram(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512, win_length=None,
                   window="hann", center=True, pad_mode="constant", power=2.0, n_mels=128,
                   fmin=0.0, fmax=None, htk=False, norm="slaney", device=None):
    """Mel spectrogram `[..., n_mels, n_frames]` (`librosa.feature.melspectrogram`): of `|STFT(y)|
    ** power`, or of a spectrogram `S` already computed."""
    s, np_in = _spectrogram(y, S, n_fft, hop_length, win_length, window, center, pad_mode,
                            power, device)
    if S is not None:
        n_fft = 2 * (s.shape[-2] - 1)
    r = _a.mel_project(s, n_fft, float(sr), n_mels, float(fmin), fmax, htk, norm)
    return _out(r, np_in)


def _ref(ref):
    if callable(ref):
        if ref is not np.max:
            raise ValueError("ref: a number or np.max")
        return None
    return float(ref)


def power_to_db(S, *, ref=1.0, amin=1e-10, top_db=80.0, device=None):
    """`10 · log10(max(amin, S) / ref)`, floored `top_db` below the maximum
    (`librosa.power_to_db`; `ref` a number or `np.max`)."""
    t, np_in = _tensor(S, device)
    return _out(_a.power_to_db(t, _ref(ref), float(amin), top_db), np_in)


def amplitude_to_db(S, *, ref=1.0, amin=1e-5, top_db=80.0, device=None):
    """`power_to_db(S ** 2, ref=ref ** 2, amin=amin ** 2)` (`librosa.amplitude_to_db`)."""
    t, np_in = _tensor(S, device)
    return _out(_a.amplitude_to_db(t, _ref(ref), float(amin), top_db), np_in)


def mfcc(*, y=None, sr=22050, S=None, n_mfcc=20, lifter=0, device=None, **kwargs):
    """MFCCs `[..., n_mfcc, n_frames]` (`librosa.feature.mfcc`: orthonormal DCT-II of
    `power_to_db(melspectrogram(y, sr, **kwargs))`, or of a log-power mel spectrogram `S`)."""
    if S is None:
        mel = melspectrogram(y=y if isinstance(y, Tensor) else _tensor(y, device)[0], sr=sr,
                             device=device, **kwargs)
        db = _a.power_to_db(mel, 1.0, 1e-10, 80.0)
        np_in = not isinstance(y, Tensor)
    else:
        db, np_in = _tensor(S, device)
    return _out(_a.mfcc_from_db(db, n_mfcc, float(lifter)), np_in)


def _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode, device):
    return _spectrogram(y, S, n_fft, hop_length, win_length, window, center, pad_mode, 1.0,
                        device)


def spectral_centroid(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512,
                      win_length=None, window="hann", center=True, pad_mode="constant",
                      device=None):
    """Each frame's magnitude-weighted mean frequency in Hz, `[..., 1, n_frames]`
    (`librosa.feature.spectral_centroid`)."""
    s, np_in = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    n_fft = 2 * (s.shape[-2] - 1)
    return _out(_a.spectral_centroid(s, float(sr), n_fft), np_in)


def spectral_bandwidth(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512,
                       win_length=None, window="hann", center=True, pad_mode="constant", p=2,
                       device=None):
    """`(Σ S_norm · |f − centroid| ** p) ** (1 / p)` per frame, `[..., 1, n_frames]`
    (`librosa.feature.spectral_bandwidth`)."""
    s, np_in = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    n_fft = 2 * (s.shape[-2] - 1)
    return _out(_a.spectral_bandwidth(s, float(sr), n_fft, float(p)), np_in)


def spectral_flatness(*, y=None, S=None, n_fft=2048, hop_length=512, win_length=None,
                      window="hann", center=True, pad_mode="constant", amin=1e-10, power=2.0,
                      device=None):
    """Geometric over arithmetic mean of `max(amin, S ** power)` per frame, `[..., 1,
    n_frames]` (`librosa.feature.spectral_flatness`)."""
    s, np_in = _magnitude(y, S, None, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    return _out(_a.spectral_flatness(s, float(amin), float(power)), np_in)


def preemphasis(y, *, coef=0.97, device=None):
    """`y[n] − coef · y[n − 1]` with librosa's initial state `2·y[0] − y[1]`
    (`librosa.effects.preemphasis`)."""
    t, np_in = _tensor(y, device)
    return _out(_a.preemphasis(t, float(coef)), np_in)


def spectral_rolloff(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512,
                     win_length=None, window="hann", center=True, pad_mode="constant",
                     freq=None, roll_percent=0.85, device=None):
    """The lowest bin frequency in Hz holding `roll_percent` of each frame's magnitude,
    `[..., 1, n_frames]` (`librosa.feature.spectral_rolloff`; the FFT bin frequencies only)."""
    if freq is not None:
        raise ValueError("freq: gpukit uses the FFT bin frequencies (freq=None)")
    s, np_in = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    n_fft = 2 * (s.shape[-2] - 1)
    return _out(_a.spectral_rolloff(s, float(sr), n_fft, float(roll_percent)), np_in)


def spectral_contrast(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512,
                      win_length=None, window="hann", center=True, pad_mode="constant",
                      freq=None, fmin=200.0, n_bands=6, quantile=0.02, linear=False,
                      device=None):
    """Peak against valley of each octave band, `[..., n_bands + 1, n_frames]`, in dB unless
    `linear` (`librosa.feature.spectral_contrast`; the FFT bin frequencies only)."""
    if freq is not None:
        raise ValueError("freq: gpukit uses the FFT bin frequencies (freq=None)")
    s, np_in = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    n_fft = 2 * (s.shape[-2] - 1)
    r = _a.spectral_contrast(s, float(sr), n_fft, float(fmin), int(n_bands), float(quantile),
                             bool(linear))
    return _out(r, np_in)


def deemphasis(y, *, coef=0.97, zi=None, return_zf=False, device=None):
    """`y_out[n] = y[n] + coef · y_out[n − 1]`, the inverse of `preemphasis`, with librosa's
    default initial state (`librosa.effects.deemphasis`; `zi` and `return_zf` are not
    supported)."""
    if zi is not None or return_zf:
        raise ValueError("deemphasis: zi and return_zf are not supported (librosa's default "
                         "initial state only)")
    t, np_in = _tensor(y, device)
    return _out(_a.deemphasis(t, float(coef)), np_in)


def resample(y, *, orig_sr, target_sr, res_type="polyphase", fix=True, scale=False, axis=-1,
             device=None):
    """`y` resampled from `orig_sr` to `target_sr` along the last axis (`librosa.resample`).
    `res_type` is "polyphase" (`scipy.signal.resample_poly`, integer rates) or "fft"/"scipy"
    (`scipy.signal.resample`); librosa's default soxr filter is not implemented, so the
    default here is "polyphase"."""
    ndim = len(y.shape) if isinstance(y, Tensor) else np.ndim(y)
    if axis not in (-1, ndim - 1):
        raise ValueError("resample: only the last axis (axis=-1)")
    t, np_in = _tensor(y, device)
    r = _a.resample(t, float(orig_sr), float(target_sr), res_type, bool(fix), bool(scale))
    return _out(r, np_in)


def phase_vocoder(D, *, rate, hop_length=None, n_fft=None, device=None):
    """The complex STFT `D` sped up by `rate` (`librosa.phase_vocoder`)."""
    t, np_in = _tensor(D, device, complex_input=not isinstance(D, Tensor))
    if n_fft is not None and n_fft != 2 * (t.shape[-3] - 1):
        raise ValueError(f"n_fft={n_fft} does not match D's {t.shape[-3]} bins")
    return _out(_a.phase_vocoder(t, float(rate), hop_length), np_in, complex_output=True)


def time_stretch(y, *, rate, n_fft=2048, hop_length=None, win_length=None, window="hann",
                 center=True, pad_mode="constant", device=None):
    """`y` played `rate` times faster at the same pitch (`librosa.effects.time_stretch`: STFT,
    phase vocoder, ISTFT to `round(len / rate)` samples)."""
    t, np_in = _tensor(y, device)
    r = _a.time_stretch(t, float(rate), n_fft, hop_length, win_length, window, center,
                        pad_mode)
    return _out(r, np_in)


def pitch_shift(y, *, sr, n_steps, bins_per_octave=12, res_type="fft", scale=False,
                n_fft=2048, hop_length=None, win_length=None, window="hann", center=True,
                pad_mode="constant", device=None):
    """`y` shifted by `n_steps` steps of `1 / bins_per_octave` octave
    (`librosa.effects.pitch_shift`): time stretch, then resampling from `sr / rate` to `sr`.
    The default `res_type` is "fft" (librosa's soxr is not implemented; "polyphase" needs
    integer rates)."""
    t, np_in = _tensor(y, device)
    r = _a.pitch_shift(t, float(sr), float(n_steps), int(bins_per_octave), res_type,
                       bool(scale), n_fft, hop_length, win_length, window, center, pad_mode)
    return _out(r, np_in)


def _pair(v):
    return (v[0], v[1]) if isinstance(v, (tuple, list)) else (v, v)


def hpss(S, *, kernel_size=31, power=2.0, mask=False, margin=1.0, device=None):
    """Harmonic and percussive parts of a spectrogram (`librosa.decompose.hpss`): median
    filters across time (harmonic) and frequency (percussive), then soft masks. A complex `S`
    gives complex parts, a magnitude `S` magnitude parts, `mask=True` the masks. Takes numpy;
    for a `gk.Tensor` signal use `hpss_signal`."""
    if isinstance(S, Tensor):
        raise TypeError("hpss takes a numpy spectrogram; for a gk.Tensor signal use "
                        "hpss_signal")
    is_complex = np.iscomplexobj(S)
    t, np_in = _tensor(S, device)
    ks, mg = _pair(kernel_size), tuple(float(m) for m in _pair(margin))
    kind = ("complex_mask" if mask else "complex") if is_complex else "mask"
    h, p = _a.hpss(t, kind, ks, float(power), mg, 2048, None, None, "hann", True, "constant")
    if mask:
        return _out(h, np_in), _out(p, np_in)
    if is_complex:
        return _out(h, np_in, complex_output=True), _out(p, np_in, complex_output=True)
    return _out(t * h, np_in), _out(t * p, np_in)


def hpss_signal(y, *, kernel_size=31, power=2.0, margin=1.0, n_fft=2048, hop_length=None,
                win_length=None, window="hann", center=True, pad_mode="constant", device=None):
    """The harmonic and percussive signals of `y` (`librosa.effects.hpss`)."""
    t, np_in = _tensor(y, device)
    ks, mg = _pair(kernel_size), tuple(float(m) for m in _pair(margin))
    h, p = _a.hpss(t, "signal", ks, float(power), mg, n_fft, hop_length, win_length, window,
                   center, pad_mode)
    return _out(h, np_in), _out(p, np_in)


def harmonic(y, *, margin=1.0, kernel_size=31, power=2.0, **kwargs):
    """The harmonic part of `y` (`librosa.effects.harmonic`)."""
    return hpss_signal(y, margin=margin, kernel_size=kernel_size, power=power, **kwargs)[0]


def percussive(y, *, margin=1.0, kernel_size=31, power=2.0, **kwargs):
    """The percussive part of `y` (`librosa.effects.percussive`)."""
    return hpss_signal(y, margin=margin, kernel_size=kernel_size, power=power, **kwargs)[1]


def softmask(X, X_ref, *, power=1, split_zeros=False, device=None):
    """`X ** power / (X ** power + X_ref ** power)` after dividing both by their maximum
    (`librosa.util.softmask`, finite powers). Both numpy, or both `gk.Tensor`s."""
    t, np_in = _tensor(X, device)
    r, _ = _tensor(X_ref, device)
    return _out(_a.softmask(t, r, float(power), bool(split_zeros)), np_in)


def cqt(y, *, sr=22050, hop_length=512, fmin=None, n_bins=84, bins_per_octave=12,
        tuning=0.0, filter_scale=1, norm=1, sparsity=0.01, window="hann", scale=True,
        pad_mode="constant", res_type="polyphase", dtype=None, device=None):
    """Complex constant-Q transform `[..., n_bins, n_frames]` (`librosa.cqt`): octave by octave
    from the top, the STFT projected onto windowed complex sinusoids, the signal halved in rate
    between octaves. `res_type` is "polyphase" (librosa's default soxr is not implemented) or
    "fft"; `tuning=None` estimates the tuning first. `norm` is 1, 2, `np.inf` or None."""
    if dtype is not None and np.dtype(dtype) != np.complex64:
        raise ValueError("cqt computes complex64 (dtype=None)")
    t, np_in = _tensor(y, device)
    if tuning is None:
        tuning = estimate_tuning(y=t, sr=sr, bins_per_octave=bins_per_octave)
    r = _a.cqt(t, float(sr), int(hop_length), None if fmin is None else float(fmin), int(n_bins),
               int(bins_per_octave), float(tuning), float(filter_scale),
               None if norm is None else float(norm), float(sparsity), window, bool(scale),
               pad_mode, res_type)
    return _out(r, np_in, complex_output=True)


def yin(y, *, fmin, fmax, sr=22050, frame_length=2048, hop_length=None, trough_threshold=0.1,
        center=True, pad_mode="constant", device=None):
    """Fundamental frequency in Hz per frame, `[..., n_frames]`, by YIN (`librosa.yin`)."""
    t, np_in = _tensor(y, device)
    r = _a.yin(t, float(fmin), float(fmax), float(sr), frame_length, hop_length,
               float(trough_threshold), center, pad_mode)
    return _out(r, np_in)


def griffinlim(S, *, n_iter=32, hop_length=None, win_length=None, n_fft=None, window="hann",
               center=True, length=None, pad_mode="constant", momentum=0.99, init="random",
               random_state=None, device=None):
    """A signal whose STFT magnitude approximates `S` (`librosa.griffinlim`, fast Griffin-Lim
    with momentum). `init=None` starts from zero phases (the same result as librosa's);
    `init="random"` from uniform phases seeded by `random_state` (an int; gpukit's generator,
    so not librosa's values)."""
    t, np_in = _tensor(S, device)
    if n_fft is None:
        n_fft = 2 * (t.shape[-2] - 1)
    if init is None:
        seed = None
    elif init == "random":
        seed = int(random_state) if random_state is not None else 0
    else:
        raise ValueError(f"init={init!r}: None or 'random'")
    r = _a.griffin_lim(t, n_iter, n_fft, hop_length, win_length, window, center, pad_mode,
                       float(momentum), seed, length)
    return _out(r, np_in)


def chroma_filters(*, sr, n_fft, n_chroma=12, tuning=0.0):
    """The chroma filter bank `[n_chroma, 1 + n_fft // 2]` as a float32 numpy array
    (`librosa.filters.chroma` with its defaults)."""
    return _a.chroma_filters(float(sr), n_fft, n_chroma, float(tuning)).numpy()


def chroma_stft(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=512, win_length=None,
                window="hann", center=True, pad_mode="constant", tuning=None, n_chroma=12,
                device=None):
    """Chromagram `[..., n_chroma, n_frames]` of the power spectrogram, each frame divided by
    its maximum (`librosa.feature.chroma_stft`). `tuning=None` estimates it from the
    spectrogram (`estimate_tuning`)."""
    s, np_in = _spectrogram(y, S, n_fft, hop_length, win_length, window, center, pad_mode, 2.0,
                            device)
    n_fft = 2 * (s.shape[-2] - 1)
    if tuning is None:
        tuning = _a.estimate_tuning(s, float(sr), 0.01, n_chroma, 150.0, 4000.0, 0.1)
    return _out(_a.chroma(s, float(sr), n_fft, n_chroma, float(tuning)), np_in)


def piptrack(*, y=None, sr=22050, S=None, n_fft=2048, hop_length=None, fmin=150.0,
             fmax=4000.0, threshold=0.1, win_length=None, window="hann", center=True,
             pad_mode="constant", ref=None, device=None):
    """Pitches and magnitudes `[..., 1 + n_fft // 2, n_frames]` (zero off the tracked peaks)
    by parabolic interpolation of the magnitude spectrogram's peaks (`librosa.piptrack`;
    `ref` is each frame's maximum)."""
    if ref is not None:
        raise ValueError("ref: gpukit compares against each frame's maximum (ref=None)")
    s, np_in = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                          device)
    f, m = _a.piptrack(s, float(sr), float(fmin), float(fmax), float(threshold))
    return _out(f, np_in), _out(m, np_in)


def estimate_tuning(*, y=None, sr=22050, S=None, n_fft=2048, resolution=0.01,
                    bins_per_octave=12, hop_length=None, fmin=150.0, fmax=4000.0,
                    threshold=0.1, win_length=None, window="hann", center=True,
                    pad_mode="constant", device=None):
    """The tuning deviation from A440 in fractions of a bin (`librosa.estimate_tuning`):
    `piptrack`, then the histogram of the louder pitches' offsets from the nearest bin."""
    s, _ = _magnitude(y, S, sr, n_fft, hop_length, win_length, window, center, pad_mode,
                      device)
    return _a.estimate_tuning(s, float(sr), float(resolution), int(bins_per_octave),
                              float(fmin), float(fmax), float(threshold))


def delta(data, *, width=9, order=1, device=None):
    """Delta features along the last axis (`librosa.feature.delta`, mode "interp"): a
    Savitzky-Golay derivative of polynomial degree `order` over `width` frames."""
    t, np_in = _tensor(data, device)
    return _out(_a.delta(t, width, order), np_in)


def zero_crossing_rate(y, *, frame_length=2048, hop_length=512, center=True, device=None):
    """The fraction of sign changes per frame, `[..., 1, n_frames]`
    (`librosa.feature.zero_crossing_rate`; `center` pads with the edge samples)."""
    t, np_in = _tensor(y, device)
    return _out(_a.zero_crossing_rate(t, frame_length, hop_length, center), np_in)


def load(path, *, device=None):
    """An audio file as (float32 samples `[channels, frames]` in [−1, 1], sample rate), at the
    file's rate (librosa's `load(path, sr=None, mono=False)`, always 2-D): WAV, FLAC, Ogg
    Vorbis, MP3 and AIFF. numpy unless `device` is given, then a `gk.Tensor` there."""
    t, sr = _a.load(str(path), device)
    return (t if device is not None else t.numpy()), sr


def write_wav(path, y, sr, *, float32=False):
    """Writes `[frames]` or `[channels, frames]` samples as 16-bit PCM WAV (or 32-bit float)."""
    t, _ = _tensor(y, "cpu")
    _a.write_wav(str(path), t, int(sr), float32)
