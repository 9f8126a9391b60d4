#!/usr/bin/env bash
# Session 36, call 10 (H200): the decode ring in session 35's probe, three alternated rounds —
# a6134c8's kernel ("old", carried as target/old-attn/attention.cu) and this tree's
# ("new": four first tiles asked of L2 where a split has 16 or more), on pre-swizzled caches;
# then the bundle's attention and cache tests, determinism, the decode rows of the ops bench,
# and memcheck on the attention test.
# (Refactored after it ran: the steps moved to decode_ab.sh, shared by calls 2, 3, 5, 10, 11.)
SAN="memcheck 585 sdpa_attention::cuda" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
