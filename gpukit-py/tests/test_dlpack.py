"""DLPack: CPU exchange with numpy, and zero-copy GPU exchange with torch and cupy in both
directions (tested by writing through one side and reading through the other)."""

import numpy as np
import pytest

import gpukit as gk
from conftest import requires_gpu


def test_cpu_export_to_numpy_shares_memory():
    t = gk.arange(6, dtype=gk.float32).reshape(2, 3)
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, [[0, 1, 2], [3, 4, 5]])
    t[0, 0] = 42.0
    assert a[0, 0] == 42.0
    assert t.__dlpack_device__() == (1, 0)


def test_cpu_import_from_numpy():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1:]
    t = gk.from_dlpack(a)
    np.testing.assert_array_equal(t.numpy(), a)


def test_a_capsule_is_consumed_once():
    t = gk.arange(4, dtype=gk.float32)
    capsule = t.__dlpack__()
    np.testing.assert_array_equal(gk.from_dlpack(capsule).numpy(), [0, 1, 2, 3])
    with pytest.raises(Exception, match="(?i)consumed|used"):
        gk.from_dlpack(capsule)


def test_quantized_tensors_cannot_be_exported():
    q = gk.quantize(gk.rand(2, 32, seed=0), gk.q8_0)
    with pytest.raises(TypeError, match="GGUF"):
        q.__dlpack__()


@requires_gpu
def test_torch_round_trip_without_copy():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    t = gk.from_dlpack(x)
    assert t.device == "cuda:0" and t.shape == (3, 4)
    assert t.data_ptr() == x.data_ptr()
    x[1, 2] = -7.0  # torch writes, gpukit reads
    torch.cuda.synchronize()
    assert t.numpy()[1, 2] == -7.0
    y = torch.from_dlpack(t * 2.0)  # gpukit result into torch
    assert y.is_cuda
    assert torch.equal(y, x * 2)
    z = gk.zeros(5, device="cuda")
    zt = torch.from_dlpack(z)
    assert zt.data_ptr() == z.data_ptr()
    zt += 3  # torch writes into gpukit's memory
    torch.cuda.synchronize()
    np.testing.assert_array_equal(z.numpy(), [3, 3, 3, 3, 3])


@requires_gpu
def test_torch_views_and_dtypes():
    torch = pytest.importorskip("torch")
    base = torch.randn(8, 6, device="cuda", dtype=torch.bfloat16)
    view = base[:, 1:5].t()
    t = gk.from_dlpack(view)
    assert t.dtype == gk.bfloat16 and t.shape == (4, 8) and t.strides == (1, 6)
    np.testing.assert_array_equal(t.to(gk.float32).numpy(), view.float().cpu().numpy())


@requires_gpu
def test_cupy_round_trip_without_copy():
    cp = pytest.importorskip("cupy")
    a = cp.arange(10, dtype=cp.float32)
    t = gk.from_dlpack(a)
    assert t.data_ptr() == a.data.ptr
    a[3] = 99.0
    cp.cuda.runtime.deviceSynchronize()
    assert t.numpy()[3] == 99.0
    back = cp.from_dlpack(gk.exp(t))
    cp.testing.assert_allclose(back, cp.exp(a), rtol=1e-6)
    z = gk.zeros(4, device="cuda")
    zc = cp.from_dlpack(z)
    assert zc.data.ptr == z.data_ptr()
    zc += 2.5  # cupy writes into gpukit's memory
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(z.numpy(), [2.5, 2.5, 2.5, 2.5])
