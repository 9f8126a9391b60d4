#!/usr/bin/env bash
# Session 37, call 4 (H200): bundle B (this tree: one ring GEMV entry point per rows-a-stage, and
# the small-matrix ring from 4 MiB, two blocks a multiprocessor) against bundle A (carried as
# target/gpu-bundle-a: main before it). The GEMV tests and determinism on B; the GEMV rows of
# the ops bench, A and B alternated twice; the decode bench of the three small models (their
# o_proj / down_proj take the small ring on B), A and B alternated twice.
# (Refactored after it ran to use device-calls.sh's decode_bench; the same runs.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
(python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1; echo "models rc $?" >> $OUT/models.log) &
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
run_test determinism $b/tests/gpukit_ops__determinism
for r in 1 2; do
  for x in a b; do
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/g$x$r" "gemv bf16" 100 | grep -E "^gemv" | sed "s/^/$x$r /"
  done
done
wait; tail -2 $OUT/models.log
for r in 1 2; do
  decode_bench $OUT/dec-a$r target/gpu-bundle-a; decode_bench $OUT/dec-b$r target/gpu-bundle
done
