#!/bin/bash
# Session 19 verification (on the bundle of the 8-row-stage launch change, then with FLOOR=0 on
# the bundle of the producer copying x): GEMV bench beside
# torch, the floor again (this commit's floor.cu), the GPU tests, and compute-sanitizer on the
# linear tests (the ring's new 4-group launch).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
D=docs/bench/2026-11-24-h200-s19
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/gemv
GPUKIT_BENCH_OUT=$OUT/gemv GPUKIT_BENCH_FILTER="gemv bf16 M=1" $B/benches/gpukit-ops__ops --bench > $OUT/gemv/log 2>&1
python3 bench/peer_ops.py $OUT/gemv > $OUT/bench-gemv.txt 2>&1; tail -7 $OUT/bench-gemv.txt
T=$B/tests/gpukit_ops__ops
{
  echo "== memcheck matmul_and_linear"; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $T matmul_and_linear --include-ignored --test-threads=1 2>&1 | tail -4; echo "rc ${PIPESTATUS[0]}"
  echo "== racecheck matmul_and_linear"; timeout 240 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $T matmul_and_linear --include-ignored --test-threads=1 2>&1 | tail -4; echo "rc ${PIPESTATUS[0]}"
} > $OUT/sanitize.txt 2>&1 &
( OUT=$OUT/tests bash $B/run.sh test > $OUT/run-test.txt 2>&1 ) &
wait
if [ "${FLOOR:-1}" = 1 ]; then   # FLOOR=0: skip the floor (the second verification run)
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a $D/floor.cu -o /tmp/floor > $OUT/nvcc-floor.txt 2>&1 && /tmp/floor > $OUT/floor-3.txt 2>&1
  echo "floor rc $?"; grep -E '^(GEMV|decode)' $OUT/floor-3.txt | cut -c1-60,100-140
fi
tail -3 $OUT/run-test.txt; cat $OUT/sanitize.txt
