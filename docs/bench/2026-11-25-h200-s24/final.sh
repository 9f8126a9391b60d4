#!/bin/bash
# Session 24, call 3: the committed rule (64 KiB L2 prefetch before the PDL wait): the GEMV ops
# bench once, then every GPU test (run.sh test).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
gunzip -f $B/benches/gpukit-ops__ops.gz && chmod +x $B/benches/gpukit-ops__ops
mkdir -p /tmp/ops-final
GPUKIT_BENCH_OUT=/tmp/ops-final GPUKIT_BENCH_FILTER="gemv bf16" timeout 90 $B/benches/gpukit-ops__ops --bench > /tmp/ops-final/log 2>&1
grep "^gemv bf16\|copy" /tmp/ops-final/log | tee $OUT/ops-final.txt
timeout 500 bash $B/run.sh test > $OUT/run-test.txt 2>&1
echo "run.sh rc $?"; grep -E "FAIL|panicked|failed" $OUT/run-test.txt | head; tail -3 $OUT/run-test.txt
