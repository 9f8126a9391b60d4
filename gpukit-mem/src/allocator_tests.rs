//! Property tests of the allocator on a host model of memory and streams.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use proptest::prelude::*;

use super::allocator::*;

/// Streams as counters: `pos` is how much work was enqueued, `done` how much has completed.
#[derive(Default)]
struct World {
    pos: HashMap<u64, u64>,
    done: HashMap<u64, u64>,
    capacity: usize,
    used: usize,
    next_addr: u64,
}

#[derive(Clone)]
struct Model(Rc<RefCell<World>>);

struct HostSegment {
    world: Model,
    bytes: usize,
}

impl Drop for HostSegment {
    fn drop(&mut self) {
        self.world.0.borrow_mut().used -= self.bytes;
    }
}

impl Backend for Model {
    type Segment = HostSegment;
    type Stream = u64;
    type Fence = (u64, u64);
    type Error = String;

    fn stream_key(s: &u64) -> u64 {
        *s
    }

    fn alloc_segment(&mut self, bytes: usize) -> Result<Option<(HostSegment, u64)>, String> {
        let mut w = self.0.borrow_mut();
        if w.used + bytes > w.capacity {
            return Ok(None);
        }
        w.used += bytes;
        let addr = w.next_addr;
        // Leave a gap so adjacent segments can never look mergeable.
        w.next_addr += bytes as u64 + 4096;
        Ok(Some((
            HostSegment {
                world: self.clone(),
                bytes,
            },
            addr,
        )))
    }

    fn record_fence(&mut self, s: &u64) -> Result<(u64, u64), String> {
        let w = self.0.borrow();
        Ok((*s, w.pos.get(s).copied().unwrap_or(0)))
    }

    fn fence_complete(&mut self, f: &(u64, u64)) -> Result<bool, String> {
        Ok(self.0.borrow().done.get(&f.0).copied().unwrap_or(0) >= f.1)
    }

    fn wait_fence(&mut self, f: &(u64, u64)) -> Result<(), String> {
        let mut w = self.0.borrow_mut();
        let d = w.done.entry(f.0).or_insert(0);
        *d = (*d).max(f.1);
        Ok(())
    }

    fn release_fence(&mut self, _: (u64, u64)) {}
}

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        bytes: usize,
        stream: u64,
    },
    Free {
        index: usize,
    },
    Complete {
        stream: u64,
    },
    ReleaseCached,
    /// Every handle to the stream but the allocator's is gone.
    Retire {
        stream: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            prop_oneof![1usize..4096, 4096usize..(2 << 20), (2usize << 20)..(24 << 20)],
            0u64..3
        )
            .prop_map(|(bytes, stream)| Op::Alloc { bytes, stream }),
        3 => any::<usize>().prop_map(|index| Op::Free { index }),
        2 => (0u64..3).prop_map(|stream| Op::Complete { stream }),
        1 => Just(Op::ReleaseCached),
        1 => (0u64..3).prop_map(|stream| Op::Retire { stream }),
    ]
}

struct Live {
    a: Allocation,
    stream: u64,
}

/// A range freed on `stream` when its queue stood at `pos`.
struct Freed {
    addr: u64,
    end: u64,
    stream: u64,
    pos: u64,
}

