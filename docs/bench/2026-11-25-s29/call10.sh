#!/usr/bin/env bash
# Session 29, call 10: quantized GEMV, loads in flight. Bench binaries built from temporary
# variants of quant.cu (target/ab/ops-f<F>-u<U>.gz): the kernel for one format only (F: 0 = Q8_0,
# 1 = Q4_0; the other format's row is then meaningless) with U batches of 8 blocks per warp in
# flight (main: every format in one kernel, U = 4, 40 registers). Two alternated rounds.
set -u
o="$OUT/call10"; mkdir -p "$o"
nvidia-smi --query-gpu=name --format=csv,noheader
for v in main f1-u4 f1-u8 f1-u16 f0-u8; do gunzip -c target/ab/ops-$v.gz > /tmp/ops-$v && chmod +x /tmp/ops-$v; done
for r in 1 2; do
  for v in main f1-u4 f1-u8 f1-u16 f0-u8; do
    mkdir -p "$o/$v-r$r"
    GPUKIT_BENCH_OUT="$o/$v-r$r" GPUKIT_BENCH_FILTER="qgemv" /tmp/ops-$v --bench > "$o/$v-r$r/log.txt" 2>&1
    echo "$v r$r: $(grep -E '^qgemv' "$o/$v-r$r/log.txt" | tr -s ' ' | tr '\n' ';')"
  done
done
