#!/usr/bin/env bash
# Session 44, call 1 (H100): bundle B (the 4-row ring kernel's consumers load x into registers
# straight from global memory; the producer copies no x) — its GEMV test, then the ops bench's
# bf16 GEMV rows beside torch, bundles A (HEAD 9e08fe7) and B alternated; then the probe's
# HEAD / xg (B.s gemv.cu) / xgw (both: xg_variants.py) at the configurations that take x in
# registers, alternated while time is left.
# As run, the tree's gemv.cu was xg (bundle B was built from it, and the probe's xg copied it);
# xg_variants.py now writes the same code from HEAD's (comments aside; SASS identical).
# (Refactored after it ran onto device-calls.sh's ab_gemv_bench, commit_probe_setup and pack_out:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
ab_gemv_bench 3 330 "^gemv|^device"
commit_probe_setup 9e08fe7 head
python3 docs/bench/2026-11-27-s44/xg_variants.py /tmp/gv/gemv_head.cu /tmp/gv > /dev/null
for v in head xg xgw; do chain_probe_build $v $v; done
echo "probes built at ${SECONDS}s"
for r in 1 2 3 4 5 6 7 8; do
  [ $SECONDS -gt 560 ] && break
  for v in head xg xgw; do gemv_probe_run $v 896,4864,4,2,8,8 1024,3072,4,2,6,6 2048,2048,4,4,4,4; done
done > $o/gemv.txt 2>&1
echo "probe rounds done at ${SECONDS}s"
gemv_probe_summary
find "$OUT" -name "*.png" -delete
pack_out call1
