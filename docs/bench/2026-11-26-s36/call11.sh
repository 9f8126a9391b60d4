#!/usr/bin/env bash
# Session 36, call 11 (H100, final kernels): the decode ring in session 35's probe, three alternated rounds —
# session 35's kernel (cca9de1, "old", carried as target/old-attn/attention.cu) and this tree's
# ("new": two MMA chains for the scores, the first tiles' lines asked of L2 by the producer
# warp's lanes, four of them where a split has 16 or more), on pre-swizzled caches; then the
# bundle's attention and cache tests,
# determinism, and the decode rows of the ops bench.
set -u
. docs/bench/device-calls.sh
o="$OUT"
D=docs/bench/2026-11-26-s36
S35=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/dv/old /tmp/dv/new
cp $K/*.cu $K/*.cuh /tmp/dv/new/
cp $K/*.cuh /tmp/dv/old/ && cp target/old-attn/attention.cu /tmp/dv/old/
build() {  # name dir extra-flags
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -DPROBE_SWZ -DATTN_PRESWIZZLED $3 -I $2 -I $S19 \
    -DATTN_SRC="\"$2/attention.cu\"" $S35/decode_probe.cu -o /tmp/dprobe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 \
    || tail -20 $OUT/nvcc-$1.txt
}
build old /tmp/dv/old "" &
build new /tmp/dv/new "" &
unpack_bundle
wait
V="old new"
for r in 1 2 3; do
  for v in $V; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
done > $OUT/ab.txt 2>&1
for v in new; do
  cmp -s /tmp/dout-old.bin /tmp/dout-$v.bin && echo "$v outputs: bitwise equal to old" || echo "$v outputs: differ from old"
done
python3 - $OUT/ab.txt <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+GQA (\d+) len=(\d+).* ([\d.]+) us", line)
    if m: t[(m[2], m[3], m[1])].append(float(m[4]))
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]))):
    print(f"GQA {k[0]} {k[1]:>6} {k[2]:<8} " + " ".join(f"{x:6.2f}" for x in t[k]))
PY
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache
run_test determinism $b/tests/gpukit_ops__determinism
bench_ops "$OUT/ops-decode" "sdpa decode" 150
sanitize racecheck 560 $b/tests/gpukit_ops__ops sdpa_at_device_position_and_decode_state::cuda
