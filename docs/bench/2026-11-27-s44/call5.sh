#!/usr/bin/env bash
# Session 44, call 5 (H200): the whole ops bench beside torch, once, on HEAD's bundle (9e08fe7,
# as in call 4): the current table of record for issues 4 and 5. (As run, the rows' grep
# lacked `linear`, so the call's output left out the linear prefill rows; they are in ops1.txt.)
# (Refactored after it ran onto device-calls.sh's whole_ops_bench: the same steps, with `linear`.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
whole_ops_bench call5
