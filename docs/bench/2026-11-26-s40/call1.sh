#!/usr/bin/env bash
# Session 40, call 1 (H200): the decode ring whose consumer warps each score all 64 keys of a
# tile and keep a quarter of the head dimension ("new", this tree) against HEAD's 16-key shares
# and four-warp merge ("old", carried as target/old-attn/attention.cu), in session 35's probe,
# three alternated rounds (outputs differ in rounding, so only the tests judge them); then the
# bundle's attention and cache tests, determinism, the decode rows of the ops bench beside torch,
# and memcheck on the attention test.
SAN="memcheck 560 sdpa_attention::cuda" exec bash docs/bench/2026-11-26-s36/decode_ab.sh
