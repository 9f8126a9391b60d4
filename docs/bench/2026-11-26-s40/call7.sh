#!/usr/bin/env bash
# Session 40, call 7 (H200): the bundle of calls 5–6 (the decode ring at every length) against
# itself with GPUKIT_SDPA_PORTABLE=1 (main's path below 4096 keys): the decode bench of the three
# small models, prompts 128 and 2048, three alternated rounds; the ops bench's decode rows on
# linear (not pre-swizzled) K/V, ring and portable; then racecheck on the attention tests with
# the time left.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
(python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,qwen3-0.6b \
  > $OUT/models.log 2>&1; echo "models rc $?" >> $OUT/models.log) &
bench_ops "$OUT/ring-lin" "sdpa decode linear" 120 | grep -E "^sdpa" | sed "s/^/ring /"
GPUKIT_SDPA_PORTABLE=1 bench_ops "$OUT/port-lin" "sdpa decode linear" 120 | grep -E "^sdpa" | sed "s/^/port /"
wait; tail -2 $OUT/models.log
for r in 1 2 3; do
  decode_bench $OUT/dec-ring$r $b
  decode_bench $OUT/dec-port$r $b GPUKIT_SDPA_PORTABLE=1
done
sanitize racecheck 580 $b/tests/gpukit_ops__ops sdpa_at_device_position
