#!/usr/bin/env bash
# Session 43, call 5 (H200): bundle B (target/gpu-bundle, 4771fde: the 4-row ring kernel keeps
# x in registers) and bundle A (target/gpu-bundle-a: the ops and decode benches of 0a2bd1e,
# before it). On B the ops and determinism tests, memcheck and racecheck on the GEMV test; the
# ops bench's bf16 GEMV rows beside torch, A and B alternated twice. Everything is packed into
# call5.tgz at the end (only a few files come back; as run, the tarball was written inside $OUT
# and tar reported the folder changing; the line below is the fixed form).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
echo "tests done at ${SECONDS}s"
sanitize memcheck $((SECONDS + 100)) $b/tests/gpukit_ops__ops matmul_and_linear::cuda
sanitize racecheck $((SECONDS + 130)) $b/tests/gpukit_ops__ops matmul_and_linear::cuda
for r in 1 2; do
  for x in a b; do
    [ $SECONDS -gt 480 ] && break 2
    if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
    bench_ops "$OUT/g$x$r" "gemv bf16" 100 | grep -E "^gemv" | sed "s/^/$x$r /"
  done
done
cd "$OUT" && tar czf /tmp/call5.tgz . && find . -mindepth 1 -delete && mv /tmp/call5.tgz .
