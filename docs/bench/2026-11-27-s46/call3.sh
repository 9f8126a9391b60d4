#!/usr/bin/env bash
# Session 46, call 3 (H200): the final bundle, after a reviewer's findings (allocating forms
# refuse a quantized operand before allocating; a quantized tensor's last dimension holds at
# least one block) — every op test, the determinism tests, the GGUF-model and HF-directory
# tests, memcheck and racecheck on the quantized tests.
# (Refactored after it ran onto device-calls.sh's product_tests: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
product_tests racecheck
pack_out call3
