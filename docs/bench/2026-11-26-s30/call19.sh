#!/usr/bin/env bash
# Session 30, calls 19 (H200) and 20 (H100), bundle of cc999d7: the decode cases of the ops bench
# beside torch; on the H200 also the attention tests (ring), the determinism tests and memcheck
# on the decode-state test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
bench_ops "$OUT/ops" "sdpa decode" 200
[ "${1:-}" = tests ] || exit 0
run_test tests $b/tests/gpukit_ops__ops sdpa
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 560 $b/tests/gpukit_ops__ops sdpa_at_device_position
