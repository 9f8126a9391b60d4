#!/usr/bin/env bash
# Session 41, call 1 (H200): session 40's prepared next-ll.sh as it stood (llt against main).
exec bash docs/bench/2026-11-26-s40/next-ll.sh
