#!/usr/bin/env bash
# Session 28, call 6: decode ring work units (exp-ring-units.diff, not on main: the unit count
# from GPUKIT_EXP_RING_UNITS), the ops bench's decode cases at 132 (the rule), 96 and 64 units,
# two alternated rounds. Fewer units: fewer splits per head, so fewer partials to merge, but
# fewer multiprocessors streaming.
set -u
b=target/gpu-bundle
o="$OUT/call6"; mkdir -p "$o"
gunzip -f $b/benches/gpukit-ops__ops.gz; chmod +x $b/benches/gpukit-ops__ops
for r in 1 2; do
  for u in 132 96 64; do
    GPUKIT_EXP_RING_UNITS=$u GPUKIT_BENCH_OUT="/tmp/u$u-r$r" GPUKIT_BENCH_FILTER="sdpa decode" \
      $b/benches/gpukit-ops__ops --bench > "$o/u$u-r$r.txt" 2>&1
    echo "units $u r$r: $(grep -E '^sdpa decode' "$o/u$u-r$r.txt" | grep -v len=1024 | awk '{print $4, $5, $(NF-1)*1000}' | tr '\n' ';')"
  done
done
nvidia-smi --query-gpu=name --format=csv,noheader
