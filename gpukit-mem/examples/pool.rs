//! The device pool and the transfer engine on device 0: allocations served from cached
//! segments, a sub-pool with a quota that refuses what would exceed it, and a 256 MiB upload
//! through the pinned staging ring, read back and checked.
//!
//! ```text
//! cargo run -p gpukit-mem --example pool
//! ```
//!
//! Needs an NVIDIA GPU; without one it says so and exits with status 1.

use std::time::Instant;

use gpukit_driver::Device;
use gpukit_mem::{DevicePool, HostSource, Priority, TransferEngine};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) if e.is_no_gpu() => {
            eprintln!("this example allocates device memory, so it needs an NVIDIA GPU: {e}");
            std::process::exit(1);
        }
        Err(e) => return Err(e.into()),
    };
    let stream = device.new_stream()?;
    let pool = DevicePool::new(&device);

    // Freed blocks go back to the pool, not the driver: the second round is all cache hits.
    for _ in 0..2 {
        let blocks: Vec<_> = (1..=8)
            .map(|i| pool.alloc(i << 20, &stream))
            .collect::<Result<_, _>>()?;
        drop(blocks);
    }
    println!("after two rounds of 8 allocations: {}", pool.stats());

    // A tenant's share: a sub-pool that may hold at most 64 MiB.
    let tenant = pool.sub_pool(64 << 20);
    let kept = tenant.alloc(48 << 20, &stream)?;
    match tenant.alloc(32 << 20, &stream) {
        Ok(_) => return Err("the quota let 80 MiB through".into()),
        Err(e) => println!("the 64 MiB quota refuses 32 MiB more: {e}"),
    }
    drop(kept);

    // An upload through the transfer engine's pinned staging ring.
    let bytes: Vec<u8> = (0..256usize << 20).map(|i| (i % 251) as u8).collect();
    let engine = TransferEngine::new(&device, pool.pinned())?;
    let t = Instant::now();
    let buffer = engine
        .upload_new(
            HostSource::bytes(bytes.clone()),
            &pool,
            &stream,
            Priority::High,
        )?
        .wait()?;
    stream.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let mut back = vec![0u8; bytes.len()];
    buffer.copy_to_host(&mut back)?;
    println!(
        "uploaded 256 MiB at {:.1} GB/s; read back {}",
        bytes.len() as f64 / secs / 1e9,
        if back == bytes { "equal" } else { "DIFFERENT" }
    );
    if back != bytes {
        return Err("the uploaded bytes came back different".into());
    }
    Ok(())
}
