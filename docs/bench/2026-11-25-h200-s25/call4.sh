#!/bin/bash
# Session 26: Llama-3.2-1B's decode step with the cluster attention kernel that only waits for
# the previous grid (griddepcontrol.wait) and never triggers its dependents early (they launch
# when it exits), beside the portable path in the same run.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
B=target/gpu-bundle
gunzip -f $B/benches/gpukit-llm__decode.gz && chmod +x $B/benches/gpukit-llm__decode
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b > $OUT/models.log 2>&1 || tail -5 $OUT/models.log
for v in portable cluster-notrigger portable cluster-notrigger; do
  unset GPUKIT_SDPA_PORTABLE
  [ $v = portable ] && export GPUKIT_SDPA_PORTABLE=1
  s=$(date +%s)
  GPUKIT_DECODE_TOKENS=64 GPUKIT_DECODE_PROMPTS=128,2048 timeout 60 $B/benches/gpukit-llm__decode --bench > $OUT/log-$v 2>&1
  echo "== $v rc $? $(( $(date +%s) - s )) s"; grep -E "^(llama|qwen)" $OUT/log-$v
done 2>&1 | tee -a $OUT/decode4.txt
