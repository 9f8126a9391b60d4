#!/usr/bin/env bash
# Session 27, calls 2 and 3: the wgmma prefill of this tree against main's (target/ab/ops-old.gz,
# the ops bench of 291314b): attention and determinism tests, then the prefill bench of both builds
# alternated twice, then torch on the same cases, then compute-sanitizer on the attention tests.
#   call 2 (the ping-pong, prefill-pingpong.diff applied):
#     SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=150 SAN_FLAGS="" bash ab-prefill.sh
#   call 3 (64-key tiles at head_dim 64, two blocks per SM; main after 00a82fb):
#     SAN_TOOLS=memcheck SAN_TIMEOUT=140 SAN_FLAGS="--report-api-errors no" bash ab-prefill.sh
# (call 2's missing --report-api-errors no is why its memcheck counted 30 API errors.)
set -uo pipefail
SAN_TOOLS="${SAN_TOOLS:-memcheck racecheck}"
SAN_TIMEOUT="${SAN_TIMEOUT:-150}"
SAN_FLAGS="${SAN_FLAGS---report-api-errors no}"
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
for tool in $SAN_TOOLS; do
  # shellcheck disable=SC2086
  timeout "$SAN_TIMEOUT" compute-sanitizer --tool $tool $SAN_FLAGS --error-exitcode 9 $B/tests/gpukit_ops__ops sdpa_attention::cuda --include-ignored --test-threads=1 >$OUT/san-$tool.txt 2>&1
  echo "$tool: rc $?"; grep -E "SUMMARY|test result" $OUT/san-$tool.txt | tail -2
done
