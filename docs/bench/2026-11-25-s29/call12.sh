#!/usr/bin/env bash
# Session 29, call 12: the quantized GEMV rewritten: four rows per warp, a lane per block, whole blocks in 4-byte words,
# x converted once per lane for the four rows, quants made floats by a byte permute) against main's bench binary (target/ab/ops-main.gz, built
# with c21f493's quant.cu), two alternated rounds; then the quantized tests, the GGUF model
# test, the determinism tests, and memcheck on the quantized tests.
set -u
# The same steps as call 9 (its bench A/B and tests), into call12/.
CALL=call12 bash docs/bench/2026-11-25-s29/call9.sh
