#!/usr/bin/env bash
# Session 45, call 5 (H200): the bundle of 118c6d8 — the GGUF-model and HF-directory tests (the
# LLM layer's quantized projections run on the rewritten one-row qgemv kernels), then the
# quantized GEMV bench rows beside torch, one row of x and four (the new multi-row kernels),
# two runs.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test gguf_model $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
for r in 1 2; do
  bench_ops "$OUT/q$r" "qgemv" 150 | grep -E "^(device|qgemv)" | sed "s/^/$r /"
done
pack_out call5
