# Session 14 (cupy on the H200): run from a directory sweep/ at the repository root, with ring.cu beside it:
# python3 sweep/ring_sweep.py. Results: ring-sweep.txt.
import cupy as cp, numpy as np, os, itertools
here = os.path.dirname(os.path.abspath(__file__)); root = os.path.dirname(here)
inc = "-I" + os.path.join(root, "gpukit-kernels/cuda")
def mod(path, defs=()):
    return cp.RawModule(code=open(path).read(), options=("-std=c++17", inc, "--gpu-architecture=sm_90a") + tuple(defs))
cur = mod(os.path.join(root, "gpukit-kernels/cuda/gemv.cu")).get_function("gemv_bf16_vec_m1")
cfgs = [(6, 2048), (4, 2048), (3, 2048), (8, 1024), (12, 1024), (4, 4096), (3, 4096)]
rings = {}
for d, p in cfgs:
    f = mod(os.path.join(here, "ring.cu"), (f"-DRING_D={d}", f"-DPIECE={p}")).get_function("gemv_ring_bf16")
    smem = 8 * d * p
    f.max_dynamic_shared_size_bytes = smem
    per_sm = min(8, 233472 // (smem + 1024 + 1024 + 8 * 8 * d + 64))
    rings[(d, p)] = (f, smem, per_sm)
SM = cp.cuda.Device().attributes["MultiProcessorCount"]
def timeit(fn, reps=50, trials=11):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for i in range(5): fn(i)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(trials):
            e0.record(s)
            for i in range(reps): fn(i)
            e1.record(s); e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1) / reps)
    return float(np.median(ts))
n = 1 << 28
a = cp.zeros(n, cp.uint16); b = cp.empty_like(a)
copy_gbs = 2 * n * 2 / timeit(lambda i: cp.copyto(b, a), 10, 5) / 1e6
print(f"copy {copy_gbs:.0f} GB/s", flush=True); del a, b
def split(rows, k):
    s = 1
    while s * 2 <= min(8, max(1, k * 2 // 2048)): s *= 2
    return max(s, 2) if rows < 4096 else s
for r in range(2):
  for k, nn in [(2048, 8192), (8192, 2048), (4096, 14336), (14336, 4096), (896, 4864)]:
    bytes_ = nn * k * 2
    copies = min(16, max(2, -(-160 * 2**20 // bytes_)))
    ws = [cp.random.uniform(-1, 1, nn * k, dtype=cp.float32).view(cp.uint32) >> 16 for _ in range(copies)]
    ws = [w.astype(cp.uint16) for w in ws]
    x = (cp.random.uniform(-1, 1, k, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16)
    out = cp.zeros(nn, cp.uint16); out2 = cp.zeros(nn, cp.uint16)
    S = split(nn, k)
    g = min(4 * SM, -(-nn // (8 // S)))
    t = timeit(lambda i: cur((g,), (256,), (x, ws[i % copies], np.uint64(0), out, np.uint32(nn), np.uint32(k), np.uint32(S))))
    line = f"k={k:5d} n={nn:5d} S={S} cur {t*1000:6.2f}us {bytes_/t/1e6/copy_gbs*100:5.1f}%"
    ref = (out.astype(cp.uint32) << 16).view(cp.float32).get()
    for (d, p), (f, smem, per_sm) in rings.items():
        gr = min(per_sm * SM, -(-nn // (8 // S)))
        out2.fill(0)
        f((gr,), (256,), (x, ws[0], np.uint64(0), out2, np.uint32(nn), np.uint32(k), np.uint32(S)), shared_mem=smem)
        cur((g,), (256,), (x, ws[0], np.uint64(0), out, np.uint32(nn), np.uint32(k), np.uint32(S)))
        got = (out2.astype(cp.uint32) << 16).view(cp.float32).get(); ref = (out.astype(cp.uint32) << 16).view(cp.float32).get()
        err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-9))
        t2 = timeit(lambda i: f((gr,), (256,), (x, ws[i % copies], np.uint64(0), out2, np.uint32(nn), np.uint32(k), np.uint32(S)), shared_mem=smem))
        line += f" | D{d}x{p}/{per_sm}: {t2*1000:6.2f} {bytes_/t2/1e6/copy_gbs*100:5.1f}% e{err:.0e}"
    print(line, flush=True)
    del ws
