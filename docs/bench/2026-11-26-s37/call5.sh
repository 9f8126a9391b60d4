#!/usr/bin/env bash
# Session 37, call 5 (H200): which small matrices the small-matrix ring should take in the decode
# step. Bundle built with exp-small-maxrow.diff (not on main): GPUKIT_GEMV_SMALL_MAXROW=bytes
# keeps the small ring to rows of at most that many bytes (20480: every small matrix, as call
# 4's bundle B; 8192: not Qwen2.5-0.5B's down_proj, 9.5 KiB rows; 4096: only the 2048-wide
# o_proj of Llama-3.2-1B and Qwen3-0.6B; 0: none, the persistent kernel as on main). The decode
# bench of the three small models, variants alternated twice; then the GEMV ops bench rows at
# 20480 and 0.
# (Refactored after it ran to use device-calls.sh's decode_bench; the same runs.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
ls $GPUKIT_DECODE_MODELS 2>/dev/null | head -3
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1 || tail -3 $OUT/models.log
for r in 1 2; do
  for v in 20480 8192 4096 0; do decode_bench $OUT/dec-$v-$r $b GPUKIT_GEMV_SMALL_MAXROW=$v; done
done
for v in 20480 0; do
  GPUKIT_GEMV_SMALL_MAXROW=$v bench_ops "$OUT/g$v" "gemv bf16 M=1 k=896" 100 | grep -E "^gemv" | sed "s/^/$v /"
done
