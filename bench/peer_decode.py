#!/usr/bin/env python3
"""Peer side of gpukit's decode benchmark.

Reads bench-decode.json (written by gpukit-llm/benches/decode.rs in the same run), runs HF
transformers on the same model directories and prompt lengths — bf16, batch 1, greedy,
`generate` with its default dynamic KV cache and default (sdpa) attention ("HF eager") — and,
for the models in --compile (default Llama-3.2-1B, at the 512-token prompt; compiling takes minutes), HF
with a static cache (`cache_implementation="static"`, which `generate` compiles with
torch.compile on its own). Measures the copy ceiling, then prints the table and
writes bench-decode-table.json and bench-decode.png next to the input.

- ms/token: (time of N new tokens - time of 1) / (N - 1), after a warm-up generation;
- TTFT: a 1-token generation (prefill + first token), best of three;
- roofline: weight bytes / copy bandwidth (every weight read once per token);
- peak memory: torch's max_memory_reserved over the generation (allocator cache included),
  beside gpukit's pool peak (reserved), both without the CUDA context.

Usage: python3 bench/peer_decode.py RESULTS_DIR [--compile llama3.2-1b,qwen2.5-0.5b,...]
"""
import argparse
import json
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_ops import copy_ceiling_gbs  # noqa: E402


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


@torch.no_grad()
def hf_run(model, vocab, prompt_len, new_tokens, seed, **gen):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, prompt_len), generator=g).cuda()

    def gen_n(n):
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                       pad_token_id=0, eos_token_id=None, **gen)

    gen_n(8)  # warm-up (and compilation, for a compiled model)
    ttft = min(timed(lambda: gen_n(1)) for _ in range(3))
    torch.cuda.reset_peak_memory_stats()
    full = timed(lambda: gen_n(new_tokens))
    return {
        "prompt": prompt_len,
        "ttft_ms": ttft * 1e3,
        "ms_per_token": (full - ttft) * 1e3 / (new_tokens - 1),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="target/bench")
    ap.add_argument("--compile", default="llama3.2-1b")
    args = ap.parse_args()
    path = os.path.join(args.out, "bench-decode.json")
    if not os.path.exists(path):
        print(f"peer_decode: {path} not found (run the gpukit-llm decode bench first)")
        return 1
    data = json.load(open(path))
    copy_gbs = copy_ceiling_gbs()
    rows = []
    for m in data["models"]:
        name = m["name"]
        torch.cuda.empty_cache()
        t = time.time()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            m["dir"], dtype=torch.bfloat16, device_map="cuda").eval()
        print(f"{name}: HF loaded in {time.time() - t:.0f} s", flush=True)
        vocab = model.config.vocab_size
        floor_ms = m["weight_bytes"] / (copy_gbs * 1e9) * 1e3
        for i, ours in enumerate(m["runs"]):
            p, n = ours["prompt"], ours["new_tokens"]
            hf = hf_run(model, vocab, p, n, 1000 + i)
            compiled = None
            if name in args.compile.split(",") and p == 512:
                try:
                    t = time.time()
                    compiled = hf_run(model, vocab, p, n, 1000 + i, cache_implementation="static")
                    compiled["setup_s"] = time.time() - t
                except Exception as e:  # noqa: BLE001 - report and go on: "where it runs"
                    compiled = {"error": f"{type(e).__name__}: {e}"[:300]}
            rows.append(dict(
                model=name, prompt=p, new_tokens=n, weight_bytes=m["weight_bytes"],
                roofline_ms=floor_ms,
                ours_ms=ours["ms_per_token"], ours_graph_ms=ours["ms_per_token_graph"],
                ours_ttft_ms=ours["ttft_ms"],
                ours_peak_bytes=ours["peak_reserved_bytes"],
                ours_peak_allocated_bytes=ours["peak_allocated_bytes"],
                need_bytes=m["weight_bytes"] + ours["kv_cache_bytes"],
                hf_ms=hf["ms_per_token"], hf_ttft_ms=hf["ttft_ms"],
                hf_peak_bytes=hf["peak_reserved_bytes"],
                hf_compiled=compiled))
        del model
    mib = 1 << 20
    print(f"device: {data['device']}; torch {torch.__version__}, transformers "
          f"{transformers.__version__}; copy {copy_gbs:.0f} GB/s; roofline = weight bytes / copy")
    print(f"{'model':<14} {'prompt':>6} {'ours ms':>8} {'tok/s':>7} {'roof%':>6} {'HF ms':>8} "
          f"{'vs HF':>6} {'HF+comp':>8} {'TTFT':>7} {'HF TTFT':>8} {'peak MiB':>9} "
          f"{'need+5%+256':>11} {'HF peak':>8}")
    for r in rows:
        c = r["hf_compiled"]
        comp = "" if c is None else ("fail" if "error" in c else f"{c['ms_per_token']:.3f}")
        allowed = r["need_bytes"] * 1.05 + 256 * mib
        print(f"{r['model']:<14} {r['prompt']:>6} {r['ours_ms']:>8.3f} {1e3 / r['ours_ms']:>7.0f} "
              f"{100 * r['roofline_ms'] / r['ours_ms']:>5.0f}% {r['hf_ms']:>8.2f} "
              f"{r['hf_ms'] / r['ours_ms']:>5.1f}x {comp:>8} {r['ours_ttft_ms']:>7.1f} "
              f"{r['hf_ttft_ms']:>8.1f} {r['ours_peak_bytes'] / mib:>9.0f} "
              f"{allowed / mib:>11.0f} {r['hf_peak_bytes'] / mib:>8.0f}")
    for r in rows:
        c = r["hf_compiled"]
        if c and "error" in c:
            print(f"HF static cache + torch.compile failed on {r['model']}: {c['error']}")
    json.dump(dict(device=data["device"], torch=torch.__version__,
                   transformers=transformers.__version__, copy_gbs=copy_gbs, rows=rows),
              open(os.path.join(args.out, "bench-decode-table.json"), "w"), indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = [f"{r['model']} p{r['prompt']}" for r in rows]
        y = range(len(rows))
        fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5))
        ax.barh([i + 0.2 for i in y], [1e3 / r["ours_ms"] for r in rows], 0.4, label="gpukit")
        ax.barh([i - 0.2 for i in y], [1e3 / r["hf_ms"] for r in rows], 0.4, label="HF eager")
        ax.scatter([1e3 / r["roofline_ms"] for r in rows], list(y), marker="|", s=300,
                   color="k", label="roofline")
        ax.set_yticks(list(y), labels)
        ax.set_xlabel("decode tokens/s (batch 1, bf16)")
        ax.set_title(f"gpukit decode vs HF transformers, {data['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "bench-decode.png"), dpi=110)
    except ImportError:
        print("matplotlib not available: no PNG chart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
