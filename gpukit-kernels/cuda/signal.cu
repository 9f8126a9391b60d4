// Signal processing (f32): batched FFTs in shared memory, padding, overlap-add, zero-crossing
// rates, first-order recurrences, polyphase resampling, median filters and row sorts.
//
// fft_f32 runs `per_block` transforms per block, `threads` threads each. A transform's points
// are loaded into shared memory, transformed there and written out:
// - Stockham autosort FFT (Govindaraju et al., "High performance discrete Fourier transforms
//   on graphics processors", SC 2008) with radix 8, 4, 2, 3 and 5 stages for lengths
//   2^a·3^b·5^c. Each stage reads its butterflies' points into registers, synchronises and
//   writes them back in place, so one buffer of `points` values suffices.
// - Bluestein's chirp-z algorithm (Bluestein 1970) for other lengths: a circular convolution
//   of power-of-two length `points` ≥ 2n − 1 done with three Stockham FFTs.
// - A real transform of even length n runs one complex FFT of n/2 points on the even/odd
//   samples packed as (re, im) and splits the result (and the reverse for C2R); odd lengths
//   run a complex FFT of n points.
// A butterfly's first twiddle comes from sincospif on an exact integer ratio; the others are
// its powers.
#include "common.cuh"

struct cfloat {
    float re, im;
};

__device__ __forceinline__ cfloat cadd(cfloat a, cfloat b) { return {a.re + b.re, a.im + b.im}; }
__device__ __forceinline__ cfloat csub(cfloat a, cfloat b) { return {a.re - b.re, a.im - b.im}; }
__device__ __forceinline__ cfloat cmul(cfloat a, cfloat b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
__device__ __forceinline__ cfloat conj(cfloat a) { return {a.re, -a.im}; }
__device__ __forceinline__ cfloat cscale(cfloat a, float s) { return {a.re * s, a.im * s}; }
// e^(iπx)
__device__ __forceinline__ cfloat cispi(float x) {
    float s, c;
    sincospif(x, &s, &c);
    return {c, s};
}

// e^(sign·2πi·m/R) for the radices of the small DFTs (m < R), from constant tables.
template <int R> __device__ __forceinline__ cfloat root(int m, int sign);
template <> __device__ __forceinline__ cfloat root<3>(int m, int sign) {
    const float c[3] = {1.0f, -0.5f, -0.5f};
    const float s[3] = {0.0f, 0.86602540378443865f, -0.86602540378443865f};
    return {c[m], sign * s[m]};
}
template <> __device__ __forceinline__ cfloat root<5>(int m, int sign) {
    const float c[5] = {1.0f, 0.30901699437494742f, -0.80901699437494742f, -0.80901699437494742f,
                        0.30901699437494742f};
    const float s[5] = {0.0f, 0.95105651629515357f, 0.58778525229247313f, -0.58778525229247313f,
                        -0.95105651629515357f};
    return {c[m], sign * s[m]};
}

// In-place DFT of R points with e^(sign·2πi·tk/R).
template <int R> __device__ __forceinline__ void small_dft(cfloat (&v)[R], int sign) {
    cfloat out[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
        cfloat acc = v[0];
#pragma unroll
        for (int t = 1; t < R; ++t) acc = cadd(acc, cmul(v[t], root<R>((t * k) % R, sign)));
        out[k] = acc;
    }
#pragma unroll
    for (int k = 0; k < R; ++k) v[k] = out[k];
}
template <> __device__ __forceinline__ void small_dft<2>(cfloat (&v)[2], int) {
    const cfloat a = v[0], b = v[1];
    v[0] = cadd(a, b);
    v[1] = csub(a, b);
}
// Multiplies by sign·i.
__device__ __forceinline__ cfloat rot90(cfloat a, int sign) {
    return sign < 0 ? cfloat{a.im, -a.re} : cfloat{-a.im, a.re};
}
template <> __device__ __forceinline__ void small_dft<4>(cfloat (&v)[4], int sign) {
    const cfloat s02 = cadd(v[0], v[2]), d02 = csub(v[0], v[2]);
    const cfloat s13 = cadd(v[1], v[3]), d13 = rot90(csub(v[1], v[3]), sign);
    v[0] = cadd(s02, s13);
    v[2] = csub(s02, s13);
    v[1] = cadd(d02, d13);
    v[3] = csub(d02, d13);
}
template <> __device__ __forceinline__ void small_dft<8>(cfloat (&v)[8], int sign) {
    // Two radix-4 DFTs over the even and odd points, then a radix-2 step with e^(sign·2πi·k/8).
    cfloat e[4] = {v[0], v[2], v[4], v[6]};
    cfloat o[4] = {v[1], v[3], v[5], v[7]};
    small_dft<4>(e, sign);
    small_dft<4>(o, sign);
    const float h = 0.70710678118654752f;
    const cfloat w1 = {h, sign * h}, w3 = {-h, sign * h};
    const cfloat t[4] = {o[0], cmul(o[1], w1), rot90(o[2], sign), cmul(o[3], w3)};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        v[k] = cadd(e[k], t[k]);
        v[k + 4] = csub(e[k], t[k]);
    }
}

