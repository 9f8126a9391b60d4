#!/usr/bin/env bash
# Session 44, call 3 (H100): call 2's balanced rows again with 32-bit arithmetic (bal: B's
# gemv.cu; call 2's kernel divided 64-bit numbers at its entry, a call to a division routine)
# beside head, the probe at the small ring's configurations, 12 alternated rounds; where bal's
# median at (896, 4864) is below head's by 0.03 µs or more, bundle B's GEMV test and the ops
# bench's bf16 GEMV rows, A (HEAD 9e08fe7) and B alternated (it was not: 4.08 against 3.87).
# As run, the tree's gemv.cu was bal (bundle B was built from it, and the probe's bal copied
# it); bal_variants.py now writes the same code from HEAD's (comments aside; cubin identical).
# (Refactored after it ran onto device-calls.sh's ab_gemv_bench, commit_probe_setup and pack_out:
# the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
commit_probe_setup 9e08fe7 head
python3 docs/bench/2026-11-27-s44/bal_variants.py /tmp/gv/gemv_head.cu /tmp/gv > /dev/null
for v in head bal; do chain_probe_build $v $v; done
echo "probes built at ${SECONDS}s"
for r in $(seq 12); do
  for v in head bal; do
    gemv_probe_run $v 896,4864,4,2,8,8 2048,2048,4,4,4,4 1024,3072,4,2,6,6 3072,1024,2,2,4,4 \
      1024,2048,4,2,4,4 1000,2503,4,2,5,5
  done
done > $o/gemv.txt 2>&1
echo "probe rounds done at ${SECONDS}s"
gemv_probe_summary
med() { grep "^$1/p8 .* k=896 " $o/gemv.txt | awk '{print $7}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mh=$(med head); mb=$(med bal); echo "medians at (896, 4864): head $mh bal $mb"
if awk -v h="$mh" -v b="$mb" 'BEGIN {exit !(b <= h - 0.03)}'; then
  b=target/gpu-bundle-a; unpack_bundle; b=target/gpu-bundle; unpack_bundle
  run_test ops $b/tests/gpukit_ops__ops matmul_and_linear
  ab_gemv_bench 4 520
fi
find "$OUT" -name "*.png" -delete
pack_out call3
