#!/usr/bin/env bash
# Session 40, call 3 (H200): the probe only, three alternated rounds — HEAD's decode ring ("old",
# target/old-attn), HEAD's with the exponentials of rows 8–15 skipped where a block has at most 8
# rows ("oldskip", target/s40-oldskip: a measurement copy that reads the row count from the
# arguments, so it is wrong for prefill), call 2's shared scores ("shared", target/s40-shared) and
# this tree's (shared scores with that skip, "sharedskip").
VARIANTS="old:target/old-attn oldskip:target/s40-oldskip shared:target/s40-shared sharedskip:gpukit-kernels/cuda" \
  exec bash docs/bench/2026-11-26-s40/probe4.sh
