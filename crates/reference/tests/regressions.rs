//! The engine bugs the fuzzer found, each as the minimal plan that showed
//! it. Each test fails on the engine before its fix: the reference model
//! disagrees, or an invariant breaks.

use nodewarden_reference::driver::{Status, TaintPick, TolerationPick};
use nodewarden_reference::{Checks, Harness, Setup, Step};

fn run(setup: Setup, steps: Vec<Step>) {
    let mut h = Harness::new(&setup, Checks::default());
    if std::env::var_os("TRACE").is_some() {
        h.record_trace();
    }
    let result = steps.iter().try_for_each(|s| h.step(s));
    for line in h.trace() {
        println!("{line}");
    }
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

fn node(node: u8, zone: u8, ready: Option<Status>, excluded: bool, taints: Vec<TaintPick>) -> Step {
    Step::AddNode { node, zone, ready, created_ago: 60, lease: false, kubelet: false, excluded, taints, size: 0 }
}

/// A healthy node in zone 2, so that not every zone is down.
fn healthy() -> Step {
    Step::AddNode {
        node: 3,
        zone: 2,
        ready: Some(Status::True),
        created_ago: 60,
        lease: true,
        kubelet: true,
        excluded: false,
        taints: vec![],
        size: 0,
    }
}

fn pod(pod: u8, node: u8, tolerations: Vec<TolerationPick>) -> Step {
    Step::AddPod {
        pod,
        node: Some(node),
        daemonset: false,
        ready: Some(true),
        terminating: false,
        tolerations,
        sched: None,
    }
}

const NOT_READY: u8 = 0;
const MAINTENANCE: u8 = 2;
const NO_EXECUTE: u8 = 0;

fn taint(key: u8, valued: bool) -> TaintPick {
    TaintPick { key, effect: NO_EXECUTE, valued }
}

/// Master disruption mode paused only the zones with a state: a zone made
/// only of excluded nodes kept tainting (and, in legacy mode, evicting).
#[test]
fn no_taint_in_a_zone_of_excluded_nodes_while_every_zone_is_down() {
    for legacy in [false, true] {
        // Grace 5 s; pod-eviction-timeout 0.
        let setup = Setup { legacy, grace: 2, timeout: 2, ..Setup::default() };
        run(
            setup,
            vec![
                node(2, 2, Some(Status::True), true, vec![]),
                pod(0, 2, vec![]),
                node(4, 1, None, false, vec![]),
                Step::AdvanceSecs { secs: 120 },
            ],
        );
    }
}

/// A pod replaced under the same name (a new uid in one update) on the same
/// node was neither marked NotReady by pod assignment nor evaluated by the
/// taint manager.
#[test]
fn a_pod_recreated_under_the_same_name_is_handled_as_new() {
    run(
        Setup::default(),
        vec![
            node(0, 0, Some(Status::Unknown), false, vec![taint(MAINTENANCE, false)]),
            Step::AdvanceSecs { secs: 6 },
            pod(0, 0, vec![TolerationPick { key: 3, exists: true, valued: false, effect: 1, seconds: Some(31) }]),
            Step::Advance { ms: 1000 },
            pod(0, 0, vec![TolerationPick { key: 3, exists: true, valued: false, effect: 1, seconds: Some(31) }]),
            Step::AdvanceSecs { secs: 60 },
        ],
    );
}

/// A restart's registration removes a node's NoExecute taint and the same
/// pass adds one back: the taint manager saw only the end state and kept a
/// deadline that the removal had cancelled, deleting the pod early.
#[test]
fn a_taint_removed_and_readded_in_one_instant_restarts_the_countdown() {
    // Grace 5 s; admission defaults 30 s (not-ready) and 10 s (unreachable).
    let setup = Setup { grace: 2, admission: 1, ..Setup::default() };
    run(
        setup,
        vec![
            // The first instant's monitor pass runs before the node exists.
            healthy(),
            node(0, 1, None, false, vec![taint(NOT_READY, false)]),
            pod(1, 0, vec![TolerationPick { key: 2, exists: true, valued: false, effect: 1, seconds: Some(142) }]),
            Step::AdvanceSecs { secs: 200 },
        ],
    );
}

/// A node deleted while its pods counted down, then re-created healthy
/// under the same name: the re-creation (a node add without NoExecute
/// taints) must cancel the countdowns.
#[test]
fn a_node_recreated_healthy_cancels_pending_deletions() {
    // Grace 5 s, so the node is tainted at 10 s; pods are due at 310 s.
    let setup = Setup { grace: 2, ..Setup::default() };
    run(
        setup,
        vec![
            healthy(),
            Step::AddNode {
                node: 1,
                zone: 1,
                ready: None,
                created_ago: 100,
                lease: true,
                kubelet: false,
                excluded: false,
                taints: vec![],
                size: 0,
            },
            pod(1, 1, vec![]),
            Step::AdvanceSecs { secs: 100 },
            Step::DeleteNode { node: 1 },
            Step::AdvanceSecs { secs: 100 },
            Step::AddNode {
                node: 1,
                zone: 1,
                ready: None,
                created_ago: 0,
                lease: false,
                kubelet: true,
                excluded: false,
                taints: vec![],
                size: 0,
            },
            Step::AdvanceSecs { secs: 200 },
        ],
    );
}

/// `decide` stopped at the first toleration of 0 s, so a later untolerated
/// taint went unnoticed and an already scheduled deletion was kept instead
/// of happening at once.
#[test]
fn an_untolerated_taint_is_not_hidden_by_an_earlier_zero_second_toleration() {
    // No admission defaults.
    let setup = Setup { admission: 2, ..Setup::default() };
    let tolerations = vec![
        TolerationPick { key: 3, exists: false, valued: false, effect: 1, seconds: Some(1) },
        TolerationPick { key: 3, exists: false, valued: true, effect: 1, seconds: Some(101) },
    ];
    run(
        setup,
        vec![
            Step::AddNode {
                node: 0,
                zone: 0,
                ready: Some(Status::True),
                created_ago: 60,
                lease: true,
                kubelet: true,
                excluded: false,
                taints: vec![taint(MAINTENANCE, true)],
                size: 0,
            },
            pod(0, 0, tolerations),
            Step::AdvanceSecs { secs: 7 },
            Step::SetTaints { node: 0, taints: vec![taint(MAINTENANCE, false), taint(NOT_READY, false)] },
            Step::AdvanceSecs { secs: 120 },
        ],
    );
}

/// Found by the engine_steps proptest (seed becdc08e...). In legacy mode a
/// node is replaced by a new object under the same name, created long ago
/// and without a Ready condition, after the checker had seen the old one's
/// Ready heartbeat. The engine, as upstream, counts a node that never posted
/// status from its creation and deletes its pods at its first monitor pass;
/// the checker used to keep the old object's heartbeat and call that early.
/// It now starts afresh when the creation timestamp changes.
#[test]
fn legacy_eviction_counts_a_replaced_node_from_its_creation() {
    let bytes: &[u8] = &[
        43, 44, 0, 0, 0, 19, 0, 0, 0, 0, 0, 0, 157, 0, 0, 0, 0, 1, 246, 46, 36, 216, 111, 76, 16, 52, 166, 75, 245,
        140, 103, 200, 131, 143, 207, 32, 94, 252, 160, 116, 142, 168, 175, 200, 205, 134, 16, 141, 201, 207, 94, 49,
        250, 69, 58, 15, 157, 92, 215, 206, 244, 87, 244, 196, 4, 27, 48, 35, 104, 76, 225, 194, 192, 198, 114, 102,
        51, 179, 7, 227, 64, 84, 76, 173, 8, 173, 165, 95, 19, 222, 123, 252, 65, 222, 241, 221, 225, 141, 145, 128,
        186, 45, 105, 253, 220, 250, 54, 34, 187, 237, 69, 248, 111, 0, 171, 139, 53, 9, 182, 53, 205, 114, 152, 52,
        99, 17, 170, 65, 92, 192, 235, 15, 190, 176, 208, 6, 55, 158, 11, 66, 17, 93, 207, 242, 245, 255, 74, 213, 79,
        222, 161, 207, 106, 69, 57, 249, 107, 63, 23, 174, 104, 184, 225, 26, 56, 38, 124, 189, 118, 148, 138, 182,
        118, 197, 58, 153, 6, 53, 81, 151, 41, 195, 10, 201, 58, 72, 8, 53, 76, 2, 94, 16, 110, 123, 81, 245, 225, 241,
        93, 70, 79, 33, 20, 250, 99, 94, 213, 208, 49, 106, 189, 149, 229, 8, 241, 60, 112, 43, 63, 70, 3, 25, 146,
        118, 134, 164, 206, 6, 188, 3, 183, 183, 77, 210, 37, 48, 5, 33, 236, 166, 111, 94, 120, 33, 10, 157, 197, 251,
        154, 43, 196, 26, 210, 183, 16, 254, 139, 183, 8, 200, 154, 98, 190, 64, 210, 223, 138, 122, 134, 229, 124, 84,
        108, 86, 152, 76, 105, 135, 147, 100, 132, 15, 126, 243, 161, 142, 218, 40, 184, 245, 137, 4, 146, 159, 163,
        188, 202, 47, 106, 136, 63, 131, 98, 181, 232, 91, 154, 226, 141, 169, 53, 236, 81,
    ];
    let plan = nodewarden_reference::Plan::from_bytes(bytes);
    if let Err(failure) = nodewarden_reference::Harness::run(&plan, nodewarden_reference::Checks::default()) {
        panic!("{failure}");
    }
}