fn run(ops: Vec<Op>, capacity: usize, limit: usize) -> Result<(), TestCaseError> {
    let model = Model(Rc::new(RefCell::new(World {
        capacity,
        next_addr: 1 << 20,
        ..Default::default()
    })));
    let mut alloc = Allocator::new(model.clone());
    let quota = Quota::new(limit);
    let mut live: Vec<Live> = Vec::new();
    let mut freed: Vec<Freed> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc { bytes, stream } => {
                *model.0.borrow_mut().pos.entry(stream).or_insert(0) += 1;
                match alloc.alloc(bytes, &stream, &[&quota]) {
                    Ok(a) => {
                        prop_assert!(a.size >= bytes && Some(a.charged) == round_size(bytes));
                        let (lo, hi) = (a.addr, a.addr + a.size as u64);
                        for l in &live {
                            let (llo, lhi) = (l.a.addr, l.a.addr + l.a.size as u64);
                            prop_assert!(hi <= llo || lhi <= lo, "overlap with a live block");
                        }
                        // Reuse of memory freed on another stream needs that free completed.
                        let w = model.0.borrow();
                        for f in &freed {
                            if f.stream != stream && lo < f.end && f.addr < hi {
                                let done = w.done.get(&f.stream).copied().unwrap_or(0);
                                prop_assert!(
                                    done >= f.pos,
                                    "block freed on stream {} at {} reused on stream {} while \
                                     only {} completed",
                                    f.stream,
                                    f.pos,
                                    stream,
                                    done
                                );
                            }
                        }
                        drop(w);
                        live.push(Live { a, stream });
                    }
                    Err(AllocError::Quota {
                        requested,
                        limit,
                        in_use,
                    }) => {
                        prop_assert!(in_use + requested > limit);
                    }
                    Err(AllocError::OutOfMemory { .. }) => {
                        // Everything cached was released first: what is reserved is live
                        // memory plus the partly used segments.
                        prop_assert!(model.0.borrow().used <= capacity);
                    }
                    Err(AllocError::Backend(e)) => return Err(TestCaseError::fail(e)),
                }
            }
            Op::Free { index } if !live.is_empty() => {
                let l = live.swap_remove(index % live.len());
                let pos = {
                    let mut w = model.0.borrow_mut();
                    let p = w.pos.entry(l.stream).or_insert(0);
                    *p += 1;
                    *p
                };
                freed.push(Freed {
                    addr: l.a.addr,
                    end: l.a.addr + l.a.size as u64,
                    stream: l.stream,
                    pos,
                });
                alloc.free(l.a, &l.stream, &[&quota]);
            }
            Op::Free { .. } => {}
            Op::Complete { stream } => {
                let mut w = model.0.borrow_mut();
                let p = w.pos.get(&stream).copied().unwrap_or(0);
                w.done.insert(stream, p);
            }
            Op::ReleaseCached => {
                alloc.release_cached().map_err(TestCaseError::fail)?;
            }
            Op::Retire { stream } => {
                // Live blocks of the stream hold it (as a buffer holds its stream's handle).
                let held = |s: &u64| *s != stream || live.iter().any(|l| l.stream == stream);
                let n = alloc.retire_streams(held).map_err(TestCaseError::fail)?;
                prop_assert!(n <= 1);
            }
        }
        alloc.check_invariants().map_err(TestCaseError::fail)?;
        let charged: usize = live.iter().map(|l| l.a.charged).sum();
        prop_assert_eq!(quota.in_use(), charged);
        prop_assert!(quota.in_use() <= limit);
        prop_assert_eq!(
            alloc.stats().allocated_bytes,
            live.iter().map(|l| l.a.size).sum::<usize>()
        );
    }
    // Every freed byte is reusable: with everything freed, the whole cache can be given back.
    for l in live.drain(..) {
        alloc.free(l.a, &l.stream, &[&quota]);
    }
    alloc.release_cached().map_err(TestCaseError::fail)?;
    alloc.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(alloc.stats().reserved_bytes, 0);
    prop_assert_eq!(model.0.borrow().used, 0);
    prop_assert_eq!(quota.in_use(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn invariants_hold_over_random_sequences(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, 200 << 20, 150 << 20)?;
    }

    #[test]
    fn invariants_hold_under_memory_pressure(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, 48 << 20, usize::MAX)?;
    }
}

fn model(capacity: usize) -> (Model, Allocator<Model>) {
    let m = Model(Rc::new(RefCell::new(World {
        capacity,
        next_addr: 1 << 20,
        ..Default::default()
    })));
    (m.clone(), Allocator::new(m))
}

