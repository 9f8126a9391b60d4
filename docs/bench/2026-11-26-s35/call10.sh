#!/usr/bin/env bash
# Session 35, call 10 (the final bundle): the attention and cache tests, determinism, and the
# decode rows of the ops bench beside torch in both layouts.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-decode" "sdpa decode" 150
