#!/usr/bin/env bash
# Session 44, call 5 (H200): the whole ops bench beside torch, once, on HEAD's bundle (9e08fe7,
# as in call 4): the current table of record for issues 4 and 5. (As run, the grep below lacked
# `linear`, so the call's output left out the linear prefill rows; they are in ops1.txt.)
# (Refactored after it ran onto device-calls.sh's pack_out: the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
unpack_bundle
bench_ops "$OUT/ops1" "" 280 > "$OUT/ops1.txt"; head -1 "$OUT/ops1.txt"
grep -E "^(device|gemv|gemm|linear|sdpa|rms|add|qgemv)" "$OUT/ops1.txt"
pack_out call5
