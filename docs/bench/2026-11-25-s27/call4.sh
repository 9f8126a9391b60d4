#!/usr/bin/env bash
# Session 27, call 4: HF parity on call 3's bundle (the random-weight models built on the machine).
B=target/gpu-bundle; gunzip -f $B/tests/gpukit_llm__hf_parity.gz; chmod +x $B/tests/gpukit_llm__hf_parity
export GPUKIT_CACHE_DIR=/tmp/gpukit-cache GPUKIT_PARITY_DIR=/tmp/gpukit-parity
python3 gpukit-llm/tests/hf_parity/make_models.py /tmp/gpukit-parity > $OUT/parity-models.log 2>&1 && touch /tmp/gpukit-parity/.complete
tail -4 $OUT/parity-models.log
$B/tests/gpukit_llm__hf_parity --include-ignored --test-threads=1 --show-output > $OUT/parity.txt 2>&1; echo rc $?
grep -E "cuda bf16|test result" $OUT/parity.txt
