#!/usr/bin/env bash
# Session 35, call 5: the prefill kernels before (c0c3485, target/gpu-bundle-old) and after the
# KV-cache layout (HEAD, target/gpu-bundle): the ops bench's prefill rows, ours only, the
# warpgroup-MMA kernel and the portable one (GPUKIT_SDPA_PORTABLE=1), bundles alternated twice;
# then the new bundle's attention and cache tests (with the padded-row swizzled case).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for b in target/gpu-bundle-old target/gpu-bundle; do unpack_bundle; done
b=target/gpu-bundle
for r in 1 2; do
  for v in old new; do
    bin=target/gpu-bundle${v/new/}; [ $v = old ] && bin=target/gpu-bundle-old
    for p in wgmma portable; do
      env=""; [ $p = portable ] && env="GPUKIT_SDPA_PORTABLE=1"
      env $env GPUKIT_BENCH_FILTER="sdpa prefill" OUT=/tmp/bo timeout 120 $bin/benches/gpukit-ops__ops --bench \
        > "$o/prefill-$v-$p-$r.txt" 2>&1
      echo "$v $p round $r rc $?"
    done
  done
done
run_test ops $b/tests/gpukit_ops__ops sdpa kv_cache
