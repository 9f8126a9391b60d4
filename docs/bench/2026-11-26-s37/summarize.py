#!/usr/bin/env python3
"""Summarizes probe.cu lines from stdin: one row per (k, n, R, S, nst, npre, variant) with its
rounds' µs, the first error and the blocks a multiprocessor holds; other lines pass through."""
import collections
import re
import sys

t = collections.defaultdict(list)
for line in sys.stdin:
    m = re.match(r"(\S+)\s+R=(\d+) S=(\d+) nst=(\d+)\s+k=(\d+)\s+n=(\d+)\s+([\d.]+) us.*sum\|x w\| (\S+)(?:\s+(\d+)/SM)?", line)
    if m:
        t[m.group(5, 6, 2, 3, 4, 1)].append((float(m[7]), m[8], m[9] or "?"))
    elif line.strip():
        print(line.rstrip())
for k in sorted(t, key=lambda k: (int(k[0]), int(k[1]), k[2:])):
    print("k=%s n=%s R=%s S=%s nst=%-2s %-12s" % k, " ".join("%.2f" % x for x, _, _ in t[k]),
          "err", t[k][0][1], t[k][0][2] + "/SM")
