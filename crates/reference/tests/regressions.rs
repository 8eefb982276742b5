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

/// Found by `engine_steps` (with the rescheduler on; the same with it off):
/// in legacy mode a node's Ready condition is removed, then the controller
/// restarts and, as upstream, counts the node (which to it never posted
/// status) from its creation, deleting pods at 644 s; the checker went by
/// the heartbeat it had seen before the removal (781.8 s). The checker now
/// counts such nodes from their creation after a restart.
#[test]
fn legacy_eviction_found_with_the_rescheduler_plans() {
    let bytes: &[u8] = &[
        125, 255, 231, 2, 218, 32, 168, 230, 37, 139, 211, 199, 209, 26, 111, 148, 121, 117, 28, 7, 13, 139, 138, 116,
        162, 244, 88, 48, 72, 19, 254, 228, 43, 21, 219, 167, 48, 34, 146, 50, 51, 70, 150, 233, 134, 187, 212, 88, 33,
        175, 85, 184, 245, 176, 16, 230, 104, 125, 240, 51, 84, 24, 75, 51, 162, 135, 79, 198, 4, 180, 56, 92, 99, 64,
        80, 48, 23, 159, 48, 18, 84, 191, 194, 28, 116, 223, 223, 53, 195, 250, 56, 4, 164, 29, 15, 200, 135, 163, 150,
        117, 131, 134, 155, 28, 192, 40, 50, 50, 231, 220, 246, 47, 163, 49, 158, 128, 0, 33, 3, 163, 88, 59, 29, 141,
        208, 132, 51, 176, 200, 99, 197, 113, 73, 241, 93, 68, 178, 27, 89, 9, 164, 250, 89, 56, 14, 110, 76, 206, 46,
        246, 9, 50, 99, 128, 133, 113, 204, 80, 19, 123, 42, 211, 112, 41, 126, 156, 154, 44, 68, 35, 110, 207, 214,
        95, 208, 188, 82, 134, 156, 230, 159, 93, 96, 190, 250, 167, 104, 59, 177, 249, 13, 67, 172, 141, 222, 250,
        217, 12, 220, 217, 10, 165, 190, 130, 222, 7, 47, 112, 239, 125, 232, 138, 19, 46, 156, 230, 234, 250, 179, 75,
        150, 58, 251, 184, 176, 240, 100, 130, 243, 214, 11, 213, 206, 181, 236, 53, 101, 97, 84, 174, 89, 174, 2, 143,
        134, 240, 49, 144, 192, 110, 250, 156, 30, 10, 99, 113, 239, 92, 45, 236, 241, 236, 148, 36, 77, 148, 15, 167,
        199, 122, 13, 36, 117, 33, 242, 28, 243, 36, 42, 120, 196, 131, 156, 140, 195, 219, 197, 29, 252, 153, 84, 88,
        197, 48, 154, 163, 41, 105, 54, 164, 104, 88, 180, 148, 104, 204, 136, 210, 34, 83, 55, 224, 95, 27, 254, 248,
        9, 7, 232, 205, 80, 161, 199, 4, 63, 111, 115, 154, 128, 199, 94, 203, 116, 221, 1, 30, 104, 121, 44, 128, 146,
        90, 12, 99, 138, 70, 24, 92, 42, 131, 206, 214, 102, 164, 98, 80, 85, 22, 244, 253, 176, 220, 210, 223, 151,
        160, 120, 131, 211, 216, 65, 88, 72, 29, 236, 222, 37, 231, 247, 55, 139, 15, 235, 29, 236, 144, 159, 209, 155,
        21, 151, 78, 90, 24, 235, 55, 244, 41, 126, 224, 235, 239, 184, 123, 106, 169, 239, 146, 218, 132, 83, 88, 104,
        243, 8, 35, 103, 98, 125, 234, 112, 111, 87, 14, 106, 141, 180, 80, 180, 4, 247, 156, 157, 13, 115, 236, 135,
        41, 14, 216, 118, 87, 223, 70, 85, 106, 20, 152, 92, 113, 83, 93, 145, 7, 167, 255, 11, 201, 178, 12, 143, 67,
        9, 36, 30, 99, 243, 86, 23, 70, 51, 5, 182, 139, 147, 116, 141, 167, 223, 76, 213, 174, 187, 188, 131, 33, 7,
        164, 79, 143, 168, 84, 208, 2, 230, 69, 32, 185, 83, 184, 7, 123, 173, 87, 5, 27, 111, 213, 210, 240, 48, 145,
        192, 145, 36, 214, 158, 223, 124, 234, 12, 20, 229, 80, 1, 80, 230, 105, 89, 226, 132, 127, 2, 61, 102, 94,
        217, 178, 76, 248, 159, 189, 59, 250, 70, 65, 31, 43, 219, 48, 174, 29, 82, 40, 54, 188, 10, 165, 113, 11, 255,
        77, 106, 59, 151, 225, 180, 51, 59, 99, 181, 48, 18, 44, 99, 59, 162, 37, 57, 26, 136, 83, 49, 62, 88, 45, 88,
        128, 152, 156, 52, 105, 69, 208, 45, 51, 203, 255, 31, 26, 64, 74, 100, 191, 125, 113, 94, 56, 152, 255, 164,
        44, 48, 20, 20, 175, 189, 246, 251, 192, 177, 91, 239, 73, 181, 17, 142, 220, 97, 242, 249, 186, 153, 163, 188,
        107, 58, 146, 5, 132, 167, 175, 144, 186, 144, 104, 147, 195, 208, 246, 162, 20, 239, 177, 114, 168, 164, 67,
        79, 28, 143, 204, 20, 55, 107, 223, 23, 135, 229, 65, 57, 209, 28, 25, 139, 161, 72, 35, 150, 220, 71, 135,
        130, 1, 98, 46, 31, 133, 207, 174, 24, 89, 128, 167, 186, 11, 235, 25, 156, 107, 86, 47, 191, 235, 100, 148,
        182, 253, 135, 181, 186, 108, 225, 247, 186, 172, 92, 159, 143, 138, 173, 230, 39, 210, 62, 190, 115, 180, 53,
        144, 136, 78, 208, 161, 185, 154, 172, 201, 20, 42, 42, 225, 99, 153, 248, 175, 65, 157, 16, 96, 104, 252, 112,
        20, 186, 89, 213, 12, 128, 23, 170, 6, 20, 165, 134, 228, 71, 198, 37, 122, 222, 247, 144, 42, 139, 150, 128,
        170, 176, 72, 155, 231, 218, 4, 45, 202, 129, 138, 108, 50, 185, 128, 3, 202, 37, 44, 30, 131, 65, 148, 102,
        169, 60, 60, 239, 116, 186, 68, 185, 187, 251, 54, 161, 4, 164, 115, 66, 93, 91, 118, 205, 101, 42, 230, 10,
        213, 107, 112, 185, 205, 74, 239, 26, 154, 61, 59, 252, 61, 137, 17, 55, 108, 247, 35, 76, 3, 192, 92, 12, 50,
        186, 61, 2, 97, 87, 155, 50, 112, 62, 243, 72, 221, 199, 102, 110, 186, 178, 89, 60, 97, 182, 60, 134, 3, 190,
        112, 171, 233, 87, 241,
    ];
    for rescheduler in [true, false] {
        let mut plan = nodewarden_reference::Plan::from_bytes(bytes);
        plan.setup.rescheduler = rescheduler;
        run(plan.setup, plan.steps);
    }
}

