//! The scheduling policy on a host model: admission, eviction order, stream priorities and
//! pacing, without a device.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use gpukit_sched::{Capacity, Ledger, Pacer, QosClass, Shortage, TenantSpec};
use proptest::prelude::*;

const GIB: usize = 1 << 30;

/// An H200 as the scheduler sees it: 132 SMs in partitions of 8.
fn h200(memory: usize) -> Capacity {
    Capacity {
        memory_bytes: memory,
        sm_count: 132,
        min_partition_sms: 8,
        sm_alignment: 8,
    }
}

#[test]
fn admission_reserves_and_refuses_with_the_numbers() {
    let mut ledger = Ledger::new(h200(80 * GIB));
    let decode = TenantSpec::new("decode", QosClass::Guaranteed)
        .memory(30 * GIB)
        .sm_share(0.5);
    let g = ledger.admit(&decode).unwrap();
    // Half of 132 SMs is 66, rounded up to the partition step of 8.
    assert_eq!(g.partition_sms, Some(72));
    assert_eq!((g.memory_reserved, g.memory_limit), (30 * GIB, 30 * GIB));
    ledger.commit(g);
    assert_eq!(ledger.memory_unreserved(), 50 * GIB);
    // 132 − 72 − one minimal partition kept for the others.
    assert_eq!(ledger.sms_available(), 52);

    let big = TenantSpec::new("big", QosClass::Guaranteed)
        .memory(60 * GIB)
        .sm_share(0.5);
    let refusal = ledger.admit(&big).unwrap_err();
    assert_eq!(
        refusal.reasons,
        vec![
            Shortage::Memory {
                requested: 60 * GIB,
                unreserved: 50 * GIB
            },
            Shortage::Sms {
                requested: 72,
                available: 52
            }
        ]
    );
    let msg = refusal.to_string();
    assert!(msg.contains("`big` (guaranteed)"), "{msg}");
    assert!(
        msg.contains("60.00 GiB") && msg.contains("50.00 GiB"),
        "{msg}"
    );
    assert!(msg.contains("10.00 GiB short"), "{msg}");
    assert!(msg.contains("72 SMs") && msg.contains("52 SMs"), "{msg}");

    // A burstable tenant reserves its minimum; a best-effort one reserves nothing.
    let chat = TenantSpec::new("chat", QosClass::Burstable)
        .memory(10 * GIB)
        .memory_limit(30 * GIB);
    let b = ledger.admit(&chat).unwrap();
    assert_eq!(
        (b.memory_reserved, b.memory_limit, b.partition_sms),
        (10 * GIB, 30 * GIB, None)
    );
    ledger.commit(b);
    let batch = TenantSpec::new("batch", QosClass::BestEffort).memory(500 * GIB);
    let e = ledger.admit(&batch).unwrap();
    assert_eq!(e.memory_reserved, 0);
    ledger.commit(e);
    assert_eq!(ledger.memory_reserved(), 40 * GIB);
    let order: Vec<&str> = ledger
        .eviction_order()
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(order, ["batch", "chat"]);

    // Malformed requests and a second tenant of one name are refused, saying why.
    for (spec, needle) in [
        (
            TenantSpec::new("chat", QosClass::BestEffort),
            "of that name",
        ),
        (
            TenantSpec::new("g0", QosClass::Guaranteed),
            "must reserve its memory",
        ),
        (
            TenantSpec::new("b", QosClass::Burstable).sm_share(0.25),
            "only guaranteed tenants",
        ),
        (
            TenantSpec::new("b", QosClass::Burstable)
                .memory(2 * GIB)
                .memory_limit(GIB),
            "below its reservation",
        ),
        (
            TenantSpec::new("g", QosClass::Guaranteed)
                .memory(GIB)
                .sm_share(1.5),
            "must be in (0, 1]",
        ),
    ] {
        let msg = ledger.admit(&spec).unwrap_err().to_string();
        assert!(msg.contains(needle), "{msg}");
    }

    // Leaving returns the reservation.
    assert!(ledger.release("decode").is_some());
    assert_eq!(ledger.memory_unreserved(), 70 * GIB);
    assert_eq!(ledger.sms_available(), 124);
    ledger.admit(&big).unwrap();
}

