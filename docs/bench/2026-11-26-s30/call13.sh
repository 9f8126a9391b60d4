#!/bin/bash
# Session 30, call 13: bece7e7's decode ring traced, with the last split's merge broken down
# (when each group of staged partials is at hand, when the sums are done).
set -u
. docs/bench/2026-11-26-s30/probe.sh
probe_trace
