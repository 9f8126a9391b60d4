// Elementwise kernels: binary ops with broadcasting, unary math, scalar ops, where, clamp, casts.
//
// Each kernel comes in a contiguous variant (`_contig`: every operand dense and the same shape; a
// grid-stride loop, memory-bound) and a strided one (`_strided`: any strides, 0 for broadcast
// dimensions, up to MAX_DIMS dimensions). Math is done in f32 and rounded once.
#include "common.cuh"

// Binary op codes: OP_* (BinaryOp in gpukit-kernels/src/shared.rs).
__device__ __forceinline__ float binary_f(int op, float a, float b) {
    switch (op) {
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        case OP_DIV: return a / b;
        case OP_MAX: return fmaxf(a, b);
        case OP_MIN: return fminf(a, b);
        case OP_ATAN2: return atan2f(a, b);
        case OP_LT: return a < b ? 1.0f : 0.0f;
        default: return powf(a, b);
    }
}

// Unary op codes: U_* (UnaryOp in gpukit-kernels/src/shared.rs).
__device__ __forceinline__ float unary_f(int op, float x) {
    switch (op) {
        case U_NEG: return -x;
        case U_ABS: return fabsf(x);
        case U_EXP: return expf(x);
        case U_LOG: return logf(x);
        case U_SQRT: return sqrtf(x);
        case U_RSQRT: return 1.0f / sqrtf(x);
        case U_SIN: return sinf(x);
        case U_COS: return cosf(x);
        case U_TANH: return tanhf(x);
        case U_SIGMOID: return 1.0f / (1.0f + expf(-x));
        case U_RELU: return x > 0.0f ? x : 0.0f;
        case U_RELU2: { float r = x > 0.0f ? x : 0.0f; return r * r; }
        // Written without 1 + (-1 + tiny) cancellation for negative x:
        // 0.5·x·(1 + erf(x/√2)) = 0.5·x·erfc(-x/√2) and 0.5·x·(1 + tanh u) = x·sigmoid(2u).
        case U_GELU_ERF: return 0.5f * x * erfcf(-x * 0.70710678118654752f);
        case U_GELU_TANH: {
            float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
            return x / (1.0f + expf(-2.0f * u));
        }
        case U_SILU: return x / (1.0f + expf(-x));
        case U_SQUARE: return x * x;
        case U_ROUND: return rintf(x);
        default: return 1.0f / x;
    }
}

// Scalar op codes: x op s and s op x (ScalarOp in gpukit-kernels/src/shared.rs).

__device__ __forceinline__ float scalar_f(int op, float x, float s) {
    switch (op) {
        case S_ADD: return x + s;
        case S_MUL: return x * s;
        case S_SUB: return x - s;
        case S_RSUB: return s - x;
        case S_DIV: return x / s;
        case S_RDIV: return s / x;
        case S_POW: return powf(x, s);
        case S_MAX: return fmaxf(x, s);
        default: return fminf(x, s);
    }
}

#define GRID_STRIDE(i, n) \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < (n); \
         i += (unsigned long long)gridDim.x * blockDim.x)

