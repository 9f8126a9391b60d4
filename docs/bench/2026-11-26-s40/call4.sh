#!/usr/bin/env bash
# Session 40, call 4 (H200): session 39's prepared diagnostic (docs/bench/2026-11-26-s39/
# next-barx.sh): barx (main with every consumer warp held at one barrier of all eight after its
# last batch) and jld (the joint last stage) against main, three alternated rounds at the 32 MiB
# shapes on 128 blocks.
exec bash docs/bench/2026-11-26-s39/next-barx.sh