// One Stockham stage of radix R over `n` points in `buf`, after sub-transforms of `ns` points:
// butterfly j reads points j + t·n/R, twiddles them by w^t with
// w = e^(sign·2πi·(j mod ns)/(ns·R)), and writes them to (j / ns)·ns·R + (j mod ns) + t·ns.
// The transform's `threads` threads take the n/R butterflies in turn; with at least n/16
// threads a thread holds at most 16/R of them.
template <int R>
__device__ __forceinline__ void stage(cfloat* buf, int n, int ns, int sign, int lane, int threads) {
    constexpr int PER = (FFT_MAX_POINTS / FFT_MAX_THREADS + R - 1) / R;
    const int nb = n / R;
    cfloat v[PER][R];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int j = lane + i * threads;
        if (j < nb) {
            const int k = j % ns;
#pragma unroll
            for (int t = 0; t < R; ++t) v[i][t] = buf[j + t * nb];
            if (ns > 1) {
                // One sincospif per butterfly; the higher twiddles are its powers (a few ulp
                // more error than one sincospif each, for a fraction of the instructions).
                const cfloat w = cispi((float)(sign * 2 * k) / (float)(ns * R));
                cfloat wt = w;
#pragma unroll
                for (int t = 1; t < R; ++t) {
                    v[i][t] = cmul(v[i][t], wt);
                    if (t + 1 < R) wt = cmul(wt, w);
                }
            }
            small_dft<R>(v[i], sign);
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int j = lane + i * threads;
        if (j < nb) {
            const int k = j % ns;
            const int base = (j / ns) * ns * R + k;
#pragma unroll
            for (int t = 0; t < R; ++t) buf[base + t * ns] = v[i][t];
        }
    }
    __syncthreads();
}

// The radix of the next stage when `rem` points remain to combine (the same on every thread of
// the block, so every thread reaches the same barriers).
__device__ __forceinline__ int next_radix(int rem) {
    if (rem % 8 == 0) return 8;
    if (rem % 4 == 0) return 4;
    if (rem % 2 == 0) return 2;
    if (rem % 3 == 0) return 3;
    return 5;
}

// In-place unnormalised FFT of `n` = 2^a·3^b·5^c points in shared memory. Every thread of the
// block calls it (it synchronises the block).
__device__ void fft_smem(cfloat* buf, int n, int sign, int lane, int threads) {
    for (int ns = 1; ns < n;) {
        const int r = next_radix(n / ns);
        switch (r) {
        case 8: stage<8>(buf, n, ns, sign, lane, threads); break;
        case 4: stage<4>(buf, n, ns, sign, lane, threads); break;
        case 2: stage<2>(buf, n, ns, sign, lane, threads); break;
        case 3: stage<3>(buf, n, ns, sign, lane, threads); break;
        default: stage<5>(buf, n, ns, sign, lane, threads); break;
        }
        ns *= r;
    }
}

// Bluestein's chirp e^(sign·πi·k²/n), with k² reduced mod 2n first (exact in integers).
__device__ __forceinline__ cfloat chirp(int k, int n, int sign) {
    const unsigned int r = (unsigned int)((unsigned long long)k * k % (2ull * n));
    return cispi((float)sign * (float)r / (float)n);
}

