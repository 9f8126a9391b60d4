#!/usr/bin/env python3
"""Session 33: gemv.cu's ring with its first stages copied into shared memory before the PDL wait
(for weights nothing writes while kernels run). Writes OUTDIR/gemv_main.cu and gemv_early.cu; in
the early copy, npre >= 100 selects the early copies (min(mine, nst) stages), else as main."""
import sys

src, out = sys.argv[1], sys.argv[2]
text = open(src).read()
old_head = """            for (unsigned int t = 0; t < mine && t < npre; ++t) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_prefetch_l2(w + r0 * K, nr * row_bytes);
            }
            pdl_wait();
            // x first (one copy; the consumers need it for every stage), then the stages.
            bulk_load(xs, x, row_bytes, &sh.x_full);
            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine; ++t) {
"""
new_head = """            const unsigned int early = npre >= 100 ? min(mine, nst) : 0;
            for (unsigned int t = 0; !early && t < mine && t < npre; ++t) {
                const unsigned long long r0 = (unsigned long long)(blockIdx.x + t * gridDim.x) * R;
                const unsigned int nr = (unsigned int)min((unsigned long long)R, N - r0);
                bulk_prefetch_l2(w + r0 * K, nr * row_bytes);
            }
            if (!early) {
                pdl_wait();
                bulk_load(xs, x, row_bytes, &sh.x_full);
            }
            unsigned int s = 0, phase = 0;
            unsigned long long r0 = (unsigned long long)blockIdx.x * R;
            for (unsigned int t = 0; t < mine || (early && t == early); ++t) {
                if (early && t == early) {
                    pdl_wait();
                    bulk_load(xs, x, row_bytes, &sh.x_full);
                    if (t == mine) break;
                }
"""
assert text.count(old_head) == 1
open(f"{out}/gemv_main.cu", "w").write(text)
early = text.replace(old_head, new_head)
open(f"{out}/gemv_early.cu", "w").write(early)
# early2: the same with room for two blocks per SM (registers capped for 2 x 288 threads).
bound = "__launch_bounds__(GEMV_RING_THREADS, 1) gemv_ring_"
assert early.count(bound) == 1
early2 = early.replace(bound, bound.replace(", 1)", ", 2)"))
open(f"{out}/gemv_early2.cu", "w").write(early2)
# early3: early2 with every thread letting the next kernel launch at entry.
entry = "    if (warp == GEMV_RING_WARPS) {\n        // The producer"
assert early2.count(entry) == 1
open(f"{out}/gemv_early3.cu", "w").write(early2.replace(entry, "    pdl_launch_dependents();\n" + entry))
