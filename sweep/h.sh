#!/usr/bin/env bash
# Temporary (deleted before the session ends): QKV kernel without 64-bit index math — tests, A/B, spills.
set -u
B=target/gpu-bundle
for gz in $B/tests/*.gz $B/benches/*.gz target/s9old/*.gz; do gunzip -f "$gz"; done
chmod +x $B/tests/* $B/benches/* target/s9old/*
t0=$(date +%s)
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_DECODE_MODELS=/tmp/gpukit-decode-models
python3 bench/decode_models.py $GPUKIT_DECODE_MODELS --models llama3.2-1b,qwen2.5-0.5b,llama3.1-8b > $OUT/models.log 2>&1 &
for t in gpukit_ops__ops gpukit_ops__determinism; do
  timeout 200 $B/tests/$t --include-ignored --test-threads=1 > $OUT/$t.log 2>&1
  echo "$t: exit $? $(grep -E '^test result' $OUT/$t.log | tail -1)"
done
grep -E "FAILED|panicked" $OUT/*.log | head
wait
echo "tests + models after $(( $(date +%s) - t0 )) s"
run() {
  label=$1; bin=$2; shift 2
  timeout 70 env "$@" GPUKIT_DECODE_PROMPTS=128,512 GPUKIT_DECODE_TOKENS=128 GPUKIT_BENCH_OUT=/tmp/b $bin > /tmp/run.log 2>&1
  grep -E "^(llama|qwen)" /tmp/run.log | sed "s/^/$label /" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  for m in llama3.1 qwen2.5 llama3.2; do
    run old target/s9old/gpukit-llm__decode GPUKIT_BENCH_FILTER=$m
    run new $B/benches/gpukit-llm__decode GPUKIT_BENCH_FILTER=$m
  done
  echo "rep $rep after $(( $(date +%s) - t0 )) s"
done
GPUKIT_DECODE_GRAPH=0 GPUKIT_BENCH_FILTER=llama3.1-8b GPUKIT_DECODE_PROMPTS=128 GPUKIT_DECODE_TOKENS=3 GPUKIT_BENCH_OUT=/tmp/b \
  timeout 100 /usr/local/cuda/bin/ncu --clock-control none --cache-control none \
  -k "regex:^gemv_norm_rope_kv" --launch-skip 40 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  $B/benches/gpukit-llm__decode > $OUT/detail-rope.txt 2>&1
grep -E "Duration|DRAM Throughput|Spilling Requests  " $OUT/detail-rope.txt
