"""Streams, events and CUDA graphs (GPU), and what they say without a GPU."""

import gc
import re

import numpy as np
import pytest

import gpukit as gk
from conftest import HAS_GPU, requires_gpu


@pytest.mark.skipif(HAS_GPU, reason="checks the message without a GPU")
def test_streams_need_a_gpu():
    with pytest.raises((RuntimeError, ValueError)):
        gk.Stream()


@requires_gpu
def test_stream_context_places_new_tensors_and_orders_work():
    s = gk.Stream(priority="high")
    assert s.priority == "high"
    with s:
        a = gk.full((1 << 20,), 2.0, device="cuda")
        b = a * 3.0
    assert b.device == "cuda:0"
    s.synchronize()
    assert b.sum().item() == 6.0 * (1 << 20)


@requires_gpu
def test_events_time_gpu_work():
    x = gk.rand(4096, 4096, seed=1, device="cuda")
    start, end = gk.Event(), gk.Event()
    start.record()
    for _ in range(5):
        x = gk.matmul(x, x) * 1e-3
    end.record()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) > 0.0


@requires_gpu
def test_graph_replay_equals_eager_bitwise():
    s = gk.Stream()
    with s:
        x = gk.rand(64, 256, seed=2, device="cuda")
        w = gk.rand(256, 256, seed=3, device="cuda")
        h = gk.zeros(64, 256, device="cuda")
        out = gk.zeros(64, 256, device="cuda")
    saxpy = gk.jit(
        'extern "C" __global__ void scale(float* y, float a, int n) {'
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= a; }",
        "scale",
    )

    def step():
        gk.linear(x, w, out=h)
        gk.silu(h, out=out)
        saxpy((64 * 256 + 255) // 256, 256, [out, 0.5, 64 * 256], stream=s)

    step()
    s.synchronize()
    eager = out.numpy().copy()
    out[...] = 0.0
    g = gk.Graph.capture(step, stream=s)
    g.upload()
    g.replay()
    g.synchronize()
    np.testing.assert_array_equal(out.numpy(), eager)
    # New inputs written before a replay are seen by it.
    with s:
        x[...] = 1.0
    g.replay()
    g.synchronize()
    assert not np.array_equal(out.numpy(), eager)


@requires_gpu
def test_graph_capture_refuses_host_work_and_passes_exceptions_through():
    s = gk.Stream()

    def allocates():
        with s:
            gk.zeros(4, device="cuda").numpy()

    with pytest.raises((ValueError, RuntimeError)):
        gk.Graph.capture(allocates, stream=s)

    def raises():
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        gk.Graph.capture(raises, stream=s)
    # The stream still works afterwards.
    with s:
        assert (gk.ones(3, device="cuda") * 2).sum().item() == 6.0


@requires_gpu
def test_memory_stats_tenant_quota_and_close():
    d = gk.device("cuda")
    stats = d.memory_stats()
    assert stats["allocated_bytes"] >= 0 and "cache_hits" in stats
    tenant = d.tenant("small", 1 << 20)
    ok = gk.zeros(1 << 17, device=tenant)  # 512 KiB
    assert tenant.memory_stats()["limit_bytes"] == 1 << 20
    with pytest.raises(MemoryError):
        gk.zeros(1 << 19, device=tenant)  # 2 MiB over the 1 MiB quota
    del ok
    d.empty_cache()
    with pytest.raises(ValueError, match="still used"):
        keep = gk.zeros(4, device="cuda")
        gk.device("cuda:0").close()
    del keep


@requires_gpu
def test_closing_counts_the_tenants_and_streams_still_in_use():
    def users():
        gc.collect()
        try:
            gk.device("cuda").close()
            return 0
        except ValueError as e:
            return int(re.search(r"used by (\d+)", str(e)).group(1))

    base = users()
    tenant = gk.device("cuda").tenant("closing", 1 << 20)
    x = gk.zeros(4, device=tenant)
    assert users() == base + 2  # the tenant and its tensor
    del x, tenant
    stream = gk.Stream()
    assert users() == base + 1
    del stream
    assert users() == base


def test_evictable_needs_a_gpu_tensor():
    with pytest.raises(ValueError, match="GPU"):
        gk.evictable(gk.ones(4))


@requires_gpu
def test_evictable_tensors_spill_to_the_host_under_a_quota_and_come_back():
    tenant = gk.device("cuda").tenant("spill", 10 << 20)
    x = gk.rand(1 << 20, seed=5, device=tenant)  # 4 MiB
    want = x.numpy()
    parked = gk.evictable(x)  # 4 MiB more
    del x
    assert parked.is_resident and parked.nbytes == 4 << 20 and parked.shape == [1 << 20]
    big = gk.zeros(7 << 18, device=tenant)  # 7 MiB: fits the 10 MiB quota only if parked moves
    stats = tenant.memory_stats()
    assert stats["evictions"] >= 1 and not parked.is_resident
    del big
    back = parked.load()
    np.testing.assert_array_equal(back.numpy(), want)
    assert parked.is_resident and tenant.memory_stats()["restores"] >= 1


def test_the_cpu_has_no_scheduler():
    with pytest.raises(ValueError, match="governs a GPU"):
        gk.device("cpu").scheduler()


@requires_gpu
def test_scheduler_admits_by_class_partitions_the_sms_and_releases():
    d = gk.device("cuda")
    sched = d.scheduler(memory=1 << 30)
    assert sched.isolation == "partitions", sched.isolation_detail
    assert sched.capacity == 1 << 30
    g = sched.admit("decode", qos="guaranteed", memory=256 << 20, sm_share=0.25, priority="high")
    e = sched.admit("batch")
    assert (g.qos, e.qos, d.qos) == ("guaranteed", "best-effort", None)
    assert g.partition_sms + e.partition_sms == d.sm_count and d.partition_sms is None
    assert sched.unreserved == (1 << 30) - (256 << 20)
    assert [t["name"] for t in sched.tenants()] == ["decode", "batch"]
    # The ops' kernels run on each tenant's partition stream, and agree with the CPU.
    a = gk.rand(4096, seed=3)
    for dev in (g, e):
        got = gk.softmax(a.to(dev) * 2.0).numpy()
        np.testing.assert_allclose(got, gk.softmax(a * 2.0).numpy(), rtol=1e-6, atol=1e-9)
    # The guaranteed tenant holds exactly its reservation.
    x = gk.zeros(32 << 20, device=g)  # 128 MiB
    with pytest.raises(MemoryError):
        gk.zeros(48 << 20, device=g)  # 192 MiB more
    # Requests that do not fit say what is short; malformed ones say what is wrong.
    with pytest.raises(ValueError, match="GiB is unreserved"):
        sched.admit("huge", qos="burstable", memory=2 << 30)
    with pytest.raises(ValueError, match="unknown QoS class"):
        sched.admit("x", qos="gold")
    with pytest.raises(ValueError, match="only guaranteed tenants"):
        sched.admit("y", qos="best-effort", sm_share=0.5)
    # The tenant leaves when its device and tensors are gone.
    del x, g
    gc.collect()
    assert [t["name"] for t in sched.tenants()] == ["batch"]
    assert sched.unreserved == 1 << 30
    assert "1 tenants" in repr(sched)
