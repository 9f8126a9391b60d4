#!/usr/bin/env bash
# Session 41, call 8 (H200): the whole ops bench beside torch, twice, on call 7's bundle (main).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
unpack_bundle
for r in 1 2; do bench_ops "$OUT/ops$r" "" 200 > "$OUT/ops$r.txt"; head -1 "$OUT/ops$r.txt"; done
grep -E "^(device|gemv|sdpa decode GQA)" "$OUT/ops1.txt" "$OUT/ops2.txt"
