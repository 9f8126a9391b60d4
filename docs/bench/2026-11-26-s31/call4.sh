#!/usr/bin/env bash
# Session 31, call 4 (H100): HEAD's decode ring alone in session 30's probe, three rounds, then
# traced (where the GQA 4 8k call's time goes on this card).
set -u
. docs/bench/2026-11-26-s30/probe.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
probe_main 3
