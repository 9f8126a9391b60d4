#!/bin/bash
# Session 30, call 11: the decode ring before (target/ab/base: bece7e7's attention.cu and common.cuh)
# and after this session's changes (the working tree), alternated in the probe, outputs compared
# bit for bit; then the new kernel traced.
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_ab 2 bits trace
