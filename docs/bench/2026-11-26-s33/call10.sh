#!/usr/bin/env bash
# Session 33, call 10 (the bundle of call 9, the final sampler kernels): racecheck on the
# sampling test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
unpack_bundle
sanitize racecheck 280 $b/tests/gpukit_ops__ops sampl
