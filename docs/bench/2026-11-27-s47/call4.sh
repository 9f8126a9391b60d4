#!/usr/bin/env bash
# Session 47, call 4 (H200, the last ~300 s of the session's device time): compute-sanitizer
# memcheck on op tests whose CUDA halves had not run under it since session 45 rewrote or added
# them (session 45's new whole-tensor reductions, scalar ops, clamp, where and casts first),
# then racecheck on the reductions (shared-memory trees) — until 190 s into the call; a test
# not listed as ok in memcheck*.txt / racecheck.txt did not finish.
set -u
. docs/bench/device-calls.sh
call_start
t=$b/tests/gpukit_ops__ops
sanitize memcheck 80 $t reductions_and_softmax::cuda scalar_clamp_where_cast::cuda
mv "$o/memcheck.txt" "$o/memcheck1.txt"
sanitize memcheck 150 $t binary_broadcasting::cuda copies_views_concat::cuda \
  embedding_and_index_select::cuda norms::cuda unary_math::cuda
mv "$o/memcheck.txt" "$o/memcheck2.txt"
sanitize racecheck 190 $t reductions_and_softmax::cuda
grep -hE "^test .*(ok|FAILED)$" "$o"/memcheck*.txt "$o/racecheck.txt"
pack_out call4
