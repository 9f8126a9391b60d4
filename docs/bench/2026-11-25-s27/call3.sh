#!/usr/bin/env bash
# Session 27, call 3: the head_dim-64 wgmma prefill on 64-key tiles, two blocks per SM, (this tree) against main's (target/ab/ops-old.gz,
# the ops bench of 291314b): attention and determinism tests, then the prefill bench of both builds
# alternated twice, then torch on the same cases, then racecheck/memcheck on the prefill tests.
set -uo pipefail
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz target/ab/*.gz; do gunzip -f "$gz"; chmod +x "${gz%.gz}"; done
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
$B/tests/gpukit_ops__ops sdpa --include-ignored --test-threads=1 >$OUT/t-sdpa.txt 2>&1; echo "sdpa tests: rc $?"; grep "test result" $OUT/t-sdpa.txt
$B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 --show-output >$OUT/t-det.txt 2>&1; echo "determinism: rc $?"; grep -E "test result|\[gpu\]" $OUT/t-det.txt
export GPUKIT_BENCH_FILTER="sdpa prefill"
for r in 1 2; do
  for v in new old; do
    bin=$B/benches/gpukit-ops__ops; [ $v = old ] && bin=target/ab/ops-old
    mkdir -p $OUT/$v$r; GPUKIT_BENCH_OUT=$OUT/$v$r $bin --bench >$OUT/bench-$v$r.txt 2>&1
    echo "== $v round $r"; grep -E "sdpa prefill" $OUT/bench-$v$r.txt
  done
done
python3 bench/peer_ops.py $OUT/new1 >$OUT/peer.txt 2>&1; tail -n 8 $OUT/peer.txt
for tool in memcheck; do
  timeout 140 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $B/tests/gpukit_ops__ops sdpa_attention::cuda --include-ignored --test-threads=1 >$OUT/san-$tool.txt 2>&1
  echo "$tool: rc $?"; grep -E "SUMMARY|test result" $OUT/san-$tool.txt | tail -2
done
