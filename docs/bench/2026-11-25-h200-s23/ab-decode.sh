#!/bin/bash
# Session 23: the decode bench (Llama-3.1-8B and Llama-3.2-1B) with the GEMV ring rule before
# (target/ab-old-decode) and after (target/ab-B) the 64 KiB ring for weights under 64 MiB, in
# alternated rounds.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
for gz in target/ab-old-decode/*.gz target/ab-B/*.gz; do gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS > /tmp/models.log 2>&1 || tail -5 /tmp/models.log
for round in 1 2; do
  for which in old new; do
    bin=target/ab-B/gpukit-llm__decode
    [ $which = old ] && bin=target/ab-old-decode/gpukit-llm__decode
    for m in llama3.1-8b llama3.2-1b; do
      mkdir -p /tmp/abd-$which-$round-$m
      GPUKIT_BENCH_OUT=/tmp/abd-$which-$round-$m GPUKIT_BENCH_FILTER=$m timeout 200 $bin --bench > /tmp/abd-$which-$round-$m/log 2>&1
      echo "== $which round $round"; grep -E "^$m" /tmp/abd-$which-$round-$m/log
    done
  done
done
