#!/usr/bin/env bash
# Session 40, call 8 (H200): call 7's linear-layout decode rows again (their output did not come
# back): the ops bench's decode rows on linear K/V, the bundle of calls 5–7 (the ring at every
# length) against GPUKIT_SDPA_PORTABLE=1, alternated twice.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
for r in 1 2; do
  bench_ops "$OUT/ring$r" "sdpa decode linear" 100 | grep -E "^sdpa" | sed "s/^/ring$r /"
  GPUKIT_SDPA_PORTABLE=1 bench_ops "$OUT/port$r" "sdpa decode linear" 100 | grep -E "^sdpa" | sed "s/^/port$r /"
done | tee $OUT/linear.txt
rm -rf $OUT/ring? $OUT/port?
