//! Objects and actions the crate's tests build again and again: a node in
//! zone `z`, a pod tolerating `unreachable` for so long, a deletion, a
//! NoExecute taint patch.

use nodewarden_engine::explain::Verdict;
use nodewarden_engine::{
    Action, ActionId, ActionKind, Explanation, NodeSnapshot, Observation, PodSnapshot, WriteSlot, ZoneReport, ZoneState,
};
use nodewarden_model::{ConditionStatus, DeletionMode, Span, Taint, TaintEffect, Timestamp, Toleration, ZoneKey, keys};

/// `secs` seconds after the epoch.
pub(crate) fn t(secs: i64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// A node in zone `z`, created an hour ago, with this Ready status (heart
/// beat and transition at 0 s) and these taints.
pub(crate) fn node(name: &str, ready: ConditionStatus, taints: Vec<Taint>) -> Observation {
    Observation::NodeUpserted(
        NodeSnapshot::new(name, t(-3600)).in_zone("z").with_ready(ready, t(0)).with_taints(taints),
    )
}

/// A pod on `node` tolerating `unreachable` for `seconds` (`None`:
/// forever), owned by a DaemonSet or not.
pub(crate) fn pod(key: &str, node: &str, seconds: Option<i64>, daemonset: bool) -> Observation {
    let p = PodSnapshot::new(key, "u", Some(node))
        .tolerating(vec![Toleration::no_execute(keys::TAINT_UNREACHABLE, seconds)]);
    Observation::PodUpserted(if daemonset { p.of_daemonset() } else { p })
}

/// The `unreachable` NoExecute taint.
pub(crate) fn unreachable() -> Taint {
    Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute)
}

/// The `not-ready` NoExecute taint.
pub(crate) fn not_ready() -> Taint {
    Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute)
}

/// Deletes the pod, as if its `unreachable` taint were not tolerated.
pub(crate) fn delete(key: &str) -> Action {
    let why = Explanation {
        pod: key.into(),
        node: "n".into(),
        node_facts: None,
        taints: vec![],
        tainting: None,
        verdict: Verdict::NotTolerated { taint: unreachable() },
        scheduled_at: t(0),
        due_at: t(0),
        deleted_at: t(0),
    };
    Action {
        id: ActionId(9),
        kind: ActionKind::DeletePod {
            pod: key.into(),
            uid: "u".into(),
            mode: DeletionMode::Delete,
            why: Box::new(why),
        },
    }
}

/// A NoExecute taint patch of the node.
pub(crate) fn taint_patch(node: &str, add: Vec<Taint>, remove: Vec<Taint>) -> Action {
    Action {
        id: ActionId(1),
        kind: ActionKind::PatchNodeTaints { node: node.into(), add, remove, slot: WriteSlot::NoExecuteTaints },
    }
}

/// A pod with the rescheduler's facts: `critical` makes it a critical
/// addon (in `kube-system`), `node` binds it, an unbound critical addon is
/// marked Unschedulable at 0 s.
pub(crate) fn scheduled_pod(key: &str, node: Option<&str>, critical: bool, mirror: bool) -> PodSnapshot {
    PodSnapshot {
        version: 0,
        node_lost: false,
        key: key.into(),
        uid: "u".into(),
        node: node.map(str::to_string),
        daemonset: false,
        ready: None,
        terminating: false,
        tolerations: vec![],
        scheduling: Some(Box::new(nodewarden_model::PodScheduling {
            critical_annotation: critical,
            mirror,
            unschedulable_since: node.is_none().then(|| t(0)),
            ..nodewarden_model::PodScheduling::default()
        })),
    }
}

/// Evicts the pod for a critical addon.
pub(crate) fn evict_for_addon(key: &str) -> Action {
    let why = nodewarden_engine::AddonEviction {
        pod: key.into(),
        node: "n".into(),
        addon: "kube-system/dns".into(),
        unschedulable_since: t(0),
        needed: nodewarden_model::Resources::ZERO,
        free_before: nodewarden_model::Resources::ZERO,
        tier: nodewarden_engine::PreparationTier::Any,
        victims: vec![key.into()],
        freed: nodewarden_model::Resources::ZERO,
        budgets: vec![],
        pod_grace: Span::from_secs(30),
        grace: Span::from_secs(10),
        decided_at: t(0),
    };
    Action {
        id: ActionId(7),
        kind: ActionKind::EvictForAddon {
            pod: key.into(),
            uid: "u".into(),
            grace: Some(Span::from_secs(10)),
            why: Box::new(why),
        },
    }
}

/// nodewarden's `CriticalAddonsOnly` taint.
pub(crate) fn reservation() -> Taint {
    Taint {
        key: nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_TAINT.into(),
        value: nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_VALUE.into(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

/// Adds (or removes) the reservation on the node.
pub(crate) fn reservation_patch(node: &str, add: bool) -> Action {
    let (add, remove) = if add { (vec![reservation()], vec![]) } else { (vec![], vec![reservation()]) };
    Action {
        id: ActionId(2),
        kind: ActionKind::PatchNodeTaints { node: node.into(), add, remove, slot: WriteSlot::CriticalAddonsTaint },
    }
}

/// The zone reports of one zone, `z`, at `rate`.
pub(crate) fn zone(rate: f64) -> Vec<ZoneReport> {
    vec![ZoneReport {
        key: ZoneKey::new("", "z"),
        state: Some(ZoneState::Normal),
        rate,
        size: 3,
        not_ready: 1,
        queued: 0,
    }]
}
