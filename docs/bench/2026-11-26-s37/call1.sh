#!/usr/bin/env bash
# Session 37, call 1: the ring GEMV (session 23's probe.cu) with gemv_variants.py's copies: x kept
# in registers with each kernel instantiated for its one R (xreg, against one, the same without
# x in registers), and a tapered last ring (taper, TAPER_Q 2 and 4), against main; three
# alternated rounds, every output checked against a host reference.
# Ran on gemv.cu and probe.cu as of 170c487; both changed later this session (see call 4 on).
# (Refactored after it ran to use device-calls.sh's gemv_probe_* steps: the same builds and
# runs; its labels now end in /pNPRE.)
set -u
. docs/bench/device-calls.sh
o=$OUT
D=docs/bench/2026-11-26-s37
gemv_probe_variants $D/gemv_variants.py
gemv_probe_build main main & gemv_probe_build taper2 taper -DTAPER_Q=2 &
gemv_probe_build taper4 taper -DTAPER_Q=4 &
for r in 1 2 4 8; do gemv_probe_build one$r one -DRING_R=$r & done
gemv_probe_build xreg2 xreg -DRING_R=2 -DRING_NP=8 & gemv_probe_build xreg4 xreg -DRING_R=4 -DRING_NP=4 &
gemv_probe_build xreg1 xreg -DRING_R=1 -DRING_NP=14 &
wait
for v in main taper2 taper4 one1 one2 one4 one8 xreg1 xreg2 xreg4; do
  echo "$v: $(grep -A2 "gemv_ring_bf16'" $OUT/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores\|Used [0-9]* registers' | tr '\n' ' ')"
done
A="2048,8192,8,2,4,2"; B="8192,2048,2,4,4,2"; C="4096,14336,4,4,4,2"; E="14336,4096,1,4,4,2"; S="896,4864,8,2,8,4"
for r in 1 2 3; do
  for v in main taper2 taper4; do gemv_probe_run $v $A $B $C $E $S; done
  gemv_probe_run one8:one $A $S
  gemv_probe_run one2:one $B; gemv_probe_run xreg2:xreg $B
  gemv_probe_run one4:one $C; gemv_probe_run xreg4:xreg $C
  gemv_probe_run one1:one $E; gemv_probe_run xreg1:xreg $E
done 2>&1 | tee $OUT/gemv.txt | python3 $D/summarize.py
