# Steps the device-call scripts share (sessions 29–30; the GEMV probe steps at the end: session 37),
# GPU machine with the bundle at target/gpu-bundle. Each writes into the folder $o (set it first)
# and prints one summary line.
#   unpack_bundle                          gunzip the bundle's test and bench binaries in place
#   run_test NAME BINARY [ARGS…]           a test binary with its GPU tests → $o/NAME.txt
#   sanitize TOOL DEADLINE BINARY [ARGS…]  compute-sanitizer TOOL (memcheck, racecheck) on a test
#                                          binary, stopped DEADLINE seconds into the script
#                                          → $o/TOOL.txt
#   bench_ops DIR [FILTER] [LIMIT]         run.sh bench ops (cases matching FILTER) and its torch
#                                          peer into DIR; prints the peer's table
#   all_tests DIR [LIMIT]                  run.sh test into DIR; prints the totals and failures
#   decode_bench DIR BUNDLE [VAR=VALUE…]   BUNDLE's decode bench binary (models in
#                                          $GPUKIT_DECODE_MODELS, prompts $PROMPTS: default
#                                          128,2048) with VAR=VALUE set → DIR; prints its rows
b=target/gpu-bundle
# Where the kernels NVRTC compiles are cached (run.sh's default, for binaries run directly).
export GPUKIT_CACHE_DIR=${GPUKIT_CACHE_DIR:-/tmp/gpukit-cache}

unpack_bundle() {
  for gz in $b/tests/*.gz $b/benches/*.gz; do [ -f "$gz" ] && gunzip -f "$gz"; done
  chmod +x $b/tests/* $b/benches/*
}

run_test() {
  local name=$1 bin=$2; shift 2
  "$bin" "$@" --include-ignored --test-threads=1 > "$o/$name.txt" 2>&1
  echo "$name rc $?: $(grep -E '^test result' "$o/$name.txt")"
  grep -E "FAILED|panicked" "$o/$name.txt" | head
}

sanitize() {
  local tool=$1 deadline=$2 bin=$3; shift 3
  timeout $((deadline - SECONDS)) compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 \
    "$bin" "$@" --include-ignored --test-threads=1 > "$o/$tool.txt" 2>&1
  echo "$tool rc $? at ${SECONDS}s: $(grep -E '(ERROR|RACECHECK) SUMMARY' "$o/$tool.txt" | tail -1)" \
    "$(grep -E '^test result' "$o/$tool.txt")"
}

bench_ops() {
  local dir=$1 filter=${2:-} limit=${3:-300}
  mkdir -p "$dir"
  GPUKIT_BENCH_FILTER="$filter" OUT="$dir" timeout "$limit" bash $b/run.sh bench ops > "$dir/bench-ops.txt" 2>&1
  echo "bench rc $? at ${SECONDS}s"; sed -n '/^device:/,$p' "$dir/peer-ops.log"
}

all_tests() {
  local dir=$1 limit=${2:-590}
  mkdir -p "$dir"
  OUT="$dir" timeout "$limit" bash $b/run.sh test > "$dir/run-test.txt" 2>&1
  echo "run.sh rc $? at ${SECONDS}s"; tail -1 "$dir/run-test.txt"
  grep -E "FAILED|panicked" "$dir/gpu-tests.log" | head -10
}

decode_bench() {
  local dir=$1 bundle=$2; shift 2
  mkdir -p "$dir"
  env "$@" GPUKIT_DECODE_PROMPTS="${PROMPTS:-128,2048}" GPUKIT_BENCH_OUT="$dir" timeout 200 \
    "$bundle/benches/gpukit-llm__decode" --bench > "$dir/log" 2>&1
  echo "== ${dir##*/} rc $? at ${SECONDS}s"; grep -E "^(llama|qwen)" "$dir/log"
}