/// A stream nobody else holds is let go: its freed blocks are waited for and serve any stream,
/// and the allocator keeps no handle to it.
#[test]
fn a_retired_stream_hands_its_blocks_to_every_stream() {
    let (m, mut a) = model(1 << 30);
    let big = 12 << 20;
    let x = a.alloc(big, &1, &[]).unwrap();
    *m.0.borrow_mut().pos.entry(1).or_insert(0) += 1; // the work using x is in flight
    a.free(x, &1, &[]);
    // Stream 1 is still held elsewhere: nothing to let go.
    assert_eq!(a.retire_streams(|_| true).unwrap(), 0);
    assert_eq!(a.retire_streams(|s| *s != 1).unwrap(), 1);
    // Its work was waited for, so stream 2 takes the block without a new segment.
    let y = a.alloc(big, &2, &[]).unwrap();
    assert_eq!(y.addr, x.addr);
    assert_eq!(a.stats().segments, 1);
    a.free(y, &2, &[]);
    assert_eq!(a.retire_streams(|_| false).unwrap(), 1);
    assert_eq!(a.retire_streams(|_| false).unwrap(), 0);
    a.check_invariants().unwrap();
}

#[test]
fn same_stream_reuses_at_once_and_other_streams_wait_for_the_fence() {
    let (m, mut a) = model(1 << 30);
    // 12 MiB gets a segment of exactly its size, so no ready remainder can serve other streams.
    let big = 12 << 20;
    let x = a.alloc(big, &1, &[]).unwrap();
    *m.0.borrow_mut().pos.entry(1).or_insert(0) += 1; // the work using x is in flight
    a.free(x, &1, &[]);
    // Same stream: the same block at once, no fence.
    let y = a.alloc(big, &1, &[]).unwrap();
    assert_eq!(y.addr, x.addr);
    assert_eq!(a.stats().fences, 0);
    a.free(y, &1, &[]);
    // Another stream: a fence is recorded on stream 1, which has not finished, so stream 2 gets
    // a new segment.
    let z = a.alloc(big, &2, &[]).unwrap();
    assert_ne!(z.addr, x.addr);
    assert_eq!(a.stats().fences, 1);
    // Once stream 1 has finished, its block is ready for anyone.
    let p = m.0.borrow().pos[&1];
    m.0.borrow_mut().done.insert(1, p);
    let w = a.alloc(big, &3, &[]).unwrap();
    assert_eq!(w.addr, x.addr);
    assert_eq!(a.stats().cache_misses, 2);
    a.check_invariants().unwrap();
}

#[test]
fn rounding_and_splitting() {
    let (_, mut a) = model(1 << 30);
    assert_eq!(round_size(1), Some(512));
    assert_eq!(round_size(513), Some(1024));
    assert_eq!(round_size(usize::MAX), None);
    // A request no device could hold is out of memory, not a wrapped zero-size block.
    let q = Quota::new(1 << 20);
    for huge in [usize::MAX, usize::MAX - 100, isize::MAX as usize + 1] {
        assert!(matches!(
            a.alloc(huge, &0, &[&q]),
            Err(AllocError::OutOfMemory { requested, .. }) if requested == huge
        ));
    }
    assert_eq!(q.in_use(), 0);
    let s = a.alloc(3000, &0, &[]).unwrap();
    assert_eq!((s.size, s.charged), (3072, 3072));
    assert_eq!(a.stats().reserved_bytes, SMALL_SEGMENT);
    // 5 MiB comes from a shared 20 MiB segment; 12 MiB gets its own, rounded to 2 MiB.
    // (12 MiB + 1) rounds to 12 MiB + 512 in a 14 MiB segment; the remainder is split off.
    let h = a.alloc((12 << 20) + 1, &0, &[]).unwrap();
    assert_eq!(h.size, (12 << 20) + 512);
    let l = a.alloc(5 << 20, &0, &[]).unwrap();
    assert_eq!(l.size, 5 << 20);
    assert_eq!(
        a.stats().reserved_bytes,
        SMALL_SEGMENT + (14 << 20) + LARGE_SEGMENT
    );
    // A large block whose remainder would be ≤ 1 MiB is handed out whole.
    a.free(l, &0, &[]);
    let whole = a.alloc((20 << 20) - (512 << 10), &0, &[]).unwrap();
    assert_eq!(whole.size, 20 << 20);
    a.check_invariants().unwrap();
}

