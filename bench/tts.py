#!/usr/bin/env python3
"""gpukit's text-to-speech benchmark, beside onnxruntime in the same run.

The default voice (Piper's en_US-joe-medium, from the gpukit cache) speaks a fixed paragraph of
three sentences (phonemes fixed here, so espeak-ng is not needed): the whole paragraph as one
utterance (about 13 s of audio) for the real-time factor (synthesis time / audio duration), and
its first sentence alone for the time to first audio of sentence-by-sentence streaming. Noise
scales are 0, so every run synthesises the same waveform on every side.

Sides: gpukit on CUDA (when present), gpukit on the CPU limited to 2 threads (RAYON_NUM_THREADS,
set before the module loads), and onnxruntime's CPU provider on the voice's ONNX file with 2
intra-op threads — the CPU comparison the issue asks for, on the same cores. Median of
repetitions after warm-up, wall time from Python (what a caller sees).

Prints the table and writes bench-tts.json (and bench-tts.png when matplotlib is installed)
to RESULTS_DIR.

Usage: python3 bench/tts.py RESULTS_DIR
"""

import json
import os
import statistics
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "2")

import numpy as np  # noqa: E402

import gpukit as gk  # noqa: E402

SENTENCES = [
    "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ nˌɪɹ ðə ɹˈɪvɚ bˈæŋk.",
    "ˈɛvɹi mˈɔːɹnɪŋ, ðɪ ˈoʊld bˈeɪkɚɹ ˈoʊpənz hɪz smˈɔːl ʃˈɑːp bᵻfˌoːɹ sˈʌnɹaɪz, ænd ðə smˈɛl ʌv "
    "fɹˈɛʃ bɹˈɛd fˈɪlz ðə kwˈaɪət stɹˈiːt.",
    "tʃˈɪldɹən stˈɑːp baɪ ˌɔn ðɛɹ wˈeɪ tə skˈuːl tə bˈaɪ wˈɔːɹm ɹˈoʊlz.",
]
QUIET = {"noise_scale": 0.0, "length_scale": 1.0, "noise_w": 0.0}
CPU_THREADS = 2


def median_s(fn, reps, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    cpu_voice = gk.tts.load(device="cpu")
    sr = cpu_voice.sample_rate
    whole = cpu_voice.ids(" ".join(SENTENCES))
    first = cpu_voice.ids(SENTENCES[0])
    seconds = cpu_voice.synthesize(whole, **QUIET).size / sr
    first_seconds = cpu_voice.synthesize(first, **QUIET).size / sr

    rows = []

    def add(side, synth, reps):
        t = median_s(lambda: synth(whole), reps)
        t1 = median_s(lambda: synth(first), reps)
        rows.append(
            dict(side=side, seconds=seconds, synth_s=t, rtf=t / seconds, first_audio_s=t1)
        )

    if gk.cuda_available():
        gpu_voice = gk.tts.load(device="cuda")
        add("gpukit CUDA", lambda ids: gpu_voice.synthesize(ids, **QUIET), reps=20)
    add(f"gpukit CPU ({CPU_THREADS} threads)", lambda ids: cpu_voice.synthesize(ids, **QUIET), 5)
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = CPU_THREADS
        opts.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(cpu_voice.path), opts, providers=["CPUExecutionProvider"]
        )

        def ort_synth(ids):
            x = np.array([ids], dtype=np.int64)
            return session.run(
                None,
                {
                    "input": x,
                    "input_lengths": np.array([x.shape[1]], dtype=np.int64),
                    "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
                },
            )[0]

        add(f"onnxruntime CPU ({CPU_THREADS} threads)", ort_synth, 5)
    except ImportError:
        print("onnxruntime is not installed: no peer row")

    print(
        f"TTS, en_US-joe-medium: one utterance of {seconds:.2f} s (3 sentences); "
        f"first sentence {first_seconds:.2f} s"
    )
    print(f"{'side':<28}{'synthesis s':>12}{'RTF':>10}{'first audio s':>15}")
    for r in rows:
        print(f"{r['side']:<28}{r['synth_s']:>12.4f}{r['rtf']:>10.4f}{r['first_audio_s']:>15.4f}")
    device = None
    if gk.cuda_available():
        device = str(gk.device("cuda"))
    with open(os.path.join(out_dir, "bench-tts.json"), "w") as f:
        json.dump(dict(device=device, utterance_s=seconds, rows=rows), f, indent=1)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3))
        ax.barh([r["side"] for r in rows], [r["rtf"] for r in rows])
        ax.set_xscale("log")
        ax.set_xlabel(f"real-time factor (synthesis / audio, {seconds:.1f} s utterance; lower is faster)")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "bench-tts.png"), dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
