#!/usr/bin/env python3
"""gpukit's Python-side benchmark, with its peers in the same run.

1. Overhead of a small op from Python: `gk.add` of two 1,024-element f32 GPU tensors followed by
   a synchronize, beside `torch.add` + `torch.cuda.synchronize()` on the same shapes (wall time
   per call, median of batches; goal: no slower than torch).
2. Decode speed through `Model.stream` beside the `gpukit` command on the same prompt, model and
   device (goal: within 2%): greedy, 256 new tokens, on the model in $GPUKIT_BENCH_MODEL (a GGUF
   file or HF directory; default: the default model, fetched as the CLI fetches it).

Prints a table and writes bench-python.json (and bench-python.png when matplotlib is there) to
RESULTS_DIR.

Usage: python3 bench/python.py RESULTS_DIR [GPUKIT_CLI]
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

import gpukit as gk


def per_call_us(fn, calls=2000, batches=15):
    """Median over `batches` of the wall time per call, in microseconds, after a warm-up."""
    for _ in range(200):
        fn()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def overhead_rows():
    rows = []
    a = gk.rand(1024, seed=1, device="cuda")
    b = gk.rand(1024, seed=2, device="cuda")
    dev = gk.device("cuda")

    def gk_add():
        gk.add(a, b)
        dev.synchronize()

    out = gk.zeros(1024, device="cuda")

    def gk_add_out():
        gk.add(a, b, out=out)
        dev.synchronize()

    ours = per_call_us(gk_add)
    ours_out = per_call_us(gk_add_out)
    try:
        import torch

        ta = torch.rand(1024, device="cuda")
        tb = torch.rand(1024, device="cuda")
        tout = torch.empty(1024, device="cuda")

        def torch_add():
            torch.add(ta, tb)
            torch.cuda.synchronize()

        def torch_add_out():
            torch.add(ta, tb, out=tout)
            torch.cuda.synchronize()

        peer, peer_out = per_call_us(torch_add), per_call_us(torch_add_out)
        version = torch.__version__
    except ImportError:
        peer = peer_out = float("nan")
        version = "absent"
    rows.append(("add 1k f32 + synchronize (new output)", ours, peer, version))
    rows.append(("add 1k f32 + synchronize (out=)", ours_out, peer_out, version))
    return rows


def decode_row(cli):
    prompt = "Write a long story about a lighthouse keeper."
    n = 256
    path = os.environ.get("GPUKIT_BENCH_MODEL")
    m = gk.llm.load(path, device="cuda")
    best = 0.0
    for _ in range(3):
        for _ in m.stream(prompt, max_tokens=n, stop=[]):
            pass
        best = max(best, m.last_stats["decode_tokens_per_s"])
    cli_best = float("nan")
    if cli:
        for _ in range(3):
            model = ["--model", path] if path else []
            r = subprocess.run(
                [cli, "generate", prompt, "--max-tokens", str(n), "--device", "cuda", "--stats", *model],
                capture_output=True,
                text=True,
                check=True,
            )
            found = re.search(r"([0-9.]+) tokens/s", r.stderr)
            if found:
                cli_best = max(0.0 if cli_best != cli_best else cli_best, float(found.group(1)))
    name = os.path.basename(path) if path else "default model"
    return (f"decode tokens/s, {name}, greedy, 256 tokens: Model.stream vs gpukit CLI", best, cli_best)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    cli = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("GPUKIT_CLI")
    os.makedirs(out, exist_ok=True)
    props = gk.device("cuda")
    print(f"== python bench on {props.name}, gpukit {gk.__version__}")
    rows = overhead_rows()
    print(f"{'case':48} {'gpukit us':>10} {'torch us':>10} {'torch/gpukit':>13}")
    for name, ours, peer, _ in rows:
        print(f"{name:48} {ours:10.2f} {peer:10.2f} {peer / ours:13.2f}")
    d = decode_row(cli)
    print(d[0])
    print(f"{'decode: Model.stream tokens/s':48} {d[1]:10.1f}")
    print(f"{'decode: gpukit CLI tokens/s':48} {d[2]:10.1f}   python/CLI {d[1] / d[2]:.3f}")
    result = {
        "device": props.name,
        "overhead": [dict(case=r[0], gpukit_us=r[1], torch_us=r[2], torch=r[3]) for r in rows],
        "decode": dict(case=d[0], stream_tokens_per_s=d[1], cli_tokens_per_s=d[2]),
    }
    with open(os.path.join(out, "bench-python.json"), "w") as f:
        json.dump(result, f, indent=2)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
        labels = ["new output", "out="]
        x = range(len(rows))
        ax1.bar([i - 0.2 for i in x], [r[1] for r in rows], 0.4, label="gpukit")
        ax1.bar([i + 0.2 for i in x], [r[2] for r in rows], 0.4, label="torch")
        ax1.set_xticks(list(x), labels)
        ax1.set_ylabel("µs per add + synchronize")
        ax1.legend()
        ax2.bar(["Model.stream", "gpukit CLI"], [d[1], d[2]], color=["C0", "C2"])
        ax2.set_ylabel("decode tokens/s")
        fig.suptitle(f"gpukit from Python, {props.name}")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "bench-python.png"), dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
