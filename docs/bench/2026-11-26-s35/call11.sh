#!/usr/bin/env bash
# Session 35, call 11: the _swz ring's consumer layout as committed in 3968de4 (one XOR: "xor") against call 1's probe formula ((c & ~63) + (((c & 63) >> 3) ^ (r & 7)) << 3: "head"), and the tensor-map entry point ("main"). (Call 9 compared RowSwizzledKV
# through kv_col, with its partial-block test: "head") against the working tree's plain XOR
# ("xor"), and the tensor-map entry point ("main"), in this session's probe, three alternated
# rounds; outputs compared bit for bit with main's.
set -u
D=docs/bench/2026-11-26-s35
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/dv/head /tmp/dv/xor
cp $K/*.cu $K/*.cuh /tmp/dv/xor/
cp $K/*.cu $K/*.cuh /tmp/dv/head/
python3 - <<'PY'
p = "/tmp/dv/head/attention.cu"
t = open(p).read()
i = t.index("template <typename T, int D> struct RowSwizzledKV {")
j = t.index("};", i) + 2
t = t[:i] + """template <typename T, int D> struct RowSwizzledKV {
    static __device__ __forceinline__ int at(int r, int c) { return r * D + (c & ~63) + ((((c & 63) >> 3) ^ (r & 7)) << 3); }
};""" + t[j:]
open(p, "w").write(t)
PY
build() {  # name dir extra-flags
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $3 -I $2 -I $S19 -DATTN_SRC="\"$2/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/dprobe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || tail -20 $OUT/nvcc-$1.txt
}
build main /tmp/dv/xor "" &
build head /tmp/dv/head "-DPROBE_SWZ -DATTN_PRESWIZZLED" &
build xor /tmp/dv/xor "-DPROBE_SWZ -DATTN_PRESWIZZLED" &
wait
for r in 1 2 3; do
  for v in main head xor; do OUTFILE=/tmp/dout-$v.bin /tmp/dprobe_$v $v; done
done 2>&1 | tee $OUT/ab.txt
for v in head xor; do
  cmp -s /tmp/dout-main.bin /tmp/dout-$v.bin && echo "$v outputs: bitwise equal to main" || echo "$v outputs: DIFFER"
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
