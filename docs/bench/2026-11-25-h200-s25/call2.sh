#!/bin/bash
# Session 25, call 2: why the decode step got slower with the cluster kernel (call 1: Llama-3.1-8B
# 4.66 against 4.39 ms/token at prompt 128) although the kernel alone was faster. The 8B decode
# bench (prompt 128, 64 tokens) per variant with and without programmatic dependent launch, and
# eagerly (no graph); then Nsight Compute times of the attention kernels alone in Llama-3.2-1B's
# eager step (ncu serialises kernels, so neighbours cannot interfere).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.1-8b,llama3.2-1b > /tmp/models.log 2>&1 || tail -5 /tmp/models.log
for v in cluster portable; do
  for mode in pdl nopdl eager; do
    if [ $v = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; fi
    if [ $mode = nopdl ]; then export GPUKIT_PDL=0; else unset GPUKIT_PDL; fi
    if [ $mode = eager ]; then export GPUKIT_DECODE_GRAPH=0; else unset GPUKIT_DECODE_GRAPH; fi
    d=/tmp/dec2-$v-$mode; mkdir -p $d
    GPUKIT_DECODE_TOKENS=64 GPUKIT_DECODE_PROMPTS=128 GPUKIT_BENCH_OUT=$d timeout 120 $B/benches/gpukit-llm__decode --bench > $d/log 2>&1
    echo "== $v $mode"; grep -E "^(llama|qwen)" $d/log
  done
done 2>&1 | tee $OUT/decode2.txt
unset GPUKIT_PDL GPUKIT_DECODE_GRAPH
for v in cluster portable; do
  if [ $v = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; fi
  GPUKIT_DECODE_GRAPH=0 GPUKIT_DECODE_PROMPTS=128 GPUKIT_DECODE_TOKENS=3 GPUKIT_BENCH_FILTER=llama3.2-1b \
    timeout 150 /usr/local/cuda/bin/ncu --csv --page raw --print-units base --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__cluster_dim_x,launch__grid_size \
    -k 'regex:^(sdpa|gemv)' $B/benches/gpukit-llm__decode --bench > $OUT/ncu-$v.csv 2> $OUT/ncu-$v.err
  echo "ncu $v rc $?"
  python3 - $OUT/ncu-$v.csv <<'PY'
import csv, sys, collections
lines = open(sys.argv[1], errors="replace").read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
t = list(csv.reader(lines[start:]))
h = t[0]; rows = t[2:]
ki = h.index("Kernel Name"); ti = h.index("gpu__time_duration.sum")
d = collections.defaultdict(list)
for r in rows[-200:]:
    d[r[ki].split("(")[0]].append(float(r[ti]) / 1e3)
for k, v in d.items():
    v.sort(); print(f"{k:40s} n={len(v):3d} median {v[len(v)//2]:.2f} us  min {v[0]:.2f}  max {v[-1]:.2f}")
PY
done 2>&1 | tee $OUT/ncu-summary.txt
