#!/usr/bin/env bash
# Session 37, call 16 (H200): gemv_variants.py's trigl (the next launch let start once each
# group has read its last stage) against main (after x lands) at the small-ring and the 32 MiB
# shapes; three alternated rounds, outputs checked. V=variant runs another variant (call 17).
set -u
V=${V:-trigl}
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build $V $V &
wait
SHAPES="896,4864,4,2,8,8 2048,2048,4,4,4,4 3072,1024,2,2,4,4 2048,1024,4,4,2,2 2048,8192,8,2,4,2
  8192,2048,2,4,4,2"
for r in 1 2 3; do
  gemv_probe_run main $SHAPES
  gemv_probe_run $V $SHAPES
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
