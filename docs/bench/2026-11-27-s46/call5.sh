#!/usr/bin/env bash
# Session 46, call 5 (H200): the bundle of 3273aa2 (the review's last commit: a quantized view's
# shape rule is now storage_bytes') — every op test, the determinism, GGUF-model and
# HF-directory tests, memcheck on the quantized tests.
set -u
. docs/bench/device-calls.sh
call_start
product_tests
pack_out call5
