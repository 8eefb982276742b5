//! Kubernetes objects (k8s-openapi types) to the engine's observations,
//! trimmed to what the engine reads, so nothing else of an object is kept.
//!
//! The API server validates what it stores, but a controller must not bet
//! its decisions on that: an object written by an older server, a buggy
//! webhook or a hand-edited etcd may carry duplicated conditions, statuses
//! no version defines, absurd timestamps or a taint list thousands long.
//! Every conversion here is total: it never panics, it says what it found
//! odd in one log line (at most once per object and kind of oddity per
//! call), and it reads the object conservatively (the reading that cannot
//! make an eviction come sooner), or ignores the object when it cannot be
//! named at all.
//!
//! Time: the engine's [`Timestamp`] is Unix time in nanoseconds in
//! production ([`timestamp`]), so a heartbeat's time is what the API says.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{
    ConditionStatus, ConditionType, NodeCondition, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator,
};

/// The namespace the kubelets keep their Leases in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// A node with more taints than this is logged: no real node needs so
/// many, and it usually means a runaway taint writer. The taints are all
/// kept (dropping one could hide a NoExecute taint the engine must see).
pub const MANY_TAINTS: usize = 256;

/// Timestamps outside 2000-01-01 .. 2200-01-01 are logged as absurd.
const SANE_FROM_UNIX_SECS: i64 = 946_684_800;
const SANE_UNTIL_UNIX_SECS: i64 = 7_258_118_400;

/// The engine's time of an API timestamp: Unix nanoseconds, saturating
/// (jiff's range is wider than an i64 of nanoseconds only by centuries, and
/// a saturated value is as absurd as the original, never a panic).
pub fn timestamp(t: &k8s_openapi::jiff::Timestamp) -> Timestamp {
    let n = t.as_nanosecond();
    Timestamp::from_nanos(i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX }))
}

/// Logs a timestamp far outside any plausible clock, once per field.
fn check_time(what: &str, object: &str, t: Timestamp) -> Timestamp {
    let secs = t.as_nanos() / 1_000_000_000;
    if !(SANE_FROM_UNIX_SECS..SANE_UNTIL_UNIX_SECS).contains(&secs) {
        tracing::warn!(object, field = what, unix_seconds = secs, "absurd timestamp in an API object; read as given");
    }
    t
}

fn effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn name_of(meta: &ObjectMeta) -> Option<&str> {
    meta.name.as_deref().filter(|n| !n.is_empty())
}

/// What the engine reads of a Node, or `None` (logged) when the node has
/// no name.
///
/// Conservative readings:
/// - a condition type listed twice: the first is read, as upstream's
///   `GetNodeCondition` does, and the duplicate is logged;
/// - a condition status other than True, False, Unknown: the condition is
///   read as absent (it says nothing the controller can act on);
/// - a missing or unparsable heartbeat or transition time: the epoch, as
///   the simulator's conversion reads it (a stale heartbeat changes nothing
///   by itself: the engine dates heartbeats by when it sees them change);
/// - a taint with an unknown effect is skipped (no rule reads it); a taint
///   listed twice with the same key and effect is read once.
pub fn node_snapshot(node: &Node) -> Option<NodeSnapshot> {
    let Some(name) = name_of(&node.metadata) else {
        tracing::warn!("ignoring a Node without metadata.name");
        return None;
    };
    let created = node
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::EPOCH, |t| check_time("metadata.creationTimestamp", name, timestamp(&t.0)));
    let labels: BTreeMap<String, String> = node.metadata.labels.clone().unwrap_or_default();
    let mut conditions: Vec<NodeCondition> = Vec::new();
    for c in node.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten() {
        let kind = ConditionType::parse(&c.type_);
        let status = match c.status.as_str() {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            "Unknown" => ConditionStatus::Unknown,
            other => {
                tracing::warn!(node = name, condition = %c.type_, status = other, "unknown condition status; condition read as absent");
                continue;
            }
        };
        if conditions.iter().any(|k| k.kind == kind) {
            tracing::warn!(node = name, condition = %c.type_, "condition listed twice; the first is read");
            continue;
        }
        let at = |what: &str, t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.as_ref().map_or(Timestamp::EPOCH, |t| check_time(what, name, timestamp(&t.0)))
        };
        conditions.push(NodeCondition {
            kind,
            status,
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            last_heartbeat: at("lastHeartbeatTime", &c.last_heartbeat_time),
            last_transition: at("lastTransitionTime", &c.last_transition_time),
        });
    }
    let spec = node.spec.as_ref();
    let raw_taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
    if raw_taints.len() > MANY_TAINTS {
        tracing::warn!(node = name, taints = raw_taints.len(), "node has an unusually long taint list; all read");
    }
    let mut taints: Vec<Taint> = Vec::with_capacity(raw_taints.len());
    for t in raw_taints {
        let Some(e) = effect(&t.effect) else {
            tracing::warn!(node = name, key = %t.key, effect = %t.effect, "taint with an unknown effect skipped");
            continue;
        };
        if taints.iter().any(|k| k.key == t.key && k.effect == e) {
            tracing::warn!(node = name, key = %t.key, "taint listed twice with the same effect; read once");
            continue;
        }
        taints.push(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: e,
            time_added: t.time_added.as_ref().map(|at| check_time("timeAdded", name, timestamp(&at.0))),
        });
    }
    Some(NodeSnapshot {
        name: name.to_string(),
        created,
        labels,
        conditions,
        taints,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
    })
}

