#!/bin/bash
# Session 30, call 12: the decode ring with split 0 merging as the splits finish (working tree)
# against bece7e7 (target/ab/base), alternated in the probe; the outputs differ in rounding (the
# merge now adds one split at a time), so they are compared within bf16 tolerance; then traced.
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_ab 2 bf16 trace
