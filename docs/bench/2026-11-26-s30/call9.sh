#!/usr/bin/env bash
# Session 30, calls 9 (H200) and 10 (H100), bundle of bece7e7: the full ops bench beside torch.
set -u
b=target/gpu-bundle
o="$OUT/ops"; mkdir -p "$o"
OUT="$o" timeout 500 bash $b/run.sh bench ops > "$o/bench-ops.txt" 2>&1
echo "bench rc $?"; sed -n '/^device:/,$p' "$o/peer-ops.log"
