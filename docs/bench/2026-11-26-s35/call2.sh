#!/usr/bin/env bash
# Session 35, call 2 (the KvLayout bundle): the tests that read or write a KV cache (attention
# in both layouts, the cache, RoPE + append, the fused QKV epilogue, the decode state), the
# determinism tests, the decode rows of the ops bench beside torch (both layouts), then memcheck
# on the decode-state test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache rope pre_norm
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-decode" "sdpa decode" 150
sanitize memcheck 420 $b/tests/gpukit_ops__ops decode_state
