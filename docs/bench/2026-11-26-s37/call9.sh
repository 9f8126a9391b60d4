#!/usr/bin/env bash
# Session 37, call 9 (H200): the whole ops bench beside torch on the bundle of a3aaa9c (B); the
# decode bench of all four models (Llama-3.1-8B included: its o_proj and down_proj take the
# per-R ring entry points) on A (carried as target/gpu-bundle-a: 170c487, main before this
# session) and B, prompts 128 and 2048, alternated; racecheck on the GEMV test.
# (Refactored after it ran to use device-calls.sh's decode_bench; the same runs.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
(python3 bench/decode_models.py $GPUKIT_DECODE_MODELS > $OUT/models.log 2>&1; echo "models rc $?" >> $OUT/models.log) &
bench_ops "$OUT/ops" "" 200 > "$OUT/ops.txt"; grep -E "^(device|gemv|rms|add|matmul|linear|sdpa decode GQA)" "$OUT/ops.txt"
wait; tail -1 $OUT/models.log
decode_bench $OUT/dec-a1 target/gpu-bundle-a; decode_bench $OUT/dec-b1 target/gpu-bundle
sanitize racecheck 580 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
