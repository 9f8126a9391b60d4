#!/bin/bash
# Session 14: same-run A/B of the ops bench, 739f9d3's binary (saved as sweep/ops_old.gz) against
# the work-counter GEMVs (ab-gemv-dynamic.txt), after the ops and determinism tests.
set -u
B=target/gpu-bundle
for gz in $B/benches/*.gz $B/tests/*.gz; do gunzip -f $gz; chmod +x ${gz%.gz}; done
gunzip -c sweep/ops_old.gz > /tmp/ops_old; chmod +x /tmp/ops_old
export GPUKIT_CACHE_DIR=/tmp/gc
$B/tests/gpukit_ops__ops --include-ignored --test-threads=1 > $OUT/ops-tests.log 2>&1; grep -E "test result|FAILED|panicked" $OUT/ops-tests.log | tail -8
$B/tests/gpukit_ops__determinism --include-ignored --test-threads=1 > $OUT/det.log 2>&1; grep -E "test result|FAILED" $OUT/det.log | tail -3
for r in 1 2 3; do
  for v in old new; do
    mkdir -p /tmp/$v$r
    if [ $v = old ]; then bin=/tmp/ops_old; else bin=$B/benches/gpukit-ops__ops; fi
    GPUKIT_BENCH_OUT=/tmp/$v$r GPUKIT_BENCH_FILTER="gemv" $bin --bench > /dev/null 2>&1
    python3 -c "
import json
d=json.load(open('/tmp/$v$r/bench-ops.json'))
print('$v$r', ' '.join('%.2f'%(c['ms']*1000) for c in d['cases'] if 'gemv' in c['name']), [c['name'] for c in d['cases']][:1] if '$r'=='1' else '')
"
  done
done
