#!/usr/bin/env bash
# Session 37, call 10 (H100): call 4's steps on an H100, bundle B now of a3aaa9c (the small ring
# for rows of at most 8 KiB), A of 170c487.
exec bash docs/bench/2026-11-26-s37/call4.sh
