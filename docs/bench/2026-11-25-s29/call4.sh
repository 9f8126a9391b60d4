#!/bin/bash
# Session 29, call 4 (the change as committed: the decode ring's one-tile L2 prefetch before the
# PDL wait; batched_scan behind argmax_scan and the sampler's greedy vectors): every GPU test.
set -u
bash target/gpu-bundle/run.sh test > $OUT/run-test.txt 2>&1
echo "run.sh rc $?"
tail -5 $OUT/run-test.txt
grep -E "^(test result|---- )" $OUT/gpu-tests.log | head -40
grep -E "FAILED|panicked" $OUT/gpu-tests.log | head -10
