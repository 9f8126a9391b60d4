#!/bin/bash
set -u
B=target/gpu-bundle
for gz in $B/benches/*.gz; do gunzip -f $gz; chmod +x ${gz%.gz}; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
run() { # name env...
  local name=$1; shift
  mkdir -p /tmp/r
  env "$@" GPUKIT_BENCH_OUT=/tmp/r GPUKIT_BENCH_FILTER="gemv bf16 M=1" $B/benches/gpukit-ops__ops --bench > /tmp/r/log 2>&1 || { echo "$name FAILED"; tail -5 /tmp/r/log; }
  python3 -c "
import json
d=json.load(open('/tmp/r/bench-ops.json'))
print('%-22s'%'$name', ' '.join('%6.2f'%(c['ms']*1000) for c in d['cases']))
"
}
for r in 1 2; do
  run base X=0
  run pf2 GPUKIT_X_PF=2
  run pf4 GPUKIT_X_PF=4
  run pfall GPUKIT_X_PF=255
  run pf2_bulk GPUKIT_X_PF=2 GPUKIT_X_BULK=1
  run pfall_bulk GPUKIT_X_PF=255 GPUKIT_X_BULK=1
  run ps3_pfall_bulk GPUKIT_X_PER_SM=3 GPUKIT_X_PF=255 GPUKIT_X_BULK=1
  run ps2_pfall_bulk GPUKIT_X_PER_SM=2 GPUKIT_X_PF=255 GPUKIT_X_BULK=1
  run ps2_pf4_bulk GPUKIT_X_PER_SM=2 GPUKIT_X_PF=4 GPUKIT_X_BULK=1
  run ps3_pf4 GPUKIT_X_PER_SM=3 GPUKIT_X_PF=4
done
