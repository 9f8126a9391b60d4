#!/usr/bin/env bash
# Session 45, call 7 (ran on an H200: it named no kind; this header first said H100): the multi-
# row quantized GEMV with x staged in shared memory (the block's 8 warps share each 1024-value
# chunk of x's rows, as f32; call 5 had them load and widen x from global memory, warp by warp:
# M=4 at 0.37-0.54x torch's bf16 GEMV on the H200). Its tests, the determinism tests, memcheck and
# racecheck on the quantized-GEMV tests, then the qgemv bench rows beside torch, two runs. Not
# kept (M=4 twice as slow): the change is xstage.diff.
# (Refactored after it ran onto device-calls.sh's call_start, quant_tests and ab_bench / b_bench:
# the same steps; memcheck's time limit, which no call reached, is now 200 s in each.)
set -u
. docs/bench/device-calls.sh
call_start
quant_tests racecheck
b_bench 2 qgemv "^(device|qgemv)" 150
pack_out call7
