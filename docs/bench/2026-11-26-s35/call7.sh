#!/usr/bin/env bash
# Session 35, call 7 (the final bundle, 6ac45b1: swizzled K/V built on the device in the tests): run.sh test, then memcheck on the attention
# tests' decode-state case (the swizzled ring and the portable kernel on swizzled caches).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 560
unpack_bundle
sanitize memcheck 590 $b/tests/gpukit_ops__ops decode_state
