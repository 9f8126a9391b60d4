#!/bin/bash
# Session 26: the decode step with the cluster attention kernel launched with and without
# programmatic dependent launch on its incoming edge (temporary GPUKIT_EXP_CLUSTER_NOPDL switch),
# beside the portable path; graphs and PDL on as by default. Logs kept (call 2's first run printed
# nothing within 120 s).
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
B=target/gpu-bundle
for gz in $B/benches/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.1-8b,llama3.2-1b > $OUT/models.log 2>&1 || tail -5 $OUT/models.log
for round in 1 2; do
for v in portable cluster cluster-nopdl; do
  unset GPUKIT_SDPA_PORTABLE GPUKIT_EXP_CLUSTER_NOPDL
  [ $v = portable ] && export GPUKIT_SDPA_PORTABLE=1
  [ $v = cluster-nopdl ] && export GPUKIT_EXP_CLUSTER_NOPDL=1
  d=$OUT/r$round-$v; mkdir -p $d
  s=$(date +%s)
  GPUKIT_DECODE_TOKENS=64 GPUKIT_DECODE_PROMPTS=128,2048 GPUKIT_BENCH_OUT=$d timeout 150 $B/benches/gpukit-llm__decode --bench > $d/log 2>&1
  echo "== $round $v rc $? $(( $(date +%s) - s )) s"; grep -E "^(llama|qwen)" $d/log
done
done 2>&1 | tee $OUT/decode3.txt
