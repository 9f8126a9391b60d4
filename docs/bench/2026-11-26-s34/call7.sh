#!/usr/bin/env bash
# Session 34, call 7 (the same bundle): memcheck and racecheck on the decode-state test (the
# decode ring) and the quantized GEMV tests, then the ring kernels' rows of the ops bench beside
# torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
sanitize memcheck 200 $b/tests/gpukit_ops__ops decode_state
mv $o/memcheck.txt $o/memcheck-decode.txt
sanitize racecheck 330 $b/tests/gpukit_ops__ops decode_state
sanitize memcheck 420 $b/tests/gpukit_ops__ops quant
bench_ops "$OUT/ops-gemv" "gemv" 90
bench_ops "$OUT/ops-decode" "sdpa decode" 90
