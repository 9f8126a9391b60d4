#!/usr/bin/env bash
# Session 47, call 5 (H200, warm after call 4, the session's last device time): memcheck on
# more of the op tests' CUDA halves (the fused decode ops, the pre-norm projections, RoPE, the
# refusals and degenerate shapes) until 110 s into the call, then racecheck on the op tests
# whose kernels reduce through shared memory until 210 s; a test not listed as ok in
# memcheck.txt / racecheck.txt did not finish.
set -u
. docs/bench/device-calls.sh
call_start
t=$b/tests/gpukit_ops__ops
sanitize memcheck 110 $t degenerate_and_bad_inputs::cuda empty_and_scalar_tensors::cuda \
  fused_decode_ops::cuda pre_norm_projections::cuda pre_norm_rope_kv::cuda \
  refuses_strided_side_inputs_and_absurd_sizes::cuda rope_and_dequantize::cuda
sanitize racecheck 210 $t norms::cuda fused_decode_ops::cuda pre_norm_projections::cuda \
  scalar_clamp_where_cast::cuda embedding_and_index_select::cuda
grep -hE "^test .*(ok|FAILED)$" "$o/memcheck.txt" "$o/racecheck.txt"
pack_out call5
