#!/usr/bin/env bash
# Session 40, call 2 (H200): the decode ring whose consumer warps each score their 16 keys of a
# tile, share the scores through shared memory and keep a quarter of the head dimension ("new",
# this tree; no four-warp merge) against HEAD's ("old", target/old-attn/attention.cu), in
# session 35's probe, three alternated rounds; then the bundle's attention and cache tests,
# determinism, the decode rows of the ops bench beside torch, and racecheck on the attention test.
SAN="racecheck 580 sdpa_attention::cuda" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
