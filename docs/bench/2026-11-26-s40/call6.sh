#!/usr/bin/env bash
# Session 40, call 6 (H200): the GPU tests of the bundle whose decode attention takes the Hopper
# ring at every length (launch::SDPA_RING_MIN_KEYS = 1): every ops test (each decode case on the
# ring), determinism, the GGUF and HF-directory models, HF parity on four models (their decode
# steps read caches far below 4096 keys), the attention tests with the portable kernels forced;
# then memcheck on the attention and decode-state tests with the time left.
set -u
. docs/bench/device-calls.sh
o="$OUT"
export GPUKIT_PARITY_DIR=/tmp/gpukit-parity
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
unpack_bundle
(python3 gpukit-llm/tests/hf_parity/make_models.py $GPUKIT_PARITY_DIR > $OUT/parity-models.log 2>&1 \
  && touch $GPUKIT_PARITY_DIR/.complete; echo "parity models rc $? at ${SECONDS}s" >> $OUT/parity-models.log) &
run_test ops $b/tests/gpukit_ops__ops
run_test determinism $b/tests/gpukit_ops__determinism
run_test gguf $b/tests/gpukit_llm__gguf_model
run_test hf_dir $b/tests/gpukit_llm__hf_dir
GPUKIT_SDPA_PORTABLE=1 run_test ops-portable $b/tests/gpukit_ops__ops sdpa
wait; tail -1 $OUT/parity-models.log
run_test hf_parity $b/tests/gpukit_llm__hf_parity
echo "tests done at ${SECONDS}s"
sanitize memcheck 575 $b/tests/gpukit_ops__ops sdpa