#[test]
fn quota_is_enforced_with_numbers() {
    let (_, mut a) = model(1 << 30);
    let q = Quota::new(10_000);
    let x = a.alloc(8_000, &0, &[&q]).unwrap();
    match a.alloc(4_000, &0, &[&q]) {
        Err(AllocError::Quota {
            requested,
            limit,
            in_use,
        }) => {
            assert_eq!((requested, limit, in_use), (4_096, 10_000, 8_192));
        }
        other => panic!("expected a quota error, got {other:?}"),
    }
    assert!(a.free(x, &0, &[&q]));
    assert_eq!(q.in_use(), 0);
    a.alloc(4_000, &0, &[&q]).unwrap();
}

#[test]
fn stale_and_forged_handles_change_nothing() {
    let (m, mut a) = model(1 << 30);
    let q = Quota::new(1 << 20);
    let x = a.alloc(512, &0, &[&q]).unwrap();
    assert!(a.free(x, &0, &[&q]));
    // A second free of the same handle: nothing changes.
    let stats = a.stats();
    assert!(!a.free(x, &0, &[&q]));
    assert_eq!((a.stats(), q.in_use()), (stats, 0));
    // The block handed out again: the old handle still does not free it.
    m.0.borrow_mut().done.insert(0, 100);
    let y = a.alloc(512, &0, &[&q]).unwrap();
    assert_eq!((y.block, y.addr), (x.block, x.addr));
    assert!(!a.free(x, &0, &[&q]));
    assert_eq!(q.in_use(), 512);
    // A handle that names no block.
    assert!(!a.free(Allocation { block: 99, ..y }, &0, &[&q]));
    // A live handle with a wrong charge gives back what was charged.
    assert!(a.free(
        Allocation {
            charged: 1 << 40,
            ..y
        },
        &0,
        &[&q]
    ));
    assert_eq!(q.in_use(), 0);
    a.check_invariants().unwrap();
}

