//! Rules for a node's conditions, taints and labels, as the API server
//! applies the node lifecycle controller's patches and the kubelet's status
//! posts.
//!
//! Invariant: a condition is identified by its type, a taint by its key and
//! effect, a label by its key; every write replaces or removes by that
//! identity and leaves everything else in place and in order.

use std::collections::BTreeMap;

use nodewarden_engine::NodeSnapshot;
use nodewarden_model::{ConditionStatus, ConditionType, NodeCondition, Taint, TaintEffect, Timestamp, keys};

use crate::scenario::EventAction;

/// The reason the kubelet gives each Ready status (upstream kubelet's
/// `nodestatus.ReadyCondition`: `KubeletReady` / `KubeletNotReady`; the node
/// lifecycle controller's `NodeStatusUnknown` for Unknown), so that a status
/// the simulation posts reads like the real one.
pub fn ready_reason(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "KubeletReady",
        ConditionStatus::False => "KubeletNotReady",
        ConditionStatus::Unknown => nodewarden_model::condition::REASON_STATUS_UNKNOWN,
    }
}

/// The node's Ready status; `None` when it has no Ready condition. Stored
/// beside the node in tables that must not search its conditions.
pub fn ready_status(conditions: &[NodeCondition]) -> Option<ConditionStatus> {
    conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status)
}

/// True for the taints the node lifecycle controller owns and evicts by
/// (`node.kubernetes.io/not-ready` and `unreachable`, effect NoExecute):
/// the timeline counts a node carrying one as tainted.
pub fn is_controller_noexecute(t: &Taint) -> bool {
    t.effect == TaintEffect::NoExecute && (t.key == keys::TAINT_NOT_READY || t.key == keys::TAINT_UNREACHABLE)
}