/// What the engine reads of a Pod, or `None` (logged) when it has no
/// name, namespace or uid: every write to a pod carries its uid as a
/// precondition, so a pod without one could never be written safely.
///
/// Conservative readings: an unknown toleration operator reads as `Equal`
/// (the API's default), an unknown effect as "all effects" only when the
/// field is absent (an unknown one is kept as absent and logged).
pub fn pod_snapshot(pod: &Pod) -> Option<PodSnapshot> {
    let meta = &pod.metadata;
    let (Some(name), Some(ns)) = (name_of(meta), meta.namespace.as_deref().filter(|n| !n.is_empty())) else {
        tracing::warn!(name = ?meta.name, namespace = ?meta.namespace, "ignoring a Pod without a name or namespace");
        return None;
    };
    let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty()) else {
        tracing::warn!(pod = %format!("{ns}/{name}"), "ignoring a Pod without metadata.uid");
        return None;
    };
    let daemonset = meta
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|r| r.kind == "DaemonSet" && r.controller == Some(true));
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status == "True");
    let spec = pod.spec.as_ref();
    let tolerations = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let operator = match t.operator.as_deref() {
                Some("Exists") => TolerationOperator::Exists,
                None | Some("Equal" | "") => TolerationOperator::Equal,
                Some(other) => {
                    tracing::warn!(pod = %format!("{ns}/{name}"), operator = other, "unknown toleration operator; read as Equal");
                    TolerationOperator::Equal
                }
            };
            let eff = match t.effect.as_deref() {
                None | Some("") => None,
                Some(e) => {
                    let parsed = effect(e);
                    if parsed.is_none() {
                        tracing::warn!(pod = %format!("{ns}/{name}"), effect = e, "unknown toleration effect; read as matching every effect");
                    }
                    parsed
                }
            };
            Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator,
                value: t.value.clone().unwrap_or_default(),
                effect: eff,
                seconds: t.toleration_seconds,
            }
        })
        .collect();
    Some(PodSnapshot {
        key: format!("{ns}/{name}"),
        uid: uid.to_string(),
        node: spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()),
        daemonset,
        ready,
        terminating: meta.deletion_timestamp.is_some(),
        tolerations,
    })
}

