#!/usr/bin/env bash
# Session 41, call 7 (H100): main's bundle (product code as of session 40's d89a4ae: the decode
# ring at every cache length, verified until now on the H200 only) on the other card: the ops
# tests (every decode case on the ring), determinism, the GGUF and HF-directory models, HF
# parity on four models; then the whole ops bench beside torch, twice.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_PARITY_DIR=/tmp/gpukit-parity
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader
unpack_bundle
(python3 gpukit-llm/tests/hf_parity/make_models.py $GPUKIT_PARITY_DIR > $OUT/parity-models.log 2>&1 \
  && touch $GPUKIT_PARITY_DIR/.complete; echo "parity models rc $? at ${SECONDS}s" >> $OUT/parity-models.log) &
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
wait; tail -1 $OUT/parity-models.log
run_test hf_parity $b/tests/gpukit_llm__hf_parity
echo "tests done at ${SECONDS}s"
for r in 1 2; do bench_ops "$OUT/ops$r" "" 200 > "$OUT/ops$r.txt"; head -1 "$OUT/ops$r.txt"; done
grep -E "^(device|gemv|sdpa decode)" "$OUT/ops2.txt"
