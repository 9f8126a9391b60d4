"""Ops on the GPU against torch on the same inputs (the GPU machine has torch): the second
reference beside numpy, in the dtypes models run in. Tolerances: f32 1e-4 relative to the
largest value, f16 / bf16 their rounding (2e-3 / 1.6e-2)."""

import math

import numpy as np
import pytest

import gpukit as gk
from conftest import requires_gpu

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = requires_gpu

DTYPES = {"float32": (torch.float32, 1e-4), "float16": (torch.float16, 2e-3), "bfloat16": (torch.bfloat16, 1.6e-2)}


def pair(shape, dtype, seed, scale=1.0):
    """The same random values as a torch and a gpukit CUDA tensor (shared memory)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = (torch.randn(shape, generator=g, device="cuda") * scale).to(dtype)
    return t, gk.from_dlpack(t)


def close(got, want, tol):
    got = torch.from_dlpack(got).float()
    want = want.float()
    err = (got - want).abs().max().item()
    scale = max(want.abs().max().item(), 1e-6)
    assert err <= tol * scale, f"max error {err:.3g} vs {tol} x {scale:.3g}"


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_elementwise_and_activations(name):
    dt, tol = DTYPES[name]
    t, x = pair((33, 257), dt, 1)
    u, y = pair((33, 257), dt, 2)
    close(gk.add(x, y), t + u, tol)
    close(gk.mul(x, y), t * u, tol)
    close(gk.silu(x), F.silu(t), tol)
    close(gk.gelu(x), F.gelu(t), tol)
    close(gk.gelu(x, approximate="tanh"), F.gelu(t, approximate="tanh"), tol)
    close(gk.sigmoid(x), torch.sigmoid(t), tol)
    close(gk.exp(x), torch.exp(t), tol)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_reductions_and_softmax(name):
    dt, tol = DTYPES[name]
    t, x = pair((17, 1000), dt, 3, scale=4.0)
    close(gk.softmax(x), torch.softmax(t.float(), -1).to(dt), tol)
    close(gk.log_softmax(x), torch.log_softmax(t.float(), -1).to(dt), tol)
    close(gk.max(x, 1), t.amax(1), tol)
    close(gk.sum(x, 1), t.float().sum(1).to(dt), max(tol, 1e-3))
    assert torch.equal(torch.from_dlpack(gk.argmax(x, 1)), t.float().argmax(1))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_norms(name):
    dt, tol = DTYPES[name]
    t, x = pair((9, 2048), dt, 4)
    w, gw = pair((2048,), dt, 5)
    b, gb = pair((2048,), dt, 6)
    close(gk.rms_norm(x, gw, 1e-6), F.rms_norm(t.float(), (2048,), w.float(), 1e-6).to(dt), tol)
    close(gk.layer_norm(x, gw, gb, 1e-5), F.layer_norm(t.float(), (2048,), w.float(), b.float(), 1e-5).to(dt), tol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("m", [1, 7, 128])
def test_matmul_and_linear(name, m):
    dt, tol = DTYPES[name]
    t, x = pair((m, 1024), dt, 7)
    w, gw = pair((3072, 1024), dt, 8, scale=0.05)
    b, gb = pair((3072,), dt, 9)
    close(gk.linear(x, gw, gb), F.linear(t, w, b), tol)
    close(gk.matmul(x, gw.T.contiguous()), t @ w.T, tol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_matches_torch(name, causal):
    dt, tol = DTYPES[name]
    q, gq = pair((2, 8, 77, 128), dt, 10)
    k, gk_ = pair((2, 2, 77, 128), dt, 11)
    v, gv = pair((2, 2, 77, 128), dt, 12)
    want = F.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), is_causal=causal
    )
    close(gk.sdpa(gq, gk_, gv, causal=causal), want, tol)


def test_rope_matches_the_rotate_half_formula_in_torch():
    t, x = pair((5, 4, 64), torch.float32, 13)
    pos = torch.tensor([0, 3, 9, 100, 4095], device="cuda", dtype=torch.int32)
    inv = 10000.0 ** (-torch.arange(0, 64, 2, device="cuda", dtype=torch.float64) / 64)
    ang = pos.double()[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).float()[:, None, :], torch.sin(ang).float()[:, None, :]
    x1, x2 = t[..., :32], t[..., 32:]
    want = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    gk.rope(x, gk.from_dlpack(pos), gk.rope_frequencies(64, 10000.0, device="cuda"))
    close(x, want, 1e-4)
    assert math.isfinite(float(np.abs(x.numpy()).max()))
