#!/usr/bin/env python3
"""Prints the scheduler's isolation table from bench-sched.json and draws it (bench-sched.png).

The guaranteed tenant's time per output token (p50 / p99 / max) and the best-effort tenant's
throughput (prefill or batched decode, one table each) in each setup, with the ratios the goals are stated in: p99 over the solo
p99 (goal ≤ 1.25) and throughput over the solo throughput (goal ≥ 0.5).

usage: python3 bench/peer_sched.py OUT_DIR
"""
import json
import os
import sys


LOADS = {
    "prefill": "Llama-3.1-8B prefill of {prompt}-token prompts in chunks of {chunk}",
    "decode": "Llama-3.1-8B batched decode of {batch} sequences ({batch_prompt}-token prompts)",
}


def main(out):
    with open(os.path.join(out, "bench-sched.json")) as f:
        report = json.load(f)
    rows = report["rows"]
    solo_row = next(r for r in rows if r["setup"] == "alone: guaranteed")
    solo_g = solo_row["guaranteed"]
    loads = [ld for ld in LOADS if any(r.get("load") == ld for r in rows)]
    print(f"{report['device']}: Llama-3.2-1B decode at batch 1 (guaranteed), "
          f"{report['tokens']} tokens timed; solo p50 {solo_g['p50_ms']:.3f} ms, "
          f"p99 {solo_g['p99_ms']:.3f} ms")
    for r in rows:
        if r["setup"].startswith("alone: guaranteed, "):
            g = r["guaranteed"]
            print(f"{r['setup']}: p50 {g['p50_ms']:.3f} ms, p99 {g['p99_ms']:.3f} ms "
                  f"({g['p99_ms'] / solo_g['p99_ms']:.2f}× solo)")
    plot = []
    for load in loads:
        mine = [solo_row] + [r for r in rows if r.get("load") == load]
        solo_be = next(r for r in mine if r["setup"] == "alone: best-effort")["best_effort"]
        print()
        print("best-effort: " + LOADS[load].format(**{k: report.get(k) for k in
                                                        ("prompt", "chunk", "batch",
                                                         "batch_prompt")}))
        print(f"| setup | TPOT p50 ms | p99 ms | max ms | p99 / solo | {load} tok/s | / solo "
              "| goals |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in mine:
            g, be = r.get("guaranteed"), r.get("best_effort")
            p99 = g["p99_ms"] / solo_g["p99_ms"] if g else None
            thr = be["tokens_per_s"] / solo_be["tokens_per_s"] if be else None
            met = ""
            if p99 is not None and thr is not None:
                met = "met" if p99 <= 1.25 and thr >= 0.5 else "not met"
            cell = lambda v, f: f.format(v) if v is not None else "—"  # noqa: E731
            print(f"| {r['setup']} | {cell(g and g['p50_ms'], '{:.3f}')} | "
                  f"{cell(g and g['p99_ms'], '{:.3f}')} | {cell(g and g['max_ms'], '{:.3f}')} | "
                  f"{cell(p99, '{:.2f}')} | "
                  f"{cell(be and be['tokens_per_s'], '{:,.0f}')} | {cell(thr, '{:.2f}')} | "
                  f"{met} |")
            if p99 is not None and thr is not None:
                plot.append((load, r["setup"], p99, thr))
    if not plot:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.axhline(0.5, color="gray", lw=0.8, ls="--")
    ax.axvline(1.25, color="gray", lw=0.8, ls="--")
    markers = {"prefill": "o", "decode": "s"}
    for load in loads:
        pts = [(n, x, y) for ld, n, x, y in plot if ld == load]
        ax.scatter([x for _, x, _ in pts], [y for _, _, y in pts], marker=markers[load],
                   zorder=2, label=f"best-effort {load}")
        for name, x, y in pts:
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xscale("log")
    ticks = [t for t in (1, 1.25, 2, 5, 10, 20, 50, 100) if t <= max(x for _, _, x, _ in plot) * 1.5]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(0.9, max(ticks[-1], max(x for _, _, x, _ in plot)) * 1.3)
    ax.set_xlabel("guaranteed decode p99 / solo p99 (goal ≤ 1.25)")
    ax.set_ylabel("best-effort throughput / solo (goal ≥ 0.5)")
    ax.set_title(f"Isolation on {report['device']} (goals: left of 1.25, above 0.5)", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out, "bench-sched.png")
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/bench")
