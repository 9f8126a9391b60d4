#!/usr/bin/env bash
# Session 38, call 9: the decode bench of all four models on A (target/gpu-bundle-a: main at
# 6dee5c1) and B (the bundle of 13bf2f4: unpack_f32 in the GEMV kernels, the large ring's
# balanced grid), prompts 128 and 2048, alternated A B A B while time allows.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS > $OUT/models.log 2>&1; echo "models rc $? at ${SECONDS}s"
for r in a1 b1 a2 b2; do
  [ $SECONDS -gt 400 ] && break
  [ ${r:0:1} = a ] && bb=target/gpu-bundle-a || bb=target/gpu-bundle
  decode_bench $OUT/dec-$r $bb
done
