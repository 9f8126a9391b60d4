#!/usr/bin/env bash
# Session 36's decode-ring A/B (calls 2, 3, 5, 10 and 11 run it): session 35's probe on
# pre-swizzled caches, three alternated rounds of the committed kernel ("old", carried as
# target/old-attn/attention.cu) and this tree's ("new"), outputs compared bit for bit; then the
# bundle's attention and cache tests, determinism and the decode rows of the ops bench.
#   EXTRA="name:flags …"   more builds of this tree's kernel (e.g. ch8:-DATTN_QK_CHAINS=8)
#   SAN="tool deadline filter"  then compute-sanitizer on the ops test binary's FILTER
set -u
. docs/bench/device-calls.sh
o="$OUT"
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
for e in ${EXTRA:-}; do build "${e%%:*}" /tmp/dv/new "${e#*:}" & done
unpack_bundle
wait
V="old new"
for e in ${EXTRA:-}; do V="$V ${e%%:*}"; done
for r in 1 2 3; do
  for v in $V; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
done > $OUT/ab.txt 2>&1
for v in ${V#old }; do
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
if [ -n "${SAN:-}" ]; then
  set -- $SAN
  sanitize "$1" "$2" $b/tests/gpukit_ops__ops "$3"
fi
