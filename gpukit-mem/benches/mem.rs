//! gpukit-mem benchmark (GPU machine): allocation latency beside `cuMemAlloc`/`cuMemFree` and
//! CUDA's stream-ordered pool (`cuMemAllocAsync`), and host↔device bandwidth of the transfer
//! engine beside a plain pinned `cuMemcpyHtoD`, including loading a 2 GiB file from the page
//! cache. Run by `cargo xtask bench` or the GPU bundle (`run.sh bench`). Prints a table and
//! writes `bench-mem.json` to `$GPUKIT_BENCH_OUT` (default `target/bench`).

use std::sync::Arc;
use std::time::Instant;

use gpukit_driver::{Device, PinnedAllocation};
use gpukit_mem::{DevicePool, HostSource, PinnedPool, Priority, TransferEngine};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median seconds per operation over `batches` batches of `per_batch` operations.
fn time_ops(batches: usize, per_batch: usize, mut op: impl FnMut() -> Res<()>) -> Res<f64> {
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..per_batch {
            op()?;
        }
        samples.push(t.elapsed().as_secs_f64() / per_batch as f64);
    }
    Ok(median(samples))
}

/// Not zeros: a cheap xorshift fill.
fn pattern(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

struct Row {
    name: String,
    value: f64,
    unit: &'static str,
    peer: Option<(String, f64)>,
}

fn main() -> Res<()> {
    let dev = Device::new(0)?;
    let s = dev.new_stream()?;
    println!("gpukit-mem bench on {} ({:?})", dev.properties().name, dev);
    let mut rows: Vec<Row> = Vec::new();

    // --- allocation latency (host time per alloc+free pair, steady state) ---
    for size in [4usize << 10, 1 << 20, 64 << 20] {
        let pool = DevicePool::new(&dev);
        let ours = time_ops(200, 500, || {
            drop(pool.alloc(size, &s)?);
            Ok(())
        })?;
        let raw = time_ops(50, 4, || {
            drop(dev.alloc(size)?);
            Ok(())
        })?;
        let async_pool = time_ops(200, 500, || {
            drop(s.alloc_async(size)?);
            Ok(())
        })?;
        s.synchronize()?;
        let label = format!("alloc+free {} KiB", size >> 10);
        rows.push(Row {
            name: format!("{label} vs cuMemAlloc/cuMemFree"),
            value: ours * 1e6,
            unit: "us",
            peer: Some(("cuMemAlloc".into(), raw * 1e6)),
        });
        rows.push(Row {
            name: format!("{label} vs cuMemAllocAsync/cuMemFreeAsync"),
            value: ours * 1e6,
            unit: "us",
            peer: Some(("cuMemAllocAsync".into(), async_pool * 1e6)),
        });
    }

    // --- bandwidth ---
    let size = 512usize << 20;
    let gbs = |secs: f64, bytes: usize| bytes as f64 / secs / 1e9;
    let pool = DevicePool::new(&dev);
    let dst = pool.alloc(size, &s)?;
    let mut pinned_raw: PinnedAllocation = dev.alloc_pinned(size)?;
    pinned_raw.as_mut_slice().copy_from_slice(&pattern(size));
    let plain_h2d = time_ops(10, 1, || {
        // SAFETY: both ranges hold `size` bytes and nothing else touches them until the sync.
        unsafe { s.memcpy_htod_async(dst.ptr(), pinned_raw.as_ptr(), size) }?;
        s.synchronize()?;
        Ok(())
    })?;
    let plain_d2h = time_ops(10, 1, || {
        // SAFETY: as above.
        unsafe { s.memcpy_dtoh_async(pinned_raw.as_mut_ptr(), dst.ptr(), size) }?;
        s.synchronize()?;
        Ok(())
    })?;
    let h2d_ceiling = gbs(plain_h2d, size);
    let d2h_ceiling = gbs(plain_d2h, size);
    drop(pinned_raw);
    println!("plain pinned cuMemcpy: H2D {h2d_ceiling:.1} GB/s, D2H {d2h_ceiling:.1} GB/s");

    let host = Arc::new(pattern(size));
    let pinned = PinnedPool::new(&dev);
    let mut dst_slot = Some(dst);
    for chunk in [32usize << 20, 64 << 20, 128 << 20] {
        let engine = TransferEngine::with_chunk_bytes(&dev, &pinned, chunk)?;
        let mc = chunk >> 20;
        let t = time_ops(10, 1, || {
            let mut p = pinned.alloc(size)?;
            p.as_mut_slice()[..8].copy_from_slice(&[1; 8]);
            let d = dst_slot.take().ok_or("buffer")?;
            dst_slot = Some(
                engine
                    .upload(HostSource::Pinned(p), d, 0, Priority::Normal)?
                    .wait()?,
            );
            Ok(())
        })?;
        rows.push(Row {
            name: format!("H2D engine, pinned source, chunk {mc} MiB"),
            value: gbs(t, size),
            unit: "GB/s",
            peer: Some(("plain pinned cuMemcpyHtoD".into(), h2d_ceiling)),
        });
        let t = time_ops(10, 1, || {
            let d = dst_slot.take().ok_or("buffer")?;
            let src = HostSource::Pageable {
                data: host.clone(),
                range: 0..size,
            };
            dst_slot = Some(engine.upload(src, d, 0, Priority::Normal)?.wait()?);
            Ok(())
        })?;
        rows.push(Row {
            name: format!("H2D engine, pageable source, chunk {mc} MiB"),
            value: gbs(t, size),
            unit: "GB/s",
            peer: Some(("plain pinned cuMemcpyHtoD".into(), h2d_ceiling)),
        });
        let t = time_ops(10, 1, || {
            let d = dst_slot.take().ok_or("buffer")?;
            let (d, bytes) = engine.download(d, 0..size, Priority::Normal)?.wait()?;
            if bytes.len() != size {
                return Err("short download".into());
            }
            dst_slot = Some(d);
            Ok(())
        })?;
        rows.push(Row {
            name: format!("D2H engine, pageable destination, chunk {mc} MiB"),
            value: gbs(t, size),
            unit: "GB/s",
            peer: Some(("plain pinned cuMemcpyDtoH".into(), d2h_ceiling)),
        });
    }
    drop(dst_slot);

    // --- a 2 GiB file from the page cache ---
    let file_size = 2usize << 30;
    let path = std::env::temp_dir().join("gpukit-bench-2g.bin");
    if std::fs::metadata(&path).map(|m| m.len() as usize).ok() != Some(file_size) {
        let block = pattern(64 << 20);
        let mut f = std::fs::File::create(&path)?;
        for _ in 0..file_size / block.len() {
            std::io::Write::write_all(&mut f, &block)?;
        }
    }
    for chunk in [32usize << 20, 64 << 20, 128 << 20] {
        let engine = TransferEngine::with_chunk_bytes(&dev, &pinned, chunk)?;
        // The first load warms the page cache; the timed ones read from it.
        drop(
            engine
                .load_file(&path, None, &pool, &s, Priority::Normal)?
                .wait()?,
        );
        let t = time_ops(3, 1, || {
            drop(
                engine
                    .load_file(&path, None, &pool, &s, Priority::Normal)?
                    .wait()?,
            );
            Ok(())
        })?;
        rows.push(Row {
            name: format!("load 2 GiB file (page cache), chunk {} MiB", chunk >> 20),
            value: gbs(t, file_size),
            unit: "GB/s",
            peer: Some(("plain pinned cuMemcpyHtoD".into(), h2d_ceiling)),
        });
        // The same file through a memory map (page faults on the mapping included).
        let t = time_ops(3, 1, || {
            let file = std::fs::File::open(&path)?;
            // SAFETY: the bench's own file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&file) }?;
            let src = HostSource::Pageable {
                data: Arc::new(map),
                range: 0..file_size,
            };
            drop(
                engine
                    .upload_new(src, &pool, &s, Priority::Normal)?
                    .wait()?,
            );
            Ok(())
        })?;
        rows.push(Row {
            name: format!("upload 2 GiB mmap'd file, chunk {} MiB", chunk >> 20),
            value: gbs(t, file_size),
            unit: "GB/s",
            peer: Some(("plain pinned cuMemcpyHtoD".into(), h2d_ceiling)),
        });
    }
    let _ = std::fs::remove_file(&path);

    // --- report ---
    println!(
        "{:<62} {:>10} {:>24} {:>8}",
        "benchmark", "gpukit", "peer", "ratio"
    );
    let mut json = Vec::new();
    for r in &rows {
        let (peer_name, peer) = r.peer.clone().unwrap_or_default();
        // For latency lower is better (peer / ours = speed-up); for bandwidth, ours / peer.
        let ratio = if r.unit == "us" {
            peer / r.value
        } else {
            r.value / peer
        };
        println!(
            "{:<62} {:>7.3} {:<4} {:>14.3} {:<9} {:>7.2}x",
            r.name, r.value, r.unit, peer, r.unit, ratio
        );
        json.push(format!(
            "{{\"name\":\"{}\",\"value\":{:.4},\"unit\":\"{}\",\"peer\":\"{}\",\"peer_value\":{:.4},\"ratio\":{:.4}}}",
            r.name, r.value, r.unit, peer_name, peer, ratio
        ));
    }
    let out = std::env::var_os("GPUKIT_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&out)?;
    let doc = format!(
        "{{\"device\":\"{}\",\"h2d_pinned_gbs\":{h2d_ceiling:.3},\"d2h_pinned_gbs\":{d2h_ceiling:.3},\"rows\":[{}]}}\n",
        dev.properties().name,
        json.join(",")
    );
    std::fs::write(out.join("bench-mem.json"), doc)?;
    Ok(())
}
