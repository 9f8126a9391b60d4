#!/usr/bin/env bash
# Session 38, call 4: the bundle of this tree (B: unpack_f32 in the GEMV kernels, the large
# ring's balanced grid) — the op tests and determinism; the ops bench's GEMV rows beside torch on
# B and on A (target/gpu-bundle-a: main at 6dee5c1), alternated B A B; memcheck on the GEMV test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
for r in b1 a1 b2; do
  [ ${r:0:1} = a ] && b=target/gpu-bundle-a || b=target/gpu-bundle
  bench_ops "$OUT/ops-$r" "gemv" 120 > "$OUT/ops-$r.txt"
  echo "== $r"; grep -E "^(device|gemv)" "$OUT/ops-$r.txt"
done
b=target/gpu-bundle
sanitize memcheck 560 $b/tests/gpukit_ops__ops matmul_and_linear::cuda
