#!/usr/bin/env bash
# Session 31, call 2 (H200): the decode ring with the early count (the working tree) against
# HEAD's (target/ab/base), three alternated rounds in session 30's probe, outputs bit for bit.
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_ab 3 bits
