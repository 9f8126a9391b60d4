#!/usr/bin/env bash
# Session 28: an ops bench case family (GPUKIT_BENCH_FILTER), the bundle's bench binary ("new")
# against main's (target/ab/ops-main.gz), two alternated rounds; outputs to $2. `ab_greedy`:
# greedy sampling, sourced by session 28's call2.sh and call3.sh after they unpack the bundle.
# Call 2's bundle had the first change (argmax_scan<8> in the greedy scan), call 3's the kept
# one (16-byte vectors). (Call 3 ran an earlier copy of this loop that wrote
# greedy-<main|new>-r<N>.txt, the names kept in call3/.) Session 29 sources it too (call6.sh:
# greedy; call9.sh, call12.sh, call13.sh: `ab_bench qgemv`).
ab_bench() {
  local filter="$1" o="$2" b=target/gpu-bundle
  gunzip -c target/ab/ops-main.gz > /tmp/ops-main && chmod +x /tmp/ops-main
  for r in 1 2; do
    for v in main new; do
      local bin=/tmp/ops-main; [ $v = new ] && bin=$b/benches/gpukit-ops__ops
      mkdir -p "$o/$v-r$r"
      GPUKIT_BENCH_OUT="$o/$v-r$r" GPUKIT_BENCH_FILTER="$filter" "$bin" --bench > "$o/$v-r$r/log.txt" 2>&1
      echo "$v r$r: $(grep -E "^$filter" "$o/$v-r$r/log.txt" | tr -s ' ' | tr '\n' ';')"
    done
  done
}
ab_greedy() { ab_bench "sampling greedy" "$1"; }
