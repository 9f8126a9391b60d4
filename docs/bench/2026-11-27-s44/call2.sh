#!/usr/bin/env bash
# Session 44, call 2 (H100): bundle B (the ring GEMV's rows after the last whole round of
# stages spread over the blocks a row at a time: struct RingRows) — its GEMV and determinism
# tests, then the ops bench's bf16 GEMV rows beside torch, bundles A (HEAD 9e08fe7) and B
# alternated; then the probe's head / bal (B's gemv.cu) at the small ring's configurations,
# alternated while time is left.
# As run, the tree's gemv.cu was bal64 (bundle B was built from it, and the probe's bal copied
# it); bal_variants.py now writes the same code from HEAD's (comments aside).
# (Refactored after it ran onto device-calls.sh's ab_gemv_bench, commit_probe_setup and pack_out:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
run_test determinism $b/tests/gpukit_ops__determinism
ab_gemv_bench 5 330
commit_probe_setup 9e08fe7 head
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
find "$OUT" -name "*.png" -delete
pack_out call2
