#!/usr/bin/env bash
# Session 28, call 2: the batched argmax scan (greedy sampling, argmax rows) against main's ops
# bench binary, two alternated rounds, then `run.sh test` on the new bundle in the time left.
set -u
b=target/gpu-bundle
o="$OUT/call2"; mkdir -p "$o"
for gz in $b/tests/*.gz $b/benches/*.gz; do gunzip -f "$gz"; done
chmod +x $b/tests/* $b/benches/*
gunzip -c target/ab/ops-main.gz > /tmp/ops-main && chmod +x /tmp/ops-main
for r in 1 2; do
  for v in main new; do
    bin=/tmp/ops-main; [ $v = new ] && bin=$b/benches/gpukit-ops__ops
    mkdir -p "$o/$v-r$r"
    GPUKIT_BENCH_OUT="$o/$v-r$r" GPUKIT_BENCH_FILTER="sampling greedy" "$bin" --bench > "$o/$v-r$r/log.txt" 2>&1
    echo "$v r$r: $(grep -E '^sampling greedy' "$o/$v-r$r/log.txt" | tr -s ' ' | tr '\n' ';')"
  done
done
OUT="$o" timeout $((590 - SECONDS)) bash $b/run.sh test > "$o/run-test.txt" 2>&1
echo "run.sh test rc $?"; tail -n 25 "$o/run-test.txt"
