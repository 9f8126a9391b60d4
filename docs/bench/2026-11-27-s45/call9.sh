#!/usr/bin/env bash
# Session 45, call 9: the Hopper quantized-GEMV ring for up to 8 rows of x (qgemv_ring_rows_*:
# row r of x in column r of the MMAs' B, where the one-row ring puts x in every column). The
# quantized-GEMV tests (each output row bitwise a one-row call's, now also against the ring),
# the determinism tests, memcheck and racecheck on the quantized-GEMV tests, then the qgemv
# bench rows beside torch (M = 4 for Q4_0 and Q4_K now on the ring), bundle A (the session's
# start, one row only) against B, two alternated rounds.
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
  for x in a b; do
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/q$x$r" "qgemv" 150 | grep -E "^qgemv" | sed "s/^/$x$r /"
  done
done
b=target/gpu-bundle
pack_out call9
