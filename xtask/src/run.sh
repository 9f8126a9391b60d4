#!/usr/bin/env bash
# gpukit GPU bundle runner (written by `cargo xtask gpu-bundle`).
#
# Usage: bash target/gpu-bundle/run.sh [test|python|bench|all|sanitize] [BENCH]  (default: test)
#
# test:     every bundled test binary with its GPU tests included (they fail, not skip, without
#           a device); first builds the HF-parity models with transformers
#           (gpukit-llm/tests/hf_parity/make_models.py) into $GPUKIT_PARITY_DIR
#           (default /tmp/gpukit-parity; kept between runs on a warm machine); then python;
# python:   the pytest suites (gpukit-py/tests against the bundled wheel, gpukit-cli/tests
#           against the bundled `gpukit serve`) with the machine's python3 (torch and cupy for the
#           interop tests; the wheels of pytest and the openai client bundled);
# bench:    every bench binary (or those whose name contains BENCH: ops, mem, decode, sched), each
#           followed by its peer bench/peer_<name>.py; the decode bench first builds its
#           random-weight models (bench/decode_models.py) in $GPUKIT_DECODE_MODELS
#           (default /tmp/gpukit-decode-models; kept between runs on a warm machine); then
#           python (bench/python.py), audio (bench/audio.py: STFT, mel and MFCC beside torch),
#           tts (bench/tts.py: the default voice beside onnxruntime; needs the voice in the cache)
#           and serve (bench/serve.py: the server under load beside
#           HF transformers; $GPUKIT_SERVE_MODELS and $GPUKIT_SERVE_ARGS narrow it);
# all:      test, then bench;
# sanitize: every test binary under compute-sanitizer memcheck and racecheck (but the
#           HF-parity one: whole 1B-parameter models under the sanitizer take hours).
# Full logs go to $OUT (or ./results); the last line is the summary
# "gpu-bundle: N passed, N failed, N skipped".
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-test}"
only="${2:-}"
out="${OUT:-$here/results}"
mkdir -p "$out"
export GPUKIT_CACHE_DIR="${GPUKIT_CACHE_DIR:-/tmp/gpukit-cache}"
export RUST_BACKTRACE=1
export GPUKIT_BENCH_OUT="$out"
log="$out/gpu-tests.log"
: >"$log"

# The binaries travel xz-compressed (cargo xtask gpu-bundle); unpack them in place.
command -v xz >/dev/null || { echo "run.sh needs xz (xz-utils) to unpack the binaries"; exit 1; }
for packed in "$here"/tests/*.xz "$here"/benches/*.xz "$here"/bin/*.xz; do
  [ -f "$packed" ] || continue
  xz -d -f "$packed" && chmod +x "${packed%.xz}"
done

echo "== $(cat "$here/BUNDLE.txt" | head -2 | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/== gpu: /'

[ -x "$here/bin/gpukit" ] && "$here/bin/gpukit" info 2>&1 | sed 's/^/== /'

passed=0 failed=0 skipped=0 broken=0
repo="$(cd "$here/../.." && pwd)"
if [ "$mode" = test ] || [ "$mode" = all ]; then
  export GPUKIT_PARITY_DIR="${GPUKIT_PARITY_DIR:-/tmp/gpukit-parity}"
  if [ ! -f "$GPUKIT_PARITY_DIR/.complete" ]; then
    echo "== building the HF-parity models in $GPUKIT_PARITY_DIR (log: parity-models.log)"
    if python3 "$repo/gpukit-llm/tests/hf_parity/make_models.py" "$GPUKIT_PARITY_DIR" \
        >"$out/parity-models.log" 2>&1; then
      touch "$GPUKIT_PARITY_DIR/.complete"
    else
      echo "== the HF-parity models could not be built: see parity-models.log"
    fi
    grep -vE '^\s*$' "$out/parity-models.log" | tail -n 6 | sed 's/^/== /'
  fi
  for m in "$GPUKIT_PARITY_DIR"/*/meta.json; do
    [ -f "$m" ] && cp "$m" "$out/parity-$(basename "$(dirname "$m")").json"
  done
  # Each test binary once; the ops tests' attention cases and the transformer kernels'
  # determinism test again with the portable kernels forced (on Hopper the defaults are the
  # warpgroup-MMA prefill and the decode ring; the portable split-K decode has its own combine).
  runs=()
  for t in "$here"/tests/*; do
    [ -x "$t" ] || continue
    runs+=("$t")
    case "$t" in
      *gpukit_ops__ops) runs+=("$t:portable:sdpa") ;;
      *gpukit_ops__determinism) runs+=("$t:portable:transformer") ;;
    esac
  done
  for run in "${runs[@]}"; do
    t="${run%%:portable:*}"
    name="$(basename "$t")"
    if [ "$run" != "$t" ]; then
      filter="${run##*:}"
      name="$name ($filter, GPUKIT_SDPA_PORTABLE=1)"
      echo "---- $name" >>"$log"
      GPUKIT_SDPA_PORTABLE=1 "$t" "$filter" --include-ignored --test-threads=1 --show-output >>"$log" 2>&1
    else
      echo "---- $name" >>"$log"
      "$t" --include-ignored --test-threads=1 --show-output >>"$log" 2>&1
    fi
    rc=$?
    line="$(grep -E '^test result:' "$log" | tail -n 1)"
    p=$(echo "$line" | sed -nE 's/.* ([0-9]+) passed.*/\1/p')
    f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
    i=$(echo "$line" | sed -nE 's/.* ([0-9]+) ignored.*/\1/p')
    if [ -z "$p" ] || { [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ]; }; then
      broken=$((broken + 1))
      echo "   $name: CRASHED (exit $rc); see $log"
    else
      passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + i))
      echo "   $name: $p passed, $f failed"
    fi
  done
  # Failures and per-test timings are worth seeing in the short output too.
  grep -E '^test .* FAILED' "$log" | head -20
  grep -A2 -E '^thread .* panicked' "$log" | head -40
  grep -E '^\[gpu\]' "$log" | head -60
