#!/bin/bash
# Session 30, call 14: the decode ring with the split merge in two passes (weights, then sums; working tree)
# against bece7e7 (target/ab/base), alternated in the probe; the outputs differ in rounding (the
# weights now come from one maximum over all splits), so they are compared within bf16
# tolerance; then traced.
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_ab 2 bf16 trace
