#!/bin/bash
# Session 22: the decode ring with one tensor copy per K or V tile (16 KiB boxes at head_dim 128;
# build A) and, on top, the split count published by one acquire-release add instead of a
# fence and an atomic (build B = this bundle). The attention and determinism tests on B, then
# the decode bench in alternated rounds: old (target/ab-old), A (target/ab-A), B; torch once.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-old/*.gz target/ab-A/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=$B/tests/gpukit_ops__ops
timeout 240 $T sdpa --include-ignored --test-threads=1 > $OUT/sdpa-tests.txt 2>&1
echo "sdpa tests rc $?"; grep -E "test result|panicked|FAIL" $OUT/sdpa-tests.txt | head -8
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > $OUT/determinism.txt 2>&1
echo "determinism rc $?"; grep -E "test result|panicked" $OUT/determinism.txt | head -3
FILTER=${FILTER:-sdpa decode}
for round in 1 2 3; do
  for which in old A B; do
    bin=$B/benches/gpukit-ops__ops
    [ $which = old ] && bin=target/ab-old/gpukit-ops__ops
    [ $which = A ] && bin=target/ab-A/gpukit-ops__ops
    mkdir -p $OUT/ab-$which-$round
    GPUKIT_BENCH_OUT=$OUT/ab-$which-$round GPUKIT_BENCH_FILTER="$FILTER" timeout 120 $bin --bench > $OUT/ab-$which-$round/log 2>&1
    echo "== $which round $round"; grep "$FILTER" $OUT/ab-$which-$round/log
  done
done | tee $OUT/ab.txt
timeout 200 python3 bench/peer_ops.py $OUT/ab-B-1 > $OUT/bench-decode.txt 2>&1; tail -10 $OUT/bench-decode.txt
