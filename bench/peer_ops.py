#!/usr/bin/env python3
"""Peer side of gpukit's ops benchmark.

Reads bench-ops.json (written by gpukit-ops/benches/ops.rs in the same run), times torch on the
same cases the same way (CUDA events, median, same rotation of weights larger than L2), measures
the ceilings (1 GiB device-to-device copy counting read + write; torch bf16 8192^3 matmul), then
prints the table and writes bench-ops-table.json and bench-ops.png next to the input.

Usage: python3 bench/peer_ops.py RESULTS_DIR
"""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F


def time_ms(fn, trials, batch, warm):
    """Milliseconds per call: `batch` calls captured into one CUDA graph (after `warm` eager
    calls), replays timed between two events, median over `trials` (the same method as the Rust
    side: GPU time only)."""
    for i in range(warm):
        fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(batch):
            fn(i)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    g.replay()
    times = []
    for _ in range(trials):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def eager_ms(fn, trials, batch):
    """Milliseconds per call of back-to-back eager calls (for the ceilings: large copies and
    products are not launch-bound, and copies inside a graph run slower than eager ones)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    fn()
    times = []
    for _ in range(trials):
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def rand(*shape):
    return torch.empty(*shape, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)


def peer(case):
    k, p = case["kind"], case["params"]
    if k == "matmul":
        a, b = rand(p["m"], p["k"]), rand(p["k"], p["n"])
        o = torch.empty(p["m"], p["n"], dtype=torch.bfloat16, device="cuda")
        return time_ms(lambda i: torch.matmul(a, b, out=o), 10, 10, 5)
    if k == "linear":
        x, w = rand(p["m"], p["k"]), rand(p["n"], p["k"])
        return time_ms(lambda i: F.linear(x, w), 10, 10, 5)
    if k == "gemv":
        ws = [rand(p["n"], p["k"]) for _ in range(p["copies"])]
        x = rand(1, p["k"])
        return time_ms(lambda i: F.linear(x, ws[i % len(ws)]), 20, 50, 10)
    if k == "linear_bi":
        ws = [rand(p["n"], p["k"]) for _ in range(p["copies"])]
        x = rand(p["m"], p["k"])
        return time_ms(lambda i: F.linear(x, ws[i % len(ws)]), 20, 20, 5)
    if k == "paged_attention":
        # torch has no paged cache: the peer reads each sequence's keys and values from one
        # contiguous tensor (batched decode SDPA, grouped-query).
        q = rand(p["seqs"], p["heads"], 1, p["d"])
        kk = rand(p["seqs"], p["kv_heads"], p["len"], p["d"])
        v = rand(p["seqs"], p["kv_heads"], p["len"], p["d"])
        return time_ms(lambda i: F.scaled_dot_product_attention(q, kk, v, enable_gqa=True),
                       20, 20, 5)
    if k == "rms_norm":
        x, w = rand(p["rows"], p["hidden"]), rand(p["hidden"])
        return time_ms(lambda i: F.rms_norm(x, (p["hidden"],), w, eps=1e-5), 20, 20, 5)
    if k == "add":
        a, b = rand(p["n"]), rand(p["n"])
        o = torch.empty_like(a)
        return time_ms(lambda i: torch.add(a, b, out=o), 20, 20, 5)
    if k == "sdpa_prefill":
        shape = (p["batch"], p["heads"], p["seq"], p["d"])
        q, kk, v = rand(*shape), rand(*shape), rand(*shape)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return time_ms(lambda i: F.scaled_dot_product_attention(q, kk, v, is_causal=True), 10, 5, 2)
    if k == "sdpa_decode":
        q = rand(1, p["q_heads"], 1, p["d"])
        kvs = [(rand(1, p["kv_heads"], p["len"], p["d"]), rand(1, p["kv_heads"], p["len"], p["d"]))
               for _ in range(p["copies"])]
        # One query at the last position sees every key: no mask (torch's is_causal aligns the
        # mask top-left, which would hide all but the first key).
        return time_ms(lambda i: F.scaled_dot_product_attention(
            q, kvs[i % len(kvs)][0], kvs[i % len(kvs)][1], enable_gqa=True), 20, 20, 5)
    if k == "qgemv":
        # torch has no GGML block formats: the peer is the bf16 GEMV of the same shape (it reads
        # 2 bytes per weight where ours reads 1.06 / 0.56), for the same rows of x.
        ws = [rand(p["n"], p["k"]) for _ in range(4)]
        x = rand(p.get("m", 1), p["k"])
        return time_ms(lambda i: F.linear(x, ws[i % len(ws)]), 20, 50, 10)
    if k == "sampling":
        logits = (torch.rand(1, p["vocab"], device="cuda") * 16 - 8).to(torch.bfloat16)

        def draw(i):
            if p["temperature"] == 0:
                return torch.argmax(logits, dim=-1)
            probs = torch.softmax(logits.float() / p["temperature"], dim=-1)
            if p["top_k"] > 0 or p["top_p"] < 1:
                # HF-style: sort, keep top-k, keep the nucleus, renormalise, draw.
                sp, si = torch.sort(probs, descending=True)
                if p["top_k"] > 0:
                    sp[:, p["top_k"]:] = 0
                cum = torch.cumsum(sp, dim=-1)
                sp[(cum - sp) > p["top_p"]] = 0
                return si.gather(-1, torch.multinomial(sp, 1))
            return torch.multinomial(probs, 1)
        return time_ms(draw, 20, 20, 5)
    raise ValueError(f"unknown case kind {k}")


def copy_ceiling_gbs():
    """The device-to-device copy bandwidth in GB/s (1 GiB, counting read + write)."""
    n = 1 << 29
    a = rand(n)
    b = torch.empty_like(a)
    gbs = 2 * n * 2 / (eager_ms(lambda: b.copy_(a), 10, 5) * 1e-3) / 1e9
    del a, b
    return gbs


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "target/bench"
    path = os.path.join(out, "bench-ops.json")
    if not os.path.exists(path):
        print(f"peer_ops: {path} not found (run the gpukit-ops bench first)")
        return 1
    data = json.load(open(path))
    copy_gbs = copy_ceiling_gbs()
    m = 8192
    x, y = rand(m, m), rand(m, m)
    gemm_tflops = 2 * m**3 / (eager_ms(lambda: torch.matmul(x, y), 5, 5) * 1e-3) / 1e12
    del x, y
    rows = []
    for c in data["cases"]:
        try:
            t = peer(c)
        except Exception as e:  # a peer that cannot run this case (or cannot be captured)
            print(f"peer_ops: torch failed on {c['name']}: {e}")
            t = float("nan")
        compute = c["flops"] > 0 and c["kind"] in ("matmul", "linear", "sdpa_prefill")
        if compute:
            ours_rate = c["flops"] / (c["ms"] * 1e-3) / 1e12
            torch_rate = c["flops"] / (t * 1e-3) / 1e12
            pct = 100 * ours_rate / gemm_tflops
            unit = "TFLOP/s"
        else:
            ours_rate = c["bytes"] / (c["ms"] * 1e-3) / 1e9
            torch_rate = c["bytes"] / (t * 1e-3) / 1e9
            pct = 100 * ours_rate / copy_gbs
            unit = "GB/s"
        rows.append(dict(name=c["name"], ours_ms=c["ms"], torch_ms=t, ratio=t / c["ms"],
                         ours_rate=ours_rate, torch_rate=torch_rate, unit=unit, pct_ceiling=pct))
        torch.cuda.empty_cache()
    print(f"device: {data['device']}; torch {torch.__version__}; ceilings: copy {copy_gbs:.0f} GB/s "
          f"(read+write), bf16 GEMM {gemm_tflops:.0f} TFLOP/s (torch 8192^3)")
    print(f"{'op':<38} {'ours ms':>9} {'torch ms':>9} {'speed-up':>8} {'ours':>9} {'torch':>9} {'unit':>8} {'% ceil':>7}")
    for r in rows:
        print(f"{r['name']:<38} {r['ours_ms']:>9.4f} {r['torch_ms']:>9.4f} {r['ratio']:>7.2f}x "
              f"{r['ours_rate']:>9.1f} {r['torch_rate']:>9.1f} {r['unit']:>8} {r['pct_ceiling']:>6.1f}%")
    json.dump(dict(device=data["device"], torch=torch.__version__, copy_gbs=copy_gbs,
                   gemm_tflops=gemm_tflops, rows=rows),
              open(os.path.join(out, "bench-ops-table.json"), "w"), indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.5))
        names = [r["name"] for r in rows]
        ax.barh(names, [r["ratio"] for r in rows], color=["#2a7" if r["ratio"] >= 1 else "#c54" for r in rows])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xlabel("speed-up over torch (torch time / gpukit time)")
        ax.set_title(f"gpukit ops vs torch {torch.__version__} on {data['device']}")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "bench-ops.png"), dpi=110)
    except ImportError:
        print("matplotlib not available: no PNG chart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
