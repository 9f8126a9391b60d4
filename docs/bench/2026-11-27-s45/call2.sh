#!/usr/bin/env bash
# Session 45, call 2: the multi-row quantized GEMV (qgemv_rows_<dt> / qgemv_k_rows_<dt>, up to 8
# rows of x). Its tests (the two quantized-GEMV op tests, the determinism tests, the transformer
# one again on the portable attention kernels), memcheck on the quantized-GEMV tests, then the
# one-row qgemv bench rows, whose kernels were rewritten around the shared row functions, bundle
# A (the session's start: target/gpu-bundle-a) against B (this build), three alternated rounds.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops-quant $b/tests/gpukit_ops__ops quant
run_test determinism $b/tests/gpukit_ops__determinism
GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer
sanitize memcheck $((SECONDS + 200)) $b/tests/gpukit_ops__ops quant
for r in 1 2 3; do
  for x in a b; do
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/q$x$r" "qgemv" 120 | grep -E "^qgemv" | sed "s/^/$x$r /"
  done
done
b=target/gpu-bundle
pack_out call2
