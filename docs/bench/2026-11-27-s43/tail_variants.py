#!/usr/bin/env python3
"""Session 43: the ring GEMV's stage releases, on gemv.cu as of 4771fde (x in registers).

Every consumer thread of a group arrives on a stage's empty barrier after reading it (S · 32
arrivals on one shared-memory word, each with release semantics), also for the stages whose slot
is never refilled: a block's last nst stages. At (896, 4864) that is 8 of a block's 9–10 stages,
including the one the call ends on.

norel   a stage is released only where the producer will refill its slot (tb + nst < mine)

Usage: tail_variants.py SRC OUTDIR -> OUTDIR/gemv_norel.cu."""
import sys

src, outdir = sys.argv[1:3]
t = open(src).read()
old = """                mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);"""
assert t.count(old) == 1
t = t.replace(old, """                if (tb + nst < mine) mbar_arrive(&empty[s]);
                ring_next(s, phase, nst, G);""")
open(f"{outdir}/gemv_norel.cu", "w").write(t)
print("norel")
