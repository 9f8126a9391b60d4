#!/usr/bin/env python3
"""Draws docs/tts-spectrogram.png: one sentence spoken by the default voice through gpukit and
through onnxruntime on the same ONNX file (the same phoneme ids, noise scales 0), as log-mel
spectrograms side by side, with the SNR of gpukit's waveform against onnxruntime's.

Needs the gpukit module, onnxruntime, espeak-ng and matplotlib.
Usage: python3 docs/tts_spectrogram.py [OUT.png] [--device cpu|cuda]
"""

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import gpukit as gk  # noqa: E402

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."


def log_mel(y, sr):
    m = gk.audio.melspectrogram(y=y, sr=sr, n_fft=1024, hop_length=256, n_mels=80)
    return gk.audio.power_to_db(m, ref=np.max, top_db=80.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default=str(pathlib.Path(__file__).with_name("tts-spectrogram.png")))
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    voice = gk.tts.load(device=a.device)
    ids = voice.ids(voice.phonemize(SENTENCE)[0])
    ours = voice.synthesize(ids, noise_scale=0.0, length_scale=1.0, noise_w=0.0)
    session = ort.InferenceSession(str(voice.path), providers=["CPUExecutionProvider"])
    x = np.array([ids], dtype=np.int64)
    ref = session.run(
        None,
        {
            "input": x,
            "input_lengths": np.array([x.shape[1]], dtype=np.int64),
            "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
        },
    )[0].ravel()
    snr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ours - ref).astype(np.float64) ** 2))
    sr = voice.sample_rate
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    extent = [0, ours.size / sr, 0, 80]
    for ax, y, name in [(axes[0], ours, f"gpukit ({a.device})"), (axes[1], ref, "onnxruntime (CPU)")]:
        ax.imshow(log_mel(y, sr), origin="lower", aspect="auto", extent=extent, cmap="magma")
        ax.set_ylabel("mel band")
        ax.set_title(name, fontsize=10)
    axes[1].set_xlabel("seconds")
    fig.suptitle(
        f'en_US-joe-medium: "{SENTENCE}"\nwaveform SNR of gpukit against onnxruntime: {snr:.1f} dB',
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(a.out, dpi=80)
    print(f"{a.out}: {ours.size / sr:.2f} s, SNR {snr:.1f} dB")


if __name__ == "__main__":
    main()
