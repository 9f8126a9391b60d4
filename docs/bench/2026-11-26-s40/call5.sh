#!/usr/bin/env bash
# Session 40, call 5 (H200): the Hopper decode ring at every length (a bundle built with
# launch::SDPA_RING_MIN_KEYS = 1, and the ops bench's decode rows at 1k, 2k, 4k, 8k, 32k keys)
# against the portable split decode and its combine below 4096 keys (the same bundle with
# GPUKIT_SDPA_PORTABLE=1, which is main's path below 4096 keys and the portable path above):
# the decode rows of the ops bench (pre-swizzled caches) beside torch, ring and portable
# alternated twice; then the decode bench of the three small models (capacity prompt + 256 <
# 4096, so main takes the portable path), prompts 128 and 2048, alternated twice.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
(python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1; echo "models rc $?" >> $OUT/models.log) &
for r in 1 2; do
  bench_ops "$OUT/ring$r" "sdpa decode GQA" 120 | grep -E "^sdpa" | sed "s/^/ring$r /"
  GPUKIT_SDPA_PORTABLE=1 bench_ops "$OUT/port$r" "sdpa decode GQA" 120 | grep -E "^sdpa" | sed "s/^/port$r /"
done
wait; tail -2 $OUT/models.log
for r in 1 2; do
  decode_bench $OUT/dec-ring$r $b
  decode_bench $OUT/dec-port$r $b GPUKIT_SDPA_PORTABLE=1
done
