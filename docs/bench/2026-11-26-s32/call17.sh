#!/usr/bin/env bash
# Session 32, call 17: the K-quants in their own kernel (`qgemv_k_<dt>`) — the quantized GEMV
# tests and memcheck on them, then the quantized GEMV rows of the ops bench beside torch, two
# alternated rounds of the bundle before (target/gpu-bundle-old: HEAD's kernels) and after.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
b=target/gpu-bundle-old unpack_bundle
run_test kquant $b/tests/gpukit_ops__ops quant
sanitize memcheck 200 $b/tests/gpukit_ops__ops quant
for r in 1 2; do
  b=target/gpu-bundle-old bench_ops "$OUT/before-$r" "qgemv" 150 | grep qgemv
  bench_ops "$OUT/after-$r" "qgemv" 150 | grep qgemv
done
