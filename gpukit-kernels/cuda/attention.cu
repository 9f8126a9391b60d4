// Scaled dot-product attention on tensor cores (mma.sync m16n8k16, f16/bf16 in, f32 accumulate).
//
// out = softmax(Q·Kᵀ·scale + bias + mask)·V. Q [batch, q_heads, q_len, D], K/V [batch, kv_heads,
// kv_len, D], out like Q; any strides for batch, head and row (multiples of 8 elements: rows are
// read with 16-byte copies), the head dimension contiguous. Query head h reads KV head
// h / (q_heads / kv_heads) (GQA/MQA, nothing replicated). Causal masking is offset: query i sits
// at position kv_len − q_len + i and sees keys at positions ≤ its own (and, with a sliding window
// w, only those > its position − w). ALiBi adds slope_h · (key − query position) with the
// slopes of Press et al. 2022 (the geometric sequence, interleaved for non-power-of-two heads,
// as HF transformers builds them).
//
// Online softmax as in FlashAttention-2 (Dao 2023): the scores never leave registers; each warp
// keeps a running max m and sum l per query row (in the log2 domain) and rescales its output
// accumulator. K/V tiles go through shared memory with cp.async (double-buffered).
//
// sdpa_prefill: a block of 4 warps owns 128 consecutive queries of one head (32 per warp; 64 and
//   16 for head_dim 256) and walks the key tiles the causal mask leaves visible; a warp masks
//   only the tiles its rows see in part and skips those they do not see. Blocks with the most
//   work start first.
// sdpa_decode (flash-decoding): for few query rows per KV head (GQA group × q_len ≤ 16), a block
//   owns one (batch, KV head, split of the keys) and every query row of that KV head; its four
//   warps take 16 keys of each 64-key tile, and are merged in a fixed order. With one split
//   the block writes the output, else a partial (m, l, unnormalised O) per row that
//   sdpa_combine merges over the splits in a fixed order. No atomics: the result depends only
//   on the shape, bit for bit.
#include "common.cuh"
#include "attention.cuh"

// Orders this thread's shared-memory writes (cp.async included) before later reads by the async
// proxy (wgmma operands), sm_90+.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// ALiBi slope of head h of n (Press et al. 2022; HF `build_alibi_tensor`).
__device__ __forceinline__ float alibi_slope(unsigned h, unsigned n) {
    unsigned p = 1;
    while (p * 2 <= n) p *= 2;
    if (h < p) return exp2f(-8.0f * (float)(h + 1) / (float)p);
    return exp2f(-4.0f * (float)(2 * (h - p) + 1) / (float)p);
}

// Query head h of sequence b: its first Q and output rows, and the first K and V rows of the KV
// head it reads (h / (q_heads / kv_heads): GQA without replication).
template <typename T> struct HeadRows {
    const T *q, *k, *v;
    T* o;
    __device__ __forceinline__ HeadRows(const T* q_, const T* k_, const T* v_, T* out, const AttnArgs& a,
                                        unsigned b, unsigned h) {
        const unsigned kvh = h / (a.q_heads / a.kv_heads);
        q = q_ + b * a.q_stride[0] + h * a.q_stride[1];
        k = k_ + b * a.k_stride[0] + kvh * a.k_stride[1];
        v = v_ + b * a.v_stride[0] + kvh * a.v_stride[1];
        o = out + b * a.o_stride[0] + h * a.o_stride[1];
    }
};

// Keys [key_begin, key_end) any of the prefill block's rows first .. first + BM − 1 can see
// (key_begin a multiple of BN; shift = kv_len − q_len, the first query's position).
template <int BM, int BN>
__device__ __forceinline__ void prefill_keys(const AttnArgs& a, unsigned first, int shift, unsigned& key_begin,
                                             unsigned& key_end) {
    key_end = a.kv_len;
    key_begin = 0;
    if (a.causal) {
        const unsigned last = min(a.q_len, first + BM) - 1;
        key_end = min(a.kv_len, (unsigned)(shift + (int)last) + 1);
        if (a.window) {
            const int lo = shift + (int)first - (int)a.window + 1;
            key_begin = lo > 0 ? ((unsigned)lo / BN) * BN : 0;
        }
    }
}

// Q fragments of a warp's m-tiles read from shared memory by ldmatrix (QRegs holds them in
// registers).
template <typename T, int D> struct QSmem {
    const T* q;  // the warp's first row in the Q tile (row stride D + SDPA_TILE_PAD), at this lane's ldmatrix row
    __device__ __forceinline__ void get(int mt, int kk, unsigned (&f)[4]) const {
        ldsm_x4(f[0], f[1], f[2], f[3], q + mt * 16 * (D + SDPA_TILE_PAD) + 16 * kk);
    }
};

// Element offset of (r, c) in an R-row tile stored as D / 64 column blocks of R rows × 128 bytes
// whose 16-byte chunks are XOR-swizzled by r % 8 (c a multiple of 8; tiles 1024-byte aligned).
template <int R> __device__ __forceinline__ int sw128_offset(int r, int c) {
    return (c >> 6) * (R * 64) + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3);
}

// A K or V tile as 64-row tiles in the 128-byte swizzle the tensor memory accelerator writes
// (sdpa_decode_ring), beside PaddedKV's padded rows.
struct SwizzledKV {
    static __device__ __forceinline__ int at(int r, int c) { return sw128_offset<64>(r, c); }
};
// Rows of D elements whose 16-byte chunks are swizzled by r % 8 within each 128-byte block: where
// a 1-d copy of a pre-swizzled cache's rows (kv_col) lands them (sdpa_decode_ring's PRE).
template <typename T, int D> struct RowSwizzledKV {
    // kv_col without its test for a partial block (the ring's rows are whole blocks).
    static_assert(D * sizeof(T) % 128 == 0, "rows of whole 128-byte blocks");
    static __device__ __forceinline__ int at(int r, int c) { return r * D + (int)kv_swizzle<T>(r, c); }
};
template <typename T, int D, bool PRE> struct RingLayout {
    using type = SwizzledKV;
};
template <typename T, int D> struct RingLayout<T, D, true> {
    using type = RowSwizzledKV<T, D>;
};

// Starts copying keys key0 .. key0 + BN of one KV head into shared memory (rows past kv_len
// are zero-filled), from K/V in the layout a.kv_swizzled names (key0 a multiple of 8).
template <typename T, int D, int BN, int THREADS>
__device__ __forceinline__ void load_kv(T* ks, T* vs, const T* kh, const T* vh, const AttnArgs& a,
                                        unsigned key0) {
    constexpr int LD = D + SDPA_TILE_PAD, CH = D / 8;
    if constexpr (THREADS % CH == 0 && BN % (THREADS / CH) == 0) {
        // Each thread copies one fixed 16-byte column of every (THREADS / CH)-th row; where that
        // step is a multiple of 8 rows, its source column in the swizzled layout is fixed too.
        constexpr int RS = THREADS / CH;
        const int c = (threadIdx.x % CH) * 8, r0 = threadIdx.x / CH;
        const long long kst = a.k_stride[2], vst = a.v_stride[2];
        const T* kp = kh + (long long)(key0 + r0) * kst;
        const T* vp = vh + (long long)(key0 + r0) * vst;
        T* kd = ks + r0 * LD + c;
        T* vd = vs + r0 * LD + c;
        const auto col = [&](int i) { return kv_col<T>(RS % 8 == 0 ? r0 : r0 + i * RS, c, D, a.kv_swizzled); };
        // A fixed trip count, and no per-row test when the whole tile is in range.
        if (key0 + BN <= a.kv_len) {
#pragma unroll
            for (int i = 0; i < BN / RS; ++i) {
                const unsigned sc = col(i);
                cp_async16(kd + i * RS * LD, kp + sc, true);
                cp_async16(vd + i * RS * LD, vp + sc, true);
                kp += RS * kst;
                vp += RS * vst;
            }
        } else {
#pragma unroll
            for (int i = 0; i < BN / RS; ++i) {
                const bool ok = key0 + r0 + i * RS < a.kv_len;
                const unsigned sc = col(i);
                cp_async16(kd + i * RS * LD, ok ? kp + sc : kh, ok);
                cp_async16(vd + i * RS * LD, ok ? vp + sc : vh, ok);
                kp += RS * kst;
                vp += RS * vst;
            }
        }
    } else {
        for (int i = threadIdx.x; i < BN * CH; i += THREADS) {
            const int r = i / CH, c = (i % CH) * 8;
            const unsigned key = key0 + r, sc = kv_col<T>(key, c, D, a.kv_swizzled);
            const bool ok = key < a.kv_len;
            cp_async16(ks + r * LD + c, ok ? kh + key * a.k_stride[2] + sc : kh, ok);
            cp_async16(vs + r * LD + c, ok ? vh + key * a.v_stride[2] + sc : vh, ok);
        }
    }
    cp_async_commit();
}

