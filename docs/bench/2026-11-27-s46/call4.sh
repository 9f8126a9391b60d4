#!/usr/bin/env bash
# Session 46, call 4 (H100): the final bundle, after a reviewer's findings (allocating forms
# refuse a quantized operand before allocating; a quantized tensor's last dimension holds at
# least one block) — every op test, the determinism tests, the GGUF-model and HF-directory
# tests, memcheck on the quantized tests.
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf_model $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
sanitize memcheck $((SECONDS + 120)) $b/tests/gpukit_ops__ops quant
pack_out call4
