#!/usr/bin/env bash
# Session 35, call 4 (H100; the bundle with the faster test helper): the tests that read or
# write a KV cache, determinism, the decode rows of the ops bench beside torch (both layouts),
# then racecheck on the decode-state test (the swizzled ring included).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache rope pre_norm
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-decode" "sdpa decode" 150
sanitize racecheck 500 $b/tests/gpukit_ops__ops decode_state
