#!/bin/bash
set -u
for v in 0 1 2 3; do gunzip -c sweep/bin/ops_v$v.gz > /tmp/ops_v$v; chmod +x /tmp/ops_v$v; done
run() { # bin filter
  mkdir -p /tmp/r; rm -f /tmp/r/bench-ops.json
  GPUKIT_BENCH_OUT=/tmp/r GPUKIT_BENCH_FILTER="$2" /tmp/ops_$1 --bench > /tmp/r/log 2>&1 || { echo "$1 FAILED"; tail -5 /tmp/r/log; }
  python3 -c "
import json
d=json.load(open('/tmp/r/bench-ops.json'))
print('%-4s'%'$1', ' '.join('%6.2f'%(c['ms']*1000) for c in d['cases']), '$2' )
"
}
for r in 1 2 3; do
  for v in v0 v1 v2 v3; do run $v "gemv bf16 M=1"; done
done
for r in 1 2; do
  for v in v0 v1; do run $v "sdpa decode"; done
done
