#!/usr/bin/env bash
# Session 29: the decode-ring variants given as $1 (GPUKIT_RING_VARIANT values, the bits in
# call1.sh and call2.sh), the ops bench's "sdpa decode" cases past 1k keys, two rounds; prints
# GQA, length and ms per case. Sourced by call2.sh and call3.sh after they unpack the bundle.
ring_variants() {
  local B=target/gpu-bundle
  for round in 1 2; do
    for v in $1; do
      mkdir -p /tmp/v$v
      GPUKIT_RING_VARIANT=$v GPUKIT_BENCH_OUT=/tmp/v$v GPUKIT_BENCH_FILTER="sdpa decode" timeout 100 $B/benches/gpukit-ops__ops --bench > /tmp/v$v/log 2>&1
      echo "== variant $v round $round"; grep -E "sdpa decode" /tmp/v$v/log | grep -v "len=1024" | awk '{print $4, $5, $7}'
    done
  done
}
