#!/usr/bin/env bash
# Session 31, calls 7 and 8 (H100s; `call7.sh`) and 9 (H200; `call7.sh all`), the bundle of the
# two-tile prefetch: the decode cases of the ops bench beside torch (with `all`: the whole
# bench), the probe's A/B against HEAD before it (target/ab/base, two rounds, outputs bit for
# bit), the attention and determinism tests, and (without `all`) memcheck on the decode-state
# test (ring cases, NaN past the position).
set -u
. docs/bench/device-calls.sh
. docs/bench/2026-11-26-s30/probe.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
if [ "${1:-}" = all ]; then bench_ops "$OUT/ops" "" 330; else bench_ops "$OUT/ops" "sdpa decode" 200; fi
probe_ab 2 bits | tail -1
python3 - $OUT/ab.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+).* ([\d.]+) us", line)
    if m: t[(m[2], m[3], m[1])].append(float(m[4]))
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]), k[2])):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<5} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
run_test tests $b/tests/gpukit_ops__ops sdpa
run_test determinism $b/tests/gpukit_ops__determinism
[ "${1:-}" = all ] || sanitize memcheck 500 $b/tests/gpukit_ops__ops sdpa_at_device_position
