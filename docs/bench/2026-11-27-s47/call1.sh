#!/usr/bin/env bash
# Session 47, call 1 (H200): HEAD's bundle — every GPU test (run.sh test: the driver, memory,
# scheduler, GGUF-model, HF-directory, HF-parity, determinism and op tests, the attention ones
# again on the portable kernels), for issue 4's resolution.
set -u
. docs/bench/device-calls.sh
call_start
all_tests "$OUT/test" 585
pack_out call1