// How a warp's rows see a key tile [lo, hi]: 0 = not at all (skip), 1 = partly (mask), 2 = all.

// AttnArgs (in gpukit_shared.cuh): strides in elements for batch, head and row; the decode
// fields (key_begin, chunk, splits, stages, partial, position) as gpukit_kernels::AttentionArgs
// documents them. partial: [batch, kv_heads, splits, SDPA_DECODE_ROWS, 2 + D] f32 for the
// split-K kernel, [batch, kv_heads, splits, rows, D + 4] for the ring.

// MT m-tiles of 16 query rows per warp: with MT = 2 each K/V fragment read from shared memory
// serves 32 rows (half the shared-memory traffic per MMA), and the block's Q tile sits in shared
// memory (ahead of the K/V stages) to leave registers for the two accumulators; with MT = 1 (head
// dim 256) the Q fragments stay in registers.
template <typename T, int D, int BN, int WARPS, int MT>
__device__ __forceinline__ void sdpa_prefill(const T* __restrict__ q, const T* __restrict__ k,
                                             const T* __restrict__ v, T* __restrict__ out, const AttnArgs& a) {
    extern __shared__ __align__(16) unsigned char attn_smem[];
    constexpr int LD = D + SDPA_TILE_PAD, TILE = BN * LD, WM = 16 * MT, BM = WM * WARPS, THREADS = 32 * WARPS;
    constexpr int QTILE = MT > 1 ? BM * LD : 0;
    T* qs = reinterpret_cast<T*>(attn_smem);
    T* smem = qs + QTILE;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned mtile = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const HeadRows<T> hr(q, k, v, out, a, b, h);
    const T *qh = hr.q, *kh = hr.k, *vh = hr.v;
    T* oh = hr.o;
    const unsigned first = mtile * BM, wfirst = first + warp * WM;
    const int shift = (int)a.kv_len - (int)a.q_len;
    const int wpos_min = shift + (int)wfirst, wpos_max = wpos_min + WM - 1;
    Rows rows[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        rows[mt].pos[0] = shift + (int)(wfirst + 16 * mt + g);
        rows[mt].pos[1] = rows[mt].pos[0] + 8;
        rows[mt].slope[0] = rows[mt].slope[1] = a.alibi ? alibi_slope(h, a.q_heads) * LOG2E : 0.0f;
    }
    unsigned qa[MT > 1 ? 1 : D / 16][4];
    if constexpr (MT == 1) {
        const unsigned row = wfirst + g;
        load_q<T, D>(qa, row < a.q_len ? qh + row * a.q_stride[2] : nullptr,
                     row + 8 < a.q_len ? qh + (row + 8) * a.q_stride[2] : nullptr);
    } else {
        // The block's Q rows into shared memory (rows past q_len zero-filled), its own group.
        constexpr int CH = D / 8;
        for (int i = threadIdx.x; i < BM * CH; i += THREADS) {
            const int r = i / CH, c = (i % CH) * 8;
            const bool ok = first + r < a.q_len;
            cp_async16(qs + r * LD + c, ok ? qh + (first + r) * a.q_stride[2] + c : qh, ok);
        }
        cp_async_commit();
    }
    const QSmem<T, D> qsm{qs + (warp * WM + (lane & 15)) * LD + (lane >> 4) * 8};
    unsigned key_begin, key_end;
    prefill_keys<BM, BN>(a, first, shift, key_begin, key_end);
    State<D> st[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) st[mt].init();
    if (key_begin < key_end) {
        load_kv<T, D, BN, THREADS>(smem, smem + TILE, kh, vh, a, key_begin);
        int stage = 0;
        for (unsigned key0 = key_begin; key0 < key_end; key0 += BN) {
            T* ks = smem + stage * 2 * TILE;
            if (key0 + BN < key_end) {
                T* nx = smem + (stage ^ 1) * 2 * TILE;
                load_kv<T, D, BN, THREADS>(nx, nx + TILE, kh, vh, a, key0 + BN);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();
            const int view = tile_view(a, key0, key0 + BN - 1, wpos_min, wpos_max);
#define SDPA_ATTEND(MASK, ALIBI)                                                                   \
            if constexpr (MT == 1)                                                                 \
                attend<T, D, BN / 8, MASK, ALIBI>(qa, ks, ks + TILE, 0, key0, rows[0], a, st[0]);  \
            else                                                                                   \
                attend_tiles<T, D, BN / 8, MT, MASK, ALIBI, PaddedKV<D>>(qsm, ks, ks + TILE, 0, key0, rows, a, st);
            if (a.alibi) {
                if (view == 2) { SDPA_ATTEND(false, true) }
                else if (view == 1) { SDPA_ATTEND(true, true) }
            } else {
                if (view == 2) { SDPA_ATTEND(false, false) }
                else if (view == 1) { SDPA_ATTEND(true, false) }
            }
#undef SDPA_ATTEND
            __syncthreads();
            stage ^= 1;
        }
    }
    cp_async_wait<0>();  // with no visible keys the Q copy is still pending: never exit before it
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        finish_sum<D>(st[mt]);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const unsigned i = wfirst + 16 * mt + g + 8 * r;
            if (i >= a.q_len) continue;
            const float inv = st[mt].l[r] > 0.0f ? 1.0f / st[mt].l[r] : 0.0f;
            T* orow = oh + i * a.o_stride[2];
#pragma unroll
            for (int n = 0; n < D / 8; ++n)
                *reinterpret_cast<unsigned*>(orow + 8 * n + 2 * t) =
                    pack2<T>(st[mt].o[n][2 * r] * inv, st[mt].o[n][2 * r + 1] * inv);
        }
    }
}

// The decode block's query rows g and g + 8 of the 16 a KV head's group covers (row r is query
// head kvh·group + r / q_len, query r % q_len; rows past group·q_len are zero): positions,
// ALiBi slopes and Q fragments.
template <typename T, int D>
__device__ __forceinline__ void decode_rows(const T* __restrict__ q, const AttnArgs& a, unsigned b, unsigned kvh,
                                            Rows& rows, unsigned (&qa)[D / 16][4]) {
    const int g = (threadIdx.x & 31) >> 2;
    const unsigned group = a.q_heads / a.kv_heads, nrows = group * a.q_len;
    const int shift = (int)a.kv_len - (int)a.q_len;
    const T* qrow[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const unsigned rr = g + 8 * r, h = kvh * group + rr / a.q_len, i = rr % a.q_len;
        const bool ok = rr < nrows;
        rows.pos[r] = shift + (int)i;
        rows.slope[r] = a.alibi && ok ? alibi_slope(h, a.q_heads) * LOG2E : 0.0f;
        qrow[r] = ok ? q + b * a.q_stride[0] + h * a.q_stride[1] + i * a.q_stride[2] : nullptr;
    }
    load_q<T, D>(qa, qrow[0], qrow[1]);
}

