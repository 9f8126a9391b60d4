import cupy as cp, numpy as np, os
here = os.path.dirname(os.path.abspath(__file__)); root = os.path.dirname(here)
inc = "-I" + os.path.join(root, "gpukit-kernels/cuda")
f = cp.RawModule(code=open(os.path.join(here, "bring.cu")).read(), options=("-std=c++17", inc, "--gpu-architecture=sm_90a", "-DEVICT_FIRST", "-DCW=16", "-DXREG=4", "-lineinfo")).get_function("gemv_bring_bf16")
f.max_dynamic_shared_size_bytes = 232448 - 2048
k, nn = 4096, 14336
ws = [(cp.random.uniform(-1, 1, nn * k, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16) for _ in range(3)]
x = (cp.random.uniform(-1, 1, k, dtype=cp.float32).view(cp.uint32) >> 16).astype(cp.uint16)
out = cp.zeros(nn, cp.uint16)
S, RPS, NST = 4, 2, 12
smem = NST * RPS * k * 2 + k * 2
for i in range(3):
    f((132,), (16 * 32 + 32,), (x, ws[i % 3], np.uint64(0), out, np.uint32(nn), np.uint32(k), np.uint32(S), np.uint32(RPS), np.uint32(NST), np.uint32(1 << 20)), shared_mem=smem)
cp.cuda.get_current_stream().synchronize()
print("ok")
