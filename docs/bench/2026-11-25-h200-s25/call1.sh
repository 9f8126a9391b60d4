#!/bin/bash
# Session 25, call 1: decode attention below 4096 keys as thread-block clusters merging their
# splits in distributed shared memory (sdpa_decode_cluster), against the portable kernel + its
# combine kernel (GPUKIT_SDPA_PORTABLE=1, which also forces the portable prefill and, from 4096
# keys, the portable decode). First the attention and determinism tests, then the ops bench's
# decode cases per variant (alternated rounds) with torch once, then the decode bench of three
# models per variant.
set -u
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz $B/bin/*.gz; do [ -f "$gz" ] && gunzip -f "$gz" && chmod +x "${gz%.gz}"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout 240 $B/tests/gpukit_ops__ops sdpa --include-ignored --test-threads=1 --show-output > $OUT/tests-sdpa.txt 2>&1
echo "sdpa tests rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "^test |test result|panicked" $OUT/tests-sdpa.txt | head -20
t0=$(date +%s)
timeout 120 $B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 --show-output > $OUT/tests-det.txt 2>&1
echo "determinism rc $? ($(( $(date +%s) - t0 )) s)"; grep -E "^test |test result|panicked|\[gpu\]" $OUT/tests-det.txt | head -20
for round in ${ROUNDS:-1 2}; do
  for v in cluster portable; do
    d=/tmp/ops-$v-$round; mkdir -p $d
    if [ $v = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; fi
    GPUKIT_BENCH_OUT=$d GPUKIT_BENCH_FILTER="sdpa decode" timeout 120 $B/benches/gpukit-ops__ops --bench > $d/log 2>&1
    echo "== $v round $round"; grep "^sdpa decode\|copy" $d/log
  done
done > $OUT/ops-decode.txt 2>&1
unset GPUKIT_SDPA_PORTABLE
cat $OUT/ops-decode.txt
timeout 200 python3 bench/peer_ops.py /tmp/ops-cluster-1 > $OUT/peer-ops.txt 2>&1; tail -14 $OUT/peer-ops.txt
cp /tmp/ops-cluster-1/bench-ops.json $OUT/bench-ops-cluster-1.json 2>/dev/null
t0=$(date +%s)
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models ${MODELS:-llama3.1-8b,llama3.2-1b,qwen2.5-0.5b} > /tmp/models.log 2>&1 || tail -5 /tmp/models.log
echo "models $(( $(date +%s) - t0 )) s"
for round in ${DROUNDS:-1}; do
  for v in cluster portable; do
    d=/tmp/dec-$v-$round; mkdir -p $d
    if [ $v = portable ]; then export GPUKIT_SDPA_PORTABLE=1; else unset GPUKIT_SDPA_PORTABLE; fi
    t0=$(date +%s)
    GPUKIT_DECODE_PROMPTS=${PROMPTS:-128,512,2048} GPUKIT_BENCH_OUT=$d timeout 300 $B/benches/gpukit-llm__decode --bench > $d/log 2>&1
    echo "== $v round $round ($(( $(date +%s) - t0 )) s)"; grep -E "^(llama|qwen)" $d/log
  done
done > $OUT/decode.txt 2>&1
cat $OUT/decode.txt
