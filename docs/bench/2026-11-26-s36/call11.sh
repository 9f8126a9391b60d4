#!/usr/bin/env bash
# Session 36, call 11 (H100, final kernels): the decode ring in session 35's probe, three alternated rounds —
# session 35's kernel (cca9de1, "old", carried as target/old-attn/attention.cu) and this tree's
# ("new": two MMA chains for the scores, the first tiles' lines asked of L2 by the producer
# warp's lanes, four of them where a split has 16 or more), on pre-swizzled caches; then the
# bundle's attention and cache tests,
# determinism, and the decode rows of the ops bench.
# (Refactored after it ran: the steps moved to decode_ab.sh, shared by calls 2, 3, 5, 10, 11.)
SAN="racecheck 560 sdpa_at_device_position_and_decode_state::cuda" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
