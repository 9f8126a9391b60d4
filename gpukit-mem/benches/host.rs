//! The caching allocator's bookkeeping, on a host model of memory and streams (no GPU): what an
//! allocation and a free cost the host, with the device work taken away.
//!
//! ```text
//! cargo bench -p gpukit-mem --bench host
//! ```
//!
//! - `same stream`: a decode step's pattern — a few dozen blocks of mixed sizes allocated and
//!   freed on one stream, every one a cache hit after the first round;
//! - `two streams`: blocks freed on one stream and allocated on another, so each reuse goes
//!   through a fence (completed at once here);
//! - `quota`: the same-stream pattern charged to a tenant's quota and its parent's.

use std::hint::black_box;

use criterion::Criterion;
use gpukit_mem::allocator::{Allocator, Backend, Quota};

/// Memory as an address counter and streams whose fences are complete at once.
struct Host {
    next_addr: u64,
}

impl Backend for Host {
    type Segment = usize;
    type Stream = u64;
    type Fence = ();
    type Error = String;

    fn stream_key(stream: &u64) -> u64 {
        *stream
    }

    fn alloc_segment(&mut self, bytes: usize) -> Result<Option<(usize, u64)>, String> {
        let addr = self.next_addr;
        self.next_addr += bytes as u64 + 4096;
        Ok(Some((bytes, addr)))
    }

    fn record_fence(&mut self, _stream: &u64) -> Result<(), String> {
        Ok(())
    }

    fn fence_complete(&mut self, _fence: &()) -> Result<bool, String> {
        Ok(true)
    }

    fn wait_fence(&mut self, _fence: &()) -> Result<(), String> {
        Ok(())
    }

    fn release_fence(&mut self, _fence: ()) {}
}

/// Sizes like a decode step's activations and workspaces: 512 B to 2 MiB.
fn sizes() -> Vec<usize> {
    (0..48).map(|i| 512 << (i % 13)).collect()
}

/// One round: every size allocated on stream `from` (charging `quotas`), then freed on `to`.
fn round(
    a: &mut Allocator<Host>,
    sizes: &[usize],
    (from, to): (u64, u64),
    quotas: &[&Quota],
) -> Result<(), String> {
    let live: Vec<_> = sizes
        .iter()
        .map(|&n| a.alloc(n, &from, quotas).map_err(|e| format!("{e:?}")))
        .collect::<Result<_, _>>()?;
    for x in live {
        if !a.free(x, &to, quotas) {
            return Err("a live allocation was not freed".into());
        }
    }
    Ok(())
}

fn main() -> Result<(), String> {
    let sizes = sizes();
    let (parent, tenant) = (Quota::new(1 << 30), Quota::new(256 << 20));
    let cases: [(&str, (u64, u64), &[&Quota]); 3] = [
        ("same stream", (1, 1), &[]),
        ("two streams", (1, 2), &[]),
        ("quota", (1, 1), &[&tenant, &parent]),
    ];
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("allocator: 48 allocations and frees");
    for (name, streams, quotas) in cases {
        let mut a = Allocator::new(Host { next_addr: 0 });
        // Checked once before it is timed: a failing round would time nothing.
        round(&mut a, &sizes, streams, quotas)?;
        group.bench_function(name, |b| {
            b.iter(|| black_box(round(&mut a, &sizes, streams, quotas)));
        });
    }
    group.finish();
    c.final_summary();
    Ok(())
}
