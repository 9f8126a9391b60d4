#!/usr/bin/env bash
# Session 36, call 13 (H200): bundle B (this tree: the ring GEMV's and the quantized ring GEMV's
# first stages asked of L2 at the block's entry) against bundle A (carried as
# target/bundle-a: the ring GEMV's change only): the GEMV, quantized GEMV, fused-projection and
# cache tests and determinism on B; the whole ops bench on B; the quantized GEMV rows on A and B
# alternated twice; memcheck on B's GEMV tests.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
b=target/bundle-a; unpack_bundle; b=target/gpu-bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear kv_cache_and_quantized_gemv k_quants pre_norm fused_decode
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-b" "" 200 > "$OUT/ops-b.txt"; grep -E "^(gemv|qgemv|sdpa decode GQA)" "$OUT/ops-b.txt"
for r in 1 2; do
  for x in a b; do
    if [ $x = a ]; then b=target/bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/q$x$r" "qgemv" 100 | grep -E "^qgemv" | sed "s/^/$x$r /"
  done
done
b=target/gpu-bundle
sanitize memcheck 585 $b/tests/gpukit_ops__ops kv_cache_and_quantized_gemv::cuda matmul_and_linear::cuda
