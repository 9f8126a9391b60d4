"""gpukit.audio against librosa (the reference, in the test environment) on synthetic signals
and real speech recordings (Debian's asterisk-core-sounds-en-wav, fetched by `cargo xtask
test` into the folder GPUKIT_AUDIO_DATA names), and on CUDA against the same function on the
CPU.

Tolerances, on ‖ours − librosa‖ / ‖librosa‖ unless stated: stft, istft, spectrogram,
melspectrogram 2e-5 (f32 transforms against librosa's, which computes in f32 through numpy's
pocketfft); decibels 2e-3 dB absolute; mfcc 1e-4; spectral features 1e-4; mel filters 1e-6
absolute; pre-emphasis 1e-6.
"""

import os
import pathlib

import numpy as np
import pytest

import gpukit as gk

HAS_GPU = gk.cuda_available()


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def synthetic(rng, sr=22050, seconds=1.3):
    """A chirp from 100 Hz to 5 kHz plus a tone and noise, float32."""
    t = np.arange(int(sr * seconds)) / sr
    chirp = np.sin(2 * np.pi * (100 * t + (5000 - 100) / (2 * seconds) * t**2))
    y = 0.5 * chirp + 0.2 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)
    return y.astype(np.float32)


def recordings():
    """Paths of real speech recordings, if the test environment has them."""
    root = os.environ.get("GPUKIT_AUDIO_DATA")
    if not root:
        return []
    names = ["hello-world.wav", "tt-weasels.wav", "vm-intro.wav"]
    found = [p for n in names for p in pathlib.Path(root).rglob(n)]
    assert found, f"no recordings under GPUKIT_AUDIO_DATA={root}"
    return found[:3]


STFT_CASES = [
    dict(n_fft=2048),
    dict(n_fft=512, hop_length=128),
    dict(n_fft=400, hop_length=160, win_length=320, window="hamming"),
    dict(n_fft=1001, hop_length=250, window="blackman", center=False),
    dict(n_fft=256, hop_length=64, pad_mode="reflect"),
    dict(n_fft=64, hop_length=16, window="boxcar", pad_mode="edge"),
]


@pytest.fixture
def signals(rng):
    """(name, samples, rate) of a synthetic signal and each available recording."""
    out = [("synthetic", synthetic(rng), 22050)]
    for p in recordings():
        y, sr = gk.audio.load(p)
        out.append((p.name, y[0], sr))
    return out


@pytest.mark.parametrize("case", STFT_CASES, ids=lambda c: str(c))
def test_stft_istft_match_librosa(signals, case):
    librosa = pytest.importorskip("librosa")
    for name, y, _ in signals:
        want = librosa.stft(y, **case)
        got = gk.audio.stft(y, **case)
        assert got.dtype == np.complex64
        assert rel(got, want) < 2e-5, name
        length = y.size if case.get("center", True) else None
        args = {k: v for k, v in case.items() if k in ("hop_length", "win_length", "window",
                                                       "center", "n_fft")}
        y_want = librosa.istft(want, length=length, **args)
        y_got = gk.audio.istft(want, length=length, **args)
        # Without centring the first and last frames' window envelope falls to ~1e-34 (both
        # divide by it); compare where it is not that ill-conditioned.
        edge = 0 if case.get("center", True) else case["n_fft"]
        assert y_got.shape == y_want.shape
        assert rel(y_got[edge:y_got.size - edge], y_want[edge:y_want.size - edge]) < 2e-5, name


def test_batched_stft_and_power_spectrogram(rng):
    librosa = pytest.importorskip("librosa")
    y = np.stack([synthetic(rng), synthetic(rng)[::-1].copy()])
    got = gk.audio.stft(y, n_fft=512, hop_length=160)
    assert rel(got, librosa.stft(y, n_fft=512, hop_length=160)) < 2e-5
    for power in (1.0, 2.0, 1.5):
        want = np.abs(librosa.stft(y, n_fft=512, hop_length=160)) ** power
        got = gk.audio.melspectrogram(y=y, sr=22050, n_fft=512, hop_length=160, power=power)
        want_mel = librosa.feature.melspectrogram(S=want, sr=22050, n_fft=512)
        assert rel(got, want_mel) < 2e-5, power


