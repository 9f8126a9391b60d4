#!/usr/bin/env bash
# Session 41, call 4 (H200): two bounds on the decode ring's tail after session 41's LL results
# (bound_variants.py): n32, main with its count free (a relaxed ticket drawn before the
# four-warp merge, no release), and n0, main without the split merge; session 35's probe, three
# alternated rounds. Timing only: neither is correct.
set -u
python3 docs/bench/2026-11-27-s41/bound_variants.py gpukit-kernels/cuda/attention.cu /tmp/bv
export PROBE_CASES=8:8192,8:32768,4:8192,4:32768,8:1024,8:2048
VARIANTS="main:gpukit-kernels/cuda n32:/tmp/bv/n32 n0:/tmp/bv/n0" exec bash docs/bench/2026-11-26-s40/probe4.sh
