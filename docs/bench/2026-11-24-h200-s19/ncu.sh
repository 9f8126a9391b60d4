#!/bin/bash
# Session 19: Nsight Compute on one eager launch of gemv_ring_bf16 at (k, n) = (2048, 8192), S = 4
# (gemv_probe.cu "main"): warp stall reasons and where in the SASS the warps wait.
set -u
D=docs/bench/2026-11-24-h200-s19
mkdir -p /tmp/v
python3 $D/variants.py gpukit-kernels/cuda/gemv.cu /tmp/v > /dev/null
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -lineinfo -w -I gpukit-kernels/cuda \
  -DGEMV_SRC="\"/tmp/v/gemv_main.cu\"" $D/gemv_probe.cu -o /tmp/probe_main
ncu --kernel-name regex:gemv_ring --launch-skip 2 --launch-count 1 --set full --import-source yes \
  -o /tmp/ring /tmp/probe_main main 4 4 > $OUT/ncu-run.txt 2>&1
ncu --import /tmp/ring.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
ncu --import /tmp/ring.ncu-rep --page source --csv --print-source sass > $OUT/ncu-sass.csv 2>&1
python3 - "$OUT/ncu-sass.csv" <<'PY' > $OUT/ncu-top-stalls.txt
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(i for i, r in enumerate(rows) if "Source" in r)
h = rows[hdr]
col = {n: i for i, n in enumerate(h)}
key = next((n for n in h if n.startswith("Warp Stall Sampling (All")), None)
print("columns:", [n for n in h if "Stall" in n][:6])
data = []
for r in rows[hdr + 1:]:
    try:
        data.append((float(r[col[key]]), r[col["Address"]] if "Address" in col else "", r[col["Source"]]))
    except (ValueError, IndexError, KeyError):
        pass
tot = sum(d[0] for d in data) or 1
for s, a, src in sorted(data, reverse=True)[:40]:
    print(f"{100*s/tot:5.1f}%  {a}  {src}")
PY
grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall|Shared" $OUT/ncu-details.txt | head -40
head -45 $OUT/ncu-top-stalls.txt
