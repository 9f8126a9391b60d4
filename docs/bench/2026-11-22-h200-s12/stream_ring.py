# Copy-only model of sdpa_decode's K/V ring (session 12): blocks stream tiles of 16 KiB K +
# 16 KiB V through a cp.async ring and optionally read shared memory `work` times per tile.
# Run on the GPU machine with cupy: python3 stream_ring.py
import cupy as cp, numpy as np
src = r'''
extern "C" __global__ void stream(const uint4* __restrict__ k, const uint4* __restrict__ v, float* out,
                                  int tiles, int stages, int work) {
    extern __shared__ __align__(16) uint4 sm[];
    const int T = blockDim.x, per = 1024 / T;   // 1024 uint4 = 16 KiB per K tile
    const uint4* kb = k + (size_t)blockIdx.x * tiles * 1024;
    const uint4* vb = v + (size_t)blockIdx.x * tiles * 1024;
    auto issue = [&](int t) {
        uint4* s = sm + (t % stages) * 2048;
        if (t < tiles) {
            for (int i = 0; i < per; ++i) {
                int idx = threadIdx.x + i * T;
                unsigned a = (unsigned)__cvta_generic_to_shared(s + idx);
                unsigned b = (unsigned)__cvta_generic_to_shared(s + 1024 + idx);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(a), "l"(kb + t * 1024 + idx));
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(b), "l"(vb + t * 1024 + idx));
            }
        }
        asm volatile("cp.async.commit_group;");
    };
    for (int s = 0; s + 1 < stages; ++s) issue(s);
    unsigned acc = 0;
    for (int t = 0; t < tiles; ++t) {
        issue(t + stages - 1);
        if (stages >= 6) asm volatile("cp.async.wait_group 5;");
        else if (stages == 5) asm volatile("cp.async.wait_group 4;");
        else if (stages == 4) asm volatile("cp.async.wait_group 3;");
        else if (stages == 3) asm volatile("cp.async.wait_group 2;");
        else if (stages == 2) asm volatile("cp.async.wait_group 1;");
        else asm volatile("cp.async.wait_group 0;");
        __syncthreads();
        const uint4* s = sm + (t % stages) * 2048;
        for (int w = 0; w < work; ++w) { uint4 x = s[(threadIdx.x * 7 + w * 33) % 2048]; acc ^= x.x + x.w; }
        __syncthreads();
    }
    if (acc == 0x12345678) out[0] = acc;
}
'''
mod = cp.RawModule(code=src, options=("-std=c++17",))
f = mod.get_function("stream")
f.max_dynamic_shared_size_bytes = 227 * 1024
def run(blocks, threads, stages, tiles, work=0, reps=50):
    total = blocks * tiles * 1024  # uint4 per tensor
    k = cp.zeros(total * 4, dtype=cp.uint32).view(cp.uint32)
    v = cp.zeros(total * 4, dtype=cp.uint32)
    out = cp.zeros(1, dtype=cp.float32)
    smem = stages * 2048 * 16
    args = (k, v, out, np.int32(tiles), np.int32(stages), np.int32(work))
    for _ in range(3): f((blocks,), (threads,), args, shared_mem=smem)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    for _ in range(reps): f((blocks,), (threads,), args, shared_mem=smem)
    e.record(); e.synchronize()
    us = cp.cuda.get_elapsed_time(s, e) * 1000 / reps
    gb = 2 * total * 16 / 1e9
    print(f"blocks {blocks:4d} thr {threads} stages {stages} tiles {tiles:3d} work {work:3d}: {gb*1e3:7.1f} MB {us:7.2f} us {gb / (us * 1e-6):7.0f} GB/s", flush=True)
for cfg in [(256,128,3,8),(256,128,3,16),(256,128,3,32),(264,128,3,8),(132,128,6,16),(132,256,6,16),(132,256,4,16),(528,128,2,4),(396,128,2,6),(256,256,3,8),(132,512,6,16)]:
    run(*cfg)
for w in [16, 64]:
    run(256,128,3,8,w); run(132,256,6,16,w)
