#!/usr/bin/env bash
# Session 28, call 5: `run.sh test` on the final bundle (H200).
mkdir -p $OUT/call5 && OUT=$OUT/call5 timeout 580 bash target/gpu-bundle/run.sh test > /tmp/t.txt 2>&1; echo rc $?; tail -n 30 /tmp/t.txt; cp /tmp/t.txt $OUT/call5/run-test.txt
