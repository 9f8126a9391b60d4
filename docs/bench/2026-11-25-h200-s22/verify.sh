#!/bin/bash
# Session 22: every GPU test of the final bundle (commit ab2bab5: the decode ring's
# acquire-release count), as CI cannot run them.
set -u
OUT=$OUT/tests timeout 570 bash target/gpu-bundle/run.sh test > $OUT/run-test.txt 2>&1
echo "run.sh rc $?"; tail -4 $OUT/run-test.txt
grep -E "^---- |test result" $OUT/tests/gpu-tests.log | paste - - | sed 's/finished in.*//' | tail -20
rm -rf $OUT/tests/*.json
