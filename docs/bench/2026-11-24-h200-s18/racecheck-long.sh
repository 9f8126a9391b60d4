#!/bin/bash
# Session 18: racecheck on the sampler (timed out at 250 s in session 17), LM head and linear, in parallel.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
gunzip -f $B/tests/gpukit_ops__ops.gz; chmod +x $B/tests/gpukit_ops__ops
T=$B/tests/gpukit_ops__ops
for t in sampling_on_the_device pre_norm_projections matmul_and_linear; do
  ( s=$(date +%s); timeout 540 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $T $t --include-ignored --test-threads=1 > $OUT/racecheck-$t.txt 2>&1; echo "rc $? after $(( $(date +%s) - s )) s" >> $OUT/racecheck-$t.txt ) &
done
wait
for f in $OUT/racecheck-*.txt; do echo "== $f"; tail -5 $f; done
