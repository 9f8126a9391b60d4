#!/usr/bin/env bash
# Session 46, call 1 (H200): the block-quantized dtype (94abc27) — every op test (the new
# quantized_tensors among them), the determinism tests, the GGUF-model tests (the LLM's weights
# now quantized tensors), and memcheck on the quantized tests.
set -u
. docs/bench/device-calls.sh
call_start
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf_model $b/tests/gpukit_llm__gguf_model
sanitize memcheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops quant
pack_out call1