// a.stages K/V tiles of 64 keys in a ring: tile i + stages − 1 is copied while tile i is used
// (three on Hopper, two where two blocks of three do not fit an SM, one for head_dim 256; the
// launch sizes the shared memory). Empty copy groups past the block's keys keep the count of
// pending groups the same on every iteration.
template <typename T, int D>
__device__ __forceinline__ void sdpa_decode(const T* __restrict__ q, const T* __restrict__ k,
                                            const T* __restrict__ v, T* __restrict__ out, const AttnArgs& a) {
    extern __shared__ __align__(16) unsigned char attn_smem[];
    T* smem = reinterpret_cast<T*>(attn_smem);
    constexpr int BN = SDPA_DECODE_KEYS, LD = D + SDPA_TILE_PAD, TILE = BN * LD;
    const int warp = threadIdx.x >> 5;
    const unsigned split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const unsigned group = a.q_heads / a.kv_heads, nrows = group * a.q_len;
    const T* kh = k + b * a.k_stride[0] + kvh * a.k_stride[1];
    const T* vh = v + b * a.v_stride[0] + kvh * a.v_stride[1];
    Rows rows;
    unsigned qa[D / 16][4];
    decode_rows<T, D>(q, a, b, kvh, rows, qa);
    const unsigned key_begin = a.key_begin + split * a.chunk;
    const unsigned key_end = min(a.kv_len, key_begin + a.chunk);
    State<D> st;
    st.init();
    const unsigned S = min(max(a.stages, 1u), 3u);
    for (unsigned s = 0; s + 1 < S; ++s) {
        T* ks = smem + s * 2 * TILE;
        if (key_begin + s * BN < key_end) load_kv<T, D, BN, SDPA_THREADS>(ks, ks + TILE, kh, vh, a, key_begin + s * BN);
        else cp_async_commit();
    }
    unsigned stage = 0;
    for (unsigned key0 = key_begin; key0 < key_end; key0 += BN) {
        const unsigned next = key0 + (S - 1) * BN, ns = (stage + S - 1) % S;
        T* nx = smem + ns * 2 * TILE;
        if (next < key_end) load_kv<T, D, BN, SDPA_THREADS>(nx, nx + TILE, kh, vh, a, next);
        else cp_async_commit();
        if (S >= 3) cp_async_wait<2>();
        else if (S == 2) cp_async_wait<1>();
        else cp_async_wait<0>();
        __syncthreads();
        const T* ks = smem + stage * 2 * TILE;
        decode_attend<T, D, PaddedKV<D>>(qa, ks, ks + TILE, warp, key0, rows, a, st);
        __syncthreads();
        stage = stage + 1 == S ? 0 : stage + 1;
    }
    finish_sum<D>(st);
    float* p = a.partial + (((unsigned long long)b * a.kv_heads + kvh) * a.splits + split) * 16 * (2 + D);
    merge_warps<D>(st, reinterpret_cast<float*>(attn_smem), nrows, [] { __syncthreads(); },
                   [&](unsigned r, unsigned c, float4 o, float m, float l) {
                       if (a.splits == 1) {
                           const unsigned h = kvh * group + r / a.q_len, i = r % a.q_len;
                           store_out4<T>(out + b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c, o, l);
                       } else {
                           float* pr = p + r * (2 + D);
                           if (c == 0) *reinterpret_cast<float2*>(pr) = make_float2(m, l);
                           *reinterpret_cast<float2*>(pr + 2 + c) = make_float2(o.x, o.y);
                           *reinterpret_cast<float2*>(pr + 4 + c) = make_float2(o.z, o.w);
                       }
                   });
}

// Merges the splits of sdpa_decode: one block per (row, KV head, batch) of G = blockDim / D
// groups of D threads (the launch makes blockDim a multiple of D and of 32, at most 1024). Group j takes
// splits j, j + G, …, SDPA_COMBINE_UNROLL of them at a time with every load issued before any is
// used: the kernel is a few rounds of L2 latency, and the launch gives each group at most one
// such round where 1024 threads allow. The groups' sums are then added in group order. The
// order is fixed by the shape: deterministic.
template <typename T>
__device__ __forceinline__ void sdpa_combine(T* __restrict__ out, const AttnArgs& a, unsigned D) {
    __shared__ float part[1024];
    __shared__ float lpart[32], scratch[32];
    const unsigned r = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
    const unsigned group = a.q_heads / a.kv_heads;
    if (r >= group * a.q_len) return;
    const unsigned G = blockDim.x / D, j = tid / D, c = tid % D;
    const unsigned RS = 2 + D;
    const float* p = a.partial + (((unsigned long long)b * a.kv_heads + kvh) * a.splits * 16 + r) * RS;
    const unsigned long long step = 16ull * RS;
    // The largest m over the splits (a max: exact in any order), a split per thread.
    float mm = -GPUKIT_INF;
    for (unsigned s = tid; s < a.splits; s += blockDim.x) mm = fmaxf(mm, p[s * step]);
    mm = block_max(mm, scratch);
    const float base = mm == -GPUKIT_INF ? 0.0f : mm;
    float l = 0.0f, o = 0.0f;
    for (unsigned s0 = j; s0 < a.splits; s0 += SDPA_COMBINE_UNROLL * G) {
        float ms[SDPA_COMBINE_UNROLL], ls[SDPA_COMBINE_UNROLL], os[SDPA_COMBINE_UNROLL];
#pragma unroll
        for (int u = 0; u < SDPA_COMBINE_UNROLL; ++u) {
            const unsigned s = s0 + u * G;
            const float* ps = p + (s < a.splits ? s : 0) * step;
            ms[u] = ps[0];
            ls[u] = ps[1];
            os[u] = ps[2 + c];
        }
#pragma unroll
        for (int u = 0; u < SDPA_COMBINE_UNROLL; ++u) {
            if (s0 + u * G < a.splits) {
                const float f = exp2f(ms[u] - base);
                l += ls[u] * f;
                o += os[u] * f;
            }
        }
    }
    part[tid] = o;
    if (c == 0) lpart[j] = l;
    __syncthreads();
    if (j != 0) return;
    float lt = 0.0f, ot = 0.0f;
    for (unsigned gi = 0; gi < G; ++gi) {
        lt += lpart[gi];
        ot += part[gi * D + c];
    }
    const unsigned h = kvh * group + r / a.q_len, i = r % a.q_len;
    out[b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c] = from_f32<T>(lt > 0.0f ? ot / lt : 0.0f);
}

