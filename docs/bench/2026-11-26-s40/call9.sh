#!/usr/bin/env bash
# Session 40, call 9 (H200): the final bundle (the decode ring at every length): racecheck on the
# attention test, whose every decode case now runs on the ring on this card.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
sanitize racecheck 560 $b/tests/gpukit_ops__ops sdpa_attention::cuda
