#!/bin/bash
# Session 14: torch's decode attention and GEMV kernels under Nsight Compute (torch-kernels.txt).
cat > /tmp/td.py <<'P'
import torch, torch.nn.functional as F
torch.manual_seed(0)
for kvh, L in [(8, 32768), (4, 32768)]:
    q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(1, kvh, L, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(1, kvh, L, 128, dtype=torch.bfloat16, device="cuda")
    for _ in range(2): F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
for n,kk in [(14336,4096),(4096,14336),(8192,2048),(2048,8192),(4864,896)]:
    w = torch.randn(n, kk, dtype=torch.bfloat16, device="cuda"); x = torch.randn(1, kk, dtype=torch.bfloat16, device="cuda")
    for _ in range(2): F.linear(x, w)
    torch.cuda.synchronize()
P
M=gpu__time_duration.sum,dram__bytes_read.sum.per_second,sm__cycles_active.avg,sm__cycles_active.max,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active
timeout 300 ncu --csv --page raw --print-units base --clock-control none --cache-control none -k 'regex:^(?!.*(elementwise|normal|distribution|fill|vectorized)).*' --metrics $M python3 /tmp/td.py > /tmp/t.csv 2>&1
python3 - <<'P'
import csv
lines=open('/tmp/t.csv').read().splitlines()
i=next(i for i,l in enumerate(lines) if l.startswith('"ID"'))
rows=list(csv.reader(lines[i:])); h=rows[0]; col={n:j for j,n in enumerate(h)}
for r in rows[2:]:
    if len(r)!=len(h): continue
    g=lambda m: r[col[m]].replace(',','')
    print(r[col['Kernel Name']][:110], '| us', round(float(g('gpu__time_duration.sum'))/1e3,2), '| GB/s', round(float(g('dram__bytes_read.sum.per_second'))/1e9), '| act', round(float(g('sm__cycles_active.avg'))/float(g('sm__cycles_active.max')),3), '| grid', g('launch__grid_size'), 'block', g('launch__block_size'), 'regs', g('launch__registers_per_thread'), 'smem', g('launch__shared_mem_per_block_dynamic'), g('launch__shared_mem_per_block_static'), 'occ', g('sm__warps_active.avg.pct_of_peak_sustained_active'))
P
