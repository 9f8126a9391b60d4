#!/usr/bin/env bash
# Session 41, call 5 (H200): the decode ring's tail taken apart further (bound_variants.py): n0
# (no split merge) again, n00 (no count either) and nmw (no four-warp merge or partial stores:
# the stream and each tile's attention alone); session 35's probe, three alternated rounds.
# Timing only: none is correct.
set -u
python3 docs/bench/2026-11-27-s41/bound_variants.py gpukit-kernels/cuda/attention.cu /tmp/bv
export PROBE_CASES=8:8192,8:32768,4:8192,4:32768,8:1024,8:2048
VARIANTS="main:gpukit-kernels/cuda n0:/tmp/bv/n0 n00:/tmp/bv/n00 nmw:/tmp/bv/nmw" exec bash docs/bench/2026-11-26-s40/probe4.sh
