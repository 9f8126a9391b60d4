#!/bin/bash
# Session 29, call 3: is the split merge's time instruction fetch? The merge made a non-inlined
# function; variant bit 32 = the producer warp, once its copies are issued, runs that same
# function dry (loads, no stores) on its head's partials, so the last split finds its code in
# the instruction caches. Decode bench, two rounds (variant bits as in call1.sh).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
. "$(dirname "$0")/ring-variants.sh"; ring_variants "0 1 33 9"
