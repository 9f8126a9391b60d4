#!/usr/bin/env bash
# Session 41, call 2 (H200): llt against its fused-check variants (llf_variants.py: lltf, and
# lltn without the check as a bound) and main, session 35's probe, three alternated rounds.
set -u
python3 docs/bench/2026-11-26-s40/ll_variants.py gpukit-kernels/cuda/attention.cu /tmp/llv
python3 docs/bench/2026-11-27-s41/llf_variants.py /tmp/llv/llt/attention.cu /tmp/llv
export PROBE_CASES=8:8192,8:32768,4:8192,4:32768,8:1024,8:2048
VARIANTS="main:gpukit-kernels/cuda llt:/tmp/llv/llt lltf:/tmp/llv/lltf lltn:/tmp/llv/lltn" \
  exec bash docs/bench/2026-11-26-s40/probe4.sh
