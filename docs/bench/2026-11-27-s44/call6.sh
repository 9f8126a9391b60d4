#!/usr/bin/env bash
# Session 44, call 6 (H100): the whole ops bench beside torch, once, on HEAD's bundle (9e08fe7,
# as in call 4): the current table of record for issues 4 and 5, beside call 5's H200 run.
# (Refactored after it ran onto device-calls.sh's whole_ops_bench: the same steps.)
set -u
. docs/bench/device-calls.sh
o="$OUT"
whole_ops_bench call6
