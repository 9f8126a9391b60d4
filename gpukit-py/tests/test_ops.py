"""Ops against numpy references (and torch on the GPU machine), on every device, with stated
tolerances: f32 to 1e-5 relative, f16/bf16 to their rounding."""

import math

import numpy as np
import pytest

import gpukit as gk

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float16": dict(rtol=2e-3, atol=2e-3)}


def t(a, dev):
    return gk.from_numpy(np.ascontiguousarray(a), device=dev)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("div", np.divide),
        ("maximum", np.maximum),
        ("minimum", np.minimum),
    ],
)
def test_binary_with_broadcasting(dev, rng, name, ref):
    a = rng.standard_normal((3, 1, 5)).astype(np.float32)
    b = rng.standard_normal((4, 1)).astype(np.float32) + 3.0
    out = getattr(gk, name)(t(a, dev), t(b, dev))
    np.testing.assert_allclose(out.numpy(), ref(a, b), **TOL["float32"])


def test_operators_and_scalars(dev, rng):
    a = rng.random((4, 6)).astype(np.float32) + 0.5
    b = rng.random((4, 6)).astype(np.float32) + 0.5
    x, y = t(a, dev), t(b, dev)
    cases = {
        "x + y": (x + y, a + b),
        "x - 2": (x - 2, a - 2),
        "2 - x": (2 - x, 2 - a),
        "3 * x": (3 * x, 3 * a),
        "x / y": (x / y, a / b),
        "1 / x": (1 / x, 1 / a),
        "x ** 2": (x**2, a**2),
        "-x": (-x, -a),
        "abs(-x)": (abs(-x), a),
        "x @ y.T": (x @ y.T, a @ b.T),
    }
    for what, (got, want) in cases.items():
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5, err_msg=what)


UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "square": np.square,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unary(dev, rng, name, dtype):
    a = rng.standard_normal((7, 33)).astype(dtype)
    if name == "sqrt":
        a = np.abs(a)
    got = getattr(gk, name)(t(a, dev)).numpy()
    want = UNARY[name](a.astype(np.float64)).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **TOL[dtype])


