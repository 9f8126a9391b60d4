#!/usr/bin/env python3
"""gpukit's audio benchmark, beside torch in the same run (GPU machine).

Batched STFT, mel spectrogram and MFCC at a speech shape (16 kHz, 1 s × 256 signals, n_fft 512,
hop 160, 80 mels) and a music shape (44.1 kHz, 30 s × 16, n_fft 2048, hop 512, 128 mels):
gpukit.audio on gk.Tensors on the GPU beside torch.stft (cuFFT) and torchaudio's MelSpectrogram
and MFCC when torchaudio is installed, else the same mel/DCT products in torch. Both sides are
timed the same way: wall time per call from Python with the device synchronized after a batch
of calls, median of batches, after warm-up — what a user calling either library sees. The copy
ceiling is the time to read the input and write the output once at the measured
device-to-device copy bandwidth.

Prints the table and writes bench-audio.json to RESULTS_DIR.

Usage: python3 bench/audio.py RESULTS_DIR
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch

import gpukit as gk

try:
    import torchaudio
except ImportError:
    torchaudio = None

SHAPES = [
    # name, sample rate, seconds, batch, n_fft, hop, n_mels
    ("speech 16 kHz 1 s ×256", 16000, 1.0, 256, 512, 160, 80),
    ("music 44.1 kHz 30 s ×16", 44100, 30.0, 16, 2048, 512, 128),
]


def per_call_ms(fn, sync, calls=10, batches=7):
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(times)


def copy_gbps():
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ms = per_call_ms(lambda: y.copy_(x), torch.cuda.synchronize, calls=20)
    return 2 * x.numel() * 4 / (ms * 1e-3) / 1e9


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    dev = gk.device("cuda")
    gsync = dev.synchronize
    tsync = torch.cuda.synchronize
    bw = copy_gbps()
    rows = []
    for name, sr, seconds, batch, n_fft, hop, n_mels in SHAPES:
        n = int(sr * seconds)
        y_np = np.random.default_rng(0).standard_normal((batch, n)).astype(np.float32)
        y_gk = gk.asarray(y_np, device="cuda")
        y_t = torch.from_numpy(y_np).cuda()
        win = torch.hann_window(n_fft, device="cuda")
        frames = 1 + n // hop
        bins = n_fft // 2 + 1
        fb = torch.from_numpy(gk.audio.mel_filters(sr=sr, n_fft=n_fft, n_mels=n_mels)).cuda()
        if torchaudio is not None:
            ta_mel = torchaudio.transforms.MelSpectrogram(
                sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels, norm="slaney",
                mel_scale="slaney", pad_mode="constant").cuda()
            ta_mfcc = torchaudio.transforms.MFCC(
                sr, n_mfcc=20, log_mels=False,
                melkwargs=dict(n_fft=n_fft, hop_length=hop, n_mels=n_mels, norm="slaney",
                               mel_scale="slaney", pad_mode="constant")).cuda()
            peer_name = "torchaudio"

            def torch_mel():
                return ta_mel(y_t)

            def torch_mfcc():
                return ta_mfcc(y_t)
        else:
            peer_name = "torch"
            dct = torch.from_numpy(np.cos(np.pi / n_mels * (np.arange(n_mels) + 0.5)[None, :]
                                          * np.arange(20)[:, None]).astype(np.float32)).cuda()

            def torch_mel():
                s = torch.stft(y_t, n_fft, hop, window=win, center=True, pad_mode="constant",
                               return_complex=True).abs().pow(2)
                return fb @ s

            def torch_mfcc():
                m = torch_mel()
                db = 10 * torch.log10(torch.clamp(m, min=1e-10))
                db = torch.maximum(db, db.max() - 80)
                return dct @ db

        cases = [
            ("stft",
             lambda: gk.audio.stft(y_gk, n_fft=n_fft, hop_length=hop),
             lambda: torch.stft(y_t, n_fft, hop, window=win, center=True, pad_mode="constant",
                                return_complex=True),
             (batch * n + batch * bins * frames * 2) * 4),
            ("melspectrogram",
             lambda: gk.audio.melspectrogram(y=y_gk, sr=sr, n_fft=n_fft, hop_length=hop,
                                             n_mels=n_mels),
             torch_mel, (batch * n + batch * n_mels * frames) * 4),
            ("mfcc",
             lambda: gk.audio.mfcc(y=y_gk, sr=sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels,
                                   n_mfcc=20),
             torch_mfcc, (batch * n + batch * 20 * frames) * 4),
        ]
        for op, ours, peer, nbytes in cases:
            ms = per_call_ms(ours, gsync)
            peer_ms = per_call_ms(peer, tsync)
            ceiling_ms = nbytes / (bw * 1e9) * 1e3
            rows.append(dict(shape=name, op=op, ours_ms=ms, peer=peer_name, peer_ms=peer_ms,
                             ratio=peer_ms / ms, pct_ceiling=100 * ceiling_ms / ms))
    print(f"copy bandwidth {bw:.0f} GB/s (read + write)")
    print(f"{'shape':26} {'op':15} {'gpukit ms':>10} {'peer':>10} {'peer ms':>9} "
          f"{'ratio':>6} {'% ceiling':>9}")
    for r in rows:
        print(f"{r['shape']:26} {r['op']:15} {r['ours_ms']:10.3f} {r['peer']:>10} "
              f"{r['peer_ms']:9.3f} {r['ratio']:6.2f} {r['pct_ceiling']:9.1f}")
    with open(os.path.join(out_dir, "bench-audio.json"), "w") as f:
        json.dump(dict(copy_gbps=bw, device=torch.cuda.get_device_name(), rows=rows), f,
                  indent=1)


if __name__ == "__main__":
    main()
