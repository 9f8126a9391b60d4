#!/usr/bin/env bash
# Session 37, call 3: small GEMVs (4–9 MiB: the ops bench's (896, 4864) and the decode shapes of
# Qwen2.5-0.5B's down_proj, Llama-3.2-1B's o_proj, Qwen3-0.6B's down_proj and o_proj) on the
# persistent kernel (R = 0, launch::gemv_split's warps per row), the ring rule's configuration
# (main, one block per multiprocessor) and rings instantiated for one R whose blocks fit twice
# on a multiprocessor (oneR); three alternated rounds, outputs checked.
# Ran on gemv.cu and probe.cu as of 170c487; both changed later this session (see call 4 on).
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & for r in 1 2 4; do gemv_probe_build one$r one -DRING_R=$r & done
wait
for r in 1 2 3; do
  # (K, N) = (896, 4864): 8.7 MB, rows of 1792 bytes
  gemv_probe_run main 896,4864,0,1,0,0 896,4864,8,2,8,4
  gemv_probe_run one4 896,4864,4,2,12,12 896,4864,4,2,8,8 896,4864,4,1,8,8 896,4864,4,2,12,6
  gemv_probe_run one2 896,4864,2,2,24,24 896,4864,2,1,24,24
  # (4864, 896): 8.7 MB, rows of 9728 bytes
  gemv_probe_run main 4864,896,0,4,0,0 4864,896,2,4,6,3
  gemv_probe_run one2 4864,896,2,2,4,4 4864,896,2,4,4,4
  gemv_probe_run one1 4864,896,1,2,8,8 4864,896,1,1,8,8
  # (2048, 2048): 8 MiB
  gemv_probe_run main 2048,2048,0,2,0,0 2048,2048,8,2,4,2
  gemv_probe_run one4 2048,2048,4,2,4,4 2048,2048,4,4,6,6
  gemv_probe_run one2 2048,2048,2,2,12,12
  # (3072, 1024): 6 MiB
  gemv_probe_run main 3072,1024,0,2,0,0 3072,1024,4,4,4,2
  gemv_probe_run one4 3072,1024,4,2,4,4
  gemv_probe_run one2 3072,1024,2,2,8,8
  # (2048, 1024): 4 MiB
  gemv_probe_run main 2048,1024,0,2,0,0 2048,1024,8,2,4,2
  gemv_probe_run one4 2048,1024,4,2,4,4
  gemv_probe_run one2 2048,1024,2,2,12,12
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