// ---- Hopper decode on a tensor-copy ring (sm_90+) ------------------------------------------------
//
// sdpa_decode_ring (head_dim 64 and 128): the flash-decoding of sdpa_decode on a persistent grid
// of one block per multiprocessor, dealt the units (batch, KV head, split of the keys) round-robin.
// The block's producer warp copies each unit's 64-key K and V tiles with the tensor memory
// accelerator (cp.async.bulk.tensor through the tensor maps tk and tv: 64 × 64 boxes in the
// 128-byte swizzle, completion counted on an mbarrier per slot) into a ring of a.stages slots,
// while the four consumer warps attend as in sdpa_decode, 16 keys of each tile apiece. From a KV
// cache laid out pre-swizzled (PRE; the entry points' _swz), each tile is instead two 1-d bulk
// copies of its contiguous K and V rows, which land in RowSwizzledKV, as free of bank conflicts
// for ldmatrix as the tensor copies' swizzle and 0.3–2.0 µs faster on the H200 (a swizzled
// tensor copy moves lines of at most 128 bytes). The ring
// runs on across units, so a block never waits for its next unit's first tile, and before the PDL
// wait the producer asks L2 for its first unit's first tiles (below). Rows of a unit's last tile past
// kv_len hold whatever the cache holds there (tensor copies) or the slot held before (1-d
// copies, which stop at kv_len): the mask hides their scores, and the consumers zero
// those V rows (0 · NaN would not be 0).
//
// The splits merge in the same kernel: each unit writes its partial (unnormalised O, then m and
// l) to the workspace and counts itself on its (batch, KV head)'s counter; the unit that counts
// last reads every split's partial in split order, writes the output and returns the counter to
// zero, so the counters (zero before the first launch) are zero between launches. No float
// atomics: the result depends only on the shape, bit for bit.
#define RING_CONSUMERS SDPA_RING_CONSUMERS
#define RING_THREADS (32 * RING_CONSUMERS + 32)

// A tensor map (the driver's opaque CUtensorMap), passed by value.
struct __align__(64) TensorMap {
    unsigned long long opaque[16];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// Copies the box at coordinates (c0, c1, c2, c3) of tensor map `map` into shared memory at dst
// (1024-byte aligned for the swizzle), counting its bytes on barrier b; the lines are marked
// evict-first in L2 (the cache is read once per step).
__device__ __forceinline__ void tma_load_4d(void* dst, const TensorMap* map, int c0, int c1, int c2, int c3,
                                            unsigned long long* b) {
    asm volatile("{\n .reg .b64 pol;\n"
                 " createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
                 " cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], pol;\n}"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(b))
                 : "memory");
}

// Asks L2 for the box at coordinates (c0, c1, c2, c3) of tensor map `map` (no shared memory, no
// barrier, no wait).
__device__ __forceinline__ void tma_prefetch_4d(const TensorMap* map, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];"
                 ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

// Unit u's (batch, KV head) index bh = b · kv_heads + kvh and its keys [begin, end).
struct RingUnit {
    unsigned bh, b, kvh, begin, end;
    __device__ __forceinline__ RingUnit(unsigned u, const AttnArgs& a) {
        const unsigned split = u % a.splits;
        bh = u / a.splits;
        b = bh / a.kv_heads;
        kvh = bh % a.kv_heads;
        begin = a.key_begin + split * a.chunk;
        end = min(a.kv_len, begin + a.chunk);
    }
};

#define RING_MERGE 16

// A row of a decode ring partial: D unnormalised O values, then m and l (and two unused floats,
// so rows stay 16-byte aligned). The partials of a unit are its nrows rows, back to back, and
// the units follow one another, so a head's partials are one contiguous block.
template <int D> __device__ constexpr unsigned ring_row_floats() { return D + 4; }

// A head's partials read from p (`ring_row_floats` floats a row, nrows rows a split): through
// L2 from the workspace (STAGED false), or from the copy in shared memory, group g of
// RING_MERGE splits counted on bars[g] (STAGED true).
template <int D, bool STAGED> struct RingPartials {
    const float* p;
    unsigned nrows;
    unsigned long long* bars;
    __device__ __forceinline__ void ready(unsigned s0) const {
        if (STAGED) mbar_wait(&bars[s0 / RING_MERGE], 0);
    }
    // Row r of split sp; the next split's is split_floats() further.
    __device__ __forceinline__ const float* row(unsigned sp, unsigned r) const {
        return p + (sp * nrows + r) * ring_row_floats<D>();
    }
    __device__ __forceinline__ unsigned split_floats() const { return nrows * ring_row_floats<D>(); }
    __device__ __forceinline__ float2 ml(const float* row) const {
        const float2* x = reinterpret_cast<const float2*>(row + D);
        return STAGED ? *x : __ldcg(x);
    }
    __device__ __forceinline__ float4 o(const float* row, unsigned c) const {
        const float4* x = reinterpret_cast<const float4*>(row + c);
        return STAGED ? *x : __ldcg(x);
    }
};

// Adds the n splits from s0 (n = RING_MERGE where FULL, else at most that) of row r, columns
// c + v · D / V, to a merging thread's running (m, l, acc): every load first, then one online
// rescale for the group and the splits in order. FULL groups need no bounds on any split.
template <int D, int W, bool FULL, class Src>
__device__ __forceinline__ void ring_merge_group(const Src& src, unsigned s0, unsigned n, unsigned r, unsigned c,
                                                 float& m, float& l, float (&acc)[W]) {
    constexpr unsigned V = W / 4;
    const unsigned step = src.split_floats();
    const float* q = src.row(s0, r);
    float2 ml[RING_MERGE];
    float4 o[RING_MERGE][V];
#pragma unroll
    for (int k = 0; k < RING_MERGE; ++k) {
        const float* qk = q + (FULL ? k : min((unsigned)k, n - 1)) * step;
        ml[k] = src.ml(qk);
#pragma unroll
        for (int v = 0; v < V; ++v) o[k][v] = src.o(qk, c + v * (D / V));
    }
    float mn = m;
#pragma unroll
    for (int k = 0; k < RING_MERGE; ++k)
        if (FULL || k < (int)n) mn = fmaxf(mn, ml[k].x);
    const float base = mn == -GPUKIT_INF ? 0.0f : mn;
    const float alpha = fast_exp2(m - base);
    l *= alpha;
#pragma unroll
    for (int j = 0; j < W; ++j) acc[j] *= alpha;
#pragma unroll
    for (int k = 0; k < RING_MERGE; ++k) {
        if (FULL || k < (int)n) {
            const float f = fast_exp2(ml[k].x - base);
            l += ml[k].y * f;
#pragma unroll
            for (int v = 0; v < V; ++v) {
                acc[4 * v] += o[k][v].x * f;
                acc[4 * v + 1] += o[k][v].y * f;
                acc[4 * v + 2] += o[k][v].z * f;
                acc[4 * v + 3] += o[k][v].w * f;
            }
        }
    }
    m = mn;
}

