#!/usr/bin/env bash
# Session 46, call 2 (H200): the bundle after call 1's failure was fixed (an empty quantized
# tensor's upload) — every op test, the determinism tests, the GGUF-model and HF-directory
# tests, memcheck and racecheck on the quantized tests, then the quantized GEMV bench rows
# beside torch (one run: against session 45's, the kernels being unchanged).
# (Refactored after it ran onto device-calls.sh's product_tests: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
product_tests racecheck
b_bench 1 qgemv "^(device|qgemv)" 150
pack_out call2
