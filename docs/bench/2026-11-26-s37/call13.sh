#!/usr/bin/env bash
# Session 37, call 13 (H200): Qwen2.5-0.5B's down_proj ((k, n) = (4864, 896), 9.5 KiB rows) on
# the small ring in 1-row stages. Bundle built with exp-small-stage.diff (not on main):
# GPUKIT_GEMV_SMALL="row_max:stage_max" (8192:20480 is main's rule: that GEMV on the persistent
# kernel; 20480:20480 its 2-row stages, as call 5; 20480:16384 1-row stages). The decode bench
# of Qwen2.5-0.5B, prompts 128 and 2048, three alternated rounds.
# (Refactored after it ran to use device-calls.sh's decode_bench; the same runs.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models qwen2.5-0.5b > $OUT/models.log 2>&1 \
  || tail -3 $OUT/models.log
for r in 1 2 3; do
  for v in 8192:20480 20480:20480 20480:16384; do
    decode_bench $OUT/dec-${v/:/-}-$r $b GPUKIT_GEMV_SMALL=$v
  done
done