// Transforms the `n` points in buf[0, n) in place, by Stockham when `m` is 0 and otherwise by
// Bluestein's algorithm with the power-of-two length `m` (buf then holds 2m points: the
// sequence and the chirp filter).
__device__ void transform(cfloat* buf, int n, int m, int sign, int lane, int threads) {
    if (m == 0) {
        fft_smem(buf, n, sign, lane, threads);
        return;
    }
    cfloat* b = buf + m;
    for (int k = lane; k < m; k += threads) {
        buf[k] = k < n ? cmul(buf[k], chirp(k, n, sign)) : cfloat{0.0f, 0.0f};
        b[k] = k < n ? conj(chirp(k, n, sign))
                     : (k > m - n ? conj(chirp(m - k, n, sign)) : cfloat{0.0f, 0.0f});
    }
    __syncthreads();
    fft_smem(buf, m, -1, lane, threads);
    fft_smem(b, m, -1, lane, threads);
    for (int k = lane; k < m; k += threads) buf[k] = cmul(buf[k], b[k]);
    __syncthreads();
    fft_smem(buf, m, 1, lane, threads);
    const float inv = 1.0f / (float)m;
    for (int k = lane; k < n; k += threads) buf[k] = cscale(cmul(buf[k], chirp(k, n, sign)), inv);
    __syncthreads();
}

// The window's value at sample j of a transform: the window array's, the analytic window's
// (periodic over win_length samples from win_offset, zero outside them), or 1.
__device__ __forceinline__ float window_at(const FftArgs& a, int j) {
    if (a.window) return a.window[j];
    if (a.window_fn == WIN_NONE) return 1.0f;
    const int k = j - (int)a.win_offset;
    if (k < 0 || k >= (int)a.win_length) return 0.0f;
    const float x = (float)(2 * k) / (float)a.win_length;
    switch (a.window_fn) {
    case WIN_HANN: return 0.5f - 0.5f * cospif(x);
    case WIN_HAMMING: return 0.54f - 0.46f * cospif(x);
    case WIN_BLACKMAN: return 0.42f - 0.5f * cospif(x) + 0.08f * cospif(2.0f * x);
    default: return 1.0f;
    }
}

// Writes bin k of a real-to-complex transform as FftArgs::out_kind asks.
__device__ __forceinline__ void store_bin(const FftArgs& a, float* out, int k, cfloat x) {
    float* p = out + (long long)k * a.out_elem;
    if (a.out_kind == FFT_OUT_COMPLEX) {
        p[0] = x.re * a.scale;
        p[1] = x.im * a.scale;
    } else {
        const float re = x.re * a.scale, im = x.im * a.scale;
        const float pw = re * re + im * im;
        p[0] = a.out_kind == FFT_OUT_POWER ? pw : sqrtf(pw);
    }
}

