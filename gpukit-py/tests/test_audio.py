"""gpukit.audio against librosa (the reference, in the test environment) on synthetic signals
and real speech recordings (Debian's asterisk-core-sounds-en-wav, fetched by `cargo xtask
test` into the folder GPUKIT_AUDIO_DATA names), and on CUDA against the same function on the
CPU.

Tolerances, on ‖ours − librosa‖ / ‖librosa‖ unless stated: stft, istft, spectrogram,
melspectrogram 2e-5 (f32 transforms against librosa's, which computes in f32 through numpy's
pocketfft); decibels 2e-3 dB absolute; mfcc 1e-4; spectral features 1e-4; mel filters 1e-6
absolute; pre-emphasis 1e-6; CQT 1e-5; de-emphasis, resampling, spectral contrast, HPSS 1e-5; YIN 1e-5;
spectral roll-off exact on at least 99% of frames (a threshold compared against prefix sums of
spectra that differ in the last bits can flip a bin); phase vocoder, time stretch and pitch
shift 1e-3 against librosa in float64: librosa's float32 path accumulates phases that reach
hop·π per frame in float32 and drifts from its own float64 result by up to 5e-3, while gpukit
accumulates them modulo 2π.
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
    assert rel(gk.audio.chroma_stft(y=y, sr=22050, tuning=0.0, device="cuda"),
               gk.audio.chroma_stft(y=y, sr=22050, tuning=0.0)) < 1e-4
    # Estimated tuning: the same peaks, the tuning within one histogram bin.
    f_cuda, m_cuda = gk.audio.piptrack(y=y, sr=22050, device="cuda")
    f_cpu, m_cpu = gk.audio.piptrack(y=y, sr=22050)
    assert np.mean((f_cuda > 0) != (f_cpu > 0)) < 1e-3
    assert abs(gk.audio.estimate_tuning(y=y, device="cuda") - gk.audio.estimate_tuning(y=y)) <= 0.01
    M = gk.audio.mfcc(y=y, sr=22050, n_mfcc=13)
    assert rel(gk.audio.delta(M, device="cuda"), gk.audio.delta(M)) < 1e-5
    y[100:200] = 0  # exact zeros and values inside the threshold count as positive
    y[300:310] = -1e-12
    assert np.array_equal(gk.audio.zero_crossing_rate(y, device="cuda"),
                          gk.audio.zero_crossing_rate(y))


def test_rolloff_contrast_and_emphasis_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        S = np.abs(librosa.stft(y, n_fft=512, hop_length=128))
        for roll in (0.85, 0.3):
            ours = gk.audio.spectral_rolloff(S=S, sr=sr, roll_percent=roll)
            ref = librosa.feature.spectral_rolloff(S=S, sr=sr, roll_percent=roll)
            assert ours.shape == ref.shape
            assert np.mean(ours != ref) <= 0.01, (name, roll)
            assert np.abs(ours - ref).max() <= sr / 512 + 1e-3, (name, roll)
        for kw in (dict(fmin=100.0, n_bands=4), dict(fmin=200.0, n_bands=3, quantile=0.1,
                                                      linear=True)):
            assert rel(gk.audio.spectral_contrast(S=S, sr=sr, **kw),
                       librosa.feature.spectral_contrast(S=S, sr=sr, **kw)) < 1e-5, (name, kw)
        assert rel(gk.audio.spectral_contrast(y=y, sr=22050),
                   librosa.feature.spectral_contrast(y=y, sr=22050)) < 1e-5, name
        for coef in (0.97, 0.5):
            assert rel(gk.audio.deemphasis(y, coef=coef),
                       librosa.effects.deemphasis(y, coef=coef)) < 1e-5, (name, coef)
        # De-emphasis undoes pre-emphasis.
        back = gk.audio.deemphasis(gk.audio.preemphasis(y))
        assert rel(back, y) < 1e-4, name


@pytest.mark.parametrize("res_type", ["polyphase", "fft"])
def test_resample_matches_librosa(signals, res_type):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        for target in (8000, 16000, 44100, 11025):
            if target == sr:
                continue
            for scale in (False, True):
                ours = gk.audio.resample(y, orig_sr=sr, target_sr=target, res_type=res_type,
                                         scale=scale)
                ref = librosa.resample(y, orig_sr=sr, target_sr=target, res_type=res_type,
                                       scale=scale)
                assert rel(ours, ref) < 1e-5, (name, target, scale)
    # A batch resamples row by row.
    y = np.stack([signals[0][1], signals[0][1][::-1].copy()])
    ours = gk.audio.resample(y, orig_sr=22050, target_sr=16000, res_type=res_type)
    assert rel(ours[1], gk.audio.resample(y[1], orig_sr=22050, target_sr=16000,
                                          res_type=res_type)) < 1e-6


def test_phase_vocoder_stretch_and_shift_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        D = librosa.stft(y, n_fft=512, hop_length=128)
        y64 = y.astype(np.float64)
        for rate in (0.8, 1.0, 1.3, 2.0):
            assert rel(gk.audio.phase_vocoder(D, rate=rate, hop_length=128),
                       librosa.phase_vocoder(D.astype(np.complex128), rate=rate,
                                             hop_length=128)) < 1e-3, (name, rate)
            assert rel(gk.audio.time_stretch(y, rate=rate, n_fft=512),
                       librosa.effects.time_stretch(y64, rate=rate, n_fft=512)) < 1e-3
        for steps in (3, -2.5):
            assert rel(gk.audio.pitch_shift(y, sr=sr, n_steps=steps, n_fft=512),
                       librosa.effects.pitch_shift(y64, sr=sr, n_steps=steps, n_fft=512,
                                                   res_type="fft")) < 1e-3, (name, steps)


def test_hpss_and_softmask_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        D = librosa.stft(y, n_fft=512, hop_length=128)
        for kw in (dict(), dict(kernel_size=(17, 8), margin=(2.0, 3.0), power=1.0)):
            for ours, ref in zip(gk.audio.hpss(D, **kw), librosa.decompose.hpss(D, **kw)):
                assert ours.dtype == np.complex64 and rel(ours, ref) < 1e-5, (name, kw)
            S = np.abs(D)
            for ours, ref in zip(gk.audio.hpss(S, mask=True, **kw),
                                 librosa.decompose.hpss(S, mask=True, **kw)):
                assert rel(ours, ref) < 1e-5, (name, kw)
        for ours, ref in zip(gk.audio.hpss_signal(y, n_fft=512),
                             librosa.effects.hpss(y, n_fft=512)):
            assert rel(ours, ref) < 1e-5, name
        assert rel(gk.audio.harmonic(y, n_fft=512),
                   librosa.effects.harmonic(y, n_fft=512)) < 1e-5
    x = np.abs(np.random.default_rng(1).standard_normal((7, 9))).astype(np.float32)
    r = np.abs(np.random.default_rng(2).standard_normal((7, 9))).astype(np.float32)
    x[0, :3] = r[0, :3] = 0  # both zero: 0, or 0.5 with split_zeros
    for power, split in ((1, False), (2, True), (0.5, False)):
        assert rel(gk.audio.softmask(x, r, power=power, split_zeros=split),
                   librosa.util.softmask(x, r, power=power, split_zeros=split)) < 1e-6


def test_yin_matches_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        for kw in (dict(fmin=60, fmax=500, frame_length=1024),
                   dict(fmin=80, fmax=sr / 4, frame_length=2048, hop_length=300,
                        trough_threshold=0.2, center=False)):
            ours = gk.audio.yin(y, sr=sr, **kw)
            ref = librosa.yin(y, sr=sr, **kw)
            assert rel(ours, ref) < 1e-5, (name, kw)
    # A pure tone's period is found to within a fraction of a sample.
    sr = 16000
    t = np.arange(sr) / sr
    f0 = gk.audio.yin(np.sin(2 * np.pi * 220 * t).astype(np.float32), fmin=80, fmax=800, sr=sr)
    assert np.all(np.abs(f0[2:-2] - 220) < 0.5)


def test_new_functions_refuse_bad_input():
    y = np.zeros(1000, np.float32)
    with pytest.raises(ValueError, match="integer rates"):
        gk.audio.resample(y, orig_sr=22050.5, target_sr=16000)
    with pytest.raises(ValueError, match="soxr"):
        gk.audio.resample(y, orig_sr=22050, target_sr=16000, res_type="soxr_hq")
    with pytest.raises(ValueError, match="fmin"):
        gk.audio.yin(y, fmin=500, fmax=100)
    with pytest.raises(ValueError, match="period"):
        gk.audio.yin(y, fmin=10, fmax=100, frame_length=512)
    with pytest.raises(ValueError, match="roll_percent"):
        gk.audio.spectral_rolloff(y=y, roll_percent=1.5)
    with pytest.raises(ValueError, match="Nyquist"):
        gk.audio.spectral_contrast(y=y, sr=8000, fmin=1000.0, n_bands=6)
    with pytest.raises(ValueError, match="rate"):
        gk.audio.time_stretch(y, rate=0.0)
    with pytest.raises(ValueError, match="margin"):
        gk.audio.hpss(np.ones((5, 5), np.float32), margin=0.5)
    with pytest.raises(ValueError, match="zi"):
        gk.audio.deemphasis(y, zi=np.zeros(1))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_cuda_filters_effects_and_pitch_match_the_cpu(rng):
    y = synthetic(rng, seconds=0.6)
    sr = 22050
    S = np.abs(gk.audio.stft(y, n_fft=512, hop_length=128))
    assert np.mean(gk.audio.spectral_rolloff(S=S, sr=sr, device="cuda")
                   != gk.audio.spectral_rolloff(S=S, sr=sr)) <= 0.01
    assert rel(gk.audio.spectral_contrast(S=S, sr=sr, device="cuda"),
               gk.audio.spectral_contrast(S=S, sr=sr)) < 1e-5
    assert rel(gk.audio.deemphasis(y, device="cuda"), gk.audio.deemphasis(y)) < 1e-6
    for res_type in ("polyphase", "fft"):
        assert rel(gk.audio.resample(y[:8000], orig_sr=sr, target_sr=16000, res_type=res_type,
                                     device="cuda"),
                   gk.audio.resample(y[:8000], orig_sr=sr, target_sr=16000,
                                     res_type=res_type)) < 1e-5, res_type
    assert rel(gk.audio.time_stretch(y, rate=1.3, n_fft=512, device="cuda"),
               gk.audio.time_stretch(y, rate=1.3, n_fft=512)) < 2e-3
    assert rel(gk.audio.pitch_shift(y[:6000], sr=sr, n_steps=2, n_fft=512, device="cuda"),
               gk.audio.pitch_shift(y[:6000], sr=sr, n_steps=2, n_fft=512)) < 2e-3
    D = gk.audio.stft(y, n_fft=512, hop_length=128)
    for ours, ref in zip(gk.audio.hpss(D, device="cuda"), gk.audio.hpss(D)):
        assert rel(ours, ref) < 1e-5
    assert rel(gk.audio.yin(y, fmin=60, fmax=500, sr=sr, device="cuda"),
               gk.audio.yin(y, fmin=60, fmax=500, sr=sr)) < 1e-5
    assert rel(gk.audio.cqt(y, sr=sr, device="cuda"), gk.audio.cqt(y, sr=sr)) < 1e-5
    # Twice on CUDA: the same bits.
    a = gk.audio.yin(y, fmin=60, fmax=500, sr=sr, device="cuda")
    assert np.array_equal(a, gk.audio.yin(y, fmin=60, fmax=500, sr=sr, device="cuda"))


def test_load_decodes_ogg_vorbis_like_librosa():
    librosa = pytest.importorskip("librosa")
    root = os.environ.get("GPUKIT_AUDIO_DATA")
    if not root:
        pytest.skip("GPUKIT_AUDIO_DATA names no recordings (cargo xtask test sets it)")
    paths = sorted(pathlib.Path(root).rglob("*.oga"))[:4]
    assert paths, f"no Ogg Vorbis files under GPUKIT_AUDIO_DATA={root}"
    for p in paths:
        y, sr = gk.audio.load(p)
        ref, ref_sr = librosa.load(p, sr=None, mono=False)
        ref = np.atleast_2d(ref)
        assert sr == ref_sr and y.shape == ref.shape, p
        assert np.abs(y - ref).max() < 1e-5, p


def test_load_refuses_what_it_cannot_decode(tmp_path):
    bad = tmp_path / "bad.flac"
    bad.write_bytes(b"fLaC and nothing else")
    with pytest.raises(ValueError, match="bad.flac"):
        gk.audio.load(bad)
    with pytest.raises(FileNotFoundError):
        gk.audio.load(tmp_path / "missing.ogg")


def test_piptrack_tuning_and_estimated_chroma_match_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        S = np.abs(librosa.stft(y, n_fft=1024, hop_length=256))
        f, m = gk.audio.piptrack(S=S, sr=sr)
        rf, rm = librosa.piptrack(S=S, sr=sr)
        # The same peaks, at the same frequencies and magnitudes.
        assert np.array_equal(f > 0, rf > 0), name
        assert rel(f, rf) < 1e-5 and rel(m, rm) < 1e-5, name
        for kw in (dict(), dict(bins_per_octave=24, resolution=0.02)):
            ours = gk.audio.estimate_tuning(S=S, sr=sr, **kw)
            ref = librosa.estimate_tuning(S=S, sr=sr, **kw)
            assert abs(ours - ref) <= kw.get("resolution", 0.01) + 1e-9, (name, kw, ours, ref)
        assert rel(gk.audio.chroma_stft(y=y, sr=sr),
                   librosa.feature.chroma_stft(y=y, sr=sr)) < 1e-4, name
    # A tone a quarter of a semitone sharp of A4.
    sr = 22050
    t = np.arange(sr) / sr
    y = np.sin(2 * np.pi * 440 * 2 ** (0.25 / 12) * t).astype(np.float32)
    assert abs(gk.audio.estimate_tuning(y=y, sr=sr) - 0.25) <= 0.02


def test_cqt_matches_librosa(signals):
    librosa = pytest.importorskip("librosa")
    for name, y, sr in signals:
        top = 84 if sr > 16000 else 60
        for kw in (dict(n_bins=top), dict(hop_length=256, n_bins=48, fmin=55.0),
                   dict(hop_length=128, bins_per_octave=24, n_bins=2 * top - 24,
                        filter_scale=0.8),
                   dict(n_bins=top, scale=False, norm=2, window="hamming"),
                   dict(hop_length=500, n_bins=36)):
            ours = gk.audio.cqt(y, sr=sr, **kw)
            ref = librosa.cqt(y, sr=sr, res_type="polyphase", **kw)
            assert ours.dtype == np.complex64 and rel(ours, ref) < 1e-5, (name, kw)
        ours = gk.audio.cqt(y, sr=sr, n_bins=48, tuning=None)
        ref = librosa.cqt(y, sr=sr, n_bins=48, tuning=None, res_type="polyphase")
        assert rel(ours, ref) < 1e-5, name
    with pytest.raises(ValueError, match="Nyquist"):
        gk.audio.cqt(np.zeros(22050, np.float32), sr=22050, n_bins=200)
