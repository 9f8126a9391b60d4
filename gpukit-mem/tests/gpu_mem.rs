//! GPU tests of gpukit-mem (ignored without a device; run by `cargo xtask test-gpu` or the GPU
//! bundle). The allocator's logic is property-tested on the CPU in `src/allocator_tests.rs`.

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_driver::testing::{device, spin, test_kernels};
use gpukit_driver::{KernelArgs, LaunchConfig};
use gpukit_mem::{
    DeviceBuffer, DevicePool, Error, EvictionRank, HostSource, PinnedPool, Priority, TransferEngine,
};
use rand::Rng;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::rng().fill(&mut v[..]);
    v
}

fn read_back(buf: &DeviceBuffer) -> Vec<u8> {
    let mut out = vec![0u8; buf.len()];
    buf.copy_to_host(&mut out).unwrap();
    out
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_same_stream_reuses_a_freed_block_at_once() {
    let dev = device();
    let pool = DevicePool::new(&dev);
    let s = dev.new_stream().unwrap();
    let a = pool.alloc(1 << 20, &s).unwrap();
    let addr = a.ptr();
    drop(a);
    let b = pool.alloc(1 << 20, &s).unwrap();
    assert_eq!(b.ptr(), addr);
    let st = pool.stats().allocator;
    assert_eq!((st.cache_hits, st.cache_misses, st.fences), (1, 1, 0));
    println!("[gpu] pool after same-stream reuse: {}", pool.stats());
}

/// A kernel on stream A reads a block late (after a 50 ms spin) while the block is freed and the
/// pool serves an allocation on stream B, whose kernel writes its block at once. If the pool
/// handed A's block to B, A's sum would be corrupted.
/// A stream whose every other handle is gone is let go by the pool (it would otherwise live as
/// long as the pool), and what it freed serves the next stream without a new segment.
#[test]
#[ignore = "needs a CUDA device"]
fn gpu_the_pool_lets_go_of_streams_nobody_holds() {
    let dev = device();
    let pool = DevicePool::new(&dev);
    let s = dev.new_stream().unwrap();
    let a = pool.alloc(12 << 20, &s).unwrap();
    let addr = a.ptr();
    drop(a);
    assert_eq!(pool.retire_streams().unwrap(), 0, "a live handle holds it");
    let weak = s.clone();
    drop(s);
    assert_eq!(pool.retire_streams().unwrap(), 0, "a clone still holds it");
    drop(weak);
    assert_eq!(pool.retire_streams().unwrap(), 1);
    let t = dev.new_stream().unwrap();
    let b = pool.alloc(12 << 20, &t).unwrap();
    assert_eq!(b.ptr(), addr);
    assert_eq!(pool.stats().allocator.segments, 1);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_cross_stream_reuse_never_races() {
    let dev = device();
    let k = test_kernels(&dev);
    let sum = k.function("spin_then_sum_u32").unwrap();
    let fill = k.function("fill_u32").unwrap();
    let pool = DevicePool::new(&dev);
    let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    // 12 MiB: a large block with a segment of exactly its size, so no ready remainder exists
    // and B can only get A's block once A is done.
    let n = 3usize << 20;
    let data: Vec<u32> = (0..n).map(|_| rand::rng().random_range(0..1000)).collect();
    let want: u64 = data.iter().map(|&x| u64::from(x)).sum();
    let mut x = pool.alloc(4 * n, &a).unwrap();
    x.copy_from_host(&data).unwrap();
    let out = pool.alloc(8, &a).unwrap();
    let x_addr = x.ptr();
    let args = KernelArgs::new()
        .arg(50_000_000u64)
        .arg(x.ptr())
        .arg(n as u32)
        .arg(out.ptr());
    // SAFETY: x holds n u32, out one u64; x's block is only reusable by other streams after the
    // kernel (what this test checks), out outlives it.
    unsafe { sum.launch(&a, &LaunchConfig::new(1, 256), &args) }.unwrap();
    drop(x); // freed on A while A's kernel is still spinning

    // B asks for the same size right away: it must not get A's block.
    let y = pool.alloc(4 * n, &b).unwrap();
    assert_ne!(
        y.ptr(),
        x_addr,
        "a block still in use on stream A was handed to stream B"
    );
    let cfg = LaunchConfig::for_elements(n, 256).unwrap();
    let fill_args = KernelArgs::new()
        .arg(y.ptr())
        .arg(0xFFFF_FFFFu32)
        .arg(n as u32);
    // SAFETY: y holds n u32.
    unsafe { fill.launch(&b, &cfg, &fill_args) }.unwrap();
    b.synchronize().unwrap();
    let mut got = [0u64];
    out.copy_to_host(&mut got).unwrap(); // waits for A
    assert_eq!(got[0], want, "stream A's read of its block was corrupted");
    assert!(pool.stats().allocator.fences >= 1);

    // Once A has finished, A's block is ready for B.
    let z = pool.alloc(4 * n, &b).unwrap();
    assert_eq!(z.ptr(), x_addr, "A's finished block was not reused by B");
    drop((y, z));

    // Same-stream reuse while a reader is in flight is ordered by the stream itself.
    let mut x2 = pool.alloc(4 * n, &a).unwrap();
    x2.copy_from_host(&data).unwrap();
    let x2_addr = x2.ptr();
    let args = KernelArgs::new()
        .arg(20_000_000u64)
        .arg(x2.ptr())
        .arg(n as u32)
        .arg(out.ptr());
    // SAFETY: as above.
    unsafe { sum.launch(&a, &LaunchConfig::new(1, 256), &args) }.unwrap();
    drop(x2);
    let v = pool.alloc(4 * n, &a).unwrap();
    assert_eq!(
        v.ptr(),
        x2_addr,
        "the same stream should reuse its block at once"
    );
    let fill_args = KernelArgs::new().arg(v.ptr()).arg(7u32).arg(n as u32);
    // SAFETY: v holds n u32; it runs after the sum on the same stream.
    unsafe { fill.launch(&a, &cfg, &fill_args) }.unwrap();
    out.copy_to_host(&mut got).unwrap();
    assert_eq!(got[0], want);
    println!(
        "[gpu] cross-stream race test: sums intact; {}",
        pool.stats()
    );
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_quotas_refuse_with_numbers() {
    let dev = device();
    let s = dev.new_stream().unwrap();
    let pool = DevicePool::with_limit(&dev, 10 << 20);
    let a = pool.alloc(8 << 20, &s).unwrap();
    match pool.alloc(4 << 20, &s) {
        Err(Error::OutOfMemory {
            requested,
            limit,
            in_use,
        }) => {
            assert_eq!((requested, limit, in_use), (4 << 20, 10 << 20, 8 << 20));
        }
        other => panic!("expected a quota error, got {other:?}"),
    }
    let tenant = pool.sub_pool(1 << 20);
    assert!(matches!(
        tenant.alloc(2 << 20, &s),
        Err(Error::OutOfMemory { .. })
    ));
    let t = tenant.alloc(1 << 20, &s).unwrap();
    // The tenant's bytes count against the parent too: 8 + 1 MiB used, 2 MiB asked.
    assert!(matches!(
        pool.alloc(2 << 20, &s),
        Err(Error::OutOfMemory { .. })
    ));
    drop((a, t));
    assert_eq!(pool.in_use(), Some(0));
    pool.alloc(10 << 20, &s).unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_device_out_of_memory_releases_the_cache_then_errors() {
    let dev = device();
    let s = dev.new_stream().unwrap();
    let pool = DevicePool::new(&dev);
    let free = dev.memory_info().unwrap().free;
    let big = (free / 10 * 6) & !((2 << 20) - 1);
    drop(pool.alloc(big, &s).unwrap()); // cached, not returned to the driver
    assert_eq!(pool.stats().allocator.reserved_bytes, big);
    // 70% does not fit beside the cached 60%: the pool must give its cache back and retry.
    let bigger = (free / 10 * 7) & !((2 << 20) - 1);
    let b = pool.alloc(bigger, &s).unwrap();
    let st = pool.stats().allocator;
    assert_eq!(st.oom_retries, 1);
    assert!(st.segments_released >= 1);
    drop(b);
    let total = dev.properties().total_memory_bytes;
    let err = pool.alloc(2 * total, &s).unwrap_err();
    assert!(matches!(err, Error::DeviceOutOfMemory { .. }), "{err}");
    assert!(err.is_out_of_memory());
    // The failed request already gave every cached segment back.
    pool.empty_cache().unwrap();
    assert_eq!(pool.stats().allocator.reserved_bytes, 0);
    println!("[gpu] device OOM: {err}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_eviction_round_trip_is_bit_exact() {
    let dev = device();
    let s = dev.new_stream().unwrap();
    let pool = DevicePool::with_limit(&dev, 64 << 20);
    let (d1, d2) = (random_bytes(24 << 20), random_bytes(24 << 20));
    let e1 = pool.alloc_evictable(d1.len(), &s).unwrap();
    let e2 = pool.alloc_evictable(d2.len(), &s).unwrap();
    e1.resident(&s)
        .unwrap()
        .buffer_mut()
        .copy_from_host(&d1)
        .unwrap();
    e2.resident(&s)
        .unwrap()
        .buffer_mut()
        .copy_from_host(&d2)
        .unwrap();
    // e2 is in use (its guard lives) and e1 is the least recently used: 24 MiB more must evict
    // e1 and leave e2 alone.
    let guard = e2.resident(&s).unwrap();
    let extra = pool.alloc(24 << 20, &s).unwrap();
    assert!(
        !e1.is_on_device(),
        "e1 should have been spilled to host memory"
    );
    assert_eq!(pool.stats().evictions, 1);
    assert_eq!(
        read_back(guard.buffer()),
        d2,
        "e2 was in use and must be untouched"
    );
    drop(guard);
    drop(extra);
    // Back on the device, bit for bit.
    let r = e1.resident(&s).unwrap();
    assert_eq!(read_back(r.buffer()), d1);
    assert_eq!(pool.stats().restores, 1);
    drop(r);
    // A request no eviction can satisfy is refused with the numbers.
    assert!(matches!(
        pool.alloc(100 << 20, &s),
        Err(Error::OutOfMemory { .. })
    ));
    assert_eq!(
        pool.stats().evictions,
        1,
        "nothing is spilled for a request over the limit"
    );
    println!("[gpu] eviction: {}", pool.stats());
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_borrowers_give_back_best_effort_memory_first() {
    const MIB: usize = 1 << 20;
    let dev = device();
    let s = dev.new_stream().unwrap();
    let root = DevicePool::new(&dev);
    // 8 MiB nobody reserved, lent to a best-effort pool and to a burstable one (2 MiB own).
    let lender = root
        .sub_pool(8 * MIB)
        .with_eviction_rank(EvictionRank::First);
    let best_effort = lender.sub_pool(64 * MIB);
    let burstable = root
        .sub_pool_borrowing(2 * MIB, 64 * MIB, &lender)
        .unwrap()
        .with_eviction_rank(EvictionRank::Normal);
    assert!(
        root.sub_pool_borrowing(0, MIB, &root).is_err(),
        "a lender needs a limit"
    );
    // The burstable buffer is the least recently used, but best-effort memory goes first.
    let b_own = burstable.alloc(2 * MIB, &s).unwrap();
    let b_lent = burstable.alloc_evictable(4 * MIB, &s).unwrap();
    let e_lent = best_effort.alloc_evictable(4 * MIB, &s).unwrap();
    assert_eq!(
        (lender.in_use(), burstable.in_use()),
        (Some(8 * MIB), Some(6 * MIB))
    );
    let more = burstable.alloc(4 * MIB, &s).unwrap();
    assert!(
        !e_lent.is_on_device(),
        "the best-effort buffer should have been spilled"
    );
    assert!(
        b_lent.is_on_device(),
        "the burstable buffer went before the best-effort one"
    );
    assert_eq!(lender.in_use(), Some(8 * MIB));
    // Shrinking the lender refuses new borrowing; the borrower gives back what it can spill.
    lender.set_limit(4 * MIB).unwrap();
    assert!(burstable.alloc(MIB, &s).is_err());
    assert!(
        !b_lent.is_on_device(),
        "the borrowed buffer should have been given back"
    );
    drop((b_own, more));
    assert_eq!((burstable.in_use(), lender.in_use()), (Some(0), Some(0)));
    // Back on the device: 4 MiB, 2 of its own reservation and 2 borrowed.
    let back = b_lent.resident(&s).unwrap();
    assert_eq!(
        (burstable.in_use(), lender.in_use()),
        (Some(4 * MIB), Some(2 * MIB))
    );
    drop(back);
    assert!(
        root.set_limit(1).is_err(),
        "the root pool has no limit of its own"
    );
    drop((b_lent, e_lent));
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_pinned_pool_reuses_buffers() {
    let dev = device();
    let pinned = PinnedPool::new(&dev);
    let mut a = pinned.alloc(100_000).unwrap();
    a.as_mut_slice().fill(7);
    drop(a);
    let b = pinned.alloc(90_000).unwrap();
    assert_eq!(b.len(), 90_000);
    let st = pinned.stats();
    assert_eq!((st.hits, st.misses), (1, 1));
    drop(b);
    assert!(pinned.empty_cache() >= 100_000);
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_transfers_round_trip_pageable_pinned_and_files() {
    let dev = device();
    let pool = DevicePool::new(&dev);
    // Small chunks so the ring wraps many times and the last chunk is partial.
    let engine = TransferEngine::with_chunk_bytes(&dev, pool.pinned(), 1 << 20).unwrap();
    let compute = dev.new_stream().unwrap();
    let data = random_bytes((13 << 20) + 12_345);

    // Pageable → device, ordered on the compute stream without a host wait; then back.
    let t = engine
        .upload_new(
            HostSource::bytes(data.clone()),
            &pool,
            &compute,
            Priority::Normal,
        )
        .unwrap();
    let buf = t.then_on(&compute).unwrap();
    assert_eq!(buf.stream(), &compute);
    let (buf, back) = engine
        .download(buf, 0..data.len(), Priority::High)
        .unwrap()
        .wait()
        .unwrap();
    assert!(back == data, "pageable round trip differs");

    // Into the middle of an existing buffer, from pinned memory.
    let mut pinned = pool.pinned().alloc(4096).unwrap();
    pinned.as_mut_slice().copy_from_slice(&data[..4096]);
    let buf = engine
        .upload(HostSource::Pinned(pinned), buf, 1_000_000, Priority::Low)
        .unwrap()
        .wait()
        .unwrap();
    let (_, part) = engine
        .download(buf, 1_000_000..1_004_096, Priority::Normal)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(&part[..], &data[..4096]);

    // A file, whole and a range.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.bin");
    std::fs::write(&path, &data).unwrap();
    let s = dev.new_stream().unwrap();
    let whole = engine
        .load_file(&path, None, &pool, &s, Priority::Normal)
        .unwrap()
        .wait()
        .unwrap();
    assert!(read_back(&whole) == data);
    let part = engine
        .load_file(&path, Some(5..(3 << 20) + 7), &pool, &s, Priority::Normal)
        .unwrap()
        .wait()
        .unwrap();
    assert!(read_back(&part) == data[5..(3 << 20) + 7]);
    // A memory-mapped file as a pageable source.
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the test's own file, not modified while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let src = HostSource::Pageable {
        data: std::sync::Arc::new(map),
        range: 7..(5 << 20) + 3,
    };
    let mapped = engine
        .upload_new(src, &pool, &s, Priority::Normal)
        .unwrap()
        .wait()
        .unwrap();
    assert!(read_back(&mapped) == data[7..(5 << 20) + 3]);
    let too_far = 0..data.len() as u64 + 1;
    let err = engine.load_file(&path, Some(too_far), &pool, &s, Priority::Normal);
    assert!(matches!(err, Err(Error::InvalidArgument(_))));
    let missing = engine.load_file(&dir.path().join("nope"), None, &pool, &s, Priority::Normal);
    assert!(matches!(missing, Err(Error::Io { .. })));

    // The upload waits for work already queued on the destination's stream: a kernel filling
    // the buffer late (after a spin) must land before the upload overwrites it.
    let k = test_kernels(&dev);
    let fill = k.function("fill_u32").unwrap();
    let target = pool.alloc(1 << 20, &s).unwrap();
    spin(&k, &s, 30_000_000);
    let args = KernelArgs::new()
        .arg(target.ptr())
        .arg(3u32)
        .arg((1u32 << 20) / 4);
    // SAFETY: target holds 2^18 u32.
    unsafe {
        fill.launch(
            &s,
            &LaunchConfig::for_elements(1 << 18, 256).unwrap(),
            &args,
        )
    }
    .unwrap();
    let ones = vec![1u8; 1 << 20];
    let target = engine
        .upload(HostSource::bytes(ones.clone()), target, 0, Priority::High)
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        read_back(&target) == ones,
        "the upload ran before the stream's earlier work"
    );
    let st = engine.stats();
    println!("[gpu] transfers: {st:?}");
    assert!(st.uploaded_bytes > 2 * data.len() as u64);
}

/// Many uploads queued back to back: each job's first chunks must not overwrite a staging buffer
/// the DMA engine is still reading for the previous job.
#[test]
#[ignore = "needs a CUDA device"]
fn gpu_back_to_back_uploads_keep_their_data() {
    let dev = device();
    let pool = DevicePool::new(&dev);
    let engine = TransferEngine::with_chunk_bytes(&dev, pool.pinned(), 256 << 10).unwrap();
    let s = dev.new_stream().unwrap();
    let datas: Vec<Vec<u8>> = (0..48)
        .map(|i| random_bytes((300 << 10) + i * 4099))
        .collect();
    let transfers: Vec<_> = datas
        .iter()
        .map(|d| {
            engine
                .upload_new(HostSource::bytes(d.clone()), &pool, &s, Priority::Normal)
                .unwrap()
        })
        .collect();
    let bufs: Vec<_> = transfers
        .into_iter()
        .map(|t| t.then_on(&s).unwrap())
        .collect();
    for (i, (b, d)) in bufs.iter().zip(&datas).enumerate() {
        assert!(read_back(b) == *d, "upload {i} was corrupted");
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_buffers_move_between_streams_in_order() {
    let dev = device();
    let k = test_kernels(&dev);
    let fill = k.function("fill_u32").unwrap();
    let pool = DevicePool::new(&dev);
    let (a, b) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    let n = 1u32 << 16;
    let mut buf = pool.alloc(4 * n as usize, &a).unwrap();
    spin(&k, &a, 20_000_000);
    let args = KernelArgs::new().arg(buf.ptr()).arg(5u32).arg(n);
    // SAFETY: buf holds n u32.
    unsafe {
        fill.launch(
            &a,
            &LaunchConfig::for_elements(n as usize, 256).unwrap(),
            &args,
        )
    }
    .unwrap();
    buf.move_to_stream(&b).unwrap();
    assert_eq!(buf.stream(), &b);
    let mut host = vec![0u32; n as usize];
    buf.copy_to_host(&mut host).unwrap(); // on b: must see a's fill
    assert!(host.iter().all(|&v| v == 5));
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_adopted_memory_is_used_in_place_and_released_by_its_owner() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Memory of another allocator, and a flag set when it is released.
    struct Owner {
        _memory: gpukit_driver::DeviceAllocation,
        released: Arc<AtomicBool>,
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.released.store(true, Ordering::SeqCst);
        }
    }

    let dev = device();
    let pool = DevicePool::new(&dev);
    let s = dev.new_stream().unwrap();
    let foreign = dev.alloc(4096).unwrap();
    let addr = foreign.ptr().0;
    let released = Arc::new(AtomicBool::new(false));
    // SAFETY: `foreign` is 4096 bytes of this device's memory, owned by the box until the drop.
    let mut buf = unsafe {
        pool.adopt(
            addr,
            4096,
            &s,
            Box::new(Owner {
                _memory: foreign,
                released: released.clone(),
            }),
        )
    }
    .unwrap();
    assert!(buf.is_adopted());
    assert_eq!((buf.ptr().0, buf.len(), buf.capacity()), (addr, 4096, 4096));
    let data = random_bytes(4096);
    buf.copy_from_host(&data).unwrap();
    assert_eq!(read_back(&buf), data);
    // The pool neither counts nor frees adopted memory.
    assert_eq!(pool.stats().allocator.allocated_bytes, 0);
    assert!(!released.load(Ordering::SeqCst));
    drop(buf);
    assert!(released.load(Ordering::SeqCst));
    assert_eq!(pool.stats().allocator.allocations, 0);
    // SAFETY: refused before the memory is touched.
    let empty = unsafe { pool.adopt(addr, 0, &s, Box::new(())) };
    assert!(matches!(empty, Err(Error::InvalidArgument(_))));
}