extern "C" __global__ void __launch_bounds__(FFT_MAX_THREADS) fft_f32(const FftArgs a) {
    extern __shared__ cfloat smem[];
    const int slot = threadIdx.x / a.threads, lane = threadIdx.x % a.threads;
    const unsigned int t = blockIdx.x * a.per_block + slot;
    // Every slot of the block runs the stages (they synchronise the block); a slot past the
    // last transform reads and writes no global memory.
    const bool live = t < a.count;
    const int n = (int)a.n, points = (int)a.points;
    const int m = a.bluestein ? points : 0;
    cfloat* buf = smem + (long long)slot * (a.bluestein ? 2 * points : points);
    const long long outer = live ? t / a.inner : 0, inner = live ? t % a.inner : 0;
    const float* in = a.input + outer * a.in_stride[0] + inner * a.in_stride[1];
    float* out = a.output + outer * a.out_stride[0] + inner * a.out_stride[1];
    const bool packed = a.mode != FFT_C2C && n % 2 == 0 && !a.bluestein;
    const int h = n / 2;

    if (a.mode == FFT_C2C) {
        for (int k = lane; k < n; k += a.threads) {
            buf[k] = live ? cfloat{in[k * a.in_elem], in[k * a.in_elem + 1]} : cfloat{0.0f, 0.0f};
        }
        __syncthreads();
        transform(buf, n, m, a.sign, lane, a.threads);
        if (live) {
            for (int k = lane; k < n; k += a.threads) {
                float* p = out + (long long)k * a.out_elem;
                p[0] = buf[k].re * a.scale;
                p[1] = buf[k].im * a.scale;
            }
        }
        return;
    }

    if (a.mode == FFT_R2C) {
        if (packed) {
            // z[k] = x[2k] + i·x[2k+1]; X[k] = E[k] + e^(−2πik/n)·O[k] with
            // E = (Z[k] + conj Z[h−k]) / 2 and O = −i (Z[k] − conj Z[h−k]) / 2.
            for (int k = lane; k < h; k += a.threads) {
                float x0 = 0.0f, x1 = 0.0f;
                if (live) {
                    x0 = in[2 * k * a.in_elem];
                    x1 = in[(2 * k + 1) * a.in_elem];
                    x0 *= window_at(a, 2 * k);
                    x1 *= window_at(a, 2 * k + 1);
                }
                buf[k] = {x0, x1};
            }
            __syncthreads();
            fft_smem(buf, h, -1, lane, a.threads);
            if (live) {
                for (int k = lane; k <= h; k += a.threads) {
                    const cfloat z = buf[k % h], zc = conj(buf[(h - k) % h]);
                    const cfloat e = cscale(cadd(z, zc), 0.5f);
                    const cfloat d = csub(z, zc);
                    const cfloat o = {0.5f * d.im, -0.5f * d.re};
                    store_bin(a, out, k, cadd(e, cmul(cispi(-2.0f * (float)k / (float)n), o)));
                }
            }
        } else {
            for (int k = lane; k < n; k += a.threads) {
                float x = 0.0f;
                if (live) {
                    x = in[k * a.in_elem];
                    x *= window_at(a, k);
                }
                buf[k] = {x, 0.0f};
            }
            __syncthreads();
            transform(buf, n, m, -1, lane, a.threads);
            if (live) {
                for (int k = lane; k <= h; k += a.threads) store_bin(a, out, k, buf[k]);
            }
        }
        return;
    }

    // C2R: the imaginary parts of the zero-frequency bin and (even n) the Nyquist bin are taken
    // as zero, as numpy's irfft does.
    if (packed) {
        // Z[k] = E[k] + i·O[k], E = (X[k] + conj X[h−k]) / 2, O = (X[k] − conj X[h−k]) / 2 ·
        // e^(2πik/n); the inverse FFT of Z holds the even samples in its real parts and the odd
        // ones in its imaginary parts, at half the full inverse's scale.
        for (int k = lane; k < h; k += a.threads) {
            cfloat x = {0.0f, 0.0f}, y = {0.0f, 0.0f};
            if (live) {
                const float* p = in + (long long)k * a.in_elem;
                const float* q = in + (long long)(h - k) * a.in_elem;
                x = {p[0], k == 0 ? 0.0f : p[1]};
                y = {q[0], k == 0 ? 0.0f : -q[1]};
            }
            const cfloat e = cscale(cadd(x, y), 0.5f);
            const cfloat o = cmul(cscale(csub(x, y), 0.5f), cispi(2.0f * (float)k / (float)n));
            buf[k] = {e.re - o.im, e.im + o.re};
        }
        __syncthreads();
        fft_smem(buf, h, 1, lane, a.threads);
        if (live) {
            const float s = 2.0f * a.scale;
            for (int k = lane; k < h; k += a.threads) {
                float x0 = buf[k].re * s, x1 = buf[k].im * s;
                x0 *= window_at(a, 2 * k);
                x1 *= window_at(a, 2 * k + 1);
                out[2 * k * a.out_elem] = x0;
                out[(2 * k + 1) * a.out_elem] = x1;
            }
        }
        return;
    }
    for (int k = lane; k < n; k += a.threads) {
        cfloat x = {0.0f, 0.0f};
        if (live) {
            const int src = k <= h ? k : n - k;
            const float* p = in + (long long)src * a.in_elem;
            const bool real_bin = src == 0 || 2 * src == n;
            x = {p[0], real_bin ? 0.0f : (k <= h ? p[1] : -p[1])};
        }
        buf[k] = x;
    }
    __syncthreads();
    transform(buf, n, m, 1, lane, a.threads);
    if (live) {
        for (int k = lane; k < n; k += a.threads) {
            float x = buf[k].re * a.scale;
            x *= window_at(a, k);
            out[k * a.out_elem] = x;
        }
    }
}

