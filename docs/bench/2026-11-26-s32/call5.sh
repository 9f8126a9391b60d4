#!/usr/bin/env bash
# Session 32, call 5 (and later ones with the final bundle): the Q4_0 tensor-core ring GEMV in the
# product — the quantized GEMV and transformer determinism tests, memcheck and racecheck on the
# quantized GEMV test, and the quantized GEMV rows of the ops bench beside torch (with `all`:
# run.sh test too).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test quant $b/tests/gpukit_ops__ops kv_cache_and_quantized
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops" "qgemv" 150
sanitize memcheck 400 $b/tests/gpukit_ops__ops kv_cache_and_quantized
sanitize racecheck 520 $b/tests/gpukit_ops__ops kv_cache_and_quantized
if [ "${1:-}" = all ]; then all_tests "$OUT/all" 590; fi