/// A status post of one condition, as the kubelet makes it (upstream
/// `nodestatus` setters): the heartbeat is always `now`, the transition time
/// moves to `now` only when the status changes (or the condition is new),
/// and the message is cleared. Other conditions are left alone.
pub fn post_condition(
    conditions: &mut Vec<NodeCondition>,
    kind: ConditionType,
    status: ConditionStatus,
    reason: &str,
    now: Timestamp,
) {
    match conditions.iter_mut().find(|c| c.kind == kind) {
        Some(c) => {
            if c.status != status {
                c.last_transition = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = String::new();
            c.last_heartbeat = now;
        }
        None => conditions.push(NodeCondition {
            kind,
            status,
            reason: reason.to_string(),
            message: String::new(),
            last_heartbeat: now,
            last_transition: now,
        }),
    }
}

/// The controller's condition update (upstream `UpdateNodeStatus` of the
/// conditions it decided): each given condition replaces the stored one of
/// its type whole, a new type is appended, and conditions it did not send
/// stay. `status.conditions` merges by `type` (its patch merge key).
pub fn merge_conditions(conditions: &mut Vec<NodeCondition>, updates: &[NodeCondition]) {
    merge_by(conditions, updates, |a, b| a.kind == b.kind);
}

/// A merge by identity, whatever holds the items (typed values here, JSON
/// objects in the served cluster): each update replaces the item `same`
/// as it in place, or is appended; items no update names stay.
pub fn merge_by<T: Clone>(items: &mut Vec<T>, updates: &[T], same: impl Fn(&T, &T) -> bool) {
    for u in updates {
        match items.iter_mut().find(|x| same(x, u)) {
            Some(x) => *x = u.clone(),
            None => items.push(u.clone()),
        }
    }
}

/// The controller's taint patch (upstream `controller.SwapNodeControllerTaint`
/// / `AddOrUpdateTaintOnNode` and `RemoveTaintOffNode`, one write): first
/// every taint matching one in `remove` goes, then each of `add` replaces
/// the taint it matches or is appended. Taints match by key and effect
/// (upstream `Taint.MatchTaint`), so a swap of value or time is one write.
pub fn patch_taints(taints: &mut Vec<Taint>, add: &[Taint], remove: &[Taint]) {
    patch_by(taints, add, remove, Taint::same_as);
}

/// [`patch_taints`] whatever holds the taints: every item `same` as one in
/// `remove` goes, then [`merge_by`] with `add`.
pub fn patch_by<T: Clone>(items: &mut Vec<T>, add: &[T], remove: &[T], same: impl Fn(&T, &T) -> bool) {
    items.retain(|t| !remove.iter().any(|r| same(r, t)));
    merge_by(items, add, same);
}

/// The controller's label patch (upstream `reconcileNodeLabels` through
/// `PatchNodeLabels`, a merge patch of `metadata.labels`): each given label
/// is set, and no label is removed.
pub fn merge_labels(labels: &mut BTreeMap<String, String>, patch: &BTreeMap<String, String>) {
    for (k, v) in patch {
        labels.insert(k.clone(), v.clone());
    }
}

/// A user's label edit (a JSON merge patch of `metadata.labels`, where
/// `null` deletes): `Some` sets the label, `None` removes it.
pub fn edit_labels(labels: &mut BTreeMap<String, String>, edits: &BTreeMap<String, Option<String>>) {
    for (k, v) in edits {
        match v {
            Some(v) => {
                labels.insert(k.clone(), v.clone());
            }
            None => {
                labels.remove(k);
            }
        }
    }
}

/// The node a scenario event about one node's own fields names
/// (`set-ready`, `set-condition`, `remove-condition`, `set-taints`,
/// `set-unschedulable`, `set-labels`); `None` for any other event.
pub fn event_node(action: &EventAction) -> Option<&str> {
    match action {
        EventAction::SetReady(a) => Some(&a.node),
        EventAction::SetCondition(a) => Some(&a.node),
        EventAction::RemoveCondition(a) => Some(&a.node),
        EventAction::SetTaints(a) => Some(&a.node),
        EventAction::SetUnschedulable(a) => Some(&a.node),
        EventAction::SetLabels(a) => Some(&a.node),
        _ => None,
    }
}

/// What such an event does to the node ([`event_node`] names it): the
/// kubelet's status post for `set-ready` and `set-condition`, a removal,
/// a replacement of the taints or of `spec.unschedulable`, a label edit.
/// The simulated cluster applies the same changes to its typed node; the
/// served cluster applies this to the node as it reads it from its store.
/// Does nothing to another event.
pub fn apply_node_event(node: &mut NodeSnapshot, action: &EventAction, now: Timestamp) {
    match action {
        EventAction::SetReady(a) => {
            post_condition(&mut node.conditions, ConditionType::Ready, a.status, ready_reason(a.status), now)
        }
        EventAction::SetCondition(a) => post_condition(&mut node.conditions, a.kind.clone(), a.status, "", now),
        EventAction::RemoveCondition(a) => node.conditions.retain(|c| c.kind != a.kind),
        EventAction::SetTaints(a) => node.taints = a.taints.clone(),
        EventAction::SetUnschedulable(a) => node.unschedulable = a.value,
        EventAction::SetLabels(a) => edit_labels(&mut node.labels, &a.labels),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(kind: ConditionType, status: ConditionStatus, at: i64) -> NodeCondition {
        let t = Timestamp::from_nanos(at);
        NodeCondition { kind, status, reason: "r".into(), message: "m".into(), last_heartbeat: t, last_transition: t }
    }

    #[test]
    fn a_post_moves_the_transition_only_on_a_change() {
        let mut cs = vec![cond(ConditionType::Ready, ConditionStatus::True, 1)];
        post_condition(&mut cs, ConditionType::Ready, ConditionStatus::True, "KubeletReady", Timestamp::from_nanos(5));
        assert_eq!((cs[0].last_heartbeat, cs[0].last_transition), (Timestamp::from_nanos(5), Timestamp::from_nanos(1)));
        assert!(cs[0].message.is_empty());
        post_condition(&mut cs, ConditionType::Ready, ConditionStatus::False, "x", Timestamp::from_nanos(7));
        assert_eq!(cs[0].last_transition, Timestamp::from_nanos(7));
        post_condition(&mut cs, ConditionType::DiskPressure, ConditionStatus::False, "", Timestamp::from_nanos(8));
        assert_eq!(cs.len(), 2);
        assert_eq!(ready_status(&cs), Some(ConditionStatus::False));
    }

    #[test]
    fn patches_go_by_identity() {
        let mut cs = vec![cond(ConditionType::Ready, ConditionStatus::True, 1)];
        merge_conditions(&mut cs, &[cond(ConditionType::MemoryPressure, ConditionStatus::False, 2)]);
        merge_conditions(&mut cs, &[cond(ConditionType::Ready, ConditionStatus::Unknown, 3)]);
        assert_eq!(cs.iter().map(|c| c.status).collect::<Vec<_>>(), [ConditionStatus::Unknown, ConditionStatus::False]);

        let mut taints = vec![Taint::new("a", TaintEffect::NoSchedule), Taint::new("b", TaintEffect::NoExecute)];
        let mut b2 = Taint::new("b", TaintEffect::NoExecute);
        b2.value = "v".into();
        patch_taints(&mut taints, &[b2.clone()], &[Taint::new("a", TaintEffect::NoSchedule)]);
        assert_eq!(taints, vec![b2]);

        let mut labels = BTreeMap::from([("k".to_string(), "v".to_string())]);
        merge_labels(&mut labels, &BTreeMap::from([("l".to_string(), "w".to_string())]));
        edit_labels(&mut labels, &BTreeMap::from([("k".to_string(), None), ("m".to_string(), Some("x".to_string()))]));
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["l", "m"]);
    }

    /// The served cluster had moved a replaced taint to the end of the
    /// list; upstream's `AddOrUpdateTaint` replaces it where it stands, as
    /// [`patch_by`] does for both back ends.
    #[test]
    fn a_replaced_item_keeps_its_place() {
        let same = |a: &(&str, u32), b: &(&str, u32)| a.0 == b.0;
        let mut items = vec![("a", 1), ("b", 1), ("c", 1)];
        patch_by(&mut items, &[("b", 2), ("d", 1)], &[("c", 0)], same);
        assert_eq!(items, [("a", 1), ("b", 2), ("d", 1)]);
    }
}
