#!/bin/bash
# Session 14: the gpukit ops bench under Nsight Compute (ncu-imbalance.txt). Run from the repository
# root on the GPU machine with target/gpu-bundle carried.
set -u
B=target/gpu-bundle
for gz in $B/benches/*.gz; do gunzip -f $gz; chmod +x ${gz%.gz}; done
M=gpu__time_duration.sum,dram__bytes_read.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
export GPUKIT_BENCH_OUT=/tmp/bo; mkdir -p /tmp/bo
run() { # filter kernel-regex count
  echo "=== $1"
  GPUKIT_BENCH_FILTER="$1" timeout 120 ncu --csv --page raw --print-units base --clock-control none --cache-control none \
    --metrics $M -k "regex:$2" -c $3 $B/benches/gpukit-ops__ops --bench 2>&1 | grep -E '^"[0-9]' | cut -c1-2000 > $OUT/"$(echo $1|tr ' =' '__')".csv
  GPUKIT_BENCH_FILTER="$1" timeout 120 ncu --csv --page raw --print-units base --clock-control none --cache-control none \
    --metrics $M -k "regex:$2" -c 1 $B/benches/gpukit-ops__ops --bench 2>&1 | grep -E '^"ID"' > $OUT/header.csv
}
run "GQA 4 len=32768" "sdpa_" 4
run "GQA 8 len=32768" "sdpa_" 4
run "k=4096 n=14336" "gemv" 3
run "k=2048 n=8192" "gemv" 3
run "GQA 4 len=8192" "sdpa_" 4
cat > /tmp/td.py <<'P'
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
for kvh, L in [(8, 32768), (4, 32768), (8, 8192)]:
    q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(1, kvh, L, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(1, kvh, L, 128, dtype=torch.bfloat16, device="cuda")
    for _ in range(2): F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
for n,kk in [(14336,4096),(8192,2048)]:
    w = torch.randn(n, kk, dtype=torch.bfloat16, device="cuda"); x = torch.randn(1, kk, dtype=torch.bfloat16, device="cuda")
    for _ in range(2): F.linear(x, w)
    torch.cuda.synchronize()
P
timeout 200 ncu --csv --page raw --print-units base --clock-control none --cache-control none --metrics $M python3 /tmp/td.py 2>&1 | grep -E '^"' | cut -c1-2500 > $OUT/torch.csv
echo done
