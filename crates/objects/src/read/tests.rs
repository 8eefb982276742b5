//! One test per kind of malformed object: each shows the object is
//! read (or ignored) without a panic, and read the conservative way.

use super::checked::{lease_reading, node_reading, pod_reading};
use super::*;
use k8s_openapi::api::core::v1::Node;
use nodewarden_engine::Observation;
use nodewarden_engine::{NodeSnapshot, PodSnapshot};
use nodewarden_model::{ConditionStatus, ConditionType, Span, TaintEffect, Timestamp};

use serde_json::json;

/// When the objects of these tests are seen: 2025-01-01T00:00:00Z.
fn seen() -> Timestamp {
    Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
}

fn node(v: Value) -> NodeSnapshot {
    node_reading(&v, seen(), Detail::Lifecycle).expect("a named node is read")
}

fn pod(v: Value) -> PodSnapshot {
    pod_reading(&v, seen(), Detail::Lifecycle).expect("an identified pod is read")
}

fn pod_with_tolerations(tolerations: Value) -> PodSnapshot {
    pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
               "spec": {"nodeName": "n1", "tolerations": tolerations}}))
}

#[test]
fn a_well_formed_node_reads_as_written() {
    let s = node(json!({
        "metadata": {"name": "n1", "creationTimestamp": "2024-12-31T00:00:00Z",
                     "labels": {"topology.kubernetes.io/zone": "z1"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": "2024-12-31T00:00:05Z"}],
                 "unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2024-12-31T00:00:10Z", "lastTransitionTime": "2024-12-31T00:00:01Z"}]},
    }));
    assert_eq!(s.created, seen() - Span::from_secs(86_400));
    assert_eq!(s.labels.get("topology.kubernetes.io/zone").map(String::as_str), Some("z1"));
    assert_eq!(s.conditions[0].last_heartbeat, seen() - Span::from_secs(86_390));
    assert_eq!(s.conditions[0].reason, "KubeletReady");
    assert_eq!(s.taints[0].time_added, Some(seen() - Span::from_secs(86_395)));
    assert!(s.unschedulable);
}

#[test]
fn missing_conditions_read_as_none() {
    let s = node(json!({"metadata": {"name": "n1"}}));
    assert!(s.conditions.is_empty() && s.taints.is_empty() && !s.unschedulable);
    assert_eq!(s.created, seen(), "no creationTimestamp: the startup grace starts when the node is seen");
    let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": null}}));
    assert!(s.conditions.is_empty());
}

#[test]
fn duplicated_conditions_read_the_first() {
    let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "Ready", "status": "Unknown"},
        {"type": "DiskPressure", "status": "Perhaps"},
        {"type": "DiskPressure", "status": "True"},
    ]}}));
    // The first Ready is read; the first DiskPressure is unreadable, so
    // DiskPressure reads as absent (its duplicate does not stand in).
    assert_eq!(s.conditions.len(), 1);
    assert_eq!((&s.conditions[0].kind, s.conditions[0].status), (&ConditionType::Ready, ConditionStatus::True));
}

#[test]
fn unknown_condition_statuses_read_as_absent() {
    let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "Maybe"},
        {"type": "MemoryPressure", "status": 3},
        {"type": "PIDPressure"},
        {"status": "True"},
        "Ready",
        {"type": "NetworkUnavailable", "status": "False"},
    ]}}));
    assert_eq!(s.conditions.len(), 1, "{:?}", s.conditions);
    assert_eq!(s.conditions[0].kind, ConditionType::NetworkUnavailable);
}

#[test]
fn absurd_and_unparsable_timestamps_read_as_the_time_seen() {
    let bad = ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2400-01-01T00:00:00Z", "yesterday", ""];
    for t in bad {
        let v = json!({
            "metadata": {"name": "n1", "creationTimestamp": t},
            "spec": {"taints": [{"key": "k", "effect": "NoExecute", "timeAdded": t}]},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": t, "lastTransitionTime": 12}]},
        });
        let s = node(v);
        assert_eq!(s.created, seen(), "{t}");
        assert_eq!(s.conditions[0].last_heartbeat, seen(), "{t}");
        assert_eq!(s.conditions[0].last_transition, seen(), "{t}");
        assert_eq!(s.taints[0].time_added, Some(seen()), "{t}");
    }
    // The typed decoding refuses what the lenient one reads.
    let typed = serde_json::from_value::<Node>(json!({"metadata": {"name": "n", "creationTimestamp": "yesterday"}}));
    assert!(typed.is_err());
    // A renewal seen later reads later, so it counts as one.
    let lease = |renew: &str, at: Timestamp| {
        lease_reading(
            &json!({"metadata": {"name": "n1", "namespace": NODE_LEASE_NAMESPACE}, "spec": {"renewTime": renew}}),
            at,
        )
    };
    let later = seen() + Span::from_secs(10);
    assert!(
        matches!(lease("9999-12-31T23:59:59.000000Z", later), Some(Observation::LeaseUpserted { renew: Some(r), .. }) if r == later)
    );
    assert!(matches!(lease("soon", seen()), Some(Observation::LeaseUpserted { renew: Some(r), .. }) if r == seen()));
}

