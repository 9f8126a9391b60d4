#!/usr/bin/env bash
# Session 39, call 4: the bundle of this tree (B: the small ring holds all of a block's stages
# where they fit) — the op tests and determinism; the ops bench's GEMV rows beside torch on B and
# on A (target/gpu-bundle-a: main at 13bf2f4, the same kernels), alternated B A B A; memcheck on
# the GEMV test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
for r in b1 a1 b2 a2; do
  [ ${r:0:1} = a ] && b=target/gpu-bundle-a || b=target/gpu-bundle
  bench_ops "$OUT/ops-$r" "gemv" 100 > "$OUT/ops-$r.txt"
  echo "== $r"; grep -E "^(device|gemv)" "$OUT/ops-$r.txt"
done
b=target/gpu-bundle
sanitize memcheck 580 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
