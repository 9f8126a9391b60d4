#!/usr/bin/env bash
# Session 40, call 10 (H200): the decode ring at short caches with fewer units: session 35's
# probe (PROBE_CASES, added this session) on main's kernel and pre-swizzled caches, the units
# aimed at (PROBE_UNITS; launch::SDPA_RING_UNITS is 132) 132, 64, 32 and 16, two alternated
# rounds. A lead for the split rule below 4096 keys, not a change. (It ran on a copy of the probe
# in this folder, since folded into session 35's: the same code.)
set -u
S19=docs/bench/2026-11-24-h200-s19
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/dv/cur && cp gpukit-kernels/cuda/*.cuh gpukit-kernels/cuda/attention.cu /tmp/dv/cur/
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -DPROBE_SWZ -DATTN_PRESWIZZLED -I /tmp/dv/cur -I $S19 \
  -DATTN_SRC="\"/tmp/dv/cur/attention.cu\"" docs/bench/2026-11-26-s35/decode_probe.cu -o /tmp/dprobe -lcuda \
  > $OUT/nvcc.txt 2>&1 || tail -20 $OUT/nvcc.txt
export PROBE_CASES=8:384,8:1024,8:2048,4:1024,4:2048,8:4096
for r in 1 2; do
  for u in 132 64 32 16; do PROBE_UNITS=$u /tmp/dprobe u$u; done
done > $OUT/units.txt 2>&1
python3 - $OUT/units.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+)\s+kv_heads=\d+ splits=(\d+).* ([\d.]+) us", line)
    if m: t[(int(m[2]), int(m[3]), m[1], m[4])].append(float(m[5]))
for k in sorted(t, key=lambda k: (k[0], k[1], -int(k[2][1:]))):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<5} splits {k[3]:>3} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
