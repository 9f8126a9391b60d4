#!/usr/bin/env bash
# Session 29, call 11: Nsight Compute on main's quantized GEMV (Q4_0 and Q8_0 at (4096, 14336)):
# throughput, occupancy and warp stall reasons.
set -u
o="$OUT/call11"; mkdir -p "$o"
gunzip -c target/ab/ops-main.gz > /tmp/ops-main && chmod +x /tmp/ops-main
which ncu || ls /usr/local/cuda*/bin/ncu
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu | head -1)
GPUKIT_BENCH_OUT=/tmp/ncu-b GPUKIT_BENCH_FILTER="qgemv" timeout 400 $NCU -k regex:qgemv -c 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats \
  /tmp/ops-main --bench > "$o/ncu.txt" 2>&1
echo "ncu rc $?"
grep -vE "^==PROF==|^\s*$" "$o/ncu.txt" | grep -E "qgemv|Duration|Throughput|Occupancy|Registers|Block Size|Grid Size|Warp Cycles|Stall|Issue|Eligible|Active Warps|L1|L2|DRAM|Executed Ipc|Mem Busy|Max Bandwidth|Sector|Waves|Limit" | head -90
