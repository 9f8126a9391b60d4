#!/usr/bin/env bash
# Session 32, call 16: the K-quant GEMV rewrite (a half-warp per super-block, 16 values a lane)
# — the K-quant and quantized GEMV tests and memcheck on them (bundle of the change), and the
# quantized GEMV rows of the ops bench beside torch on the bundle before it
# (target/gpu-bundle-old: the same bench rows, HEAD's kernels) and after it, in one run.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test kquant $b/tests/gpukit_ops__ops k_quants
run_test quant $b/tests/gpukit_ops__ops kv_cache_and_quantized
sanitize memcheck 200 $b/tests/gpukit_ops__ops quant
b=target/gpu-bundle-old unpack_bundle
b=target/gpu-bundle-old bench_ops "$OUT/ops-before" "qgemv" 150
bench_ops "$OUT/ops-after" "qgemv" 150
