#!/usr/bin/env bash
# Session 47, call 6 (H200, warm; the session's last device time): memcheck on the remaining
# op tests but attention (GEMM/GEMV, sampling, the KV cache, the quantized ones, the large
# elementwise case) until 120 s into the call, the determinism tests until 150 s and the pool
# and scheduler tests until 165 s, then racecheck on the other element-wise, copy and
# sampling tests until 205 s; a test not listed as ok did not finish.
set -u
. docs/bench/device-calls.sh
call_start
t=$b/tests/gpukit_ops__ops
sanitize memcheck 120 $t elementwise_large::cuda kv_cache_and_quantized_gemv::cuda \
  matmul_and_linear::cuda quantized_tensors::cuda quants_match_gguf_py::cuda \
  sampling_on_the_device_matches_the_reference::cuda
mv "$o/memcheck.txt" "$o/memcheck-ops.txt"
sanitize memcheck 150 $b/tests/gpukit_ops__determinism
mv "$o/memcheck.txt" "$o/memcheck-determinism.txt"
sanitize memcheck 158 $b/tests/gpukit_mem__gpu_mem
mv "$o/memcheck.txt" "$o/memcheck-gpu_mem.txt"
sanitize memcheck 165 $b/tests/gpukit_sched__gpu_sched
mv "$o/memcheck.txt" "$o/memcheck-gpu_sched.txt"
sanitize racecheck 205 $t binary_broadcasting::cuda copies_views_concat::cuda \
  sampling_on_the_device_matches_the_reference::cuda unary_math::cuda
grep -hE "^test .*(ok|FAILED)$" "$o"/memcheck-*.txt "$o/racecheck.txt"
pack_out call6
