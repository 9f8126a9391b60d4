#!/bin/bash
# Session 30, call 1: the decode ring in a standalone probe (timing as the ops bench), then a
# trace of where one launch's time goes (trace_patch.py).
set -u
. docs/bench/2026-11-26-s30/probe.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
probe_main 2
