#!/usr/bin/env bash
# Session 32, call 19 (bundle of 1bfa943, the session's kernels): every ops test, the
# determinism tests, the GGUF model test, memcheck and racecheck on the quantized GEMV tests,
# and the GEMV and quantized GEMV rows of the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf $b/tests/gpukit_llm__gguf_model
sanitize memcheck 330 $b/tests/gpukit_ops__ops quant
sanitize racecheck 400 $b/tests/gpukit_ops__ops quant
bench_ops "$OUT/ops" "gemv" 150