#[test]
fn classes_parse_and_take_priority_bands() {
    for c in QosClass::ALL {
        assert_eq!(c.name().parse::<QosClass>().unwrap(), c);
    }
    assert_eq!(
        "BestEffort".parse::<QosClass>().unwrap(),
        QosClass::BestEffort
    );
    assert!(
        "gold"
            .parse::<QosClass>()
            .unwrap_err()
            .contains("guaranteed, burstable")
    );
    // Hopper's range: -5 (most urgent) to 0.
    let p = |c: QosClass, urgent| c.stream_priority(-5, 0, urgent);
    assert_eq!(
        [
            p(QosClass::Guaranteed, true),
            p(QosClass::Guaranteed, false),
            p(QosClass::Burstable, true),
            p(QosClass::Burstable, false),
            p(QosClass::BestEffort, true),
            p(QosClass::BestEffort, false),
        ],
        [-5, -4, -3, -2, -1, 0]
    );
    // Two levels: guaranteed and burstable share the urgent one.
    assert_eq!(QosClass::Burstable.stream_priority(-1, 0, false), -1);
    assert_eq!(QosClass::BestEffort.stream_priority(-1, 0, true), 0);
    // One level: everything at it.
    for c in QosClass::ALL {
        assert_eq!(c.stream_priority(0, 0, true), 0);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Admit {
        class: QosClass,
        memory: usize,
        limit: Option<usize>,
        share: Option<f64>,
    },
    Release(usize),
    Resize(usize, f64),
}

fn op() -> impl Strategy<Value = Op> {
    let class = prop_oneof![
        Just(QosClass::Guaranteed),
        Just(QosClass::Burstable),
        Just(QosClass::BestEffort)
    ];
    prop_oneof![
        3 => (
            class,
            0usize..(40 * GIB),
            prop::option::of(0usize..(60 * GIB)),
            prop::option::of(0.0f64..1.2),
        )
            .prop_map(|(class, memory, limit, share)| Op::Admit {
                class,
                memory,
                limit,
                share
            }),
        1 => any::<usize>().prop_map(Op::Release),
        1 => (any::<usize>(), 0.0f64..1.2).prop_map(|(k, s)| Op::Resize(k, s)),
    ]
}

/// A guaranteed partition grows into the free SMs and its own, shrinks, and nothing else
/// resizes.
#[test]
fn resizing_a_partition_counts_its_own_sms_as_free() {
    let mut ledger = Ledger::new(h200(80 * GIB));
    let spec = |name: &str, share| {
        TenantSpec::new(name, QosClass::Guaranteed)
            .memory(GIB)
            .sm_share(share)
    };
    ledger.commit(ledger.admit(&spec("decode", 0.25)).unwrap());
    ledger.commit(ledger.admit(&spec("asr", 0.25)).unwrap());
    ledger.commit(
        ledger
            .admit(&TenantSpec::new("batch", QosClass::BestEffort))
            .unwrap(),
    );
    // 2 × 40 reserved; 132 − 80 − 8 = 44 free.
    assert_eq!(ledger.sms_available(), 44);
    // 0.6 of 132 is 80 SMs: its own 40 and 40 of the 44 free.
    let grown = ledger.resize("decode", 0.6).unwrap();
    assert_eq!(grown.partition_sms, Some(80));
    ledger.replace(grown);
    assert_eq!(ledger.sms_available(), 4);
    let refusal = ledger.resize("decode", 0.7).unwrap_err();
    assert_eq!(
        refusal.reasons,
        vec![Shortage::Sms {
            requested: 96,
            available: 84
        }]
    );
    ledger.replace(ledger.resize("decode", 0.1).unwrap());
    assert_eq!(ledger.sms_available(), 68);
    for (name, share) in [("batch", 0.1), ("nobody", 0.1), ("asr", 0.0)] {
        let r = ledger.resize(name, share).unwrap_err();
        assert!(
            matches!(r.reasons[..], [Shortage::Invalid(_)]),
            "{name}: {r}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// No over-admission, no under-admission, guaranteed tenants never on the eviction list.
    #[test]
    fn admission_never_over_reserves(ops in prop::collection::vec(op(), 1..60)) {
        let cap = h200(80 * GIB);
        let mut ledger = Ledger::new(cap);
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Admit { class, memory, limit, share } => {
                    let spec = TenantSpec {
                        name: format!("t{i}"),
                        class,
                        memory_bytes: memory,
                        memory_limit: limit,
                        sm_share: share,
                    };
                    let reserved = if class == QosClass::BestEffort { 0 } else { memory };
                    let sms = share.map(|s| cap.partition_sms(s));
                    let valid = (class != QosClass::Guaranteed || memory > 0)
                        && (class == QosClass::Guaranteed || share.is_none())
                        && limit.is_none_or(|l| l >= reserved)
                        && share.is_none_or(|s| s > 0.0 && s <= 1.0);
                    let fits = reserved <= ledger.memory_unreserved()
                        && sms.is_none_or(|n| n <= ledger.sms_available());
                    match ledger.admit(&spec) {
                        Ok(g) => {
                            prop_assert!(valid && fits);
                            prop_assert!(g.memory_limit >= g.memory_reserved);
                            prop_assert_eq!(g.memory_reserved, reserved);
                            ledger.commit(g);
                        }
                        Err(r) => {
                            prop_assert!(!(valid && fits), "refused a request that fits: {}", r);
                            prop_assert!(!r.reasons.is_empty());
                        }
                    }
                }
                Op::Release(k) => {
                    if !ledger.grants().is_empty() {
                        let name = ledger.grants()[k % ledger.grants().len()].name.clone();
                        prop_assert!(ledger.release(&name).is_some());
                    }
                }
                Op::Resize(k, share) => {
                    if !ledger.grants().is_empty() {
                        let g = ledger.grants()[k % ledger.grants().len()].clone();
                        let sms = cap.partition_sms(share);
                        let free = ledger.sms_available() + g.partition_sms.unwrap_or(0);
                        let fits = g.class == QosClass::Guaranteed
                            && share > 0.0
                            && share <= 1.0
                            && sms <= free;
                        match ledger.resize(&g.name, share) {
                            Ok(new) => {
                                prop_assert!(fits);
                                prop_assert_eq!(new.partition_sms, Some(sms));
                                prop_assert_eq!(new.memory_reserved, g.memory_reserved);
                                ledger.replace(new);
                            }
                            Err(r) => prop_assert!(!fits, "refused a resize that fits: {}", r),
                        }
                    }
                }
            }
            prop_assert!(ledger.memory_reserved() <= cap.memory_bytes);
            prop_assert!(ledger.sms_reserved() + cap.min_partition_sms <= cap.sm_count);
            prop_assert!(ledger
                .eviction_order()
                .iter()
                .all(|g| g.class != QosClass::Guaranteed));
            let order = ledger.eviction_order();
            prop_assert!(order.windows(2).all(|w| w[0].class >= w[1].class));
        }
    }

    /// Whatever the load, the pacer keeps best-effort work running (at least its floor every
    /// slice) and within its bounds.
    #[test]
    fn pacing_slows_but_never_starves(
        steps in prop::collection::vec(0u64..3_000, 1..400),
        min in 1u32..4,
        max in 1u32..64,
    ) {
        let objective = Duration::from_micros(1_000);
        let slice = Duration::from_micros(2_000);
        let mut pacer = Pacer::new(objective, slice, min, max);
        let (min, max) = (min.max(1), max.max(min.max(1)));
        let mut now = Duration::ZERO;
        for us in steps {
            pacer.observe(Duration::from_micros(us));
            now += slice;
            // A new slice: at least the floor may launch.
            let mut launched = 0;
            while pacer.try_launch(now) {
                launched += 1;
                prop_assert!(launched <= max);
            }
            prop_assert!(launched >= min && launched == pacer.budget());
            prop_assert!(pacer.wait(now) <= slice);
        }
    }
}

/// A guaranteed step slows with the best-effort launches beside it; the pacer finds the budget
/// that keeps it under the objective, and gives everything back when the load goes away.
#[test]
fn pacing_converges_under_interference_and_recovers_when_idle() {
    let objective = Duration::from_micros(1_000);
    let slice = Duration::from_micros(1_000);
    let mut pacer = Pacer::new(objective, slice, 1, 32);
    assert_eq!(pacer.budget(), 32);
    // Each best-effort launch in the slice adds 60 µs to a 700 µs step: the objective holds
    // up to 5 launches.
    let step = |budget: u32| Duration::from_micros(700 + 60 * u64::from(budget));
    let mut now = Duration::ZERO;
    let mut late = 0;
    for i in 0..400 {
        let s = step(pacer.budget());
        if i >= 100 && s > objective {
            late += 1;
        }
        pacer.observe(s);
        now += slice;
        while pacer.try_launch(now) {}
    }
    assert!(pacer.budget() <= 5, "budget {}", pacer.budget());
    assert!(pacer.budget() >= 1);
    // After settling, a late step is a rare probe (additive increase), not the rule.
    assert!(late <= 300 / 4, "{late} late steps of 300");
    // The guaranteed tenant goes idle: best-effort work gets its full budget back.
    for _ in 0..40 {
        now += slice;
        while pacer.try_launch(now) {}
    }
    assert_eq!(pacer.budget(), 32);
}
