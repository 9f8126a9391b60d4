"""Tensors: creation, numpy round trips for every dtype, views, indexing, conversions, errors."""

import numpy as np
import pytest

import gpukit as gk

NUMPY_DTYPES = [np.float32, np.float16, np.int32, np.int64, np.uint8]


@pytest.mark.parametrize("np_dtype", NUMPY_DTYPES)
def test_numpy_round_trip_every_dtype(dev, rng, np_dtype):
    a = (rng.standard_normal((3, 5, 7)) * 50).astype(np_dtype)
    t = gk.from_numpy(a, device=dev)
    assert t.shape == a.shape
    assert t.dtype.name == np.dtype(np_dtype).name
    assert t.device == dev
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_bool_becomes_uint8(dev):
    a = np.array([True, False, True])
    t = gk.from_numpy(a, device=dev)
    assert t.dtype == gk.uint8
    np.testing.assert_array_equal(t.numpy(), [1, 0, 1])


def test_bfloat16_round_trips_through_float32(dev, rng):
    a = rng.standard_normal((4, 9)).astype(np.float32)
    t = gk.from_numpy(a, device=dev).to(gk.bfloat16)
    assert t.dtype == gk.bfloat16
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    np.testing.assert_allclose(t.to(gk.float32).numpy(), a, rtol=2**-8, atol=0)


def test_non_contiguous_arrays_are_read_in_logical_order(dev, rng):
    a = rng.standard_normal((6, 8)).astype(np.float32)
    view = a[::2, 1::3].T
    np.testing.assert_array_equal(gk.from_numpy(view, device=dev).numpy(), view)


def test_float64_is_refused_by_from_numpy_and_narrowed_by_asarray(dev):
    a = np.array([1.5, 2.5])
    with pytest.raises(TypeError, match="float64"):
        gk.from_numpy(a)
    t = gk.asarray(a, device=dev)
    assert t.dtype == gk.float32
    np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))
    assert gk.asarray([[1, 2], [3, 4]]).dtype == gk.int64


def test_creation_functions(dev):
    assert gk.zeros(2, 3, device=dev).numpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert gk.ones((2,), dtype=gk.int32, device=dev).numpy().tolist() == [1, 1]
    assert gk.full((2, 2), 7.0, device=dev).numpy().tolist() == [[7, 7], [7, 7]]
    assert gk.empty(4, 5, device=dev).shape == (4, 5)
    assert gk.arange(5, device=dev).numpy().tolist() == [0, 1, 2, 3, 4]
    assert gk.arange(5, device=dev).dtype == gk.int64
    np.testing.assert_allclose(gk.arange(1, 2, 0.25, device=dev).numpy(), [1, 1.25, 1.5, 1.75])
    r1 = gk.rand(100, seed=3, device=dev).numpy()
    r2 = gk.rand(100, seed=3, device=dev).numpy()
    np.testing.assert_array_equal(r1, r2)
    assert ((r1 >= 0) & (r1 < 1)).all()


def test_metadata(dev):
    t = gk.zeros(2, 3, 4, dtype=gk.float16, device=dev)
    assert t.ndim == 3 and t.numel() == 24 and t.nbytes == 48
    assert t.strides == (12, 4, 1) and t.is_contiguous()
    assert t.transpose(0, 2).strides == (1, 4, 12) and not t.transpose(0, 2).is_contiguous()
    assert len(t) == 2
    assert "float16" in repr(t)


def test_views_share_memory(dev):
    t = gk.zeros(4, 6, device=dev)
    v = t[1:3, 2:]
    assert v.shape == (2, 4)
    v[...] = 5.0
    expect = np.zeros((4, 6), np.float32)
    expect[1:3, 2:] = 5
    np.testing.assert_array_equal(t.numpy(), expect)


