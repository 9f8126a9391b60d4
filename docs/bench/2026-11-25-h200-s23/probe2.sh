#!/bin/bash
# Session 23, call 2: rows per warp (rpw) against main, three alternated rounds.
set -u
D=docs/bench/2026-11-25-h200-s23
MAIN="2048,8192,8,2,4 8192,2048,2,4,4 4096,14336,4,4,4 14336,4096,1,4,4"
RPW="2048,8192,8,8,4 2048,8192,8,8,6 2048,8192,4,8,8 8192,2048,2,8,4 8192,2048,2,8,6 8192,2048,1,8,8 4096,14336,4,8,4 14336,4096,1,8,4"
for round in 1 2 3; do
  VARIANTS=main CONFIGS="$MAIN" bash $D/probe.sh
  VARIANTS=rpw CONFIGS="$RPW" bash $D/probe.sh
done 2>&1 | grep -v "^\(main\|rpw\): "