@pytest.mark.parametrize("htk,norm,fmax", [(False, "slaney", None), (True, None, 6000.0)])
def test_mel_filters_and_melspectrogram_match_librosa(signals, htk, norm, fmax):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        kw = dict(sr=sr, n_fft=1024, n_mels=40, htk=htk, norm=norm,
                  fmax=fmax if fmax is None else min(fmax, sr / 2))
        want_f = librosa.filters.mel(**kw)
        assert np.max(np.abs(gk.audio.mel_filters(**kw) - want_f)) < 1e-6
        want = librosa.feature.melspectrogram(y=y, hop_length=256, **kw)
        got = gk.audio.melspectrogram(y=y, hop_length=256, **kw)
        assert rel(got, want) < 2e-5, name


def test_decibels_and_mfcc_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        S = librosa.feature.melspectrogram(y=y, sr=sr, n_fft=512, hop_length=128, n_mels=40)
        for ref in (1.0, np.max):
            for top_db in (80.0, None):
                want = librosa.power_to_db(S, ref=ref, top_db=top_db)
                got = gk.audio.power_to_db(S, ref=ref, top_db=top_db)
                assert np.max(np.abs(got - want)) < 2e-3, (name, ref, top_db)
        A = np.abs(librosa.stft(y, n_fft=512))
        assert np.max(np.abs(gk.audio.amplitude_to_db(A, ref=np.max)
                             - librosa.amplitude_to_db(A, ref=np.max))) < 2e-3
        for lifter in (0, 22):
            want = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13, n_fft=512, hop_length=128,
                                        n_mels=40, lifter=lifter)
            got = gk.audio.mfcc(y=y, sr=sr, n_mfcc=13, n_fft=512, hop_length=128, n_mels=40,
                                lifter=lifter)
            assert rel(got, want) < 1e-4, (name, lifter)


def test_spectral_features_and_preemphasis_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        kw = dict(n_fft=1024, hop_length=256)
        assert rel(gk.audio.spectral_centroid(y=y, sr=sr, **kw),
                   librosa.feature.spectral_centroid(y=y, sr=sr, **kw)) < 1e-4, name
        for p in (1, 2):
            assert rel(gk.audio.spectral_bandwidth(y=y, sr=sr, p=p, **kw),
                       librosa.feature.spectral_bandwidth(y=y, sr=sr, p=p, **kw)) < 1e-4, name
        assert rel(gk.audio.spectral_flatness(y=y, **kw),
                   librosa.feature.spectral_flatness(y=y, **kw)) < 1e-4, name
        assert rel(gk.audio.preemphasis(y), librosa.effects.preemphasis(y)) < 1e-6, name


def test_wav_files_round_trip_and_match_librosa(tmp_path, rng):
    librosa = pytest.importorskip("librosa")
    for p in recordings():
        y, sr = gk.audio.load(p)
        want, want_sr = librosa.load(p, sr=None, mono=False)
        assert sr == want_sr and np.array_equal(y[0], want)
    y = np.clip(synthetic(rng, sr=16000, seconds=0.5), -1, 1)
    stereo = np.stack([y, -y])
    gk.audio.write_wav(tmp_path / "a.wav", stereo, 16000)
    back, sr = gk.audio.load(tmp_path / "a.wav")
    assert sr == 16000 and back.shape == stereo.shape
    assert np.max(np.abs(back - stereo)) <= 0.5 / 32768
    gk.audio.write_wav(tmp_path / "f.wav", y, 16000, float32=True)
    assert np.array_equal(gk.audio.load(tmp_path / "f.wav")[0][0], y)