// Where position j of a row of len samples reads from under a PAD_* mode (numpy's np.pad
// modes; PAD_SYMMETRIC is scipy.ndimage's "reflect"), or −1 for the constant. len ≥ 1 unless
// the mode is PAD_CONSTANT.
__device__ __forceinline__ long long pad_source(long long j, long long len, unsigned int mode) {
    if (j >= 0 && j < len) return j;
    if (mode == PAD_CONSTANT) return -1;
    if (mode == PAD_EDGE || len == 1) return j < 0 ? 0 : len - 1;
    const long long period = mode == PAD_SYMMETRIC ? 2 * len : 2 * (len - 1);
    long long p = j % period;
    if (p < 0) p += period;
    if (p < len) return p;
    return mode == PAD_SYMMETRIC ? period - 1 - p : period - p;
}

// y[r, j] for j in [0, left + len + right): x[r, j − left] inside the signal, and outside it
// the constant, the edge sample, or a mirror image (pad_source; a mirror repeats for pads
// longer than the signal, as np.pad's). Rows of x are `row_stride` apart.
extern "C" __global__ void pad_f32(const float* __restrict__ x, float* __restrict__ y,
                                   unsigned int rows, unsigned int len, long long row_stride,
                                   unsigned int left, unsigned int right, unsigned int mode,
                                   float value) {
    const unsigned long long width = (unsigned long long)left + len + right;
    const unsigned long long total = rows * width;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long r = i / width;
        const long long s = pad_source((long long)(i % width) - left, len, mode);
        y[i] = s < 0 ? value : x[r * row_stride + s];
    }
}

// y[b, t] = Σ_f frames[b, f, t − f·hop] over the frames f covering sample t, in increasing f
// (one thread per output sample: no atomics, the same sum every run). Frames are contiguous
// [batch, n_frames, n]; y is contiguous [batch, (n_frames − 1)·hop + n].
extern "C" __global__ void overlap_add_f32(const float* __restrict__ frames, float* __restrict__ y,
                                           unsigned int batch, unsigned int n_frames,
                                           unsigned int n, unsigned int hop) {
    const unsigned long long len = (unsigned long long)(n_frames - 1) * hop + n;
    const unsigned long long total = batch * len;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long b = i / len, t = i % len;
        const unsigned long long first = t < n ? 0 : (t - n) / hop + 1;
        const unsigned long long last = min(t / hop, (unsigned long long)n_frames - 1);
        float acc = 0.0f;
        for (unsigned long long f = first; f <= last; ++f)
            acc += frames[(b * n_frames + f) * n + (t - f * hop)];
        y[i] = acc;
    }
}

// out[r, f] = the fraction of the frame_length samples of frame f (starting at f·hop in row r
// of y) whose sign differs from the previous sample's, the first sample counting as no
// crossing (librosa's zero_crossing_rate): a sample is negative when below −threshold, so
// values within ±threshold count as positive zeros. One warp per frame; the integer count is
// summed across the warp (exact, so the same every run). y is contiguous [rows, len].
extern "C" __global__ void zero_crossing_rate_f32(const float* __restrict__ y,
                                                  float* __restrict__ out, unsigned int rows,
                                                  unsigned int len, unsigned int frame_length,
                                                  unsigned int hop, unsigned int n_frames,
                                                  float threshold) {
    const unsigned int lane = threadIdx.x % 32;
    const unsigned long long warps = (unsigned long long)gridDim.x * (blockDim.x / 32);
    const unsigned long long total = (unsigned long long)rows * n_frames;
    for (unsigned long long w = blockIdx.x * (unsigned long long)(blockDim.x / 32) + threadIdx.x / 32;
         w < total; w += warps) {
        const unsigned long long r = w / n_frames, f = w % n_frames;
        const float* x = y + r * len + f * hop;
        unsigned int count = 0;
        for (unsigned int i = lane + 1; i < frame_length; i += 32)
            count += (x[i - 1] < -threshold) != (x[i] < -threshold);
#pragma unroll
        for (int o = 16; o > 0; o /= 2) count += __shfl_xor_sync(0xffffffffu, count, o);
        if (lane == 0) out[w] = (float)count / (float)frame_length;
    }
}

