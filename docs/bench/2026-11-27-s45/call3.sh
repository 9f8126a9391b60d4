#!/usr/bin/env bash
# Session 45, call 3: the multi-row quantized GEMV (qgemv_rows_<dt> / qgemv_k_rows_<dt>, up to 8
# rows of x). Its tests (the two quantized-GEMV op tests, the determinism tests, the transformer
# one again on the portable attention kernels), memcheck on the quantized-GEMV tests, then the
# one-row qgemv bench rows, whose kernels were rewritten around the shared row functions, bundle
# A (the session's start: target/gpu-bundle-a) against B (this build), three alternated rounds.
# The same steps as call 2, after the K-quant row function was changed to issue the first row's
# loads of x before it decodes the super-block (call 2: the Q6_K row 29.9 µs against 28.3).
# (Refactored after it ran onto device-calls.sh's call_start, quant_tests and ab_bench / b_bench:
# the same steps; memcheck's time limit, which no call reached, is now 200 s in each.)
set -u
. docs/bench/device-calls.sh
call_start
quant_tests portable
ab_bench 3 99999 qgemv ^qgemv 120 q
pack_out call3
