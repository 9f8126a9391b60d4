//! GPU tests of gpukit-sched (ignored without a device).

// Test code: a failed expectation is a test failure, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpukit_driver::testing::{spin, test_kernels};
use gpukit_driver::{KernelArgs, LaunchConfig};
use gpukit_sched::{LanePriority, Runtime};

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
