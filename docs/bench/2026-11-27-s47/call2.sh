#!/usr/bin/env bash
# Session 47, calls 2 (H200) and 3 (H100): HEAD's bundle — the whole ops bench beside torch,
# once (the table of record for issue 4's resolution), then the ops bench's bf16 GEMV rows again
# until DEADLINE (default 500) s into the call (more runs of (896, 4864), the goal at the line on the H100).
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
unpack_bundle
bench_ops "$OUT/ops1" "" 280 > "$OUT/ops1.txt"; head -1 "$OUT/ops1.txt"
grep -E "^(device|gemv|gemm|linear|sdpa|rms|add|qgemv)" "$OUT/ops1.txt"
r=0
while [ $SECONDS -lt "${DEADLINE:-500}" ]; do
  r=$((r + 1))
  bench_ops "$OUT/g$r" "gemv bf16" 90 | grep -E "^gemv" | sed "s/^/g$r /"
done
pack_out "${CALL:-call2}"