// The last split of (batch b, KV head kvh) merges them all. Threads 0–127 each take W (4 or 8)
// columns of a row — W / 4 runs of four, D / (W / 4) apart, so a warp's 16-byte reads of a run
// are contiguous (no bank conflicts in shared memory) — and walk the splits in order,
// RING_MERGE splits at a time with all their loads (m, l and the W O values) issued before any
// is used — one round of latency per group — and an online rescale between groups, so no pass
// over the maxima comes first; the weights by the special-function unit's exp2. This is one
// block's latency-bound arithmetic at the end of the call (a trace measured 0.67 µs per 16
// splits), so the few instructions count. (ring_merge_head picks W.) Whole groups take
// ring_merge_group's path without bounds. src supplies the partials (RingPartials): ready(s0)
// before the group from split s0 is read, and rows of m, l and O.
template <typename T, int D, int W, class Src>
__device__ __forceinline__ void ring_merge_splits(const Src& src, unsigned splits, unsigned nrows,
                                                  T* __restrict__ out, const AttnArgs& a, unsigned b, unsigned kvh) {
    constexpr unsigned CW = D / W, V = W / 4;
    const unsigned group = a.q_heads / a.kv_heads;
    for (unsigned e = threadIdx.x; e < nrows * CW; e += SDPA_THREADS) {
        const unsigned r = e / CW, c = (e % CW) * 4;
        float m = -GPUKIT_INF, l = 0.0f;
        float acc[W];
#pragma unroll
        for (int j = 0; j < W; ++j) acc[j] = 0.0f;
        unsigned s0 = 0;
        for (; s0 + RING_MERGE <= splits; s0 += RING_MERGE) {
            src.ready(s0);
            ring_merge_group<D, W, true>(src, s0, RING_MERGE, r, c, m, l, acc);
        }
        if (s0 < splits) {
            src.ready(s0);
            ring_merge_group<D, W, false>(src, s0, splits - s0, r, c, m, l, acc);
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const unsigned h = kvh * group + r / a.q_len, i = r % a.q_len;
        T* dst = out + b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c;
#pragma unroll
        for (int v = 0; v < V; ++v)
            *reinterpret_cast<uint2*>(dst + v * (D / V)) =
                make_uint2(pack2<T>(acc[4 * v] * inv, acc[4 * v + 1] * inv),
                           pack2<T>(acc[4 * v + 2] * inv, acc[4 * v + 3] * inv));
    }
}

// ring_merge_splits with W = 4 columns a thread, or 8 where four would leave rows for a second
// round of the 128 threads.
template <typename T, int D, class Src>
__device__ __forceinline__ void ring_merge_head(const Src& src, unsigned splits, unsigned nrows, T* __restrict__ out,
                                                const AttnArgs& a, unsigned b, unsigned kvh) {
    if (nrows * (D / 4) <= SDPA_THREADS)
        ring_merge_splits<T, D, 4>(src, splits, nrows, out, a, b, kvh);
    else
        ring_merge_splits<T, D, 8>(src, splits, nrows, out, a, b, kvh);
}

// Most split groups the staged merge has barriers for (splits ≤ RING_MERGE · RING_MERGE_GROUPS).
#define RING_MERGE_GROUPS 9

// PRE: K and V (k, v) laid out pre-swizzled, their rows contiguous (k_stride[2] = v_stride[2] = D)
// and 16-byte aligned, copied by 1-d bulk copies; else through the tensor maps tk, tv.
template <typename T, int D, bool PRE>
__device__ __forceinline__ void sdpa_decode_ring(const T* __restrict__ q, T* __restrict__ out, AttnArgs a,
                                                 const TensorMap* tk, const TensorMap* tv, const T* k, const T* v,
                                                 unsigned* __restrict__ counters, unsigned batch) {
    constexpr int BN = SDPA_DECODE_KEYS, TILE = BN * D;
    using Layout = typename RingLayout<T, D, PRE>::type;
    const unsigned units = batch * a.kv_heads * a.splits;
    // Unit x's K and V rows from key0 on (PRE), and the bytes of a tile from key0 of keys below
    // `len` (never past the operands: len is at most the launch's kv_len).
    const auto rows_at = [&](const T* base, const long long* stride, const RingUnit& x, unsigned key0) {
        return base + x.b * stride[0] + x.kvh * stride[1] + (unsigned long long)key0 * D;
    };
    const auto tile_bytes = [](unsigned key0, unsigned len) {
        return min((unsigned)BN, len - key0) * D * (unsigned)sizeof(T);
    };
    // Before the PDL wait the producer only asks L2 for the first K and V tiles of its first unit
    // (and the tensor maps): the copies after the wait then start from L2. Only L2 prefetches
    // may come first: they overlap the previous kernel's tail and cannot read data that kernel
    // may still write (its writes land in L2). kv_len is still the launch's (the capacity when
    // *position sets it): a tile may lie past the keys read, which costs only the prefetch.
    // Two tiles where a split has at least 8 (512 keys), else one (same-run A/Bs in the ops
    // bench's four ring cases): two were 0.4–1.1 µs faster than one at 32k keys on both cards
    // and at GQA 4 8k on the H100 (0.7 µs; the same on the H200), but 0.2–0.4 µs slower at GQA
    // 8 8k (4-tile splits); three or four tiles were slower than two on the H200; one tile was
    // 0.4–1.2 µs faster than none.
    // The block's first unit is worked out before the wait as well (its end again after it, where
    // *position may shorten kv_len): its divisions cost the producer 0.17 µs before its first
    // copy otherwise. From a pre-swizzled cache the producer warp's 32 lanes
    // ask for the tiles' 128-byte lines (prefetch.global.L2), measured 0.2 µs
    // faster at GQA 8 8k than one bulk prefetch per tile, and the same within 0.05 µs elsewhere;
    // there four tiles where a split has at least 16 (1024 keys) were 0.5–0.7 µs faster than two
    // at 32k keys on the H200 (six: faster at GQA 4, slower at GQA 8; more tiles at 8-tile
    // splits: slower), never more than the unit has.
    RingUnit first(blockIdx.x, a);
    if (threadIdx.x / 32 == RING_CONSUMERS && (PRE || threadIdx.x % 32 == 0) && blockIdx.x < units) {
        if (!PRE) {
            asm volatile("prefetch.tensormap [%0];" ::"l"(tk) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"(tv) : "memory");
        }
        const unsigned most = PRE && a.chunk >= 16 * BN ? 4 : a.chunk >= 8 * BN ? 2 : 1;
        // An empty unit asks for nothing from a pre-swizzled cache (its begin may lie past kv_len,
        // where tile_bytes would not hold); the tensor maps bound their boxes themselves.
        const unsigned tiles =
            first.begin < first.end ? min(most, (first.end - first.begin + BN - 1) / BN) : PRE ? 0 : 1;
        for (unsigned i = 0; i < tiles; ++i) {
            const unsigned key0 = first.begin + BN * i;
            if (PRE) {
                prefetch_l2_lines(tile_bytes(key0, a.kv_len), threadIdx.x % 32, rows_at(k, a.k_stride, first, key0),
                                  rows_at(v, a.v_stride, first, key0));
            } else {
#pragma unroll
                for (int j = 0; j < D / 64; ++j) {
                    tma_prefetch_4d(tk, 64 * j, key0, first.kvh, first.b);
                    tma_prefetch_4d(tv, 64 * j, key0, first.kvh, first.b);
                }
            }
        }
    }
    // The dynamic part starts after the static barriers; the swizzled tiles need 1024-byte
    // alignment, which the launch leaves room for (1024 bytes more than the ring and merge).
    // The barriers are set up before the PDL wait too (this block's shared memory only): after
    // it, the producer's first copy goes out at once.
    extern __shared__ __align__(16) unsigned char attn_smem[];
    __shared__ unsigned long long full[SDPA_RING_MAX_STAGES], empty[SDPA_RING_MAX_STAGES], staged[RING_MERGE_GROUPS];
    __shared__ unsigned last;
    constexpr unsigned STAGE_BYTES = 2 * TILE * sizeof(T);
    unsigned char* base = attn_smem + ((1024u - (smem_addr(attn_smem) & 1023u)) & 1023u);
    T* ring = reinterpret_cast<T*>(base);
    const unsigned nst = a.stages;
    float* red = reinterpret_cast<float*>(base + nst * STAGE_BYTES);
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (unsigned i = 0; i < nst; ++i) {
            mbar_init(&full[i], 1);
            mbar_init(&empty[i], SDPA_THREADS);
        }
        for (unsigned i = 0; i < RING_MERGE_GROUPS; ++i) mbar_init(&staged[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    pdl_enter();
    if (a.position) {
        a.kv_len = min(a.kv_len, (unsigned)max(*a.position, 0) + a.q_len);
        first.end = min(a.kv_len, first.begin + a.chunk);
    }
    if (warp == RING_CONSUMERS) {
        // The producer: the block's tiles, in order, into slot n mod nst once its previous use
        // was released.
        if (lane == 0) {
            unsigned s = 0, phase = 0, n = 0;
            RingUnit un = first;
            for (unsigned u = blockIdx.x; u < units; u += gridDim.x, un = RingUnit(u, a)) {
                for (unsigned key0 = un.begin; key0 < un.end; key0 += BN, ++n) {
                    if (n >= nst) mbar_wait(&empty[s], phase ^ 1);
                    T* ks = ring + s * 2 * TILE;
                    if (PRE) {
                        // The rows below kv_len only (a tail's others keep older rows).
                        const unsigned bytes = tile_bytes(key0, a.kv_len);
                        mbar_expect_tx(&full[s], 2 * bytes);
                        bulk_copy(ks, rows_at(k, a.k_stride, un, key0), bytes, &full[s]);
                        bulk_copy(ks + TILE, rows_at(v, a.v_stride, un, key0), bytes, &full[s]);
                    } else {
                        mbar_expect_tx(&full[s], STAGE_BYTES);
#pragma unroll
                        for (int j = 0; j < D / 64; ++j) {
                            tma_load_4d(ks + j * BN * 64, tk, 64 * j, key0, un.kvh, un.b, &full[s]);
                            tma_load_4d(ks + TILE + j * BN * 64, tv, 64 * j, key0, un.kvh, un.b, &full[s]);
                        }
                    }
                    ring_next(s, phase, nst);
                }
            }
        }
        return;
    }
    const unsigned group = a.q_heads / a.kv_heads, nrows = group * a.q_len;
    const auto sync = [] { named_barrier(1, SDPA_THREADS); };
    unsigned s = 0, phase = 0;
    RingUnit un = first;
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x, un = RingUnit(u, a)) {
        Rows rows;
        unsigned qa[D / 16][4];
        decode_rows<T, D>(q, a, un.b, un.kvh, rows, qa);
        State<D> st;
        st.init();
        for (unsigned key0 = un.begin; key0 < un.end; key0 += BN) {
            mbar_wait(&full[s], phase);
            T* ks = ring + s * 2 * TILE;
            const bool tail = key0 + BN > a.kv_len;
            if (tail) {
                // This warp's V rows past kv_len (it reads only its own 16) to zero.
                constexpr int CH = D / 8;
                for (int i = lane; i < 16 * CH; i += 32) {
                    const int r = 16 * warp + i / CH, c = (i % CH) * 8;
                    if (key0 + r >= a.kv_len)
                        *reinterpret_cast<uint4*>(ks + TILE + Layout::at(r, c)) = make_uint4(0, 0, 0, 0);
                }
                __syncwarp();
            }
            decode_attend<T, D, Layout>(qa, ks, ks + TILE, warp, key0, rows, a, st);
            // The zeroing's writes are ordered before the producer's next copy into the slot.
            if (tail) fence_proxy_async();
            mbar_arrive(&empty[s]);
            ring_next(s, phase, nst);
        }
        finish_sum<D>(st);
        float* part = a.partial + (unsigned long long)u * nrows * ring_row_floats<D>();
        const bool whole = a.splits == 1;
        merge_warps<D>(st, red, nrows, sync, [&](unsigned r, unsigned c, float4 o, float m, float l) {
            if (whole) {
                const unsigned h = un.kvh * group + r / a.q_len, i = r % a.q_len;
                store_out4<T>(out + un.b * a.o_stride[0] + h * a.o_stride[1] + i * a.o_stride[2] + c, o, l);
            } else {
                float* pr = part + r * ring_row_floats<D>();
                *reinterpret_cast<float4*>(pr + c) = o;
                if (c == 0) *reinterpret_cast<float2*>(pr + D) = make_float2(m, l);
            }
        });
        if (whole) continue;
        // Publish the partial, then count it (as CUTLASS's generic barrier does: the block's
        // barrier, then one thread's release — cumulative over the writes the barrier ordered
        // before it — here an acquire-release add, so the last split's reads after the next
        // barrier see every partial): 0.2–0.3 µs less than a fence and an atomic.
        //
        // On the block's last unit, where the head's partials fit the ring and merge area (now
        // idle: every tile was consumed, the four-warp merge's reads came before the barrier),
        // the last split's thread 0 copies them into shared memory as soon as it knows it is
        // last: one bulk copy and barrier per RING_MERGE splits (the tensor memory accelerator
        // keeps more bytes in flight than the threads' loads do), and the merge reads them there
        // in the same order (the same bits).
        const unsigned long long first_unit = (unsigned long long)un.bh * a.splits;
        const float* head = a.partial + first_unit * nrows * ring_row_floats<D>();
        const unsigned split_floats = nrows * ring_row_floats<D>();
        const bool stage = u + gridDim.x >= units && a.splits <= RING_MERGE * RING_MERGE_GROUPS &&
                           a.splits * split_floats * 4 <= nst * STAGE_BYTES + SDPA_MERGE_BYTES(D);
        float* const staged_parts = reinterpret_cast<float*>(base);
        sync();
        if (threadIdx.x == 0) {
            unsigned old;
            asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                         : "=r"(old)
                         : "l"(&counters[un.bh])
                         : "memory");
            last = old == a.splits - 1;
            if (last) counters[un.bh] = 0;
            if (last && stage) {
                // The other splits' partials (generic stores, acquired by the add above) are
                // read next by the async proxy.
                asm volatile("fence.proxy.async.global;" ::: "memory");
                for (unsigned s0 = 0; s0 < a.splits; s0 += RING_MERGE) {
                    const unsigned bytes = min(a.splits - s0, (unsigned)RING_MERGE) * split_floats * 4;
                    mbar_expect_tx(&staged[s0 / RING_MERGE], bytes);
                    bulk_copy(staged_parts + s0 * split_floats, head + s0 * split_floats, bytes,
                              &staged[s0 / RING_MERGE]);
                }
            }
        }
        sync();
        if (!last) continue;
        if (stage)
            ring_merge_head<T, D>(RingPartials<D, true>{staged_parts, nrows, staged}, a.splits, nrows, out, a, un.b,
                                  un.kvh);
        else
            ring_merge_head<T, D>(RingPartials<D, false>{head, nrows, nullptr}, a.splits, nrows, out, a, un.b,
                                  un.kvh);
    }
}

#define SDPA_RING_BODY(T, D) sdpa_decode_ring<T, D, false>(q, out, a, &tk, &tv, nullptr, nullptr, counters, batch);
#define SDPA_RING_SWZ_BODY(T, D) sdpa_decode_ring<T, D, true>(q, out, a, nullptr, nullptr, k, v, counters, batch);
#else
// Entry points exist in every image; only sm_90+ ones have a body (the launcher picks them only
// there).
#define SDPA_RING_BODY(T, D) __trap();
#define SDPA_RING_SWZ_BODY(T, D) __trap();
#endif

#define SDPA_RING(T, NAME, D)                                                                      \
extern "C" __global__ void __launch_bounds__(RING_THREADS, 1) sdpa_decode_ring_##NAME##_d##D(      \
        const T* q, T* out, AttnArgs a, const __grid_constant__ TensorMap tk,                      \
        const __grid_constant__ TensorMap tv, unsigned* counters, unsigned batch) {                \
    SDPA_RING_BODY(T, D)                                                                           \
}                                                                                                  \
/* From a KV cache laid out pre-swizzled (rows contiguous), by 1-d bulk copies. */                 \
extern "C" __global__ void __launch_bounds__(RING_THREADS, 1) sdpa_decode_ring_##NAME##_d##D##_swz( \
        const T* q, T* out, AttnArgs a, const T* k, const T* v, unsigned* counters, unsigned batch) { \
    SDPA_RING_SWZ_BODY(T, D)                                                                       \
}
SDPA_RING(bf16, bf16, 64)
SDPA_RING(bf16, bf16, 128)
SDPA_RING(f16, f16, 64)
SDPA_RING(f16, f16, 128)

