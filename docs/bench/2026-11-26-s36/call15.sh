#!/usr/bin/env bash
# Session 36, call 15 (H200): after the review's mends — the attention and cache tests,
# determinism, and memcheck on the attention test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 420 $b/tests/gpukit_ops__ops sdpa_attention::cuda