def test_indexing_matches_numpy(dev, rng):
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    t = gk.from_numpy(a, device=dev)
    for key in [1, -1, (1, 2), (slice(1, 3),), (Ellipsis, 2), (None, 0), (slice(None), 3, slice(2, 4)),
                (2, Ellipsis, slice(-2, None)), (slice(None, None, 2),),
                (slice(1, None, 3), Ellipsis, slice(0, 5, 2)), (Ellipsis, slice(5, 1, 4)),
                (slice(0, 0, 2),)]:
        np.testing.assert_array_equal(t[key].numpy(), a[key], err_msg=str(key))
    ids = gk.asarray(np.array([3, 0, 3], np.int64), device=dev)
    np.testing.assert_array_equal(t[ids].numpy(), a[[3, 0, 3]])
    with pytest.raises(IndexError):
        t[4]
    with pytest.raises(IndexError, match="step"):
        t[::-1]


def test_strided_slices_are_views(dev):
    t = gk.zeros(6, 4, device=dev)
    t[1::2, ::3] = 7.0
    expect = np.zeros((6, 4), np.float32)
    expect[1::2, ::3] = 7
    np.testing.assert_array_equal(t.numpy(), expect)
    assert t[::2].strides == (8, 1)
    assert t[:, ::10**18].shape == (6, 1)  # a step past the end takes one element


def test_setitem_from_tensor_array_and_number(dev):
    t = gk.zeros(3, 4, device=dev)
    t[0] = 1.0
    t[1] = np.arange(4, dtype=np.float32)
    t[2, 1:3] = gk.full((2,), 9.0, device=dev)
    np.testing.assert_array_equal(t.numpy(), [[1, 1, 1, 1], [0, 1, 2, 3], [0, 9, 9, 0]])


def test_reshape_view_permute_squeeze(dev, rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = gk.from_numpy(a, device=dev)
    np.testing.assert_array_equal(t.reshape(6, -1).numpy(), a.reshape(6, -1))
    np.testing.assert_array_equal(t.view(-1).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.permute(2, 0, 1).reshape(4, 6).numpy(), a.transpose(2, 0, 1).reshape(4, 6))
    np.testing.assert_array_equal(t.unsqueeze(1).squeeze(1).numpy(), a)
    np.testing.assert_array_equal(t[:, :1].squeeze().numpy(), a[:, :1].squeeze())
    np.testing.assert_array_equal(t.narrow(2, 1, 2).numpy(), a[:, :, 1:3])
    np.testing.assert_array_equal(t[0].T.numpy(), a[0].T)
    np.testing.assert_array_equal(t[0, 0].expand(3, 4).numpy(), np.broadcast_to(a[0, 0], (3, 4)))
    with pytest.raises(ValueError):
        t.reshape(5, 5)


def test_to_and_from_device_and_dtype(dev, rng):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    t = gk.from_numpy(a)
    moved = t.to(dev)
    assert moved.device == dev
    np.testing.assert_array_equal(moved.cpu().numpy(), a)
    np.testing.assert_allclose(moved.to(gk.float16).numpy(), a.astype(np.float16))
    both = t.to(dev, gk.float16)
    assert both.device == dev and both.dtype == gk.float16
    assert t.to("cpu") is not None
    with pytest.raises(TypeError):
        t.to(3.5)


def test_array_protocol_and_item(dev):
    t = gk.arange(4, dtype=gk.float32, device=dev)
    np.testing.assert_array_equal(np.asarray(t), [0, 1, 2, 3])
    assert t.sum().item() == 6.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="one-element"):
        t.item()


def test_dtypes():
    assert gk.float32.itemsize == 4 and gk.bfloat16.itemsize == 2
    assert gk.q4_K.block_size == 256 and gk.q4_K.is_quantized
    assert gk.float16.is_floating_point and not gk.int32.is_floating_point
    assert repr(gk.float32) == "gpukit.float32"
    assert gk.zeros(2, dtype="f16").dtype == gk.float16
    assert gk.zeros(2, dtype=np.int32).dtype == gk.int32
    with pytest.raises(ValueError, match="dtype"):
        gk.zeros(2, dtype="complex128")


def test_devices():
    names = [str(d) for d in gk.devices()]
    assert names[0] == "cpu"
    cpu = gk.device("cpu")
    assert cpu.type == "cpu" and cpu.index is None and cpu == "cpu"
    assert cpu.memory_stats() == {}
    with pytest.raises(ValueError, match="expected"):
        gk.device("tpu")
    if not gk.cuda_available():
        with pytest.raises((RuntimeError, ValueError)):
            gk.device("cuda:0")