// ---- Hopper prefill on warpgroup MMA (sm_90a only) ----------------------------------------------
//
// sdpa_prefill_wgmma (head_dim 64 and 128): a block of 2 warpgroups owns 128 consecutive queries of
// one head (64 per warpgroup) and walks BN-key tiles (SDPA_WGMMA_BN: 64 at head_dim 64, where two
// blocks then share an SM, else 128) through a ring of 3 K/V stages in shared memory, copied with
// cp.async into the 128-byte-swizzled layout wgmma reads (Q and K K-major, V MN-major). Scores
// S = Q·Kᵀ come from wgmma with both operands in shared memory; P (the softmax numerators, bf16/
// f16 in registers, the accumulator layout reused as the A operand) times V from wgmma with A in
// registers. The scores of tile j + 1 are computed on the tensor cores while the softmax of tile
// j runs (FlashAttention-3's intra-warpgroup overlap, Shah et al. 2024, without warp
// specialisation). The online softmax is the FlashAttention-2 one above (same masks, sliding
// window; no ALiBi: that goes to sdpa_prefill). Fixed order everywhere: deterministic.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], unsigned long long da, unsigned long long db,
                                         int scale_d);
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs_t(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long db,
                                           int scale_d);
// d (64 × N f32, the accumulator fragments) = [d +] A·B: wgmma_ss with A (64 × 16, K-major) and B
// (N × 16, K-major) in shared memory; wgmma_rs_t with A in registers and B (16 × N) MN-major
// (transposed) in shared memory. scale_d = 0 ignores the old d.
#define WGMMA_N128(T, TY)                                                                         \
template <> __device__ __forceinline__ void wgmma_ss<T, 128>(float (&d)[64], unsigned long long da,         \
                                                       unsigned long long db, int scale_d) {           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                           \
                 : "l"(da), "l"(db), "r"(scale_d));                                               \
}                                                                                                 \
template <> __device__ __forceinline__ void wgmma_rs_t<T, 128>(float (&d)[64], const unsigned (&a)[4],   \
                                                         unsigned long long db, int scale_d) {         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));           \
}
WGMMA_N128(bf16, "bf16")
WGMMA_N128(f16, "f16")
// N = 64 (wgmma_ss: the scores of 64-key tiles at head_dim 64; wgmma_rs_t: P·V at head_dim 64):
// 32 accumulator registers.
#define WGMMA_N64(T, TY)                                                                          \
template <> __device__ __forceinline__ void wgmma_ss<T, 64>(float (&d)[32], unsigned long long da,         \
                                                      unsigned long long db, int scale_d) {            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                          \
                 : "l"(da), "l"(db), "r"(scale_d));                                               \
}                                                                                                 \
template <> __device__ __forceinline__ void wgmma_rs_t<T, 64>(float (&d)[32], const unsigned (&a)[4],   \
                                                        unsigned long long db, int scale_d) {          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                          \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                          \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));           \
}
WGMMA_N64(bf16, "bf16")
WGMMA_N64(f16, "f16")

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Keeps the compiler from moving accesses to registers an in-flight wgmma owns across this point.
template <int R> __device__ __forceinline__ void wgmma_fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"), 128-byte swizzle:
// start address, leading and stride byte offsets, all in 16-byte units.
__device__ __forceinline__ unsigned long long sw128_desc(const void* p, unsigned lbo, unsigned sbo) {
    const unsigned a = smem_addr(p);
    return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// Starts copying rows row0 .. row0 + R of a [rows, D] matrix into the swizzled layout (rows at
// or past rows_valid zero-filled), from a matrix laid out pre-swizzled where swizzled != 0
// (kv_col; row0 a multiple of 8). Each thread copies one fixed 16-byte column of every
// (THREADS / (D / 8))-th row, so its r % 8, and both swizzles, stay fixed.
template <typename T, int D, int R, int THREADS>
__device__ __forceinline__ void load_tile_sw128(T* dst, const T* src, long long stride, unsigned row0,
                                                unsigned rows_valid, unsigned swizzled) {
    constexpr int CH = D / 8, RS = THREADS / CH;
    static_assert(THREADS % CH == 0 && R % RS == 0 && RS % 8 == 0, "tile copy shape");
    const int c = (threadIdx.x % CH) * 8, r0 = threadIdx.x / CH;
    T* d = dst + sw128_offset<R>(r0, c);
    const T* p = src + (long long)(row0 + r0) * stride + kv_col<T>(r0, c, D, swizzled);
    const long long step = RS * stride;
    if (row0 + R <= rows_valid) {
#pragma unroll
        for (int r = 0; r < R; r += RS) {
            cp_async16(d + r * 64, p, true);
            p += step;
        }
    } else {
#pragma unroll
        for (int r = 0; r < R; r += RS) {
            const bool ok = row0 + r0 + r < rows_valid;
            cp_async16(d + r * 64, ok ? p : src, ok);
            p += step;
        }
    }
}

template <typename T, int D, int BN>
__device__ __forceinline__ void sdpa_prefill_wgmma(const T* __restrict__ q, const T* __restrict__ k,
                                                   const T* __restrict__ v, T* __restrict__ out,
                                                   const AttnArgs& a) {
    extern __shared__ __align__(1024) unsigned char attn_smem[];
    constexpr int BM = 128, THREADS = 256, STAGES = 3;
    T* qs = reinterpret_cast<T*>(attn_smem);
    T* kv = qs + BM * D;
    const int tid = threadIdx.x, wg = tid >> 7, wq = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const unsigned mtile = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const HeadRows<T> hr(q, k, v, out, a, b, h);
    const T *qh = hr.q, *kh = hr.k, *vh = hr.v;
    T* oh = hr.o;
    const unsigned first = mtile * BM, wfirst = first + 64 * wg + 16 * wq;
    const int shift = (int)a.kv_len - (int)a.q_len;
    const int wpos_min = shift + (int)(first + 64 * wg), wpos_max = wpos_min + 63;
    const KeyRange keys[2] = {visible_keys(a, shift + (int)(wfirst + g)), visible_keys(a, shift + (int)(wfirst + g) + 8)};
    unsigned key_begin, key_end;
    prefill_keys<BM, BN>(a, first, shift, key_begin, key_end);
    const unsigned t0 = key_begin / BN, tiles = key_end > key_begin ? (key_end + BN - 1) / BN : t0;
    auto load = [&](unsigned j) {
        T* st = kv + (j % STAGES) * 2 * BN * D;
        load_tile_sw128<T, D, BN, THREADS>(st, kh, a.k_stride[2], j * BN, a.kv_len, a.kv_swizzled);
        load_tile_sw128<T, D, BN, THREADS>(st + BN * D, vh, a.v_stride[2], j * BN, a.kv_len, a.kv_swizzled);
    };
    // Scores of tile j into acc: D / 16 wgmma of K = 16 (Q and K column blocks of 64, 32 bytes
    // per step inside a block; 8-row groups 1024 bytes apart).
    auto scores = [&](float (&acc)[BN / 2], unsigned j) {
        const T* ks = kv + (j % STAGES) * 2 * BN * D;
        wgmma_fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const T* qa = qs + (kk >> 2) * (BM * 64) + (64 * wg) * 64 + (kk & 3) * 16;
            const T* kb = ks + (kk >> 2) * (BN * 64) + (kk & 3) * 16;
            wgmma_ss<T, BN>(acc, sw128_desc(qa, 16, 1024), sw128_desc(kb, 16, 1024), kk > 0);
        }
        wgmma_commit();
    };
    load_tile_sw128<T, D, BM, THREADS>(qs, qh, a.q_stride[2], first, a.q_len, 0);
    if (t0 < tiles) load(t0);
    cp_async_commit();
    if (t0 + 1 < tiles) load(t0 + 1);
    cp_async_commit();
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    float m[2] = {-GPUKIT_INF, -GPUKIT_INF}, l[2] = {0.0f, 0.0f};
    const float sc = a.scale_log2;
    float s[BN / 2], sn[BN / 2];
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    if (t0 < tiles) {
        scores(s, t0);
        wgmma_wait_all();
        wgmma_fence_regs(s);
    }
    for (unsigned j = t0; j < tiles; ++j) {
        // Tile j + 1 has landed and every warp is done with tile j − 1's stage: refill it.
        cp_async_wait<0>();
        fence_proxy_async();
        __syncthreads();
        if (j + 2 < tiles) load(j + 2);
        cp_async_commit();
        if (j + 1 < tiles) scores(sn, j + 1);
        const unsigned key0 = j * BN;
        const int view = tile_view(a, key0, key0 + BN - 1, wpos_min, wpos_max);
        if (view != 2) {
#pragma unroll
            for (int i = 0; i < BN / 2; ++i)
                if (!keys[(i >> 1) & 1].has(key0 + 8 * (i >> 2) + 2 * t + (i & 1))) s[i] = -GPUKIT_INF;
        }
        float mx[2] = {-GPUKIT_INF, -GPUKIT_INF};
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
        float base[2], alpha[2], sum[2] = {0.0f, 0.0f};
        softmax_rows(mx, sc, m, base, alpha);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            s[i] = fast_exp2(fmaf(s[i], sc, -base[(i >> 1) & 1]));
            sum[(i >> 1) & 1] += s[i];
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + sum[r];
#pragma unroll
        for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
        // O += P·V: K = 16 keys per step (16 rows of 128 bytes); V's column blocks BN·128 bytes
        // apart (the leading offset of an MN-major operand), 8-key groups 1024 bytes apart.
        // P is packed whole before the first wgmma: registers written between the wgmma of one
        // group make ptxas fence each of them (C7519).
        const T* vs = kv + (j % STAGES) * 2 * BN * D + BN * D;
        unsigned pa[BN / 16][4];
#pragma unroll
        for (int c = 0; c < BN / 16; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) pa[c][e] = pack2<T>(s[8 * c + 2 * e], s[8 * c + 2 * e + 1]);
        wgmma_fence_regs(o);
        wgmma_fence();
#pragma unroll
        for (int c = 0; c < BN / 16; ++c) wgmma_rs_t<T, D>(o, pa[c], sw128_desc(vs + c * 16 * 64, BN * 128, 1024), 1);
        wgmma_commit();
        wgmma_wait_all();
        wgmma_fence_regs(o);
        wgmma_fence_regs(sn);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) s[i] = sn[i];
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const unsigned i = wfirst + g + 8 * r;
        if (i >= a.q_len) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        T* orow = oh + i * a.o_stride[2];
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
            *reinterpret_cast<unsigned*>(orow + 8 * n + 2 * t) =
                pack2<T>(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
}
#endif

// The wgmma prefill's entry points exist in every image; only the sm_90a one has a body (the
// launcher picks them only for that image).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SDPA_WGMMA_BODY(T, D) sdpa_prefill_wgmma<T, D, SDPA_WGMMA_BN(D)>(q, k, v, out, a);
#else
#define SDPA_WGMMA_BODY(T, D) __trap();
#endif
// Keys per tile and blocks per SM (attention::wgmma_keys and its shared memory): at
// head_dim 64, 64-key tiles keep a thread within 128 registers, so two blocks share an SM.
#define SDPA_WGMMA_BN(D) ((D) == 64 ? SDPA_WGMMA_KEYS_D64 : SDPA_WGMMA_KEYS)
#define SDPA_WGMMA_BLOCKS(D) (SDPA_WGMMA_BN(D) == 64 ? 2 : 1)
#define SDPA_WGMMA(T, NAME, D)                                                                     \
extern "C" __global__ void __launch_bounds__(256, SDPA_WGMMA_BLOCKS(D)) sdpa_prefill_wgmma_##NAME##_d##D(            \
        const T* q, const T* k, const T* v, T* out, AttnArgs a) {                                  \
    SDPA_WGMMA_BODY(T, D)                                                                          \
}
SDPA_WGMMA(f16, f16, 64)
SDPA_WGMMA(bf16, bf16, 64)
SDPA_WGMMA(f16, f16, 128)
SDPA_WGMMA(bf16, bf16, 128)

