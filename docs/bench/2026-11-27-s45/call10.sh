#!/usr/bin/env bash
# Session 45, call 10: call 9's tests again after the ring's per-32-value sums of x start at
# the block's index within its row of x (call 9: rows after the first of a k = 8448 x summed in
# another order than a one-row call's, and differed from it in the last bit), then the qgemv
# bench rows beside torch, two runs.
# (Refactored after it ran onto device-calls.sh's call_start, quant_tests and ab_bench / b_bench:
# the same steps; memcheck's time limit, which no call reached, is now 200 s in each.)
set -u
. docs/bench/device-calls.sh
call_start
quant_tests racecheck
b_bench 2 qgemv "^(device|qgemv)" 150
pack_out call10
