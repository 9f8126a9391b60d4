#!/usr/bin/env bash
# Session 43, call 7 (H100): bundle B's GEMV test, and the ops bench's bf16 GEMV rows beside
# torch, bundles A (before) and B (the 4-row ring kernel holds x in registers) alternated three
# times.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
for r in 1 2 3; do
  for x in a b; do
    [ $SECONDS -gt 480 ] && break 2
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/g$x$r" "gemv bf16" 100 | grep -E "^gemv|^device" | sed "s/^/$x$r /"
  done
done
cd "$OUT" && find . -name "*.png" -delete && tar czf /tmp/call7.tgz . && find . -mindepth 1 -delete \
  && mv /tmp/call7.tgz .
