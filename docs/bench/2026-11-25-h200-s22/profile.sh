#!/bin/bash
# Session 22: the decode bench with the acquire-release count alone (this bundle) against the
# previous build (target/ab-old), two alternated rounds; then Nsight Compute on one launch each of
# the ring GEMV at (K, N) = (2048, 8192) and the decode ring at GQA 8, 32k keys: the full
# section set and, per SASS instruction, where the warps stall (source page as CSV).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz target/ab-old/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
W=/tmp/work; mkdir -p $W
for round in 1 2; do
  for which in old new; do
    bin=$B/benches/gpukit-ops__ops; [ $which = old ] && bin=target/ab-old/gpukit-ops__ops
    GPUKIT_BENCH_OUT=$W/$which-$round GPUKIT_BENCH_FILTER="sdpa decode" timeout 120 $bin --bench > $W/log 2>&1
    echo "== $which round $round"; grep "sdpa decode" $W/log
  done
done | tee $OUT/ab.txt
prof() {  # name, bench filter, kernel regex
  GPUKIT_BENCH_OUT=$W/p-$1 GPUKIT_BENCH_FILTER="$2" timeout 240 ncu --set full --import-source no \
    -k "regex:$3" --launch-skip 40 --launch-count 1 -f -o $W/$1 $B/benches/gpukit-ops__ops --bench > $W/$1.log 2>&1
  echo "ncu $1 rc $?"; tail -3 $W/$1.log
  ncu -i $W/$1.ncu-rep --page details > $OUT/ncu-$1.txt 2>&1
  ncu -i $W/$1.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$1-sass.csv 2>&1
  ls -la $OUT/ncu-$1*
}
prof gemv "gemv bf16 M=1 k=2048 n=8192" "gemv_ring_bf16"
prof dec "sdpa decode GQA 8 len=32768" "sdpa_decode_ring_bf16_d128"
