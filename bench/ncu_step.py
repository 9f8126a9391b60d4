#!/usr/bin/env python3
"""Where a decode step's time goes: one step's kernels from an Nsight Compute CSV.

Profile the decode bench eagerly (a graph replay hides its kernels from ncu), at the real clocks
and without cache flushes, keeping the decode kernels:

    GPUKIT_DECODE_GRAPH=0 GPUKIT_DECODE_PROMPTS=128 GPUKIT_DECODE_TOKENS=3 \\
    GPUKIT_BENCH_FILTER=llama3.2-1b ncu --csv --page raw --print-units base \\
        --clock-control none --cache-control none \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum \\
        -k 'regex:^(index_select|gemv|sdpa_decode|sdpa_combine|rope|sample|decode_advance)' \\
        target/gpu-bundle/benches/gpukit-llm__decode > step.csv

then `python3 bench/ncu_step.py step.csv --copy-gbs 4250 [--graph-ms 1.05]`. The last complete
step (the kernels after the second-to-last `decode_advance`, up to the last) is grouped by role:
the single-row GEMVs after attention are the output projection, those after the SwiGLU GEMV the
down projection. For each role: launches, time, DRAM bytes read, the rate, and the time those
bytes take at the copy bandwidth (the floor) — the excess is what the kernel loses to latency,
ramp-up and tail. With --graph-ms (the same model's graph-replay step time), the difference
between the graph step and the kernels' serial sum is the launch gaps less what programmatic
dependent launch overlaps.
"""
import argparse
import csv
import sys

# ncu's unit names (its CSV's second row) → bytes and µs.
SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
         "ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}


def rows(path):
    """The profiled kernels in launch order: (name, µs, bytes read)."""
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV table (expected a header starting with \"ID\")")
    table = list(csv.reader(lines[start:]))
    head, units = table[0], table[1]
    col = {name: i for i, name in enumerate(head)}

    def value(r, metric):
        i = col[metric]
        if units[i] not in SCALE:
            sys.exit(f"{path}: unknown unit {units[i]!r} of {metric}")
        text = r[i].replace(",", "")
        return float(text) * SCALE[units[i]] if text not in ("", "n/a") else 0.0

    out = []
    for r in table[2:]:
        if len(r) != len(head):
            continue
        out.append((r[col["Kernel Name"]].split("(")[0],
                    value(r, "gpu__time_duration.sum"),
                    value(r, "dram__bytes_read.sum")))
    return out


def last_step(ks):
    ends = [i for i, k in enumerate(ks) if k[0].startswith("decode_advance")]
    step = ks[ends[-2] + 1:ends[-1] + 1] if len(ends) >= 2 else []
    # A decode step starts with the embedding gather and holds no prefill kernel (with too few
    # tokens, the slice would reach back into a prefill).
    if not step or not step[0][0].startswith("index_select") or any(
            k[0].startswith(("rms_norm", "sdpa_prefill")) for k in step):
        sys.exit("no complete decode step between two decode_advance kernels "
                 "(profile with GPUKIT_DECODE_TOKENS >= 3)")
    return step


def role(name, after, last_gemv):
    """A kernel's role in the step; `after`: the role of the last GEMV or attention kernel
    before it; `last_gemv`: whether this is the step's last GEMV (the LM head). Covers the
    fused step (pre-norm QKV, SwiGLU and head GEMVs); in a step with separate norms the
    single-row GEMVs after o_proj up to the next attention are labelled `mlp` together."""
    if last_gemv and name.startswith("gemv"):
        return "lm_head"
    if name.startswith("gemv_norm_rope_kv"):
        return "qkv+rope+append"
    if name.startswith("gemv_norm"):
        return "qkv"
    if name.startswith("gemv_swiglu"):
        return "gate_up+swiglu"
    if name.startswith("gemv") and ("_m1" in name or name.startswith("gemv_ring")):
        return {"attention": "o_proj", "o_proj": "mlp", "mlp": "mlp",
                "gate_up+swiglu": "down"}.get(after, "qkv")
    if name.startswith(("sdpa_decode", "sdpa_combine")):
        return "attention"
    if name.startswith("rope"):
        return "qk_norm+rope+append"
    return name.split("_bf16")[0].split("_f16")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--copy-gbs", type=float, required=True, help="measured copy bandwidth")
    ap.add_argument("--graph-ms", type=float, help="the graph-replay step time of this model")
    args = ap.parse_args()
    step = last_step(rows(args.csv))
    gemvs = [i for i, k in enumerate(step) if k[0].startswith("gemv")]
    groups, order, after = {}, [], "down"
    for i, (name, us, read) in enumerate(step):
        r = role(name, after, i == gemvs[-1])
        if name.startswith(("gemv", "sdpa")):
            after = r
        if r not in groups:
            groups[r] = [0, 0.0, 0.0]
            order.append(r)
        g = groups[r]
        g[0] += 1
        g[1] += us
        g[2] += read
    bw = args.copy_gbs * 1e3  # bytes per µs
    print(f"{'role':<22} {'launches':>8} {'µs':>9} {'µs each':>8} {'MB read':>9} {'GB/s':>6} "
          f"{'floor µs':>9} {'excess µs':>10}")
    tot = [0, 0.0, 0.0, 0.0]
    for r in order:
        n, us, read = groups[r]
        floor = read / bw
        tot = [tot[0] + n, tot[1] + us, tot[2] + read, tot[3] + floor]
        print(f"{r:<22} {n:>8} {us:>9.1f} {us / n:>8.2f} {read / 1e6:>9.1f} "
              f"{read / us / 1e3:>6.0f} {floor:>9.1f} {us - floor:>10.1f}")
    print(f"{'kernels (serial sum)':<22} {tot[0]:>8} {tot[1]:>9.1f} {'':>8} {tot[2] / 1e6:>9.1f} "
          f"{tot[2] / tot[1] / 1e3:>6.0f} {tot[3]:>9.1f} {tot[1] - tot[3]:>10.1f}")
    if args.graph_ms:
        g = args.graph_ms * 1e3
        print(f"graph step {g:.1f} µs: serial sum {tot[1]:.1f} µs, difference {g - tot[1]:+.1f} µs "
              f"(launch gaps less the overlap of programmatic dependent launch)")


if __name__ == "__main__":
    main()
