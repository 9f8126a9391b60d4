#!/usr/bin/env bash
# Session 44, call 2 (H100): bundle B (the ring GEMV's rows after the last whole round of
# stages spread over the blocks a row at a time: struct RingRows) — its GEMV and determinism
# tests, then the ops bench's bf16 GEMV rows beside torch, bundles A (HEAD 9e08fe7) and B
# alternated; then the probe's head / bal (B's gemv.cu) at the small ring's configurations,
# alternated while time is left.
# As run, the tree's gemv.cu was bal64 (bundle B was built from it, and the probe's bal copied
# it); bal_variants.py now writes the same code from HEAD's (comments aside).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
run_test determinism $b/tests/gpukit_ops__determinism
for r in 1 2 3 4 5; do
  for x in a b; do
    [ $SECONDS -gt 330 ] && break 2
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/g$x$r" "gemv bf16" 100 | grep -E "^gemv" | sed "s/^/$x$r /"
  done
done
b=target/gpu-bundle
git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
chain_probe_variants /tmp/gemv_before.cu > /dev/null
git show 9e08fe7:gpukit-kernels/cuda/gemv.cu > /tmp/gv/gemv_head.cu
python3 docs/bench/2026-11-27-s44/bal_variants.py /tmp/gv/gemv_head.cu /tmp/gv > /dev/null
mv /tmp/gv/gemv_bal64.cu /tmp/gv/gemv_bal.cu
for v in head bal; do chain_probe_build $v $v; done
echo "probes built at ${SECONDS}s"
for r in $(seq 12); do
  [ $SECONDS -gt 560 ] && break
  for v in head bal; do
    gemv_probe_run $v 896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6 3072,1024,2,2,4,4 \
      1024,2048,4,2,4,4 1000,2503,4,2,5,5
  done
done > $o/gemv.txt 2>&1
echo "probe rounds done at ${SECONDS}s"
gemv_probe_summary
cd "$OUT" && find . -name "*.png" -delete && tar czf /tmp/call2.tgz . && find . -mindepth 1 -delete \
  && mv /tmp/call2.tgz .
