#!/usr/bin/env bash
# Session 36, call 2: the decode ring in session 35's probe, three alternated rounds — the
# committed kernel ("old", carried as target/old-attn/attention.cu), this tree's ("new": the
# scores over two MMA chains, the first tiles' lines asked of L2 by the producer warp's lanes),
# and this tree's with four chains ("ch8", -DATTN_QK_CHAINS=8), all on pre-swizzled caches; then
# the bundle's attention and cache tests, determinism, and the decode rows of the ops bench.
# (Refactored after it ran: the steps moved to decode_ab.sh, shared by calls 2, 3, 5, 10, 11.)
EXTRA="ch8:-DATTN_QK_CHAINS=8" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
