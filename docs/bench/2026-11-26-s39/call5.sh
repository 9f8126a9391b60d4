#!/usr/bin/env bash
# Session 39, call 5: per-stage timelines (session 38's "timeline" copy, probe.cu
# -DPROBE_TIMELINE) of the small ring at (896, 4864) on 8 stages (the rule) and on 10 (all of a
# block's), and at (2048, 1536) on 2 and 3; two rounds.
set -u
. docs/bench/device-calls.sh
o=$OUT
gemv_probe_variants docs/bench/2026-11-26-s38/gemv_variants.py
gemv_probe_build tl timeline -DPROBE_TIMELINE
for r in 1 2; do
  gemv_probe_run tl 896,4864,4,2,8,8 896,4864,4,2,10,10 2048,1536,4,4,2,2 2048,1536,4,4,3,3
done > $o/timeline.txt 2>&1
grep -v timeline $o/timeline.txt | python3 docs/bench/2026-11-26-s37/summarize.py
grep timeline $o/timeline.txt | cut -c1-400