def test_bad_input_raises_clear_errors(tmp_path):
    y = np.zeros(4096, np.float32)
    with pytest.raises(ValueError, match="window"):
        gk.audio.stft(y, window="kaiser")
    with pytest.raises(ValueError, match="pad_mode"):
        gk.audio.stft(y, pad_mode="wrap")
    with pytest.raises(ValueError, match="fewer than n_fft"):
        gk.audio.stft(y[:100], n_fft=512, center=False)
    with pytest.raises(ValueError, match="win_length"):
        gk.audio.stft(y, n_fft=512, win_length=1024)
    with pytest.raises(ValueError, match="n_mfcc"):
        gk.audio.mfcc(y=y, n_mfcc=500)
    with pytest.raises(FileNotFoundError):
        gk.audio.load(tmp_path / "missing.wav")
    (tmp_path / "bad.wav").write_bytes(b"RIFF\x00\x00\x00\x00not a wave file")
    with pytest.raises(ValueError):
        gk.audio.load(tmp_path / "bad.wav")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_cuda_matches_the_cpu(signals):
    for name, y, sr in signals:
        for case in STFT_CASES[:5]:
            cpu = gk.audio.stft(y, **case)
            cuda = gk.audio.stft(y, device="cuda", **case)
            assert rel(cuda, cpu) < 2e-5, (name, case)
            args = {k: v for k, v in case.items() if k != "pad_mode"}
            edge = 0 if case.get("center", True) else case["n_fft"]
            back_cuda = gk.audio.istft(cuda, device="cuda", length=y.size, **args)
            back_cpu = gk.audio.istft(cpu, length=y.size, **args)
            assert rel(back_cuda[edge:y.size - edge], back_cpu[edge:y.size - edge]) < 2e-5
        kw = dict(sr=sr, n_fft=512, hop_length=128, n_mels=40)
        assert rel(gk.audio.melspectrogram(y=y, device="cuda", **kw),
                   gk.audio.melspectrogram(y=y, **kw)) < 2e-5, name
        assert rel(gk.audio.mfcc(y=y, device="cuda", **kw), gk.audio.mfcc(y=y, **kw)) < 1e-4
        for f in (gk.audio.spectral_centroid, gk.audio.spectral_bandwidth):
            assert rel(f(y=y, sr=sr, device="cuda"), f(y=y, sr=sr)) < 1e-4, f.__name__
        assert rel(gk.audio.spectral_flatness(y=y, device="cuda"),
                   gk.audio.spectral_flatness(y=y)) < 1e-4
        assert rel(gk.audio.preemphasis(y, device="cuda"), gk.audio.preemphasis(y)) < 1e-6
    # gk.Tensor in, gk.Tensor out, on the device.
    t = gk.asarray(signals[0][1], device="cuda")
    s = gk.audio.stft(t, n_fft=512)
    assert isinstance(s, gk.Tensor) and s.shape[-1] == 2 and s.device.type == "cuda"


def test_griffinlim_chroma_and_delta_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        y = y[: 2 * sr]
        S = np.abs(librosa.stft(y, n_fft=512, hop_length=128))
        want = librosa.griffinlim(S, n_iter=8, hop_length=128, init=None)
        got = gk.audio.griffinlim(S, n_iter=8, hop_length=128, init=None)
        assert rel(got, want) < 1e-4, name
        kw = dict(n_fft=1024, hop_length=256, tuning=0.0)
        assert np.max(np.abs(gk.audio.chroma_filters(sr=sr, n_fft=1024)
                             - librosa.filters.chroma(sr=sr, n_fft=1024))) < 1e-6
        assert rel(gk.audio.chroma_stft(y=y, sr=sr, **kw),
                   librosa.feature.chroma_stft(y=y, sr=sr, **kw)) < 1e-4, name
        for kw in (dict(), dict(frame_length=400, hop_length=160, center=False)):
            assert rel(gk.audio.zero_crossing_rate(y, **kw),
                       librosa.feature.zero_crossing_rate(y, **kw)) < 1e-6, (name, kw)
        M = librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13)
        for width, order in ((9, 1), (5, 2), (3, 1)):
            assert rel(gk.audio.delta(M, width=width, order=order),
                       librosa.feature.delta(M, width=width, order=order)) < 1e-5, name
    with pytest.raises(ValueError, match="width"):
        gk.audio.delta(np.zeros((3, 5), np.float32), width=9)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_cuda_griffinlim_chroma_and_delta_match_the_cpu(rng):
    y = synthetic(rng)[:16000]
    S = np.abs(gk.audio.stft(y, n_fft=512, hop_length=128))
    for init in (None, "random"):
        cpu = gk.audio.griffinlim(S, n_iter=4, hop_length=128, init=init, random_state=3)
        cuda = gk.audio.griffinlim(S, n_iter=4, hop_length=128, init=init, random_state=3,
                                   device="cuda")
        assert rel(cuda, cpu) < 1e-4, init
    assert rel(gk.audio.chroma_stft(y=y, sr=22050, device="cuda"),
               gk.audio.chroma_stft(y=y, sr=22050)) < 1e-4
    M = gk.audio.mfcc(y=y, sr=22050, n_mfcc=13)
    assert rel(gk.audio.delta(M, device="cuda"), gk.audio.delta(M)) < 1e-5
    y[100:200] = 0  # exact zeros and values inside the threshold count as positive
    y[300:310] = -1e-12
    assert np.array_equal(gk.audio.zero_crossing_rate(y, device="cuda"),
                          gk.audio.zero_crossing_rate(y))
