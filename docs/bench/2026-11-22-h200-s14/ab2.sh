#!/bin/bash
# Session 14: decode geometry through temporary environment overrides XB / XS / XP in
# launch::sdpa_decode_splits / launch::sdpa_decode (not kept; ab-decode-geometry.txt).
B=target/gpu-bundle
for gz in $B/benches/*.gz; do gunzip -f $gz; chmod +x ${gz%.gz}; done
for r in 1 2; do
for cfg in "264 3 2" "396 2 3" "264 2 3" "528 1 4" "396 3 2"; do
  set -- $cfg
  mkdir -p /tmp/o
  XB=$1 XS=$2 XP=$3 GPUKIT_BENCH_OUT=/tmp/o GPUKIT_BENCH_FILTER="sdpa decode" $B/benches/gpukit-ops__ops --bench > /dev/null 2>&1
  python3 -c "
import json
d=json.load(open('/tmp/o/bench-ops.json'))
print('$cfg', ' '.join('%.1f'%(c['ms']*1000) for c in d['cases']))
"
done; done
