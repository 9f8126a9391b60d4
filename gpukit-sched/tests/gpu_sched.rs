//! GPU tests of gpukit-sched (ignored without a device).

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use gpukit_driver::testing::{sms_used, spin, test_kernels};
use gpukit_driver::{KernelArgs, LaunchConfig};
use gpukit_sched::{Isolation, LanePriority, QosClass, Runtime, SchedulerOptions, TenantSpec};

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_runtime_lanes_fork_and_join_in_order() {
    let rt = Runtime::new().unwrap();
    assert!(!rt.devices().is_empty());
    assert!(rt.device(rt.devices().len()).is_err());
    let dev = rt.device(0).unwrap();
    let range = dev.device().stream_priority_range().unwrap();
    let tenant = dev.default_tenant();
    let a = tenant.lane(LanePriority::Normal).unwrap();
    assert_eq!(a.stream().priority().unwrap(), range.lowest);
    let k = test_kernels(dev.device());
    let fill = k.function("fill_u32").unwrap();
    let n = 1u32 << 16;
    let buf = a.alloc(4 * n as usize).unwrap();
    // Lane a: a long spin, then fill with 9. A lane forked after that must see the 9s.
    spin(&k, a.stream(), 30_000_000);
    let cfg = LaunchConfig::for_elements(n as usize, 256).unwrap();
    // SAFETY: buf holds n u32.
    unsafe {
        fill.launch(
            a.stream(),
            &cfg,
            &KernelArgs::new().arg(buf.ptr()).arg(9u32).arg(n),
        )
    }
    .unwrap();
    let b = a.fork(LanePriority::High).unwrap();
    assert_eq!(b.stream().priority().unwrap(), range.highest);
    // Lane b overwrites with 4 after the fork point; lane a joins b and reads.
    // SAFETY: as above; b runs after a's fill (fork), a's read after b's fill (join).
    unsafe {
        fill.launch(
            b.stream(),
            &cfg,
            &KernelArgs::new().arg(buf.ptr()).arg(4u32).arg(n),
        )
    }
    .unwrap();
    a.join(&b).unwrap();
    let mut host = vec![0u32; n as usize];
    buf.copy_to_host(&mut host).unwrap(); // on lane a
    assert!(
        host.iter().all(|&v| v == 4),
        "join did not order lane a after lane b"
    );
    a.synchronize().unwrap();
    b.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_tenants_get_their_memory_share() {
    let rt = Runtime::with_devices(&[0]).unwrap();
    let dev = rt.device(0).unwrap();
    let t = dev.tenant("small", 4 << 20);
    assert_eq!(t.name(), "small");
    let lane = t.lane(LanePriority::Normal).unwrap();
    let a = lane.alloc(3 << 20).unwrap();
    let err = lane.alloc(2 << 20).unwrap_err();
    assert!(
        err.to_string().contains("limited to 4194304 bytes"),
        "{err}"
    );
    drop(a);
    lane.alloc(4 << 20).unwrap();
    // Another tenant shares the device cache but not the limit.
    let other = dev
        .tenant("big", 64 << 20)
        .lane(LanePriority::High)
        .unwrap();
    other.alloc(32 << 20).unwrap();
    println!("[gpu] device pool: {}", dev.pool().stats());
}

/// Blocks that each stay 20 µs on their SM, so a launch spreads over every SM it may use.
const SPREAD_NS: u64 = 20_000;

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_sm_partitions_confine_kernels_to_their_sms() {
    let rt = Runtime::with_devices(&[0]).unwrap();
    let dev = rt.device(0).unwrap().device().clone();
    // Every GPU machine gpukit tests on has a driver with green contexts: fail, never skip.
    dev.green_context_support().unwrap();
    let sm = dev.sm_resource().unwrap();
    println!("[gpu] {sm:?}");
    assert_eq!(sm.sm_count, dev.properties().multiprocessor_count);
    let k = test_kernels(&dev);
    let all = sms_used(&k, &dev.new_stream().unwrap(), 8 * sm.sm_count, SPREAD_NS);
    println!("[gpu] a primary-context stream reached {} SMs", all.len());
    assert!(all.len() as u32 > sm.sm_count / 2);

    let a = sm.round_up(16).unwrap();
    let b = sm.round_up(2 * sm.min_partition_sms + 1).unwrap();
    let parts = dev
        .partition_sms(&[16, 2 * sm.min_partition_sms + 1])
        .unwrap();
    let sizes: Vec<u32> = parts.iter().map(|p| p.sm_count()).collect();
    assert_eq!(sizes, [a, b, sm.sm_count - a - b]);
    let mut seen: Vec<BTreeSet<u32>> = Vec::new();
    for p in &parts {
        let stream = p.new_stream(0).unwrap();
        let used = sms_used(&k, &stream, 8 * p.sm_count(), SPREAD_NS);
        println!(
            "[gpu] partition of {} SMs: kernels ran on {:?}",
            p.sm_count(),
            used
        );
        assert!(
            used.len() as u32 <= p.sm_count(),
            "a kernel left its partition"
        );
        assert!(
            used.len() as u32 >= p.sm_count() / 2,
            "a partition's SMs sat idle"
        );
        seen.push(used.into_iter().collect());
    }
    for i in 0..seen.len() {
        for j in i + 1..seen.len() {
            assert!(
                seen[i].is_disjoint(&seen[j]),
                "partitions {i} and {j} share SMs"
            );
        }
    }
    // Sizes the device cannot give are refused with the numbers.
    let err = dev.partition_sms(&[0]).unwrap_err().to_string();
    assert!(err.contains("partition of 0 SMs"), "{err}");
    let all_units = sm.sm_count / sm.unit() * sm.unit();
    let err = dev
        .partition_sms(&[all_units, sm.unit()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than the device's"), "{err}");
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_scheduler_enforces_partitions_priorities_and_memory() {
    const MIB: usize = 1 << 20;
    let rt = Runtime::with_devices(&[0]).unwrap();
    let dev = rt.device(0).unwrap();
    let sched = dev
        .scheduler(SchedulerOptions {
            memory_bytes: Some(1024 * MIB),
            ..Default::default()
        })
        .unwrap();
    println!("[gpu] {}", sched.isolation());
    let Isolation::Partitions(sm) = sched.isolation().clone() else {
        panic!(
            "the GPU machine's driver has green contexts: {}",
            sched.isolation()
        );
    };
    let g = sched
        .admit(
            &TenantSpec::new("decode", QosClass::Guaranteed)
                .memory(256 * MIB)
                .sm_share(0.25),
        )
        .unwrap();
    let b = sched
        .admit(&TenantSpec::new("chat", QosClass::Burstable).memory(128 * MIB))
        .unwrap();
    let e = sched
        .admit(&TenantSpec::new("batch", QosClass::BestEffort))
        .unwrap();
    assert_eq!(sched.unreserved_pool().limit(), Some(640 * MIB));
    let gp = g.partition().unwrap();
    let shared = e.partition().unwrap();
    assert_eq!(gp.sm_count(), sm.round_up(sm.sm_count.div_ceil(4)).unwrap());
    assert_eq!(shared.sm_count(), sm.sm_count - gp.sm_count());
    assert_eq!(b.partition().unwrap().sm_count(), shared.sm_count());

    // Lanes: the class's priority band, on the tenant's partition.
    let range = dev.device().stream_priority_range().unwrap();
    let gl = g.lane(LanePriority::High).unwrap();
    let el = e.lane(LanePriority::Normal).unwrap();
    assert_eq!(gl.stream().priority().unwrap(), range.highest);
    assert_eq!(el.stream().priority().unwrap(), range.lowest);
    let k = test_kernels(dev.device());
    let on_g: BTreeSet<u32> = sms_used(&k, gl.stream(), 8 * gp.sm_count(), SPREAD_NS)
        .into_iter()
        .collect();
    let on_e: BTreeSet<u32> = sms_used(&k, el.stream(), 8 * shared.sm_count(), SPREAD_NS)
        .into_iter()
        .collect();
    println!(
        "[gpu] guaranteed lane on {} SMs, best-effort lane on {}",
        on_g.len(),
        on_e.len()
    );
    assert!(on_g.len() as u32 <= gp.sm_count() && on_e.len() as u32 <= shared.sm_count());
    assert!(
        on_g.is_disjoint(&on_e),
        "guaranteed and best-effort kernels shared SMs"
    );

    // Memory: the guaranteed tenant holds exactly its reservation.
    let g_all = gl.alloc(256 * MIB).unwrap();
    assert!(gl.alloc(MIB).is_err());
    // Best-effort work fills the unreserved memory; the burstable tenant still has its own
    // 128 MiB but cannot borrow while nothing is unreserved.
    let bl = b.lane(LanePriority::Normal).unwrap();
    let e_all = el.alloc(640 * MIB).unwrap();
    let b_own = bl.alloc(128 * MIB).unwrap();
    let err = bl.alloc(MIB).unwrap_err().to_string();
    assert!(err.contains("limited to"), "{err}");
    drop(e_all);
    let b_borrowed = bl.alloc(100 * MIB).unwrap();
    assert_eq!(sched.unreserved_pool().in_use(), Some(100 * MIB));
    assert!(
        el.alloc(600 * MIB).is_err(),
        "borrowed memory was handed out twice"
    );

    // A guaranteed tenant cannot re-split SMs under live lanes; it says what to do.
    let late = sched
        .admit(
            &TenantSpec::new("late", QosClass::Guaranteed)
                .memory(MIB)
                .sm_share(0.1),
        )
        .unwrap_err()
        .to_string();
    assert!(late.contains("guaranteed tenants before making"), "{late}");
    assert_eq!(sched.ledger().grants().len(), 3);

    // Leaving returns the reservation, and the SMs once nothing runs on the old layout.
    drop((g_all, b_own, b_borrowed, gl, el, bl, g, gp, shared));
    assert_eq!(sched.ledger().grants().len(), 2);
    assert_eq!(sched.unreserved_pool().limit(), Some(896 * MIB));
    assert_eq!(e.partition().unwrap().sm_count(), sm.sm_count);

    // Resizing between work: the partition and the shared rest follow the new share, its
    // kernels stay on its SMs, and a live lane stops a re-split.
    let asr = sched
        .admit(
            &TenantSpec::new("asr", QosClass::Guaranteed)
                .memory(MIB)
                .sm_share(0.25),
        )
        .unwrap();
    let quarter = asr.partition().unwrap().sm_count();
    sched.resize(&asr, 0.5).unwrap();
    let half = asr.partition().unwrap();
    assert_eq!(
        half.sm_count(),
        sm.round_up(sm.sm_count.div_ceil(2)).unwrap()
    );
    assert!(half.sm_count() > quarter);
    assert_eq!(asr.grant().unwrap().partition_sms, Some(half.sm_count()));
    assert_eq!(
        e.partition().unwrap().sm_count(),
        sm.sm_count - half.sm_count()
    );
    let al = asr.lane(LanePriority::High).unwrap();
    let on_asr = sms_used(&k, al.stream(), 8 * half.sm_count(), SPREAD_NS);
    let on_asr: BTreeSet<u32> = on_asr.into_iter().collect();
    println!(
        "[gpu] resized partition of {} SMs: kernels on {}",
        half.sm_count(),
        on_asr.len()
    );
    assert!(on_asr.len() as u32 <= half.sm_count());
    let busy = sched.resize(&asr, 0.25).unwrap_err().to_string();
    assert!(busy.contains("live lanes of `asr`"), "{busy}");
    assert_eq!(asr.grant().unwrap().partition_sms, Some(half.sm_count()));
    drop((al, half));
    sched.resize(&asr, 0.25).unwrap();
    assert_eq!(asr.partition().unwrap().sm_count(), quarter);
    dev.device().take_deferred_error().unwrap();
}

#[test]
#[ignore = "needs a CUDA device"]
fn gpu_scheduler_without_partitions_uses_priorities() {
    let rt = Runtime::with_devices(&[0]).unwrap();
    let dev = rt.device(0).unwrap();
    let sched = dev
        .scheduler(SchedulerOptions {
            memory_bytes: Some(64 << 20),
            no_partitions: true,
        })
        .unwrap();
    assert!(matches!(
        sched.isolation(),
        Isolation::StreamPriorities { .. }
    ));
    let g = sched
        .admit(
            &TenantSpec::new("g", QosClass::Guaranteed)
                .memory(16 << 20)
                .sm_share(0.5),
        )
        .unwrap();
    assert!(g.partition().is_none());
    let range = dev.device().stream_priority_range().unwrap();
    let lane = g.lane(LanePriority::Normal).unwrap();
    assert_eq!(
        lane.stream().priority().unwrap(),
        QosClass::Guaranteed.stream_priority(range.highest, range.lowest, false)
    );
    let k = test_kernels(dev.device());
    let used = sms_used(
        &k,
        lane.stream(),
        4 * dev.device().properties().multiprocessor_count,
        SPREAD_NS,
    );
    assert!(used.len() as u32 > dev.device().properties().multiprocessor_count / 2);
}
