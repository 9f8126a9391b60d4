"""`gk.jit`: NVRTC compiles (with NVRTC's log on errors), disk cache, launches checked against
the kernel's parameters, and results."""

import numpy as np
import pytest

import gpukit as gk
from conftest import requires_gpu

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_compile_error_carries_the_log():
    with pytest.raises(RuntimeError, match="undefined"):
        gk.jit('extern "C" __global__ void k(float* x) { x[0] = undefined_name; }', "k", arch="sm_80")


def test_missing_entry_point():
    with pytest.raises(ValueError, match="not in the compiled source"):
        gk.jit(SAXPY, "axpy", arch="sm_80")


def test_second_compile_comes_from_the_disk_cache():
    src = SAXPY + "// cache probe\n"
    first = gk.jit(src, "saxpy", arch="sm_80", options=["-DPROBE=1"])
    again = gk.jit(src, "saxpy", arch="sm_80", options=["-DPROBE=1"])
    assert again.from_cache
    assert first.arch == "sm_80" and first.name == "saxpy"


def test_bad_arch():
    with pytest.raises(ValueError, match="arch"):
        gk.jit(SAXPY, "saxpy", arch="hopper")


@requires_gpu
def test_saxpy_launch():
    k = gk.jit(SAXPY, "saxpy")
    n = 10_000
    x = gk.arange(n, dtype=gk.float32, device="cuda")
    y = gk.ones(n, device="cuda")
    k(((n + 255) // 256,), (256,), [2.0, x, y, n])
    np.testing.assert_array_equal(y.numpy(), 2.0 * np.arange(n, dtype=np.float32) + 1)


@requires_gpu
def test_launch_arguments_are_checked():
    k = gk.jit(SAXPY, "saxpy")
    x = gk.zeros(4, device="cuda")
    with pytest.raises(ValueError, match="takes 4 arguments"):
        k(1, 32, [2.0, x, x])
    with pytest.raises(ValueError, match="cpu"):
        k(1, 32, [2.0, gk.zeros(4), x, 4])
    with pytest.raises(TypeError):
        k(1, 32, [2.0, "x", x, 4])
    with pytest.raises(ValueError):
        k(1, 4096, [2.0, x, x, 4])  # more threads per block than the device allows