# GEMV probe steps (session 37): session 23's probe.cu built against copies of gemv.cu that a
# gemv_variants.py script patched.
#   gemv_probe_variants SCRIPT [SRC]        prints the GPU, then SCRIPT writes its variants of SRC
#                                           (default: gemv.cu) into /tmp/gv as gemv_<variant>.cu
#   gemv_probe_build NAME VARIANT [FLAGS…]  probe.cu against /tmp/gv/gemv_VARIANT.cu (nvcc FLAGS)
#                                           → /tmp/probe_NAME, ptxas report → $o/nvcc-NAME.txt
#   gemv_probe_run NAME[:LABEL] CONFIG…     /tmp/probe_NAME once per K,N,R,S,NST[,NPRE] config,
#                                           its lines labelled LABEL/pNPRE (LABEL: NAME)
#   gemv_probe_main                         prints the GPU, builds /tmp/probe_main on main's gemv.cu
#                                           (session 41)
#   gemv_probe_summary                      session 37's summary of $o/gemv.txt → $o/summary.txt,
#                                           printed (session 41)
gemv_probe_variants() {
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  mkdir -p /tmp/gv
  python3 "$1" "${2:-gpukit-kernels/cuda/gemv.cu}" /tmp/gv > /dev/null
}

gemv_probe_build() {
  local name=$1 src=$2; shift 2
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda \
    -DGEMV_SRC="\"/tmp/gv/gemv_$src.cu\"" "$@" docs/bench/2026-11-25-h200-s23/probe.cu \
    -o "/tmp/probe_$name" > "$o/nvcc-$name.txt" 2>&1 \
    || { echo "nvcc $name failed"; tail -20 "$o/nvcc-$name.txt"; }
}

gemv_probe_run() {
  local bin=${1%%:*} label=${1#*:}; shift
  for c in "$@"; do timeout 60 "/tmp/probe_$bin" "$label/p${c##*,}" "$c"; done
}

gemv_probe_main() {
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  mkdir -p /tmp/gv && cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_main.cu
  gemv_probe_build main main
}

gemv_probe_summary() {
  python3 docs/bench/2026-11-26-s37/summarize.py < "$o/gemv.txt" > "$o/summary.txt"
  cat "$o/summary.txt"
}

# Session 42's chain probes (docs/bench/2026-11-27-s42/chain_variants.py):
#   chain_probe_variants [SRC]               prints the GPU, writes chain_variants.py's copies of
#                                            SRC (default: gemv.cu; its patches match gemv.cu up
#                                            to 2819fa2) and its probe_chain.cu into /tmp/gv
#   chain_probe_build NAME VARIANT [FLAGS…]  probe_chain.cu against /tmp/gv/gemv_VARIANT.cu (nvcc
#                                            FLAGS, e.g. -DPROBE_CHAIN) → /tmp/probe_NAME, for
#                                            gemv_probe_run
chain_probe_variants() {
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  mkdir -p /tmp/gv
  python3 docs/bench/2026-11-27-s42/chain_variants.py "${1:-gpukit-kernels/cuda/gemv.cu}" \
    docs/bench/2026-11-25-h200-s23/probe.cu /tmp/gv
}

chain_probe_build() {
  local name=$1 v=$2; shift 2
  /usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -w -Xptxas=-v -I gpukit-kernels/cuda "$@" \
    -DGEMV_SRC="\"/tmp/gv/gemv_$v.cu\"" /tmp/gv/probe_chain.cu -o "/tmp/probe_$name" \
    > "$o/nvcc-$name.txt" 2>&1 || echo "nvcc $name failed"
}

# Session 43: probes of gemv.cu since 4771fde (the 4-row ring kernel holds x in registers), which
# session 37's and 42's variant scripts no longer patch.
#   now_probe_setup    prints the GPU; chain_variants.py's copies of 2819fa2's gemv.cu (the kernel
#                      before; gemv_main.cu) and probe_chain.cu into /tmp/gv, and /tmp/probe_now
#                      on this tree's gemv.cu (/tmp/gv/gemv_now.cu)
now_probe_setup() {
  nvidia-smi --query-gpu=name --format=csv,noheader
  git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
  chain_probe_variants /tmp/gemv_before.cu > /dev/null
  cp gpukit-kernels/cuda/gemv.cu /tmp/gv/gemv_now.cu
  chain_probe_build now now
}

# Session 44: the A/B bench rounds, probes of a committed gemv.cu, and the packing of $OUT.
#   ab_gemv_bench ROUNDS DEADLINE [PATTERN]
#                                  the ops bench's bf16 GEMV rows, bundles A (target/gpu-bundle-a)
#                                  and B (target/gpu-bundle) alternated ROUNDS times, none started
#                                  past DEADLINE seconds → $OUT/gaN, $OUT/gbN; prints the lines of
#                                  the peer's table matching PATTERN (default ^gemv), each
#                                  prefixed aN / bN; leaves b at B
#   commit_probe_setup REV NAME    chain_variants.py's probe_chain.cu (on 2819fa2's gemv.cu) in
#                                  /tmp/gv, and REV's gemv.cu as /tmp/gv/gemv_NAME.cu
#   pack_out NAME                  everything under $OUT packed into $OUT/NAME.tgz (only a few
#                                  files come back from a call)
#   whole_ops_bench NAME           prints the GPU; the whole ops bench beside torch, once, on
#                                  $b → $OUT/ops1, $OUT/ops1.txt; prints the rows with goals;
#                                  packs $OUT as NAME.tgz
#   (session 45)
#   ab_bench ROUNDS DEADLINE FILTER PATTERN LIMIT TAG
#                                  ab_gemv_bench for the ops bench's cases matching FILTER, each
#                                  run stopped at LIMIT seconds → $OUT/TAGaN, $OUT/TAGbN
#   b_bench ROUNDS FILTER PATTERN LIMIT
#                                  the same on $b alone → $OUT/qN; prints the rows matching
#                                  PATTERN, each prefixed N
#   call_start                     a call's start: o = $OUT, the GPU's name and clock printed,
#                                  the bundle unpacked
#   quant_tests [portable] [racecheck]
#                                  the quantized-GEMV op tests and the determinism tests
#                                  (portable: the transformer one again on the portable
#                                  attention kernels), then memcheck (and racecheck) on the
#                                  quantized-GEMV tests
#   product_tests [racecheck]      (session 46) every op test, the determinism, GGUF-model and
#                                  HF-directory tests, then memcheck (and racecheck) on the
#                                  quantized tests
ab_bench() {
  local rounds=$1 deadline=$2 filter=$3 pattern=$4 limit=$5 tag=$6 r x
  for r in $(seq "$rounds"); do
    for x in a b; do
      [ $SECONDS -gt "$deadline" ] && break 2
      if [ $x = a ]; then b=target/gpu-bundle-a; else b=target/gpu-bundle; fi
      bench_ops "$OUT/$tag$x$r" "$filter" "$limit" | grep -E "$pattern" | sed "s/^/$x$r /"
    done
  done
  b=target/gpu-bundle
}

ab_gemv_bench() {
  ab_bench "$1" "$2" "gemv bf16" "${3:-^gemv}" 100 g
}

b_bench() {
  local r
  for r in $(seq "$1"); do
    bench_ops "$OUT/q$r" "$2" "$4" | grep -E "$3" | sed "s/^/$r /"
  done
}

call_start() {
  o="$OUT"
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  unpack_bundle
}

quant_tests() {
  run_test ops-quant $b/tests/gpukit_ops__ops quant
  run_test determinism $b/tests/gpukit_ops__determinism
  case " $* " in *" portable "*)
    GPUKIT_SDPA_PORTABLE=1 run_test determinism-portable $b/tests/gpukit_ops__determinism transformer ;;
  esac
  sanitize memcheck $((SECONDS + 200)) $b/tests/gpukit_ops__ops quant
  case " $* " in *" racecheck "*)
    sanitize racecheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops quant ;;
  esac
}

