#!/usr/bin/env bash
# Session 37, call 1: the ring GEMV (session 23's probe.cu) with gemv_variants.py's copies: x kept
# in registers with each kernel instantiated for its one R (xreg, against one, the same without
# x in registers), and a tapered last ring (taper, TAPER_Q 2 and 4), against main; three
# alternated rounds, every output checked against a host reference.
# Ran on gemv.cu and probe.cu as of 170c487; both changed later this session (see call 4 on).
set -u
D=docs/bench/2026-11-26-s37
NVCC=/usr/local/cuda/bin/nvcc
K=gpukit-kernels/cuda
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/gv
python3 $D/gemv_variants.py $K/gemv.cu /tmp/gv > /dev/null
build() {  # build NAME SOURCE FLAGS…
  local name=$1 src=$2; shift 2
  $NVCC -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I $K -DGEMV_SRC="\"/tmp/gv/gemv_$src.cu\"" "$@" \
    docs/bench/2026-11-25-h200-s23/probe.cu -o /tmp/probe_$name > $OUT/nvcc-$name.txt 2>&1 \
    || { echo "nvcc $name failed"; tail -20 $OUT/nvcc-$name.txt; }
}
build main main & build taper2 taper -DTAPER_Q=2 & build taper4 taper -DTAPER_Q=4 &
for r in 1 2 4 8; do build one$r one -DRING_R=$r & done
build xreg2 xreg -DRING_R=2 -DRING_NP=8 & build xreg4 xreg -DRING_R=4 -DRING_NP=4 &
build xreg1 xreg -DRING_R=1 -DRING_NP=14 &
wait
for v in main taper2 taper4 one1 one2 one4 one8 xreg1 xreg2 xreg4; do
  echo "$v: $(grep -A2 "gemv_ring_bf16'" $OUT/nvcc-$v.txt | grep -o '[0-9]* bytes spill stores\|Used [0-9]* registers' | tr '\n' ' ')"
done
A="2048,8192,8,2,4,2"; B="8192,2048,2,4,4,2"; C="4096,14336,4,4,4,2"; E="14336,4096,1,4,4,2"; S="896,4864,8,2,8,4"
for r in 1 2 3; do
  for v in main taper2 taper4; do timeout 120 /tmp/probe_$v $v $A $B $C $E $S; done
  timeout 60 /tmp/probe_one8 one $A $S
  timeout 60 /tmp/probe_one2 one $B; timeout 60 /tmp/probe_xreg2 xreg $B
  timeout 60 /tmp/probe_one4 one $C; timeout 60 /tmp/probe_xreg4 xreg $C
  timeout 60 /tmp/probe_one1 one $E; timeout 60 /tmp/probe_xreg1 xreg $E
done 2>&1 | tee $OUT/gemv.txt | python3 -c '
import collections, re, sys
t = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"(\S+)\s+R=(\d+) S=(\d+) nst=(\d+)\s+k=(\d+)\s+n=(\d+)\s+([\d.]+) us.*sum\|x w\| (\S+)", line)
    if m: t[m.group(5, 6, 2, 3, 4, 1)].append((float(m[7]), m[8]))
    elif line.strip(): print(line.rstrip())
for k in sorted(t): print("k=%s n=%s R=%s S=%s nst=%s %-7s" % k, " ".join("%.2f" % x for x, _ in t[k]), "err", t[k][0][1])
'
