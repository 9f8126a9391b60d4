#!/usr/bin/env bash
# Session 37, call 11 (H200): gemv_variants.py's wearly (the first ring of weight stages copied
# into shared memory before the PDL wait: legal only for weights nothing writes while the GEMV
# may run) against main (a3aaa9c's kernels) at the small-ring and the large-ring shapes, three
# alternated rounds, outputs checked. Session 33 measured the same copies with one kernel for
# every R and the next launch let in at the kernel's entry.
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps; the same builds and
# runs.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build wearly wearly &
wait
SHAPES="896,4864,4,2,8,8 896,4864,4,2,12,12 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2
  4864,896,2,4,4,4 2048,8192,8,2,4,2 8192,2048,2,4,4,2 4096,14336,4,4,4,2 14336,4096,1,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run wearly $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