// y[o, n, i] = x[o, n, i] + a·y[o, n − 1, i] along the middle axis of contiguous
// [outer, len, inner], starting from y[o, −1, i] = init[o·inner + i] (0 without init): a prefix
// sum for a = 1, a first-order IIR filter (scipy's lfilter with denominator [1, −a]) otherwise.
// One thread per (o, i) line, in order, each step one fused multiply-add: consecutive threads
// read consecutive i (coalesced when inner > 1) and every run gives the same bits.
extern "C" __global__ void linear_recurrence_f32(const float* __restrict__ x,
                                                 const float* __restrict__ init,
                                                 float* __restrict__ y, unsigned long long outer,
                                                 unsigned int len, unsigned long long inner,
                                                 float a) {
    const unsigned long long lines = outer * inner;
    for (unsigned long long l = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         l < lines; l += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long base = (l / inner) * len * inner + l % inner;
        float acc = init ? init[l] : 0.0f;
        for (unsigned int n = 0; n < len; ++n) {
            acc = fmaf(a, acc, x[base + n * inner]);
            y[base + n * inner] = acc;
        }
    }
}

// y[r, k] = Σ_j h[j]·u[t − j] with t = k·down + offset, u being row r of x upsampled by up
// (x[r, m] at position m·up, zeros between) and h the h_len taps: scipy's upfirdn from its
// output index offset/down on. Only the taps j ≡ t (mod up) meet a sample (the polyphase
// decomposition), summed in increasing j; one thread per output. x is contiguous
// [rows, n_in], y contiguous [rows, n_out].
extern "C" __global__ void upfirdn_f32(const float* __restrict__ x, const float* __restrict__ h,
                                       float* __restrict__ y, unsigned int rows,
                                       unsigned int n_in, unsigned int n_out, unsigned int h_len,
                                       unsigned int up, unsigned int down, long long offset) {
    const unsigned long long total = (unsigned long long)rows * n_out;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long r = i / n_out;
        const long long t = (long long)(i % n_out) * down + offset;
        long long p = t % up;
        if (p < 0) p += up;
        // Tap p + q·up meets sample m0 − q; start at the first q whose sample is in the row.
        const long long m0 = (t - p) / up;
        const long long q0 = m0 >= (long long)n_in ? m0 - n_in + 1 : 0;
        const float* row = x + r * n_in;
        float acc = 0.0f;
        for (long long j = p + q0 * up, m = m0 - q0; j < h_len && m >= 0; j += up, --m)
            acc = fmaf(h[j], row[m], acc);
        y[i] = acc;
    }
}

// y[o, n, i] = the value of rank size/2 (the median for an odd size, the upper median for an
// even one) among x[o, n − size/2 + k, i], k = 0..size−1, along the middle axis of contiguous
// [outer, len, inner]; positions outside the row read through pad_source (a constant reads
// value): scipy.ndimage.median_filter's window and boundary modes. One thread per output: the
// window goes into a local array and the value of the wanted rank is found by counting, which
// is exact and needs no sorting network (O(size²); size ≤ MEDIAN_MAX_SIZE).
extern "C" __global__ void median_filter_f32(const float* __restrict__ x, float* __restrict__ y,
                                             unsigned long long outer, unsigned int len,
                                             unsigned long long inner, unsigned int size,
                                             unsigned int mode, float value) {
    float w[MEDIAN_MAX_SIZE];
    const unsigned long long total = outer * len * inner;
    const unsigned int rank = size / 2;
    for (unsigned long long e = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         e < total; e += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long i = e % inner, n = (e / inner) % len, o = e / (inner * len);
        const float* line = x + o * len * inner + i;
        for (unsigned int k = 0; k < size; ++k) {
            const long long s = pad_source((long long)n - rank + k, len, mode);
            w[k] = s < 0 ? value : line[s * inner];
        }
        float result = w[0];
        for (unsigned int a = 0; a < size; ++a) {
            unsigned int lt = 0, le = 0;
            for (unsigned int b = 0; b < size; ++b) {
                lt += w[b] < w[a];
                le += w[b] <= w[a];
            }
            if (lt <= rank && rank < le) {
                result = w[a];
                break;
            }
        }
        y[e] = result;
    }
}