#[test]
fn out_of_memory_releases_the_cache_and_retries() {
    let (m, mut a) = model(24 << 20);
    let x = a.alloc(12 << 20, &0, &[]).unwrap(); // own 12 MiB segment
    a.free(x, &0, &[]);
    m.0.borrow_mut().done.insert(0, 100);
    // 16 MiB does not fit beside the cached 12 MiB segment; releasing it makes room.
    let y = a.alloc(16 << 20, &1, &[]).unwrap();
    assert_eq!(y.size, 16 << 20);
    assert_eq!(a.stats().oom_retries, 1);
    assert_eq!(a.stats().segments_released, 1);
    match a.alloc(16 << 20, &1, &[]) {
        Err(AllocError::OutOfMemory {
            requested,
            reserved,
        }) => {
            assert_eq!((requested, reserved), (16 << 20, 16 << 20));
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
}

/// Tenants of one lender: (reserved, limit) each, plus a tenant that only borrows (reserved 0
/// through the lender's own quota chain, as best-effort pools are built).
fn borrowing_run(
    tenants: &[(usize, usize)],
    lender_limit: usize,
    ops: &[(usize, usize, bool)],
) -> Result<(), TestCaseError> {
    let (_, mut a) = model(1 << 40);
    let lender = Arc::new(Quota::new(lender_limit));
    let quotas: Vec<Arc<Quota>> = tenants
        .iter()
        .map(|&(r, l)| Arc::new(Quota::borrowing(r, l, lender.clone())))
        .collect();
    // Tenant `tenants.len()` is the lender's own (best-effort) user.
    let chain = |t: usize| -> Vec<&Quota> {
        match quotas.get(t) {
            Some(q) => vec![&**q],
            None => vec![&*lender],
        }
    };
    let mut live: Vec<(usize, Allocation)> = Vec::new();
    for &(t, bytes, free) in ops {
        let t = t % (tenants.len() + 1);
        if free && !live.is_empty() {
            let (owner, alloc) = live.swap_remove(bytes % live.len());
            prop_assert!(a.free(alloc, &0, &chain(owner)));
        } else {
            let size = round_size(bytes).unwrap_or(usize::MAX);
            let own = quotas.get(t).map(|q| (q.in_use(), q.reserved()));
            match a.alloc(bytes, &0, &chain(t)) {
                Ok(alloc) => live.push((t, alloc)),
                Err(AllocError::Quota { .. }) => {
                    // What is reserved is always there: a tenant inside its reservation is
                    // never refused, whatever the others borrowed.
                    if let Some((in_use, reserved)) = own {
                        prop_assert!(in_use + size > reserved, "refused inside its reservation");
                    }
                }
                Err(e) => prop_assert!(false, "unexpected {e:?}"),
            }
        }
        // The lender is charged exactly the bytes beyond each reservation, plus its own users',
        // and never more than its limit; nobody exceeds their limit.
        let borrowed: usize = quotas
            .iter()
            .map(|q| q.in_use().saturating_sub(q.reserved()))
            .sum();
        let direct: usize = live
            .iter()
            .filter(|(o, _)| *o == tenants.len())
            .map(|(_, al)| al.charged)
            .sum();
        prop_assert_eq!(lender.in_use(), borrowed + direct);
        prop_assert!(lender.in_use() <= lender.limit());
        for q in &quotas {
            prop_assert!(q.in_use() <= q.limit());
        }
    }
    for (owner, alloc) in live {
        prop_assert!(a.free(alloc, &0, &chain(owner)));
    }
    prop_assert_eq!(lender.in_use(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn borrowers_share_the_lender_and_keep_their_reservations(
        tenants in prop::collection::vec((0usize..(8 << 20), 0usize..(24 << 20)), 1..4),
        lender_limit in 0usize..(16 << 20),
        ops in prop::collection::vec((0usize..8, 1usize..(6 << 20), any::<bool>()), 1..80),
    ) {
        borrowing_run(&tenants, lender_limit, &ops)?;
    }
}

#[test]
fn a_borrowing_quota_names_the_limit_it_hits() {
    let (_, mut a) = model(1 << 30);
    let lender = Arc::new(Quota::new(1 << 20));
    let q = Arc::new(Quota::borrowing(1 << 20, 4 << 20, lender.clone()));
    let x = a.alloc(1 << 20, &0, &[&q]).unwrap();
    assert_eq!((q.in_use(), lender.in_use()), (1 << 20, 0));
    let y = a.alloc(1 << 20, &0, &[&q]).unwrap();
    assert_eq!((q.in_use(), lender.in_use()), (2 << 20, 1 << 20));
    // The tenant's own limit has room; the lender's has none.
    assert!(Arc::ptr_eq(&q.limiting(512).unwrap(), &lender));
    match a.alloc(512, &0, &[&q]) {
        Err(AllocError::Quota { limit, .. }) => assert_eq!(limit, 1 << 20),
        other => panic!("expected the lender's limit, got {other:?}"),
    }
    assert!(q.counts_against(&lender) && q.counts_against(&q) && !lender.counts_against(&q));
    // Freeing the block that was allocated first still returns the borrowed bytes: what is
    // borrowed follows from the total held, not from which block is freed.
    assert!(a.free(x, &0, &[&q]));
    assert_eq!((q.in_use(), lender.in_use()), (1 << 20, 0));
    assert!(a.free(y, &0, &[&q]));
    assert_eq!((q.in_use(), lender.in_use()), (0, 0));
}
