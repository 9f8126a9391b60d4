#!/usr/bin/env bash
# Session 45, call 10: call 9's tests again after the ring's per-32-value sums of x start at
# the block's index within its row of x (call 9: rows after the first of a k = 8448 x summed in
# another order than a one-row call's, and differed from it in the last bit), then the qgemv
# bench rows beside torch, two runs.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test ops-quant $b/tests/gpukit_ops__ops quant
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck $((SECONDS + 100)) $b/tests/gpukit_ops__ops quant
sanitize racecheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops quant
for r in 1 2; do
  bench_ops "$OUT/q$r" "qgemv" 150 | grep -E "^(device|qgemv)" | sed "s/^/$r /"
done
pack_out call10
