#!/bin/bash
# Session 29, call 4 (the change as committed: the decode ring's one-tile L2 prefetch before the
# PDL wait; batched_scan behind argmax_scan and the sampler's greedy vectors): every GPU test.
set -u
. docs/bench/device-calls.sh
o="$OUT"
all_tests "$OUT"
grep -E "^(test result|---- )" $OUT/gpu-tests.log | head -40
