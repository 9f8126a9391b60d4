#!/usr/bin/env bash
# Session 45, call 7 (ran on an H200: it named no kind; this header first said H100): the multi-
# row quantized GEMV with x staged in shared memory (the block's 8 warps share each 1024-value
# chunk of x's rows, as f32; call 5 had them load and widen x from global memory, warp by warp:
# M=4 at 0.37-0.54x torch's bf16 GEMV on the H200). Its tests, the determinism tests, memcheck and
# racecheck on the quantized-GEMV tests, then the qgemv bench rows beside torch, two runs. Not
# kept (M=4 twice as slow): the change is xstage.diff.
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
pack_out call7
