"""Shared fixtures: the devices every test runs on (the CPU always; CUDA when present, else the
CUDA cases are reported as skipped), and the `gpu` marker."""

import numpy as np
import pytest

import gpukit as gk

HAS_GPU = gk.cuda_available()

requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, requires_gpu])])
def dev(request):
    """The device name a test runs on."""
    return request.param


@pytest.fixture
def rng(request):
    """Fresh random inputs per run; the seed is in the test's report if it fails."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(requires_gpu)
