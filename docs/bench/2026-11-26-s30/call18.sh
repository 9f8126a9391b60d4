#!/bin/bash
# Session 30, call 18: the split merge with whole groups of 16 splits on a path without bounds
# (working tree) against cae72e8 (target/ab/base), alternated in the probe, outputs compared.
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_ab 3 bits
