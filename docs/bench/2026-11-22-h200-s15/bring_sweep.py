import cupy as cp, numpy as np, os, sys
here = os.path.dirname(os.path.abspath(__file__)); root = os.path.dirname(here)
inc = "-I" + os.path.join(root, "gpukit-kernels/cuda")
def mod(path, defs=()):
    return cp.RawModule(code=open(path).read(), options=("-std=c++17", inc, "--gpu-architecture=sm_90a") + tuple(defs))
cur = mod(os.path.join(root, "gpukit-kernels/cuda/gemv.cu")).get_function("gemv_bf16_vec_m1")
def bring(defs, name="gemv_bring_bf16"):
    return mod(os.path.join(here, "bring.cu"), ("-DEVICT_FIRST",) + defs).get_function(name)
variants = {"x4c16": (bring(("-DCW=16", "-DXREG=4")), 16, 544), "b2x4": (bring(("-DXREG2=4",), "gemv_bring2_bf16"), 16, 512), "b2x7": (bring(("-DXREG2=7",), "gemv_bring2_bf16"), 16, 512)}
for f, _, _ in variants.values(): f.max_dynamic_shared_size_bytes = 232448 - 2048
SM = cp.cuda.Device().attributes["MultiProcessorCount"]
try:
    import torch
except Exception:
    torch = None
def timeit(fn, reps=50, trials=11):
    s = cp.cuda.get_current_stream()
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
print(f"copy {copy_gbs:.0f} GB/s SMs {SM}", flush=True); del a, b
def split(rows, k):
    s = 1
    while s * 2 <= min(8, max(1, k * 2 // 2048)): s *= 2
    return max(s, 2) if rows < 4096 else s
def plan(N, K, ring, stage_min, cw):
    row = K * 2; S = split(N, K); G = cw // S
    RPS = max(1, stage_min // row); sb = RPS * row
    NST = min(32, ring // sb) // G * G
    if NST < G: return None
    smem = NST * sb + row
    if NST < 2 or smem > 232448 - 4096: return None
    return S, RPS, NST, smem
# (ring bytes, stage min, piece, blocks per SM)
cfgs = [(128 << 10, 16 << 10, 1 << 20, 1), (192 << 10, 16 << 10, 1 << 20, 1), (96 << 10, 16 << 10, 1 << 20, 1)]
for r in range(2):
  for k, nn in [(4096, 14336), (14336, 4096), (2048, 8192), (8192, 2048)]:
    bytes_ = nn * k * 2
    copies = min(16, max(2, -(-160 * 2**20 // bytes_)))
    ws = [(cp.random.uniform(-1, 1, nn * k, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16) for _ in range(copies)]
    x = (cp.random.uniform(-1, 1, k, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16)
    out = cp.zeros(nn, cp.uint16); out2 = cp.zeros(nn, cp.uint16)
    S = split(nn, k)
    g = min(4 * SM, -(-nn // (8 // S)))
    t = timeit(lambda i: cur((g,), (256,), (x, ws[i % copies], np.uint64(0), out, np.uint32(nn), np.uint32(k), np.uint32(S))))
    line = f"k={k:5d} n={nn:5d} S={S} cur {t*1000:6.2f}us {bytes_/t/1e6/copy_gbs*100:5.1f}%"
    if torch is not None:
        tw = [torch.from_dlpack(w).view(torch.bfloat16).view(nn, k) for w in ws]
        tx = torch.from_dlpack(x).view(torch.bfloat16).view(1, k)
        tt = timeit(lambda i: torch.matmul(tx, tw[i % copies].t()))
        line += f" torch {tt*1000:6.2f}us {bytes_/tt/1e6/copy_gbs*100:5.1f}%"
    cur((g,), (256,), (x, ws[0], np.uint64(0), out, np.uint32(nn), np.uint32(k), np.uint32(S)))
    ref = out.get()
    print(line, flush=True)
    for vname, (f, cw, nthr) in variants.items():
      line = f"   {vname:5s}"
      for ring, smin, piece, bpm in cfgs:
        p = plan(nn, k, ring, smin, cw)
        if p is None: line += " | -"; continue
        S_, RPS, NST, smem = p
        gr = SM * bpm
        out2.fill(0)
        f((gr,), (nthr,), (x, ws[0], np.uint64(0), out2, np.uint32(nn), np.uint32(k), np.uint32(S_), np.uint32(RPS), np.uint32(NST), np.uint32(piece)), shared_mem=smem)
        cp.cuda.get_current_stream().synchronize()
        same = bool((out2.get() == ref).all())
        t2 = timeit(lambda i: f((gr,), (nthr,), (x, ws[i % copies], np.uint64(0), out2, np.uint32(nn), np.uint32(k), np.uint32(S_), np.uint32(RPS), np.uint32(NST), np.uint32(piece)), shared_mem=smem))
        line += f" | {ring>>10}K/{RPS}r/{NST}st/p{min(piece,99999)}/b{bpm}: {t2*1000:6.2f} {bytes_/t2/1e6/copy_gbs*100:5.1f}%{'' if same else ' DIFF'}"
      print(line, flush=True)
    del ws