// Prefill: BN keys per tile (BN_SHORT when a.chunk asks for it: the launch's choice where the
// shared memory per block is short, e.g. sm_86/89), WARPS × MT × 16 queries per block (launch
// geometry in gpukit-kernels/src/attention.rs).
#define SDPA_HEAD(T, NAME, D, BN, BN_SHORT, WARPS, MT)                                             \
extern "C" __global__ void __launch_bounds__(32 * WARPS) sdpa_prefill_##NAME##_d##D(               \
        const T* q, const T* k, const T* v, T* out, AttnArgs a) {                                  \
    if constexpr (BN_SHORT != BN) {                                                                \
        if (a.chunk == BN_SHORT) {                                                                 \
            sdpa_prefill<T, D, BN_SHORT, WARPS, MT>(q, k, v, out, a);                              \
            return;                                                                                \
        }                                                                                          \
    }                                                                                              \
    sdpa_prefill<T, D, BN, WARPS, MT>(q, k, v, out, a);                                            \
}                                                                                                  \
extern "C" __global__ void __launch_bounds__(SDPA_THREADS) sdpa_decode_##NAME##_d##D(              \
        const T* q, const T* k, const T* v, T* out, AttnArgs a) {                                  \
    pdl_enter();                                                                                   \
    if (a.position) a.kv_len = min(a.kv_len, (unsigned)max(*a.position, 0) + a.q_len);            \
    sdpa_decode<T, D>(q, k, v, out, a);                                         \
}

