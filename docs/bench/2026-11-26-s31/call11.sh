#!/usr/bin/env bash
# Session 31, call 11 (H200), the bundle of 9aa679a (DevicePtr::offset checked): `run.sh test`,
# every GPU test.
set -u
. docs/bench/device-calls.sh
nvidia-smi --query-gpu=name --format=csv,noheader
all_tests "$OUT/tests" 560
