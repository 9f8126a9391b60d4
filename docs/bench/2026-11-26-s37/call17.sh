#!/usr/bin/env bash
# Session 37, call 17 (H200): call 16 with gemv_variants.py's trigf (the next launch let start once
# each group's first stage has landed) against main (after x lands).
V=trigf exec bash docs/bench/2026-11-26-s37/call16.sh
