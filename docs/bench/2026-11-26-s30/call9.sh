#!/usr/bin/env bash
# Session 30, calls 9 (H200) and 10 (H100), bundle of bece7e7: the full ops bench beside torch.
set -u
. docs/bench/device-calls.sh
bench_ops "$OUT/ops" "" 500