#define ELEMENTWISE_KERNELS(T, NAME)                                                              \
/* Contiguous: 16-byte vectors (pointers 16-byte aligned; the host checks), scalar tail. */      \
extern "C" __global__ void binary_##NAME##_contig(int op, const T* __restrict__ a,                 \
        const T* __restrict__ b, T* __restrict__ out, unsigned long long n) {                      \
    pdl_enter();                                                                                   \
    const int V = Vec16<T>::N;                                                                     \
    unsigned long long nv = n / V;                                                                 \
    GRID_STRIDE(i, nv) {                                                                           \
        Pack<T> x = load16(a + i * V), y = load16(b + i * V), r;                                   \
        _Pragma("unroll") for (int j = 0; j < V; ++j)                                              \
            r.v[j] = from_f32<T>(binary_f(op, to_f32(x.v[j]), to_f32(y.v[j])));                    \
        store16(out + i * V, r);                                                                   \
    }                                                                                              \
    GRID_STRIDE(t, n - nv * V) {                                                                   \
        unsigned long long i = nv * V + t;                                                         \
        out[i] = from_f32<T>(binary_f(op, to_f32(a[i]), to_f32(b[i])));                            \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void binary_##NAME##_strided(int op, const T* __restrict__ a,                \
        const T* __restrict__ b, T* __restrict__ out, unsigned long long n, StridedIndex ix) {      \
    pdl_enter();                                                                                    \
    GRID_STRIDE(i, n) {                                                                            \
        long long oa, ob, oo;                                                                      \
        strided_offsets(ix, i, oa, ob, oo);                                                        \
        out[oo] = from_f32<T>(binary_f(op, to_f32(a[oa]), to_f32(b[ob])));                         \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void unary_##NAME##_contig(int op, const T* __restrict__ x,                  \
        T* __restrict__ out, unsigned long long n) {                                               \
    pdl_enter();                                                                                   \
    const int V = Vec16<T>::N;                                                                     \
    unsigned long long nv = n / V;                                                                 \
    GRID_STRIDE(i, nv) {                                                                           \
        Pack<T> v = load16(x + i * V), r;                                                          \
        _Pragma("unroll") for (int j = 0; j < V; ++j)                                              \
            r.v[j] = from_f32<T>(unary_f(op, to_f32(v.v[j])));                                     \
        store16(out + i * V, r);                                                                   \
    }                                                                                              \
    GRID_STRIDE(t, n - nv * V) {                                                                   \
        unsigned long long i = nv * V + t;                                                         \
        out[i] = from_f32<T>(unary_f(op, to_f32(x[i])));                                           \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void unary_##NAME##_strided(int op, const T* __restrict__ x,                 \
        T* __restrict__ out, unsigned long long n, StridedIndex ix) {                               \
    pdl_enter();                                                                                    \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = from_f32<T>(unary_f(op, to_f32(x[ox])));                                         \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void scalar_##NAME##_strided(int op, float s, const T* __restrict__ x,       \
        T* __restrict__ out, unsigned long long n, StridedIndex ix) {                               \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = from_f32<T>(scalar_f(op, to_f32(x[ox]), s));                                     \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void clamp_##NAME##_strided(float lo, float hi, const T* __restrict__ x,     \
        T* __restrict__ out, unsigned long long n, StridedIndex ix) {                               \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = from_f32<T>(fminf(fmaxf(to_f32(x[ox]), lo), hi));                                \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void where_##NAME##_strided(const u8* __restrict__ cond,                     \
        const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,                      \
        unsigned long long n, StridedIndex ix, StridedIndex ix_b) {                                 \
    GRID_STRIDE(i, n) {                                                                            \
        long long oc, oa, oo, ob, u1, u2;                                                          \
        strided_offsets(ix, i, oc, oa, oo);                                                        \
        strided_offsets(ix_b, i, ob, u1, u2);                                                      \
        out[oo] = cond[oc] ? a[oa] : b[ob];                                                        \
    }                                                                                              \
}                                                                                                  \
extern "C" __global__ void copy_##NAME##_strided(const T* __restrict__ x, T* __restrict__ out,     \
        unsigned long long n, StridedIndex ix) {                                                   \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = x[ox];                                                                           \
    }                                                                                              \
}

ELEMENTWISE_KERNELS(float, f32)
ELEMENTWISE_KERNELS(f16, f16)
ELEMENTWISE_KERNELS(bf16, bf16)

// Integer tensors get copies (for views and concat) and casts only.
#define COPY_ONLY(T, NAME)                                                                         \
extern "C" __global__ void copy_##NAME##_strided(const T* __restrict__ x, T* __restrict__ out,     \
        unsigned long long n, StridedIndex ix) {                                                   \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = x[ox];                                                                           \
    }                                                                                              \
}
COPY_ONLY(i32, i32)
COPY_ONLY(i64, i64)
COPY_ONLY(u8, u8)

// Casts between float dtypes (through f32, rounding to nearest even).
#define CAST(TI, NI, TO, NO)                                                                       \
extern "C" __global__ void cast_##NI##_##NO(const TI* __restrict__ x, TO* __restrict__ out,        \
        unsigned long long n, StridedIndex ix) {                                                   \
    GRID_STRIDE(i, n) {                                                                            \
        long long ox, oo, unused;                                                                  \
        strided_offsets(ix, i, ox, oo, unused);                                                    \
        out[oo] = from_f32<TO>(to_f32(x[ox]));                                                     \
    }                                                                                              \
}
CAST(float, f32, f16, f16)
CAST(float, f32, bf16, bf16)
CAST(f16, f16, float, f32)
CAST(f16, f16, bf16, bf16)
CAST(bf16, bf16, float, f32)
CAST(bf16, bf16, f16, f16)
