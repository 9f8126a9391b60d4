"""Errors reach Python as exceptions with the Rust message; nothing crashes the interpreter."""

import pytest

import gpukit as gk


def test_a_rust_panic_becomes_an_exception():
    with pytest.raises(gk.PanicException, match="boom"):
        gk._gpukit._panic("boom")
    # The interpreter and the module are still fine.
    assert (gk.ones(2) + 1).sum().item() == 4.0


def test_shape_and_dtype_errors_are_value_errors():
    with pytest.raises(ValueError, match="broadcast"):
        gk.add(gk.ones(3), gk.ones(4))
    with pytest.raises(ValueError):
        gk.matmul(gk.ones(2, 3), gk.ones(2, 3))
    with pytest.raises(ValueError):
        gk.add(gk.ones(3), gk.ones(3, dtype=gk.float16))
    with pytest.raises(ValueError):
        gk.exp(gk.ones(3, dtype=gk.int32))
    with pytest.raises(ValueError, match="negative"):
        gk.zeros(-1)


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError):
        gk.zeros("three")
    with pytest.raises(TypeError):
        gk.from_numpy([1, 2, 3])
    with pytest.raises(TypeError):
        gk.add(1, 2)


def test_host_out_of_memory_is_a_memory_error():
    # 256 TiB of f32: a size that fits the shape arithmetic but no x86-64 address space (128
    # TiB for a process), whatever the host's overcommit policy.
    with pytest.raises(MemoryError):
        gk.empty(1 << 46)


def test_index_errors():
    with pytest.raises(IndexError):
        gk.embedding(gk.ones(4, 2), gk.asarray([5], dtype=gk.int32))
