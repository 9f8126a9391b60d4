# Session 30: the decode-ring probe's device-side steps, sourced by the call scripts (run from the
# repository root on the GPU machine, $OUT set by the device tool).
#   probe_ab ROUNDS bits|bf16 [trace]  build the kernel of target/ab/base (a commit's attention.cu
#                                      and common.cuh) as "base" and the working tree's as "new",
#                                      run them alternated ROUNDS times (ab.txt), compare their
#                                      outputs bit for bit or within bf16 (a differently rounded
#                                      change), then trace the new kernel if asked
#   probe_main ROUNDS                  the working tree's kernel alone as "main", then traced
#   probe_trace                        the working tree's kernel traced (trace_patch.py)
D=docs/bench/2026-11-26-s30
S19=docs/bench/2026-11-24-h200-s19
NVCC=/usr/local/cuda/bin/nvcc

# Copies the sources of variant $1 (base, new, main or trace) to /tmp/v/$1 and builds
# /tmp/probe_$1.
probe_build() {
  mkdir -p /tmp/v/$1
  case $1 in
    base) cp target/ab/base/attention.cu target/ab/base/common.cuh /tmp/v/base/ ;;
    trace) cp gpukit-kernels/cuda/common.cuh /tmp/v/trace/
           python3 $D/trace_patch.py gpukit-kernels/cuda/attention.cu /tmp/v/trace/attention.cu ;;
    *) cp gpukit-kernels/cuda/attention.cu gpukit-kernels/cuda/common.cuh /tmp/v/$1/ ;;
  esac
  local extra=""; [ $1 = trace ] && extra=-DDECODE_TRACE
  $NVCC -O3 -std=c++17 -arch=sm_90a -w $extra -I /tmp/v/$1 -I $S19 -DATTN_SRC="\"/tmp/v/$1/attention.cu\"" \
    $D/decode_probe.cu -o /tmp/probe_$1 -lcuda > $OUT/nvcc-$1.txt 2>&1 || { echo "nvcc $1 failed"; tail -30 $OUT/nvcc-$1.txt; }
}

probe_trace() {
  [ -x /tmp/probe_trace ] || probe_build trace
  /tmp/probe_trace trace 2>&1 | tee $OUT/probe-trace.txt
}

probe_main() {
  probe_build main & probe_build trace & wait
  for r in $(seq "$1"); do /tmp/probe_main main; done 2>&1 | tee $OUT/probe-main.txt
  probe_trace
}

probe_ab() {
  local rounds=$1 compare=$2 trace=${3:-}
  probe_build base & probe_build new & { [ -n "$trace" ] && probe_build trace; } & wait
  for r in $(seq "$rounds"); do
    OUTFILE=/tmp/out-base.bin /tmp/probe_base base
    OUTFILE=/tmp/out-new.bin /tmp/probe_new new
  done 2>&1 | tee $OUT/ab.txt
  if [ "$compare" = bits ]; then
    cmp /tmp/out-base.bin /tmp/out-new.bin && echo "outputs: bitwise equal" || echo "outputs: DIFFER"
  else
    python3 - <<'PY'
import struct
def load(p):
    b = open(p, "rb").read()
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for (h,) in struct.iter_unpack("<H", b)]
a, b = load("/tmp/out-base.bin"), load("/tmp/out-new.bin")
diffs = [abs(x - y) for x, y in zip(a, b)]
rel = [d / max(abs(x), 1e-3) for d, x in zip(diffs, a)]
print(f"outputs: {len(a)} values, {sum(d == 0 for d in diffs)} equal, max |diff| {max(diffs):.3g}, max rel {max(rel):.3g}")
PY
  fi
  [ -n "$trace" ] && probe_trace
  return 0
}
