#!/usr/bin/env bash
# Session 29, call 8: every GPU test on the final bundle (kernels and tests of 187f227).
set -u
bash target/gpu-bundle/run.sh test > $OUT/run-test.txt 2>&1
echo "run.sh rc $?"
tail -3 $OUT/run-test.txt
grep -E "FAILED|panicked" $OUT/gpu-tests.log | head -10
grep -E "chi-square" $OUT/gpu-tests.log | head -4
