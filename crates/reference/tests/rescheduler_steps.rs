//! Property tests of the critical-addon rescheduler: random plans that
//! start from a cluster with room to make (Ready nodes of random sizes,
//! pods with random requests, budgets and owners, a critical addon marked
//! Unschedulable), then go on with random steps, run with the invariants
//! checked after every action and the reference model compared after
//! every instant. The general property test (`engine_steps.rs`) runs the
//! rescheduler in half its plans, but rarely gets an addon to need help.

use arbitrary::{Arbitrary, Unstructured};
use nodewarden_reference::driver::{SchedPick, Status};
use nodewarden_reference::{Checks, Harness, Plan, Setup, Step};
use proptest::prelude::*;

/// Cases per property; `PROPTEST_CASES` overrides it.
const CASES: u32 = 256;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES)
}

/// A plan from bytes: a prepared cluster, then random steps.
pub fn rescheduler_plan(bytes: &[u8]) -> Plan {
    let mut u = Unstructured::new(bytes);
    let mut setup = Setup::arbitrary(&mut u).unwrap_or_default();
    setup.rescheduler = true;
    // Kubelets keep the nodes Ready: any grace works.
    let mut steps = Vec::new();
    let nodes = u.int_in_range(1..=4u8).unwrap_or(2);
    for node in 0..nodes {
        steps.push(Step::AddNode {
            node,
            zone: u.arbitrary().unwrap_or(0),
            ready: Some(Status::True),
            created_ago: 60,
            lease: true,
            kubelet: true,
            excluded: false,
            taints: vec![],
            size: u.arbitrary().unwrap_or(0),
        });
    }
    let addons = u.int_in_range(1..=2u8).unwrap_or(1);
    for pod in 0..6u8 {
        let addon = pod >= 6 - addons;
        let mut sched = SchedPick::arbitrary(&mut u).unwrap_or(SchedPick {
            cpu: 7,
            memory: 0,
            kind: 0,
            grace: 0,
            app: false,
            budget: None,
            unschedulable: false,
            pool: None,
            tolerates_reservation: true,
        });
        if addon {
            sched.kind = 1;
            sched.unschedulable = true;
        } else if sched.kind % 8 == 1 {
            sched.kind = 0;
        }
        steps.push(Step::AddPod {
            pod,
            node: (!addon).then_some(pod % nodes),
            daemonset: !addon && u.ratio(1, 8).unwrap_or(false),
            ready: Some(true),
            terminating: false,
            tolerations: vec![],
            sched: Some(sched),
        });
    }
    steps.push(Step::AdvanceSecs { secs: 25 });
    while !u.is_empty() && steps.len() < 64 {
        match Step::arbitrary(&mut u) {
            Ok(step) => steps.push(step),
            Err(_) => break,
        }
    }
    steps.push(Step::AdvanceSecs { secs: 60 });
    Plan { setup, steps }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_rescheduler_keeps_invariants_and_agrees_with_the_reference(bytes in proptest::collection::vec(any::<u8>(), 64..1024)) {
        let plan = rescheduler_plan(&bytes);
        if let Err(failure) = Harness::run(&plan, Checks::default()) {
            prop_assert!(false, "{failure}\nplan: {plan:#?}");
        }
    }
}

/// The plans above do reach the rescheduler's decisions: evictions,
/// reservations, releases.
#[test]
fn the_plans_make_the_rescheduler_act() {
    let mut evictions = 0;
    let mut reservations = 0;
    for seed in 0..64u64 {
        let bytes: Vec<u8> =
            (0..512u64).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed * 97) >> 7) as u8).collect();
        let plan = rescheduler_plan(&bytes);
        let mut h = Harness::new(&plan.setup, Checks::default());
        h.record_trace();
        for step in &plan.steps {
            h.step(step).unwrap_or_else(|f| panic!("{f}\n{}", h.trace().join("\n")));
        }
        evictions += h.trace().iter().filter(|l| l.contains("engine") && l.contains("EvictForAddon")).count();
        reservations += h.trace().iter().filter(|l| l.contains("engine") && l.contains("CriticalAddonsTaint")).count();
    }
    assert!(evictions > 0 && reservations > 0, "evictions {evictions}, reservation patches {reservations}");
}

/// Found by the property above: in legacy mode, a node replaced by a new
/// object under its name (no status yet) between two monitor passes keeps
/// the controller's health record (upstream's pass sees no deletion), so its
/// pods are deleted counting from the old object's last heartbeat; the
/// checker counted from the new object's creation, 0.224 s later. It now
/// allows the earlier of the two.
#[test]
fn legacy_eviction_of_a_recreated_node() {
    let bytes: &[u8] = &[
        61, 54, 0, 0, 0, 181, 7, 0, 0, 0, 166, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 187, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 187, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 161, 0, 0, 0, 0, 0, 0, 0, 0, 72, 0, 2, 0, 1, 0, 0, 0, 0, 0, 29, 0, 0,
        56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 73, 0, 0, 0, 0, 0, 128, 4, 1, 0, 0, 0, 0, 127, 0, 0, 0, 0, 6, 62, 50, 0, 0, 0,
        100, 0, 0, 0, 0, 0, 15, 2, 0, 0, 0, 86, 0, 29, 0, 0, 0, 1, 0, 0, 0, 20, 0, 0, 0, 128, 0, 0, 0, 0, 0, 72, 19, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 43, 0, 0, 0, 0, 43, 0, 0, 0, 0, 43, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 86, 0, 0,
        0, 0, 0, 214, 0, 79, 0, 0, 0, 15, 2, 0, 0, 0, 43, 0, 0, 0, 0, 0, 16, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 160, 152,
        240, 231, 143, 137, 138, 114, 141, 237, 203, 46, 184, 98, 156, 61, 144, 149, 19, 245, 135, 93, 230, 220, 170,
        230, 216, 60, 120, 101, 92, 92, 10, 204, 237, 138, 124, 177, 139, 13, 131, 25, 18, 11, 26, 158, 86, 126, 92,
        105, 148, 35, 164, 21, 45, 199, 71, 219, 76, 146, 185, 55, 153, 135, 35, 240, 0, 252,
    ];
    let mut plan = rescheduler_plan(bytes);
    plan.setup.legacy = true;
    // The same with the rescheduler off: it fails the same way.
    plan.setup.rescheduler = false;
    Harness::run(&plan, Checks::default()).unwrap();
}
