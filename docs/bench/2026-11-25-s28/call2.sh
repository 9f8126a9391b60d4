#!/usr/bin/env bash
# Session 28, call 2: the batched argmax scan (greedy sampling, argmax rows) against main's ops
# bench binary, two alternated rounds, then `run.sh test` on the new bundle in the time left.
set -u
b=target/gpu-bundle
o="$OUT/call2"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
. "$(dirname "$0")/ab-greedy.sh"; ab_greedy "$o"
OUT="$o" timeout $((590 - SECONDS)) bash $b/run.sh test > "$o/run-test.txt" 2>&1
echo "run.sh test rc $?"; tail -n 25 "$o/run-test.txt"
