#!/usr/bin/env bash
# Session 37, call 2: ring GEMVs whose blocks fit twice on a multiprocessor (4-row stages: 90
# registers; a ring of ≤ ~100 KiB), so the next launch's blocks start beside the previous
# launch's and ask L2 for their stages before its end; against the ring rule's configs (main)
# and, at (896, 4864), the persistent kernel the ops bench uses there (its GEMV rows, same call).
# Labels carry npre (the stages asked of L2 before the PDL wait) and c100 where the preferred
# shared-memory carveout is 100%.
# Ran on gemv.cu and probe.cu as of 170c487; both changed later this session (see call 4 on).
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build one4 one -DRING_R=4 & gemv_probe_build one1 one -DRING_R=1 &
unpack_bundle &
wait
for r in 1 2 3; do
  gemv_probe_run main 896,4864,8,2,8,4 2048,8192,8,2,4,2 8192,2048,2,4,4,2
  gemv_probe_run one4 896,4864,4,4,12,12 896,4864,4,4,12,4 896,4864,4,4,8,8 896,4864,4,2,12,12 \
    896,4864,4,4,14,14 896,4864,4,4,16,12 2048,8192,4,4,6,4 2048,8192,4,4,4,2
  PROBE_CARVEOUT=100 gemv_probe_run one4:one4c100 896,4864,4,4,12,12 2048,8192,4,4,6,4
  gemv_probe_run one1 8192,2048,1,4,4,4 8192,2048,1,4,6,4
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
bench_ops $OUT/ops "gemv bf16" 200 | grep -i "gemv\|device"
