# rms_norm variants on the GPU machine with cupy (session 13): the block-per-row kernel before
# 05e33f1 (its norm.cu saved as sweep/norm_old.cu) against the row groups at NORM_VEC 1, 2, 4.
# Run from a directory sweep/ at the repository root: python3 sweep/norm_sweep.py
import cupy as cp, numpy as np, os
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
inc = "-I" + os.path.join(root, "gpukit-kernels/cuda")
def mod(path, defs=()):
    return cp.RawModule(code=open(path).read(), options=("-std=c++17", inc, "--gpu-architecture=sm_90a") + tuple(defs))
old = mod(os.path.join(here, "norm_old.cu"))
new = {v: mod(os.path.join(root, "gpukit-kernels/cuda/norm.cu"), (f"-DNORM_VEC={v}",)) for v in (1, 2, 4)}

def timeit(fn, reps=20, trials=15):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(3): fn()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(trials):
            e0.record(s)
            for _ in range(reps): fn()
            e1.record(s); e1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(e0, e1) / reps)
    return float(np.median(ts))

n = 1 << 28
a = cp.zeros(n, cp.uint16); b = cp.empty_like(a)
copy_ms = timeit(lambda: cp.copyto(b, a), 10, 5)
copy_gbs = 2 * n * 2 / copy_ms / 1e6
print(f"copy {copy_gbs:.0f} GB/s"); del a, b

def bf16(x):
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
def f32(u):
    return (u.astype(np.uint32) << 16).view(np.float32)

res = []
for rows, hidden in [(16384, 4096), (8192, 2048), (8192, 4096), (2048, 8192), (32768, 1024), (4096, 2048)]:
    rng = np.random.default_rng(0)
    xh = bf16(rng.uniform(-1, 1, (rows, hidden))); wh = bf16(rng.uniform(0.5, 1.5, hidden))
    x, w = cp.asarray(xh), cp.asarray(wh)
    out = cp.empty_like(x)
    byts = 2 * rows * hidden * 2
    f = old.get_function("rms_norm_bf16")
    nvec = hidden // 8
    th = min(max(1 << (nvec - 1).bit_length(), 32), 256)
    ms = timeit(lambda: f((rows,), (th,), (x, w, out, np.uint32(hidden), np.float32(1e-5))))
    ref = f32(cp.asnumpy(out)).copy()
    line = [f"{rows}x{hidden}: old {ms*1e3:7.1f} us {100*byts/ms/1e6/copy_gbs:5.1f}%"]
    for v, m in new.items():
        g = m.get_function("rms_norm_bf16")
        group = min(max(1 << (max(1, -(-nvec // v)) - 1).bit_length(), 32), 1024)
        for B in (64, 128, 256):
            block = max(group, B); rpb = block // group; grid = -(-rows // rpb)
            out.fill(0)
            try:
                ms = timeit(lambda: g((grid,), (block,), (x, w, out, np.uint32(rows), np.uint32(hidden), np.uint32(group), np.float32(1e-5))))
            except Exception as e:
                line.append(f"v{v} g{group} b{block} failed: regs {g.num_regs} maxthreads {g.max_threads_per_block}: {e}"); continue
            err = float(np.max(np.abs(f32(cp.asnumpy(out)) - ref)))
            line.append(f"v{v} g{group} b{block} r{g.num_regs} {ms*1e3:7.1f} us {100*byts/ms/1e6/copy_gbs:5.1f}% err {err:.2g}")
            res.append(dict(rows=rows, hidden=hidden, vec=v, group=group, block=block, us=ms*1e3))
    print("\n  ".join(line), flush=True)
print("old regs", old.get_function("rms_norm_bf16").num_regs, old.get_function("add_rms_norm_bf16").num_regs)