#[test]
fn huge_and_duplicated_taint_lists_are_read_whole_once() {
    let mut taints: Vec<_> = (0..5000).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule"})).collect();
    taints.push(json!({"key": "k1", "effect": "NoSchedule"}));
    taints.push(json!({"key": "x", "effect": "Sometimes"}));
    taints.push(json!({"key": 7, "effect": "NoExecute"}));
    taints.push(json!("node.kubernetes.io/unreachable:NoExecute"));
    taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}));
    let s = node(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}));
    assert_eq!(s.taints.len(), 5001);
    assert!(s.taints.iter().any(|t| t.is("node.kubernetes.io/unreachable", TaintEffect::NoExecute)));
}

#[test]
fn missing_and_malformed_zone_labels_leave_the_node_unlabelled() {
    let s = node(json!({"metadata": {"name": "n1"}}));
    assert!(s.labels.is_empty());
    let s = node(json!({"metadata": {"name": "n1", "labels": {
        "topology.kubernetes.io/zone": 5, "kubernetes.io/os": "linux"}}}));
    assert_eq!(s.labels.len(), 1);
    assert!(!s.labels.contains_key("topology.kubernetes.io/zone"));
    let s = node(json!({"metadata": {"name": "n1", "labels": ["topology.kubernetes.io/zone=z1"]}}));
    assert!(s.labels.is_empty());
}

#[test]
fn fields_of_the_wrong_type_read_as_absent() {
    let s = node(json!({
        "metadata": {"name": "n1"},
        "spec": {"taints": "node.kubernetes.io/unreachable:NoExecute", "unschedulable": "yes"},
        "status": {"conditions": {"type": "Ready", "status": "False"}},
    }));
    assert!(s.taints.is_empty() && s.conditions.is_empty() && !s.unschedulable);
    let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                       "spec": {"nodeName": 5}, "status": {"conditions": "Ready"}}));
    assert_eq!((p.node, p.ready), (None, None));
}

#[test]
fn objects_that_cannot_be_named_are_ignored() {
    assert!(node_reading(&json!({"metadata": {}}), seen(), Detail::Lifecycle).is_none());
    assert!(node_reading(&json!({"metadata": {"name": 3}}), seen(), Detail::Lifecycle).is_none());
    assert!(node_reading(&json!([1, 2]), seen(), Detail::Lifecycle).is_none());
    assert!(pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns"}}), seen(), Detail::Lifecycle).is_none());
    assert!(pod_reading(&json!({"metadata": {"name": "p", "uid": "u"}}), seen(), Detail::Lifecycle).is_none());
    assert!(
        pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns", "uid": 1}}), seen(), Detail::Lifecycle)
            .is_none()
    );
    assert!(lease_reading(&json!({"metadata": {"namespace": NODE_LEASE_NAMESPACE}}), seen()).is_none());
    assert!(
        lease_reading(&json!({"metadata": {"name": "n1", "namespace": "kube-system"}}), seen()).is_none(),
        "not a node Lease"
    );
}

#[test]
fn unreadable_tolerations_tolerate_everything_in_their_place() {
    let all = pod::tolerate_everything();
    let p = pod_with_tolerations(json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "k", "tolerationSeconds": "300"},
        {"key": "k", "tolerationSeconds": 1.5},
        {"key": ["k"]},
        {"key": "k", "operator": 5},
        "node.kubernetes.io/unreachable",
        {"key": "k", "value": "v", "tolerationSeconds": -5},
    ]));
    assert_eq!(p.tolerations[0].seconds, Some(300));
    assert_eq!(&p.tolerations[1..6], vec![all.clone(); 5].as_slice());
    assert_eq!(p.tolerations[6].seconds, Some(-5), "a negative time is valid: evict at once");
    let p = pod_with_tolerations(json!("all of them"));
    assert_eq!(p.tolerations, vec![all]);
}

/// An operator or effect no version defines is a string upstream decodes
/// and then matches against no taint (`Toleration.ToleratesTaint`), so
/// such a toleration tolerates nothing here either. (It once read as
/// tolerating everything here, and as `Equal` in the served cluster.)
#[test]
fn an_unknown_operator_or_effect_tolerates_no_taint() {
    let p = pod_with_tolerations(json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Sideways", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "Whenever"},
        {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    ]));
    assert_eq!(p.tolerations.len(), 1, "{:?}", p.tolerations);
    assert_eq!(p.tolerations[0].seconds, Some(60));
}

#[test]
fn unreadable_owner_references_spare_the_pod_as_a_daemonsets() {
    let with =
        |refs: Value| pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": refs}}));
    assert!(with(json!([{"kind": "DaemonSet", "name": "d", "controller": true}])).daemonset);
    assert!(!with(json!([{"kind": "ReplicaSet", "name": "r", "controller": true}])).daemonset);
    assert!(!with(json!([{"kind": "DaemonSet", "name": "d"}])).daemonset);
    assert!(with(json!([{"kind": "DaemonSet", "controller": "true"}])).daemonset);
    assert!(with(json!({"kind": "DaemonSet"})).daemonset);
    // Two controllers (the API server refuses that): unreadable, spared.
    let two = json!([{"kind": "ReplicaSet", "name": "a", "controller": true},
                     {"kind": "ReplicaSet", "name": "b", "controller": true}]);
    assert!(with(two).daemonset);
    let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "deletionTimestamp": "soon"}}));
    assert!(p.terminating, "any deletionTimestamp means terminating");
}
