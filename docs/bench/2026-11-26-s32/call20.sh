#!/usr/bin/env bash
# Session 32, calls 20, 21 and 22 (the bundles of af52a47, 0d91eb0 and the final one): the rings
# for Q4_K and Q5_K (`qgemv_ring_q4k_<dt>`, `_q5k_`) — the quantized GEMV
# tests (the K-quant test's (300, 8448) Q4_K and Q5_K take the ring), the determinism tests (a 1000 × 2048
# Q4_K matrix), memcheck and racecheck on the quantized GEMV tests, and the quantized GEMV rows of
# the ops bench beside torch.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
run_test quant $b/tests/gpukit_ops__ops quant
run_test determinism $b/tests/gpukit_ops__determinism
sanitize memcheck 200 $b/tests/gpukit_ops__ops quant
sanitize racecheck 260 $b/tests/gpukit_ops__ops quant
bench_ops "$OUT/ops" "qgemv" 150
