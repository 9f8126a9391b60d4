#!/usr/bin/env bash
# Session 43, call 13 (H100): bundle B's HF-parity tests (random-weight models at real shapes
# against HF transformers; their decode steps take the small ring's 4-row kernel, now with x in
# registers), until the call's limit.
set -u
. docs/bench/device-calls.sh
o="$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
unpack_bundle
export GPUKIT_PARITY_DIR=/tmp/gpukit-parity
timeout 150 python3 gpukit-llm/tests/hf_parity/make_models.py $GPUKIT_PARITY_DIR > $o/parity-models.log 2>&1
echo "models rc $? at ${SECONDS}s"; tail -3 $o/parity-models.log
timeout $((290 - SECONDS)) $b/tests/gpukit_llm__hf_parity --include-ignored --test-threads=1 > $o/hf_parity.txt 2>&1
echo "hf_parity rc $? at ${SECONDS}s: $(grep -E '^test result' $o/hf_parity.txt)"
grep -E "^test |FAILED|panicked" $o/hf_parity.txt | head -20