/// Found by `engine_steps` with the client-rate plans: in legacy mode a
/// node's status heartbeat is seen and its Ready condition removed in the
/// same instant, before a monitor pass. The pass sees no Ready condition
/// and the removal is no heartbeat (upstream B10), so the controller's
/// probe stays where its last pass left it and its pods go at 752 s; the
/// checker counted the vanished heartbeat and called that early (796 s).
/// The checker now drops a Ready heartbeat no pass took in when the
/// condition goes (a Lease renewal still counts).
#[test]
fn a_ready_heartbeat_removed_before_a_pass_is_no_probe() {
    let bytes: &[u8] = &[
        29, 9, 42, 83, 230, 135, 14, 28, 222, 105, 142, 194, 232, 155, 52, 55, 14, 224, 215, 207, 65, 38, 63, 180, 241,
        224, 238, 236, 100, 10, 142, 138, 211, 198, 61, 54, 21, 74, 101, 114, 53, 70, 234, 225, 6, 142, 9, 211, 242,
        82, 194, 7, 159, 124, 60, 163, 184, 141, 164, 15, 81, 107, 199, 53, 7, 109, 118, 246, 231, 172, 55, 23, 246,
        69, 96, 254, 71, 136, 187, 172, 145, 249, 213, 238, 174, 35, 23, 212, 196, 137, 0, 154, 112, 118, 13, 225, 16,
        182, 126, 67, 27, 120, 186, 32, 20, 154, 107, 65, 35, 250, 83, 155, 122, 219, 217, 138, 51, 130, 144, 214, 170,
        30, 238, 60, 242, 117, 31, 108, 80, 16, 207, 178, 104, 117, 23, 114, 115, 23, 43, 148, 186, 161, 37, 159, 78,
        168, 0, 55, 16, 76, 206, 92, 126, 62, 230, 161, 51, 196, 156, 39, 121, 164, 222, 48, 232, 83, 103, 83, 40, 126,
        80, 219, 178, 9, 197, 3, 49, 39, 37, 1, 241, 72, 245, 49, 126, 229, 230, 110, 89, 112, 205, 184, 93, 166, 60,
        75, 29, 81, 200, 92, 59, 210, 65, 73, 84, 123, 93, 228, 7, 18, 195, 92, 112, 244, 208, 88, 162, 131, 67, 121,
        82, 84, 144, 186, 134, 110, 230, 53, 69, 60, 139, 183, 94, 210, 66, 217, 11, 186, 198, 153, 169, 110, 86, 53,
        69, 7, 80, 115, 14, 236, 122, 195, 228, 107, 225, 89, 144, 38, 33, 185, 115, 171, 19, 55, 51, 84, 169, 143,
        227, 175, 96, 180, 142, 230, 148, 43, 150, 255, 30, 176, 137, 244, 194, 90, 2, 140, 109, 4, 24, 2, 70, 175,
        207, 198, 141, 9, 228, 34, 44, 172, 219, 228, 120, 116, 190, 57, 129, 161, 51, 112, 21, 102, 178, 24, 219, 75,
        50, 192, 113, 55, 163, 97, 126, 244, 125, 13, 94, 4, 63, 239, 205, 221, 235, 234, 108, 188, 88, 50, 138, 39,
        203, 227, 185, 246, 66, 239, 79, 193, 15, 162, 98, 153, 188, 242, 147, 25, 84, 72, 82, 47, 160, 100, 229, 44,
        213, 134, 200, 209, 174, 187, 164, 122, 7, 33, 252, 64, 97, 168, 200, 50, 150, 199, 163, 22, 94, 175, 91, 108,
        121, 133, 242, 174, 10, 197, 33, 176, 160, 227, 21, 255, 21, 234, 89, 168, 179, 52, 189, 193, 163, 88, 114, 10,
        155, 87, 184, 68, 93, 53, 165, 157, 228, 122, 116, 172, 76, 167, 50, 191, 30, 247, 112, 48, 41, 31, 78, 111,
        166, 95, 140, 188, 105, 201, 208, 48, 76, 172, 138, 120, 178, 153, 100, 242, 138, 118, 227, 213, 108, 107, 24,
        22, 235, 142, 95, 155, 249, 159, 108, 251, 90, 242, 151, 70, 160, 27, 115, 67, 160, 11, 22, 88, 151, 137, 41,
        162, 213, 107, 240, 255, 177, 207, 112, 113, 184, 122, 120, 159, 206, 96, 82, 177, 133, 247, 171, 125, 1, 77,
        154, 166, 1, 211, 32, 126, 17, 99, 77, 172, 88, 141, 154, 101, 158, 56, 39, 75, 167, 21, 19, 19, 43, 210, 129,
        192, 46, 34, 62, 108, 16, 224, 132, 41, 114, 139, 217, 23, 71, 204, 56, 138, 175, 61, 110, 13, 164, 230, 118,
        157, 169, 137, 41, 42, 217, 194, 198, 200, 119, 24, 82, 201, 80, 234, 225, 13, 37, 16, 241, 49, 121, 126, 31,
        94, 228, 84, 55, 96, 54, 112, 83, 53, 113, 252, 159, 193, 229, 162,
    ];
    let plan = nodewarden_reference::Plan::from_bytes(bytes);
    if let Err(failure) = nodewarden_reference::Harness::run(&plan, nodewarden_reference::Checks::default()) {
        panic!("{failure}");
    }
}