fi

# The Python package: its wheel and pytest installed into a folder on PYTHONPATH for the
# machine's own python3 (which has numpy, torch and cupy for the interop tests).
pysite="$here/py-site"
python_setup() {
  [ -f "$pysite/.complete" ] && return 0
  rm -rf "$pysite"
  python3 -m pip install -q --no-index --no-deps --target "$pysite" "$here"/python/*.whl \
    >>"$out/python-setup.log" 2>&1 &&
    touch "$pysite/.complete"
}
pyrun() { PYTHONPATH="$pysite${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"; }
if [ "$mode" = test ] || [ "$mode" = all ] || [ "$mode" = python ]; then
  if python_setup; then
    # No network here for the default model: the LLM tests use a random-weight HF model.
    export GPUKIT_TEST_MODEL="${GPUKIT_TEST_MODEL:-/tmp/gpukit-py-test-model}"
    [ -f "$GPUKIT_TEST_MODEL/.complete" ] ||
      python3 "$repo/gpukit-py/tests/make_test_model.py" "$GPUKIT_TEST_MODEL" --shape tiny 2>&1 | tail -n 2
    echo "---- pytest gpukit-py/tests gpukit-cli/tests" >>"$log"
    (cd "$repo" && GPUKIT_BIN="$here/bin/gpukit" pyrun -m pytest gpukit-py/tests gpukit-cli/tests \
      -q -rs -p no:cacheprovider --durations=8) >>"$out/pytest.log" 2>&1
    rc=$?
    cat "$out/pytest.log" >>"$log"
    line="$(grep -E '[0-9]+ (passed|failed)' "$out/pytest.log" | tail -n 1)"
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | awk '{print $1}')
    f=$(echo "$line" | grep -oE '[0-9]+ (failed|error)' | awk '{s+=$1} END {print s+0}')
    s=$(echo "$line" | grep -oE '[0-9]+ skipped' | awk '{print $1}')
    if [ -z "$p" ] && [ "${f:-0}" -eq 0 ]; then
      broken=$((broken + 1))
      echo "   pytest: CRASHED (exit $rc); see pytest.log"
    else
      passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
      echo "   pytest: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
    fi
    grep -E '^(FAILED|ERROR|SKIPPED)' "$out/pytest.log" | head -30
    grep -A12 -E 'slowest .*durations' "$out/pytest.log" | head -12
  else
    broken=$((broken + 1))
    echo "   pytest: the wheel could not be installed; see python-setup.log"
    tail -n 5 "$out/python-setup.log"
  fi
fi

if [ "$mode" = bench ] || [ "$mode" = all ]; then
  export GPUKIT_DECODE_MODELS="${GPUKIT_DECODE_MODELS:-/tmp/gpukit-decode-models}"
  for b in "$here"/benches/*; do
    [ -x "$b" ] || continue
    name="$(basename "$b")"          # <crate>__<bench>, e.g. gpukit-llm__decode
    short="${name##*__}"
    case "$short" in *"$only"*) ;; *) continue ;; esac
    if [ "$short" = decode ]; then
      echo "== building the decode models in $GPUKIT_DECODE_MODELS"
      python3 "$repo/bench/decode_models.py" "$GPUKIT_DECODE_MODELS" 2>&1 | tee "$out/decode-models.log" | tail -n 8
    elif [ "$short" = sched ]; then
      echo "== building the sched bench's models in $GPUKIT_DECODE_MODELS"
      python3 "$repo/bench/decode_models.py" "$GPUKIT_DECODE_MODELS" --models llama3.2-1b,llama3.1-8b 2>&1 | tail -n 4
    fi
    echo "== bench $name"
    "$b" --bench 2>&1 | tee "$out/bench-$short.log" | tail -n 40
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   bench $name FAILED"; broken=$((broken + 1)); continue; }
    # The peer (torch / HF transformers) times the same cases in the same run.
    py="$repo/bench/peer_$short.py"
    [ -f "$py" ] || continue
    echo "== peer $(basename "$py")"
    python3 "$py" "$out" 2>&1 | tee "$out/peer-$short.log" | tail -n 40
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   peer $(basename "$py") FAILED"; broken=$((broken + 1)); }
  done
fi

if { [ "$mode" = bench ] || [ "$mode" = all ]; } && { [ -z "$only" ] || [ "$only" = python ]; }; then
  echo "== bench python (gk.add overhead beside torch; Model.stream beside the gpukit CLI)"
  # No network here for the default model: a Llama-3.2-1B-shaped model with random weights.
  export GPUKIT_BENCH_MODEL="${GPUKIT_BENCH_MODEL:-/tmp/gpukit-py-bench-model}"
  [ -f "$GPUKIT_BENCH_MODEL/.complete" ] || [ -f "$GPUKIT_BENCH_MODEL" ] ||
    python3 "$repo/gpukit-py/tests/make_test_model.py" "$GPUKIT_BENCH_MODEL" --shape 1b 2>&1 | tail -n 2
  if python_setup; then
    pyrun "$repo/bench/python.py" "$out" "$here/bin/gpukit" 2>&1 | tee "$out/bench-python.log" | tail -n 12
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   bench python FAILED"; broken=$((broken + 1)); }
  else
    echo "   bench python: the wheel could not be installed; see python-setup.log"
    broken=$((broken + 1))
  fi
fi

if { [ "$mode" = bench ] || [ "$mode" = all ]; } && { [ -z "$only" ] || [ "$only" = audio ]; }; then
  echo "== bench audio (batched STFT, mel spectrogram and MFCC beside torch / torchaudio)"
  if python_setup; then
    pyrun "$repo/bench/audio.py" "$out" 2>&1 | tee "$out/bench-audio.log" | tail -n 10
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   bench audio FAILED"; broken=$((broken + 1)); }
  else
    echo "   bench audio: the wheel could not be installed; see python-setup.log"
    broken=$((broken + 1))
  fi
fi

if { [ "$mode" = bench ] || [ "$mode" = all ]; } && { [ -z "$only" ] || [ "$only" = tts ]; }; then
  echo "== bench tts (the default voice's real-time factor on CUDA and 2 CPU threads beside onnxruntime)"
  if python_setup; then
    pyrun "$repo/bench/tts.py" "$out" 2>&1 | tee "$out/bench-tts.log" | tail -n 8
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   bench tts FAILED"; broken=$((broken + 1)); }
  else
    echo "   bench tts: the wheel could not be installed; see python-setup.log"
    broken=$((broken + 1))
  fi
fi

if { [ "$mode" = bench ] || [ "$mode" = all ]; } && { [ -z "$only" ] || [ "$only" = serve ]; }; then
  echo "== bench serve (gpukit serve under load beside HF transformers' batched generate)"
  export GPUKIT_DECODE_MODELS="${GPUKIT_DECODE_MODELS:-/tmp/gpukit-decode-models}"
  python3 "$repo/bench/decode_models.py" "$GPUKIT_DECODE_MODELS" \
    --models "${GPUKIT_SERVE_MODELS:-llama3.2-1b,llama3.1-8b}" 2>&1 | tail -n 2
  python3 "$repo/bench/serve.py" "$out" "$here/bin/gpukit" \
    --models "${GPUKIT_SERVE_MODELS:-llama3.2-1b,llama3.1-8b}" ${GPUKIT_SERVE_ARGS:-} 2>&1 |
    tee "$out/bench-serve.log" | tail -n 30
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "   bench serve FAILED"; broken=$((broken + 1)); }
fi

if [ "$mode" = sanitize ]; then
  for tool in memcheck racecheck; do
    for t in "$here"/tests/*; do
      [ -x "$t" ] || continue
      name="$(basename "$t")"
      case "$name" in *hf_parity*) continue ;; esac
      slog="$out/sanitize-$tool.log"
      echo "---- $name" >>"$slog"
      compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 9 \
        "$t" --include-ignored --test-threads=1 >>"$slog" 2>&1
      rc=$?
      errors="$(grep -E '(ERROR|RACECHECK) SUMMARY' "$slog" | tail -n 1 | sed 's/^=* *//')"
      line="$(grep -E '^test result:' "$slog" | tail -n 1)"
      echo "   $tool $name: exit $rc; $errors; $line"
      if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    done
  done
fi

if [ $broken -gt 0 ]; then
  echo "gpu-bundle: $broken test binaries crashed"
fi
echo "gpu-bundle: $passed passed, $((failed + broken)) failed, $skipped skipped"
[ $((failed + broken)) -eq 0 ]