product_tests() {
  run_test ops $b/tests/gpukit_ops__ops
  run_test determinism $b/tests/gpukit_ops__determinism
  run_test gguf_model $b/tests/gpukit_llm__gguf_model
  run_test hf_dir $b/tests/gpukit_llm__hf_dir
  sanitize memcheck $((SECONDS + 120)) $b/tests/gpukit_ops__ops quant
  case " $* " in *" racecheck "*)
    sanitize racecheck $((SECONDS + 150)) $b/tests/gpukit_ops__ops quant ;;
  esac
}

commit_probe_setup() {
  git show 2819fa2:gpukit-kernels/cuda/gemv.cu > /tmp/gemv_before.cu
  chain_probe_variants /tmp/gemv_before.cu > /dev/null
  git show "$1:gpukit-kernels/cuda/gemv.cu" > "/tmp/gv/gemv_$2.cu"
}

pack_out() {
  (cd "$OUT" && tar czf "/tmp/$1.tgz" . && find . -mindepth 1 -delete && mv "/tmp/$1.tgz" .)
}

whole_ops_bench() {
  nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
  unpack_bundle
  bench_ops "$OUT/ops1" "" 280 > "$OUT/ops1.txt"; head -1 "$OUT/ops1.txt"
  grep -E "^(device|gemv|gemm|linear|sdpa|rms|add|qgemv)" "$OUT/ops1.txt"
  pack_out "$1"
}
