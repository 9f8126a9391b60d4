#!/usr/bin/env bash
# Session 36, call 4: the ring GEMV (session 23's probe.cu) with gemv_variants.py's copies that
# keep fewer shared-memory loads in flight a pass (u1, half, u1h) against main, three alternated
# rounds, every output checked against a host reference.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps and session 37's
# summarize.py; it ran on gemv.cu and probe.cu as of that session's start.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s36
gemv_probe_variants $D/gemv_variants.py
GV="main u1 half u1h"
for v in $GV; do gemv_probe_build $v $v & done
wait
for v in $GV; do echo "gemv $v: $(grep -A2 "gemv_ring_bf16'" $OUT/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores\|Used [0-9]* registers' | tr '\n' ' ')"; done
CONFIGS="2048,8192,8,2,4,2 8192,2048,2,4,4,2 2048,8192,4,2,8,4 8192,2048,1,4,8,4 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  for v in $GV; do gemv_probe_run $v $CONFIGS; done
done 2>&1 | tee $OUT/gemv.txt | python3 docs/bench/2026-11-26-s37/summarize.py
