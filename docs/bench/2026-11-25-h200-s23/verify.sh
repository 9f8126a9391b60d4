#!/bin/bash
# Session 23: the bundle with the smaller ring for GEMV weights under 64 MiB — `run.sh test`
# (every GPU test), then (second call, BENCH=1) the GEMV cases of the ops bench beside torch.
set -u
B=target/gpu-bundle
if [ "${BENCH:-0}" = 1 ]; then
  export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
  for gz in $B/benches/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
  mkdir -p /tmp/bench
  for round in 1 2; do
    GPUKIT_BENCH_OUT=/tmp/bench GPUKIT_BENCH_FILTER="gemv" timeout 200 $B/benches/gpukit-ops__ops --bench > /tmp/bench/log-$round 2>&1
    echo "== round $round"; grep "gemv" /tmp/bench/log-$round
  done > $OUT/bench-gemv-rounds.txt
  timeout 250 python3 bench/peer_ops.py /tmp/bench > $OUT/bench-gemv.txt 2>&1
  cat $OUT/bench-gemv-rounds.txt; grep -i "gemv\|copy" $OUT/bench-gemv.txt | head -20
else
  timeout 580 bash $B/run.sh test > $OUT/run-test.txt 2>&1
  echo "rc $?"; grep -E "^gpu-bundle|FAILED|panicked" $OUT/run-test.txt | head -20
  tail -5 $OUT/run-test.txt
fi
