#!/usr/bin/env bash
# Session 43, call 11 (H100): stage releases only where a slot is refilled (tail_variants.py
# norel) beside this tree's kernel, at (896, 4864) and the 32 MiB shapes' launch-rule
# configurations, four alternated rounds.
# (Refactored after it ran onto device-calls.sh's now_probe_setup: the same steps, and it
# prints the GPU's name.)
set -u
. docs/bench/device-calls.sh
o=$OUT
now_probe_setup
python3 docs/bench/2026-11-27-s43/tail_variants.py gpukit-kernels/cuda/gemv.cu /tmp/gv > /dev/null
chain_probe_build norel norel
for r in 1 2 3 4; do
  for v in now norel; do gemv_probe_run $v 896,4864,4,2,8,8 8192,2048,2,4,4,2 2048,8192,8,2,4,2; done
done > $o/gemv.txt 2>&1
gemv_probe_summary
