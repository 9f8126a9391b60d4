#!/usr/bin/env bash
# Session 43, call 6 (H200): the decode bench of the three small models (their o_proj, and
# Qwen3-0.6B's down_proj, take the small ring; the 4-row kernel now holds x in registers and two
# blocks an SM where it held three), bundle A (before) and B alternated, prompts 128 and 2048.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1; echo "models rc $? at ${SECONDS}s"
for r in a1 b1 a2 b2 a3 b3; do
  [ $SECONDS -gt 470 ] && break
  [ ${r:0:1} = a ] && bb=target/gpu-bundle-a || bb=target/gpu-bundle
  decode_bench $OUT/dec-$r $bb
done
cd "$OUT" && tar czf /tmp/call6.tgz . && find . -mindepth 1 -delete && mv /tmp/call6.tgz .
