#!/usr/bin/env bash
# Session 31, calls 11 and 13 (H200), the bundles of 9aa679a (DevicePtr::offset checked) and
# ccd3566 (dptr in one place): `run.sh test`,
# every GPU test.
set -u
. docs/bench/device-calls.sh
nvidia-smi --query-gpu=name --format=csv,noheader
all_tests "$OUT/tests" 560
