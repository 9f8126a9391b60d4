#!/usr/bin/env bash
# Session 37, call 18 (H200): call 16 with gemv_variants.py's trigw (the next launch let start
# right after the consumers' PDL wait, before x lands) against main (after x lands).
V=trigw exec bash docs/bench/2026-11-26-s37/call16.sh