#define SDPA_KERNELS(T, NAME)                                                                      \
SDPA_HEAD(T, NAME, 64, SDPA_PREFILL_KEYS, SDPA_PREFILL_KEYS, SDPA_PREFILL_WARPS, SDPA_PREFILL_Q_TILES) \
SDPA_HEAD(T, NAME, 80, SDPA_PREFILL_KEYS, SDPA_PREFILL_KEYS, SDPA_PREFILL_WARPS, SDPA_PREFILL_Q_TILES) \
SDPA_HEAD(T, NAME, 96, SDPA_PREFILL_KEYS, SDPA_PREFILL_KEYS, SDPA_PREFILL_WARPS, SDPA_PREFILL_Q_TILES) \
SDPA_HEAD(T, NAME, 128, SDPA_PREFILL_KEYS, SDPA_PREFILL_KEYS_SHORT, SDPA_PREFILL_WARPS,           \
          SDPA_PREFILL_Q_TILES)                                                                    \
SDPA_HEAD(T, NAME, 256, SDPA_PREFILL_KEYS_SHORT, SDPA_PREFILL_KEYS_SHORT, SDPA_PREFILL_WARPS, 1)   \
extern "C" __global__ void __launch_bounds__(1024)                                              \
sdpa_combine_##NAME(T* out, AttnArgs a, unsigned int head_dim) {                                   \
    pdl_enter();                                                                                   \
    sdpa_combine<T>(out, a, head_dim);                                                             \
}

SDPA_KERNELS(f16, f16)
SDPA_KERNELS(bf16, bf16)