/// Found by `engine_steps` under watch delay: a node's foreign NoExecute
/// taint is removed and the node deleted, both delivered before the taint
/// manager ran. The removal calls the pending deletion of a pod on it off
/// (I4; I5 keeps only what is pending when the node goes), but the engine
/// dropped the cancellation with the node's entity and deleted the pod at
/// its old deadline ("node n3 gone").
#[test]
fn taints_seen_gone_call_deletions_off_though_the_node_goes_too() {
    let bytes: &[u8] = &[
        234, 186, 51, 58, 83, 165, 76, 188, 25, 205, 96, 117, 131, 93, 60, 229, 104, 159, 68, 246, 209, 248, 73, 218,
        203, 71, 125, 47, 49, 7, 41, 170, 143, 185, 95, 199, 128, 2, 143, 209, 151, 89, 61, 169, 106, 120, 219, 61, 79,
        65, 186, 3, 237, 228, 177, 120, 206, 103, 232, 238, 73, 124, 120, 113, 188, 72, 105, 31, 93, 35, 232, 47, 234,
        252, 159, 255, 241, 105, 97, 65, 15, 165, 238, 140, 169, 48, 106, 18, 212, 144, 185, 32, 190, 105, 58, 2, 68,
        199, 12, 212, 139, 38, 23, 77, 88, 107, 41, 137, 17, 46, 104, 136, 158, 99, 29, 220, 138, 152, 89, 117, 207,
        235, 111, 40, 140, 143, 1, 191, 8, 187, 3, 159, 44, 96, 69, 61, 32, 50, 193, 179, 69, 105, 230, 232, 154, 91,
        171, 29, 128, 76, 230, 52, 162, 14, 13, 127, 60, 223, 57, 200, 123, 37, 198, 105, 40, 23, 139, 170, 34, 48, 24,
        181, 13, 87, 152, 32, 61, 237, 29, 184, 227, 147, 246, 131, 92, 83, 190, 246, 84, 254, 52, 61, 125, 183, 106,
        161, 202, 14, 9, 176, 205, 197, 249, 192, 191, 138, 253, 19, 242, 67, 137, 159, 230, 190, 34, 43, 242, 56, 114,
        33, 112, 208, 130, 131, 66, 63, 18, 244, 106, 22, 44, 255, 199, 27, 29, 22, 145, 149, 7, 153, 105, 247, 70,
        191, 185, 149, 69, 139, 13, 77, 9, 77, 90, 213, 117, 189, 72, 157, 87, 44, 178, 113, 167, 157, 221, 17, 97,
        230, 37, 209, 23, 192, 224, 182, 11, 183, 88, 121, 254, 76, 115, 117, 122, 33, 9, 85, 43, 234, 227, 111, 34,
        37, 14, 158, 196, 170, 30, 5, 160, 231, 225, 132, 243, 150, 36, 203, 211, 176, 11, 136, 195, 152, 87, 184, 214,
        211, 26, 172, 41, 65, 36, 14, 251, 154, 138, 35, 159, 16, 246, 177, 235, 97, 145, 130, 149, 42, 54, 233, 121,
        67, 134, 105, 127, 6, 192, 90, 192, 167, 250, 52, 209, 64, 52, 14, 8, 244, 161, 228, 13, 13, 210, 44, 75, 211,
        96, 213, 125, 42, 230, 176, 190, 245, 246, 247, 65, 166, 118, 76, 106, 173, 0, 117, 6, 218, 63, 18, 72, 196,
        184, 188, 205, 213, 0, 127, 223, 59, 159, 103, 85, 166, 103, 80, 41, 44, 39, 166, 199, 114, 7, 41, 146, 233,
        216, 27, 192, 159, 69, 160, 93, 3, 30, 174, 2, 187, 228, 146, 23, 188, 232, 130, 193, 4, 178, 12, 137, 74, 24,
        84, 244, 18, 11, 174, 92, 216, 191, 140, 62, 251, 197, 141, 8, 63, 79, 53, 4, 68, 74, 41, 20, 210, 174, 9, 54,
        209, 97, 192, 122, 191, 147, 89, 33, 212, 15, 125, 125, 111, 212, 110, 145, 210, 251, 21, 55, 84, 24, 199, 94,
        41, 231, 168, 84, 221, 108, 119, 136, 179, 31, 217, 127, 127, 10, 5, 54, 178, 222, 78, 16, 80, 173, 7, 96, 142,
        96, 173, 129, 44, 61, 161, 29, 57, 152, 91, 63, 119, 152, 46, 110, 84, 2, 28, 230, 174, 164, 140, 53, 75, 196,
        15, 40, 147, 59, 179, 48, 123, 168, 240, 3, 133, 26, 94, 142, 23, 111, 51, 235, 191, 70, 52, 187, 219, 161, 37,
        101, 193, 10, 13, 133, 73, 231, 148, 11, 255, 161, 47, 5, 9, 223, 168, 209, 159, 73, 8, 139, 247, 123, 250,
        212, 208, 8, 206, 137, 93, 251, 175, 239, 55, 131, 152, 220, 19, 32, 176, 114, 230, 64, 237, 114, 78, 195, 244,
        151, 82, 133, 212, 140, 18, 81, 240, 210, 61, 147, 159, 4, 157, 56, 190, 206, 194, 160, 52, 140, 214, 232, 177,
        191, 226, 154, 11, 67, 79, 254, 224, 229, 238, 185, 36, 123, 115, 207, 215, 147, 195, 127, 108, 45, 96, 138,
        39, 74, 197, 80, 25, 12, 3, 237, 127, 76, 150, 152, 171, 139, 102, 192, 208, 115, 198, 151, 73, 250, 144, 32,
        221, 216, 167, 236, 160, 32, 191, 95, 53, 162, 139, 240, 94, 153, 3, 31, 222, 27, 139, 209, 43, 167, 166, 8,
        10, 115, 192, 183, 44, 235, 9, 46, 102, 2, 74, 224, 162, 75, 205, 188, 235, 224, 77, 135, 247, 205, 54, 74, 60,
        218, 28, 148, 245, 181, 69, 212, 27, 70, 197, 131, 138, 153, 104, 103, 159, 25, 245, 90, 22, 176, 234, 141, 64,
        227, 171, 250, 88, 150, 91, 45, 53, 38, 227, 184, 39, 16, 230, 223, 0, 82, 5, 210, 66, 43, 228, 236, 220, 82,
        186, 203, 72, 25, 198, 16, 140, 112, 218, 89, 207, 124, 95, 27, 223, 32, 32, 228, 188, 22, 175, 182, 136, 2,
        149, 244, 205, 220, 138, 75, 77, 95, 89, 28, 19, 159, 210, 117, 153, 52, 125, 85, 112, 222, 106, 90, 28, 184,
        246, 212, 47, 103, 252, 66, 223, 1, 1, 61, 16, 52, 97, 162, 222, 98, 255, 210, 114, 11, 194, 46, 69, 55, 239,
        98, 148, 193, 139, 106, 119, 20, 220, 137, 130, 89, 46, 92, 114, 42, 223, 102, 65, 22, 67, 49, 199, 94, 78,
        244, 187, 244, 248, 224, 150, 40, 82, 97, 225, 175, 185, 193, 1, 136, 206, 227, 116, 212, 141, 255, 44, 17,
        218, 227, 47, 42, 229, 77, 56, 195, 150, 9, 25, 102, 28, 54, 29, 68, 136, 184, 0, 48, 21, 105, 231, 119, 19,
        195, 14, 142, 83, 3, 76, 83, 182, 189, 254, 236, 3, 125, 82, 24, 215, 131, 41, 195, 195, 62, 3, 151, 189, 120,
        33, 17, 125, 205, 58, 204, 148, 2, 64,
    ];
    let plan = nodewarden_reference::Plan::from_bytes(bytes);
    if let Err(failure) = nodewarden_reference::Harness::run(&plan, nodewarden_reference::Checks::default()) {
        panic!("{failure}");
    }
}

