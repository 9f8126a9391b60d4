#!/usr/bin/env bash
# Prepared in session 40 for the next session (not run): the decode ring with tickets drawn
# before the four-warp merge and flagged 64-bit partials (ll_variants.py's llt) against main, in
# session 35's probe, three alternated rounds at the ops bench's four ring cases and at 1k and 2k
# keys; the outputs must be bitwise equal to main's (the same floats, merged in the same order).
# Expected where the partials fit shared memory twice over (GQA 4): the split count's 0.6–0.8 µs
# off the last split's tail; at GQA 8 (32 splits of 8 rows) the slow unstaged path.
set -u
python3 docs/bench/2026-11-26-s40/ll_variants.py gpukit-kernels/cuda/attention.cu /tmp/llv
export PROBE_CASES=8:8192,8:32768,4:8192,4:32768,8:1024,8:2048
VARIANTS="main:gpukit-kernels/cuda llt:/tmp/llv/llt" exec bash docs/bench/2026-11-26-s40/probe4.sh
