#!/usr/bin/env bash
# Session 46, call 2 (H200): the bundle after call 1's failure was fixed (an empty quantized
# tensor's upload) — every op test, the determinism tests, the GGUF-model and HF-directory
# tests, memcheck and racecheck on the quantized tests, then the quantized GEMV bench rows
# beside torch (one run: against session 45's, the kernels being unchanged).
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf_model $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
sanitize memcheck $((SECONDS + 120)) $b/tests/gpukit_ops__ops quant
sanitize racecheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops quant
b_bench 1 qgemv "^(device|qgemv)" 150
pack_out call2
