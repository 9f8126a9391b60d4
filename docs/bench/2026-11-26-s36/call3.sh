#!/usr/bin/env bash
# Session 36, call 3: the decode ring in session 35's probe, three alternated rounds — the
# committed kernel (a6134c8, "old", carried as target/old-attn/attention.cu) and this tree's
# ("new": the split that merges a head chosen by tickets drawn as each split begins its last
# tile), on pre-swizzled caches; then the bundle's attention and cache tests, determinism, and
# the decode rows of the ops bench.
# (Refactored after it ran: the steps moved to decode_ab.sh, shared by calls 2, 3, 5, 10, 11.)
SAN="memcheck 520 sdpa_at_device_position_and_decode_state::cuda" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
