#!/usr/bin/env bash
# Session 45, call 5 (H200): the bundle of 118c6d8 — the GGUF-model and HF-directory tests (the
# LLM layer's quantized projections run on the rewritten one-row qgemv kernels), then the
# quantized GEMV bench rows beside torch, one row of x and four (the new multi-row kernels),
# two runs.
# (Refactored after it ran onto device-calls.sh's call_start and b_bench: the same steps.)
set -u
. docs/bench/device-calls.sh
call_start
run_test gguf_model $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
b_bench 2 qgemv "^(device|qgemv)" 150
pack_out call5