/// The observation a node Lease gives: its name and `spec.renewTime`.
/// `None` for Leases outside `kube-node-lease` or without a name.
pub fn lease_observation(lease: &Lease) -> Option<Observation> {
    if lease.metadata.namespace.as_deref() != Some(NODE_LEASE_NAMESPACE) {
        return None;
    }
    let node = name_of(&lease.metadata)?;
    let renew = lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| check_time("spec.renewTime", node, timestamp(&t.0)));
    Some(Observation::LeaseUpserted { node: node.to_string(), renew })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("a Node")
    }

    #[test]
    fn duplicated_and_unknown_conditions_read_conservatively() {
        let n = node(json!({
            "metadata": {"name": "n1", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2025-01-01T00:00:10Z"},
                {"type": "Ready", "status": "Unknown"},
                {"type": "MemoryPressure", "status": "Perhaps"},
                {"type": "DiskPressure", "status": "False"},
            ]},
        }));
        let s = node_snapshot(&n).expect("named");
        assert_eq!(s.conditions.len(), 2);
        assert_eq!(
            (s.conditions[0].kind.clone(), s.conditions[0].status),
            (ConditionType::Ready, ConditionStatus::True)
        );
        assert_eq!(s.conditions[1].kind, ConditionType::DiskPressure);
        assert!(s.labels.is_empty(), "no zone label: the engine's unlabelled zone");
    }

    #[test]
    fn absurd_timestamps_and_missing_fields_do_not_panic() {
        let n = node(json!({
            "metadata": {"name": "n1", "creationTimestamp": "9000-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "0001-01-01T00:00:00Z"}]},
        }));
        let s = node_snapshot(&n).expect("named");
        assert!(s.created > Timestamp::EPOCH);
        assert!(s.conditions[0].last_heartbeat < Timestamp::EPOCH);
        assert!(node_snapshot(&node(json!({"metadata": {}}))).is_none());
        let bare = node_snapshot(&node(json!({"metadata": {"name": "bare"}}))).expect("named");
        assert!(bare.conditions.is_empty() && bare.taints.is_empty() && !bare.unschedulable);
    }

    #[test]
    fn huge_and_duplicated_taint_lists_are_read_whole_once() {
        let mut taints: Vec<_> = (0..5000).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule"})).collect();
        taints.push(json!({"key": "k1", "effect": "NoSchedule"}));
        taints.push(json!({"key": "x", "effect": "Sometimes"}));
        taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}));
        let s = node_snapshot(&node(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}))).expect("named");
        assert_eq!(s.taints.len(), 5001);
        assert!(s.taints.iter().any(|t| t.effect == TaintEffect::NoExecute));
    }

    #[test]
    fn pods_without_identity_are_ignored_and_odd_tolerations_tolerate_more() {
        let pod = |v| serde_json::from_value::<Pod>(v).expect("a Pod");
        assert!(pod_snapshot(&pod(json!({"metadata": {"name": "p", "namespace": "ns"}}))).is_none());
        assert!(pod_snapshot(&pod(json!({"metadata": {"name": "p", "uid": "u"}}))).is_none());
        let p = pod_snapshot(&pod(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": true}]},
            "spec": {"containers": [], "nodeName": "", "tolerations": [
                {"key": "k", "operator": "Sideways", "effect": "Whenever", "tolerationSeconds": -5}]},
            "status": {"conditions": [{"type": "Ready", "status": "Maybe"}]},
        })))
        .expect("identified");
        assert_eq!(p.node, None);
        assert!(p.daemonset);
        assert_eq!(p.ready, Some(false));
        assert_eq!(p.tolerations[0].effect, None, "an unknown effect tolerates every effect");
        assert_eq!(p.tolerations[0].seconds, Some(-5));
    }

    #[test]
    fn leases_outside_the_node_lease_namespace_are_not_heartbeats() {
        let l = |ns: &str| {
            serde_json::from_value::<Lease>(json!({"metadata": {"name": "n1", "namespace": ns},
                "spec": {"renewTime": "2025-01-01T00:00:00.000001Z"}}))
            .expect("a Lease")
        };
        assert!(lease_observation(&l("kube-system")).is_none());
        assert!(matches!(
            lease_observation(&l(NODE_LEASE_NAMESPACE)),
            Some(Observation::LeaseUpserted { renew: Some(_), .. })
        ));
    }
}