/// Found by `engine_steps` under watch delay with restarts: the answer to
/// a taint removal showed the node at a newer version than the watch had
/// delivered; another write of ours to the node was refused; the watch's
/// late, older snapshot still carried the removed NoExecute taint, and the
/// engine, which forgot the version it held when a write finished, took it
/// in and deleted a pod for a taint no longer there. A finished write now
/// lets the node's held version in again, never an older one.
#[test]
fn a_late_older_node_snapshot_after_a_write_does_not_bring_a_taint_back() {
    let bytes: &[u8] = &[
        6, 0, 0, 0, 0, 0, 8, 158, 0, 0, 25, 0, 0, 1, 63, 124, 218, 254, 99, 246, 147, 206, 228, 94, 238, 30, 84, 236,
        217, 124, 85, 123, 61, 207, 103, 104, 68, 176, 14, 105, 130, 119, 102, 90, 76, 129, 201, 124, 215, 121, 135,
        163, 16, 38, 114, 63, 127, 134, 34, 111, 81, 166, 136, 74, 17, 25, 79, 78, 44, 152, 186, 172, 216, 179, 195, 4,
        4, 17, 207, 52, 117, 52, 139, 146, 68, 175, 79, 81, 23, 126, 56, 34, 37, 59, 218, 213, 211, 61, 71, 189, 238,
        78, 200, 183, 135, 219, 243, 139, 190, 159, 186, 121, 195, 73, 237, 19, 20, 74, 155, 209, 186, 69, 231, 174,
        95, 247, 92, 186, 31, 0, 141, 61, 170, 205, 30, 211, 130, 124, 224, 89, 82, 158, 169, 241, 190, 54, 98, 61,
        180, 20, 9, 66, 149, 105, 90, 129, 121, 232, 228, 246, 4, 64, 36, 123, 102, 51, 9, 183, 65, 178, 19, 57, 72,
        181, 78, 201, 25, 36, 247, 92, 219, 38, 106, 150, 17, 167, 47, 122, 195, 27, 86, 32, 93, 234, 255, 228, 93,
        213, 77, 202, 251, 246, 167, 243, 196, 255, 220, 186, 198, 108, 170, 241, 210, 147, 41, 128, 47, 58, 239, 0,
        86, 29, 26, 31, 161, 252, 170, 19, 211, 239, 33, 182, 251, 5, 26, 218, 80, 177, 28, 166, 115, 99, 69, 122, 22,
        149, 35, 30, 217, 189, 158, 127, 37, 94, 93, 67, 10, 121, 57, 52, 31, 244, 148, 93, 62, 39, 27, 89, 154, 23,
        166, 0, 107, 24, 203, 203, 123, 85, 92, 209, 8, 119, 215, 241, 29, 13, 104, 137, 113, 37, 111, 137, 160, 19,
        154, 199, 207, 248, 123, 16, 190, 99, 11, 31, 93, 210, 82, 17, 140, 147, 234, 181, 48, 81, 56, 24, 212, 73,
        220, 90, 17, 176, 154, 244, 103, 217, 89, 137, 137, 39, 217, 241, 36, 21, 23, 160, 65, 249, 135, 103, 101, 155,
        103, 98, 74, 128, 28, 42, 19, 173, 22, 39, 148, 219, 229, 68, 18, 186, 105, 29, 168, 6, 209, 70, 163, 46, 126,
        31, 139, 187, 11, 30, 35, 148, 218, 65, 85, 90, 52, 105, 216, 178, 197, 27, 245, 166, 18, 175, 198, 59, 210,
        96, 237, 250, 100, 38, 110, 214, 48, 148, 124, 187, 17, 100, 51, 205, 92, 220, 192, 105, 47, 147, 182, 130,
        198, 32, 36, 106, 34, 53, 54, 0, 170, 104, 80, 167, 156, 164, 11, 156, 202, 85, 66, 57, 199, 183, 57, 49, 124,
        137, 104, 64, 197, 118, 42, 166, 106, 140, 8, 149, 12, 148, 189, 193, 186, 81, 63, 89, 154, 100, 176, 202, 39,
        223, 210, 134, 191, 29, 224, 251, 36, 166, 144, 6, 49, 28, 87, 26, 154, 176, 242, 49, 103, 142, 69, 142, 139,
        209, 126, 108, 177, 44, 153, 220, 21, 84, 37, 126, 140, 144, 178, 218, 138, 140, 95, 156, 32, 29, 224, 33, 59,
        69, 114, 130, 189, 215, 61, 77, 200, 26, 74, 29, 95, 191, 67, 210, 239, 194, 208, 206, 66, 191, 134, 214, 199,
    ];
    let plan = nodewarden_reference::Plan::from_bytes(bytes);
    if let Err(failure) = nodewarden_reference::Harness::run(&plan, nodewarden_reference::Checks::default()) {
        panic!("{failure}");
    }
}
