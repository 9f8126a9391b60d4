#!/usr/bin/env python3
"""Session 41: copies of gemv.cu for probe.cu (docs/bench/2026-11-25-h200-s23) with a smaller ring
GEMV batch. Each consumer thread sums GEMV_RING_BATCH (8) rows before reducing them across its
warp and group at once; session 39 measured that reduction at 0.15–0.2 µs of a 32 MiB call
(`nored`), on the path after each group's last stage. With a batch of R rows (one stage) each
stage is reduced as soon as it is read, so the reductions of all but the last stage overlap the
waits for the next, and the last one is shorter (fewer rows to transpose).

b4  GEMV_RING_BATCH 4 (entry points with R ≤ 4 only: R = 8 would have no stages a batch)
b2  GEMV_RING_BATCH 2 (R ≤ 2 only)

The sums are the same values added in another order: outputs within the probe's tolerance, not
bitwise main's. Usage: batch_variants.py SRC OUTDIR -> OUTDIR/gemv_<name>.cu"""
import os
import sys

src, outdir = sys.argv[1], sys.argv[2]
t = open(src).read()
assert t.count("#define GEMV_RING_BATCH 8") == 1
os.makedirs(outdir, exist_ok=True)
open(os.path.join(outdir, "gemv_main.cu"), "w").write(t)
for b in (4, 2):
    open(os.path.join(outdir, f"gemv_b{b}.cu"), "w").write(t.replace("#define GEMV_RING_BATCH 8", f"#define GEMV_RING_BATCH {b}"))
