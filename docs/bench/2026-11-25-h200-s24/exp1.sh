#!/bin/bash
# Session 24, call 1: the ring GEMV's stage/ring size and L2 prefetch before the PDL wait,
# chosen at run time by GPUKIT_GEMV_RING_EXP="small_below_mib:prefetch_kib" (an experiment
# build; 0 = the 128 KiB ring of 32 KiB stages everywhere, 64 = 16 KiB stages in a 64 KiB ring
# below 64 MiB). The GEMV ops bench per variant, then the decode bench of Llama-3.1-8B. The
# override is experiment-override.diff (not on main); call 2 ran it with VARIANTS="0:0 0:64
# 0:128" ROUNDS="1 2" DROUNDS="1 2".
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
VARIANTS=${VARIANTS:-"0:128 64:128 0:256 64:256 0:512 64:512"}
ROUNDS=${ROUNDS:-"1 2"}
if [ "${OPS:-1}" = 1 ]; then
  for round in $ROUNDS; do
    for v in $VARIANTS; do
      d=/tmp/ops-${v/:/-}-$round; mkdir -p $d
      GPUKIT_GEMV_RING_EXP=$v GPUKIT_BENCH_OUT=$d GPUKIT_BENCH_FILTER="gemv bf16" timeout 120 $B/benches/gpukit-ops__ops --bench > $d/log 2>&1
      echo "== $v round $round"; grep "^gemv bf16" $d/log
    done
  done > $OUT/ops.txt 2>&1
  cat $OUT/ops.txt
fi
t0=$(date +%s)
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.1-8b > /tmp/models.log 2>&1 || tail -5 /tmp/models.log
echo "models $(( $(date +%s) - t0 )) s"
for round in ${DROUNDS:-1}; do
  for v in $VARIANTS; do
    d=/tmp/dec-${v/:/-}-$round; mkdir -p $d
    t0=$(date +%s)
    GPUKIT_GEMV_RING_EXP=$v GPUKIT_DECODE_PROMPTS=${PROMPTS:-128,2048} GPUKIT_BENCH_OUT=$d GPUKIT_BENCH_FILTER=llama3.1-8b timeout 200 $B/benches/gpukit-llm__decode --bench > $d/log 2>&1
    echo "== $v round $round ($(( $(date +%s) - t0 )) s)"; grep -E "^llama3.1-8b" $d/log
  done
done > $OUT/decode.txt 2>&1
cat $OUT/decode.txt