def test_gelu_both_forms(dev, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    erf = np.vectorize(math.erf)
    exact = 0.5 * a * (1 + erf(a / math.sqrt(2)))
    approx = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
    np.testing.assert_allclose(gk.gelu(t(a, dev)).numpy(), exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gk.gelu(t(a, dev), approximate="tanh").numpy(), approx, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        gk.gelu(t(a, dev), approximate="fast")


def test_reductions(dev, rng):
    a = rng.standard_normal((5, 17, 3)).astype(np.float32)
    x = t(a, dev)
    for axis in [None, 0, 1, -1]:
        for name, ref in [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)]:
            np.testing.assert_allclose(
                getattr(gk, name)(x, axis).numpy(), ref(a, axis=axis), rtol=1e-5, atol=1e-5, err_msg=f"{name} {axis}"
            )
    np.testing.assert_array_equal(gk.argmax(x, 1).numpy(), np.argmax(a, 1))
    assert gk.argmax(x).item() == np.argmax(a)


def test_softmax(dev, rng):
    a = rng.standard_normal((6, 50)).astype(np.float32) * 5
    e = np.exp(a - a.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(gk.softmax(t(a, dev)).numpy(), want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gk.log_softmax(t(a, dev)).numpy(), np.log(want), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gk.softmax(t(a, dev), axis=0).numpy().sum(0), np.ones(50), rtol=1e-5)


@pytest.mark.parametrize("m,k,n", [(1, 64, 96), (5, 33, 17), (64, 128, 256)])
def test_matmul_and_linear(dev, rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(gk.matmul(t(a, dev), t(w.T, dev)).numpy(), a @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gk.linear(t(a, dev), t(w, dev), t(b, dev)).numpy(), a @ w.T + b, rtol=1e-4, atol=1e-4)
    relu = gk.linear(t(a, dev), t(w, dev), t(b, dev), activation="relu").numpy()
    np.testing.assert_allclose(relu, np.maximum(a @ w.T + b, 0), rtol=1e-4, atol=1e-4)


def test_norms(dev, rng):
    x = rng.standard_normal((4, 96)).astype(np.float32)
    w = rng.standard_normal(96).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    rms = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(gk.rms_norm(t(x, dev), t(w, dev)).numpy(), rms, rtol=1e-5, atol=1e-5)
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(gk.layer_norm(t(x, dev), t(w, dev), t(b, dev)).numpy(), ln, rtol=1e-4, atol=1e-4)


def test_indexing_ops(dev, rng):
    table = rng.standard_normal((10, 8)).astype(np.float32)
    ids = np.array([3, 0, 9, 3], np.int32)
    np.testing.assert_array_equal(gk.embedding(t(table, dev), t(ids, dev)).numpy(), table[ids])
    np.testing.assert_array_equal(gk.index_select(t(table, dev), 1, t(ids[:2], dev)).numpy(), table[:, ids[:2]])
    idx = rng.integers(0, 8, (10, 3)).astype(np.int64)
    np.testing.assert_array_equal(gk.gather(t(table, dev), 1, t(idx, dev)).numpy(), np.take_along_axis(table, idx, 1))
    parts = [table[:3], table[3:]]
    np.testing.assert_array_equal(gk.cat([t(p, dev) for p in parts]).numpy(), table)
    cond = (table > 0).astype(np.uint8)
    zeros = np.zeros_like(table)
    np.testing.assert_array_equal(gk.where(t(cond, dev), t(table, dev), t(zeros, dev)).numpy(), np.where(cond, table, 0))
    np.testing.assert_array_equal(gk.clamp(t(table, dev), -0.5, 0.5).numpy(), np.clip(table, -0.5, 0.5))


def test_out_writes_in_place(dev, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    out = gk.zeros(3, 4, device=dev)
    ret = gk.add(t(a, dev), 1.0, out=out)
    np.testing.assert_allclose(out.numpy(), a + 1, rtol=1e-6)
    assert ret.data_ptr() == out.data_ptr()
    gk.exp(t(a, dev), out=out)
    np.testing.assert_allclose(out.numpy(), np.exp(a), rtol=1e-5)
    with pytest.raises(ValueError):
        gk.add(t(a, dev), 1.0, out=gk.zeros(2, 2, device=dev))


def rope_reference(x, pos, inv_freq):
    half = inv_freq.size
    ang = pos[:, None] * inv_freq[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half : 2 * half]
    out = x.copy()
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half : 2 * half] = x2 * cos + x1 * sin
    return out


def test_rope_rotate_half(dev, rng):
    x = rng.standard_normal((5, 4, 64)).astype(np.float32)
    pos = np.array([0, 1, 7, 100, 3], np.int32)
    freqs = gk.rope_frequencies(64, 10000.0, device=dev)
    np.testing.assert_allclose(freqs.numpy(), 10000.0 ** (-np.arange(0, 64, 2) / 64), rtol=1e-6)
    xt = t(x, dev)
    gk.rope(xt, t(pos, dev), freqs)
    np.testing.assert_allclose(xt.numpy(), rope_reference(x, pos.astype(np.float64), freqs.numpy().astype(np.float64)), rtol=1e-4, atol=1e-4)


def sdpa_reference(q, k, v, causal):
    g = q.shape[1] // k.shape[1]
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = q.shape[2], k.shape[2]
        mask = np.arange(lk)[None, :] > (np.arange(lq)[:, None] + lk - lq)
        s = np.where(mask, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(dev, rng, causal):
    q = rng.standard_normal((2, 4, 9, 64)).astype(np.float16)
    k = rng.standard_normal((2, 2, 13, 64)).astype(np.float16)
    v = rng.standard_normal((2, 2, 13, 64)).astype(np.float16)
    got = gk.sdpa(t(q, dev), t(k, dev), t(v, dev), causal=causal).numpy().astype(np.float32)
    want = sdpa_reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def test_sample_greedy_and_seeded(dev, rng):
    logits = rng.standard_normal((3, 500)).astype(np.float32)
    greedy = gk.sample(t(logits, dev)).numpy()
    np.testing.assert_array_equal(greedy, logits.argmax(-1))
    a = gk.sample(t(logits, dev), temperature=1.0, top_p=0.9, seed=7, step=3).numpy()
    b = gk.sample(t(logits, dev), temperature=1.0, top_p=0.9, seed=7, step=3).numpy()
    np.testing.assert_array_equal(a, b)
    cpu = gk.sample(t(logits, "cpu"), temperature=1.0, top_p=0.9, seed=7, step=3).numpy()
    np.testing.assert_array_equal(a, cpu)
    with pytest.raises(ValueError):
        gk.sample(t(logits, dev), top_p=0.0)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q4_1"])
def test_quantize_dequantize_and_qgemv(dev, rng, fmt):
    w = rng.standard_normal((16, 128)).astype(np.float32)
    x = rng.standard_normal((2, 128)).astype(np.float32)
    q = gk.quantize(t(w, "cpu"), fmt).to(dev)
    assert q.dtype.name == fmt
    wq = gk.dequantize(q).numpy()
    step = np.abs(w).max(-1, keepdims=True) / (127 if fmt == "q8_0" else 7)
    assert (np.abs(wq - w) <= step + 1e-6).all()
    np.testing.assert_allclose(gk.qgemv(t(x, dev), q).numpy(), x @ wq.T, rtol=1e-4, atol=1e-3)


# GGUF K-quant block sizes in bytes, and the offsets of their f16 scale fields.
K_BLOCKS = {"q4_K": (144, [0, 2]), "q5_K": (176, [0, 2]), "q6_K": (210, [208])}


def k_blocks(rng, fmt, rows, cols):
    """Random raw blocks of `fmt` whose f16 scales are small and finite."""
    size, scale_at = K_BLOCKS[fmt]
    raw = rng.integers(0, 256, size=(rows * cols // 256, size), dtype=np.uint8)
    for at in scale_at:
        raw[:, at:at + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    return raw.reshape(-1)


def q4_k_reference(raw, rows, cols):
    """ggml's q4_K dequantization, in numpy: per 256 values a d and a dmin (f16), eight 6-bit
    scales and mins packed in 12 bytes, and 4-bit codes (low nibbles, then high, 32 at a time)."""
    b = raw.reshape(-1, 144)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)[:, 0]
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float32)[:, 0]
    sc, qs = b[:, 4:16].astype(np.int32), b[:, 16:144].astype(np.int32)

    def scale_min(j):
        if j < 4:
            return sc[:, j] & 63, sc[:, j + 4] & 63
        return ((sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4),
                (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4))

    out = np.empty((b.shape[0], 256), np.float32)
    for g in range(4):
        q = qs[:, 32 * g:32 * g + 32]
        for half, codes in enumerate((q & 0xF, q >> 4)):
            s, m = scale_min(2 * g + half)
            out[:, 64 * g + 32 * half:64 * g + 32 * half + 32] = (
                (d * s)[:, None] * codes - (dmin * m)[:, None])
    return out.reshape(rows, cols)


@pytest.mark.parametrize("fmt", list(K_BLOCKS))
def test_k_quant_tensors_from_raw_blocks(dev, rng, fmt):
    rows, cols = 8, 512
    raw = k_blocks(rng, fmt, rows, cols)
    q = gk.from_blocks(raw, fmt, (rows, cols), device=dev)
    assert q.dtype.name == fmt and q.shape == (rows, cols)
    np.testing.assert_array_equal(q.blocks().numpy(), raw)
    assert gk.from_blocks(raw.tobytes(), fmt, [rows, cols]).dtype.name == fmt
    wq = gk.dequantize(q).numpy()
    np.testing.assert_array_equal(wq, gk.dequantize(q.to("cpu")).numpy())
    if fmt == "q4_K":
        np.testing.assert_allclose(wq, q4_k_reference(raw, rows, cols), rtol=1e-6, atol=1e-6)
    x = rng.standard_normal((2, cols)).astype(np.float32)
    np.testing.assert_allclose(gk.qgemv(t(x, dev), q).numpy(), x @ wq.T, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError):
        gk.from_blocks(raw[:-1], fmt, (rows, cols))
    with pytest.raises(ValueError):
        gk.from_blocks(raw, "float32", (rows, cols))
    with pytest.raises(TypeError):
        gk.from_blocks([1, 2, 3], fmt, (rows, cols))
    with pytest.raises(ValueError):
        gk.ones(4).blocks()
