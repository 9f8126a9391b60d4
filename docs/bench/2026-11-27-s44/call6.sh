#!/usr/bin/env bash
# Session 44, call 6 (H100): the whole ops bench beside torch, once, on HEAD's bundle (9e08fe7,
# as in call 4): the current table of record for issues 4 and 5, beside call 5's H200 run.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
unpack_bundle
bench_ops "$OUT/ops1" "" 280 > "$OUT/ops1.txt"; head -1 "$OUT/ops1.txt"
grep -E "^(device|gemv|gemm|linear|sdpa|rms|add|qgemv)" "$OUT/ops1.txt"
pack_out call6