// Each row of contiguous [rows, len] sorted ascending into y, one block per row: a bitonic
// sort in shared memory over `points` (the power of two ≥ len, ≤ SORT_MAX_POINTS), the tail
// filled with +∞. Rows holding NaN come out in an unspecified order.
extern "C" __global__ void sort_f32(const float* __restrict__ x, float* __restrict__ y,
                                    unsigned int rows, unsigned int len, unsigned int points) {
    extern __shared__ float keys[];
    for (unsigned int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* row = x + (unsigned long long)r * len;
        for (unsigned int k = threadIdx.x; k < points; k += blockDim.x)
            keys[k] = k < len ? row[k] : __int_as_float(0x7f800000);  // +∞
        __syncthreads();
        for (unsigned int size = 2; size <= points; size <<= 1) {
            for (unsigned int stride = size / 2; stride > 0; stride >>= 1) {
                for (unsigned int k = threadIdx.x; k < points; k += blockDim.x) {
                    const unsigned int partner = k ^ stride;
                    if (partner > k) {
                        const float a = keys[k], b = keys[partner];
                        if ((a > b) == ((k & size) == 0)) {
                            keys[k] = b;
                            keys[partner] = a;
                        }
                    }
                }
                __syncthreads();
            }
        }
        float* out = y + (unsigned long long)r * len;
        for (unsigned int k = threadIdx.x; k < len; k += blockDim.x) out[k] = keys[k];
        __syncthreads();
    }
}

// y[b, o, t] = bias[o] + Σ_c Σ_k w[o, c, k]·x[b, g·cin_g + c, t·stride − padding + k·dilation]
// with g = o / cout_g the group of output channel o (PyTorch's Conv1d; positions outside the
// row read zero). Each thread computes OB consecutive output channels of one group at one
// position, so an input sample it loads serves OB outputs; every output's sum runs over c,
// then k, in increasing order, whatever OB is: the same bits every run and from either entry
// point. x is contiguous [batch, c_in, len_in], w [c_out, cin_g, k_size], y [batch, c_out,
// len_out]; bias may be null.
template <int OB>
__device__ __forceinline__ void conv1d_impl(const float* __restrict__ x,
                                            const float* __restrict__ w,
                                            const float* __restrict__ bias, float* __restrict__ y,
                                            unsigned int batch, unsigned int c_in,
                                            unsigned int len_in, unsigned int c_out,
                                            unsigned int len_out, unsigned int k_size,
                                            unsigned int stride, unsigned int padding,
                                            unsigned int dilation, unsigned int groups) {
    const unsigned int cin_g = c_in / groups, cout_g = c_out / groups;
    const unsigned int o_blocks = c_out / OB;
    const unsigned long long total = (unsigned long long)batch * o_blocks * len_out;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned int t = i % len_out;
        const unsigned int o0 = (unsigned int)((i / len_out) % o_blocks) * OB;
        const unsigned long long b = i / ((unsigned long long)len_out * o_blocks);
        const long long start = (long long)t * stride - padding;
        // The taps whose input position lies inside the row: k in [k0, k1).
        unsigned int k0 = 0, k1 = k_size;
        if (start < 0) k0 = (unsigned int)((-start + dilation - 1) / dilation);
        const long long last = (long long)len_in - 1 - start;
        if (last < 0) k1 = 0;
        else if (last / dilation + 1 < k_size) k1 = (unsigned int)(last / dilation + 1);
        const float* xb = x + (b * c_in + (unsigned long long)(o0 / cout_g) * cin_g) * len_in;
        const float* wo = w + (unsigned long long)o0 * cin_g * k_size;
        const unsigned long long w_step = (unsigned long long)cin_g * k_size;
        float acc[OB];
#pragma unroll
        for (int j = 0; j < OB; ++j) acc[j] = 0.0f;
        for (unsigned int c = 0; c < cin_g; ++c) {
            const float* xr = xb + (unsigned long long)c * len_in + start;
            const float* wr = wo + (unsigned long long)c * k_size;
            for (unsigned int k = k0; k < k1; ++k) {
                const float v = xr[(long long)k * dilation];
#pragma unroll
                for (int j = 0; j < OB; ++j) acc[j] = fmaf(wr[j * w_step + k], v, acc[j]);
            }
        }
        float* yo = y + (b * c_out + o0) * (unsigned long long)len_out + t;
#pragma unroll
        for (int j = 0; j < OB; ++j)
            yo[(unsigned long long)j * len_out] = bias ? acc[j] + bias[o0 + j] : acc[j];
    }
}

