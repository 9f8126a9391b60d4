#!/usr/bin/env bash
# Session 33, calls 11 and 13 (bundles of the final host code: one first-stage launch; then the review mends): the sampling test
# and the determinism tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
unpack_bundle
run_test sampling $b/tests/gpukit_ops__ops sampl
run_test determinism $b/tests/gpukit_ops__determinism
