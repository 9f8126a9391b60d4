#!/usr/bin/env bash
# Session 45, call 9: the Hopper quantized-GEMV ring for up to 8 rows of x (qgemv_ring_rows_*:
# row r of x in column r of the MMAs' B, where the one-row ring puts x in every column). The
# quantized-GEMV tests (each output row bitwise a one-row call's, now also against the ring),
# the determinism tests, memcheck and racecheck on the quantized-GEMV tests, then the qgemv
# bench rows beside torch (M = 4 for Q4_0 and Q4_K now on the ring), bundle A (the session's
# start, one row only) against B, two alternated rounds.
# (Refactored after it ran onto device-calls.sh's call_start, quant_tests and ab_bench / b_bench:
# the same steps; memcheck's time limit, which no call reached, is now 200 s in each.)
set -u
. docs/bench/device-calls.sh
call_start
quant_tests racecheck
ab_bench 2 99999 qgemv ^qgemv 150 q
pack_out call9