// One output channel per thread: any geometry.
extern "C" __global__ void conv1d_f32(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y,
                                      unsigned int batch, unsigned int c_in, unsigned int len_in,
                                      unsigned int c_out, unsigned int len_out,
                                      unsigned int k_size, unsigned int stride,
                                      unsigned int padding, unsigned int dilation,
                                      unsigned int groups) {
    conv1d_impl<1>(x, w, bias, y, batch, c_in, len_in, c_out, len_out, k_size, stride, padding,
                   dilation, groups);
}

// Eight output channels per thread: when each group's output channels are a multiple of 8.
extern "C" __global__ void conv1d_ob8_f32(const float* __restrict__ x,
                                          const float* __restrict__ w,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          unsigned int batch, unsigned int c_in,
                                          unsigned int len_in, unsigned int c_out,
                                          unsigned int len_out, unsigned int k_size,
                                          unsigned int stride, unsigned int padding,
                                          unsigned int dilation, unsigned int groups) {
    conv1d_impl<8>(x, w, bias, y, batch, c_in, len_in, c_out, len_out, k_size, stride, padding,
                   dilation, groups);
}

// The transposed convolution (PyTorch's ConvTranspose1d): input sample s of channel c adds
// w[c, o − g·cout_g, k]·x[b, c, s] to output position s·stride − padding + k·dilation of each
// output channel o of its group g. Gathered per output: y[b, o, t] = bias[o] + Σ_k Σ_c
// w[c, o', k]·x[b, g·cin_g + c, s] over the taps k with t + padding − k·dilation = s·stride,
// 0 ≤ s < len_in; k, then c, in increasing order, one thread per output. x is contiguous
// [batch, c_in, len_in], w [c_in, cout_g, k_size], y [batch, c_out, len_out]; bias may be null.
extern "C" __global__ void conv_transpose1d_f32(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
    float* __restrict__ y, unsigned int batch, unsigned int c_in, unsigned int len_in,
    unsigned int c_out, unsigned int len_out, unsigned int k_size, unsigned int stride,
    unsigned int padding, unsigned int dilation, unsigned int groups) {
    const unsigned int cin_g = c_in / groups, cout_g = c_out / groups;
    const unsigned long long total = (unsigned long long)batch * c_out * len_out;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned int t = i % len_out;
        const unsigned int o = (i / len_out) % c_out;
        const unsigned long long b = i / ((unsigned long long)len_out * c_out);
        const unsigned int g = o / cout_g, og = o % cout_g;
        const float* xb = x + (b * c_in + (unsigned long long)g * cin_g) * len_in;
        const float* wg = w + ((unsigned long long)g * cin_g * cout_g + og) * k_size;
        float acc = 0.0f;
        for (unsigned int k = 0; k < k_size; ++k) {
            const long long p = (long long)t + padding - (long long)k * dilation;
            if (p < 0 || p % stride != 0) continue;
            const long long s = p / stride;
            if (s >= (long long)len_in) continue;
            for (unsigned int c = 0; c < cin_g; ++c)
                acc = fmaf(wg[(unsigned long long)c * cout_g * k_size + k],
                           xb[(unsigned long long)c * len_in + s], acc);
        }
        y[i] = bias ? acc + bias[o] : acc;
    }
}
