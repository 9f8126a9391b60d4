#!/usr/bin/env bash
# Session 35, call 3 (the KvLayout bundle of call 2): run.sh test (every GPU test: HF parity on
# four models with their swizzled caches, GGUF, ops, determinism, both attention paths).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
all_tests "$OUT/test" 580
