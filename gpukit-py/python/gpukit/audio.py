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
    "delta",
    "griffinlim",
    "istft",
    "load",
    "mel_filters",
    "melspectrogram",
    "mfcc",
    "power_to_db",
    "preemphasis",
    "spectral_bandwidth",
    "spectral_centroid",
    "spectral_flatness",
    "stft",
    "write_wav",
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
                window="hann", center=True, pad_mode="constant", tuning=0.0, n_chroma=12,
                device=None):
    """Chromagram `[..., n_chroma, n_frames]` of the power spectrogram, each frame divided by
    its maximum (`librosa.feature.chroma_stft`). `tuning` defaults to 0 (librosa estimates it
    when given None; gpukit does not)."""
    if tuning is None:
        raise ValueError("tuning=None (estimated tuning) is not implemented: pass a value")
    s, np_in = _spectrogram(y, S, n_fft, hop_length, win_length, window, center, pad_mode, 2.0,
                            device)
    n_fft = 2 * (s.shape[-2] - 1)
    return _out(_a.chroma(s, float(sr), n_fft, n_chroma, float(tuning)), np_in)


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
    """A WAV file as (float32 samples `[channels, frames]` in [−1, 1], sample rate). numpy
    unless `device` is given, then a `gk.Tensor` there."""
    t, sr = _a.read_wav(str(path), device)
    return (t if device is not None else t.numpy()), sr


def write_wav(path, y, sr, *, float32=False):
    """Writes `[frames]` or `[channels, frames]` samples as 16-bit PCM WAV (or 32-bit float)."""
    t, _ = _tensor(y, "cpu")
    _a.write_wav(str(path), t, int(sr), float32)
