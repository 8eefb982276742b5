//! Kubernetes objects to the engine's observations, read leniently from
//! their JSON and trimmed to what the engine reads, so nothing else of an
//! object is kept.
//!
//! The API server validates what it stores, but a controller must not bet
//! its decisions on that: an object written by an older server, a buggy
//! webhook or a hand-edited etcd may carry duplicated conditions, statuses
//! no version defines, absurd or unparsable timestamps, a taint list
//! thousands long or a field of the wrong JSON type. Decoding such an
//! object into k8s-openapi's types fails, and when it fails inside a list
//! page, the whole page (and so the cache's first sync) fails with it. So
//! the watches read the JSON itself ([`node_reading`], [`pod_reading`],
//! [`lease_reading`]), field by field, and every reading here is total: it
//! never panics, it says what it found odd in a log line naming the object,
//! and it reads the field conservatively (the reading that cannot make an
//! eviction come sooner), or ignores the object when it cannot be named.
//!
//! The conservative readings, field by field:
//! - a timestamp that cannot be parsed, or lies outside 2000..2200, reads
//!   as the moment the object was seen (`seen_at`). The engine uses a
//!   timestamp either to tell whether it changed (heartbeats, transitions,
//!   Lease renewals: a fresh delivery then counts as a sign of life) or as
//!   the start of a grace period (creation: it starts now, the latest it
//!   could). Absent timestamps keep their API meaning;
//! - a condition type listed twice: the first is read (upstream's
//!   `GetNodeCondition`); a status other than True/False/Unknown: the
//!   condition reads as absent (an absent Ready condition decides nothing;
//!   an Unknown one would);
//! - a taint or condition entry that cannot be read is skipped (a NoExecute
//!   taint the engine cannot see evicts nothing); a taint list of the wrong
//!   type reads as empty;
//! - a toleration that cannot be read (unknown operator or effect, a field
//!   of the wrong type) reads as one that tolerates every taint forever,
//!   in its place in pod order: upstream would tolerate less, and a pod
//!   deleted by mistake cannot be brought back;
//! - owner references that cannot be read mark the pod as a DaemonSet's
//!   (legacy eviction spares those); any deletionTimestamp marks it
//!   terminating (the controller leaves those alone);
//! - a label of the wrong type is skipped (a node without a zone label is
//!   in the engine's unlabelled zone).
//!
//! Time: the engine's [`Timestamp`] is Unix time in nanoseconds in
//! production ([`timestamp`]), so a heartbeat's time is what the API says.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{
    ConditionStatus, ConditionType, NodeCondition, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator,
};
use serde_json::Value;

/// The namespace the kubelets keep their Leases in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// A node with more taints than this is logged: no real node needs so
/// many, and it usually means a runaway taint writer. The taints are all
/// kept (dropping one could hide a NoExecute taint the engine must see).
pub const MANY_TAINTS: usize = 256;

/// Timestamps outside 2000-01-01 .. 2200-01-01 are absurd.
const SANE_FROM_UNIX_SECS: i64 = 946_684_800;
const SANE_UNTIL_UNIX_SECS: i64 = 7_258_118_400;

/// The engine's time of an API timestamp: Unix nanoseconds, saturating
/// (jiff's range is wider than an i64 of nanoseconds only by centuries, and
/// a saturated value is as absurd as the original, never a panic).
pub fn timestamp(t: &k8s_openapi::jiff::Timestamp) -> Timestamp {
    let n = t.as_nanosecond();
    Timestamp::from_nanos(i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX }))
}

/// Now, on the engine's production clock (Unix nanoseconds): the
/// `seen_at` of an object decoded now.
pub fn wall_clock_now() -> Timestamp {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Timestamp::from_nanos(nanos)
}

/// An API timestamp (RFC 3339) within the sane range, or `None`.
fn sane_time(s: &str) -> Option<Timestamp> {
    let t = timestamp(&s.parse::<k8s_openapi::jiff::Timestamp>().ok()?);
    let secs = t.as_nanos() / 1_000_000_000;
    (SANE_FROM_UNIX_SECS..SANE_UNTIL_UNIX_SECS).contains(&secs).then_some(t)
}

fn effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

/// The value at `path`, `None` when absent or null.
fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// One object being read: its name for the log lines, and when it was
/// seen (what an unreadable timestamp reads as).
struct Reading<'a> {
    kind: &'static str,
    name: &'a str,
    seen_at: Timestamp,
}

impl Reading<'_> {
    fn odd(&self, field: &str, what: &str) {
        tracing::warn!(kind = self.kind, object = self.name, field, "malformed API object: {what}");
    }

    /// A string field: `None` when absent, null or (logged) not a string.
    fn text<'v>(&self, v: &'v Value, path: &[&str], field: &str) -> Option<&'v str> {
        let x = at(v, path)?;
        let s = x.as_str();
        if s.is_none() {
            self.odd(field, &format!("expected a string, found {}", json_type(x)));
        }
        s
    }

    /// A timestamp field: `None` when absent or null; `seen_at` (logged)
    /// when unparsable, of the wrong type or absurd.
    fn time(&self, v: &Value, path: &[&str], field: &str) -> Option<Timestamp> {
        let x = at(v, path)?;
        let Some(s) = x.as_str() else {
            self.odd(field, &format!("timestamp is a {}; read as the time it was seen", json_type(x)));
            return Some(self.seen_at);
        };
        match sane_time(s) {
            Some(t) => Some(t),
            None => {
                self.odd(field, &format!("unparsable or absurd timestamp {s:?}; read as the time it was seen"));
                Some(self.seen_at)
            }
        }
    }

    /// An array field: empty when absent or null; `Err` (logged) when of
    /// another type.
    fn list<'v>(&self, v: &'v Value, path: &[&str], field: &str) -> Result<&'v [Value], ()> {
        match at(v, path) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(x) => {
                self.odd(field, &format!("expected a list, found {}", json_type(x)));
                Err(())
            }
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn name_of(v: &Value) -> Option<&str> {
    at(v, &["metadata", "name"]).and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// What the engine reads of a Node's JSON, or `None` (logged) when the
/// node has no name. See the module's documentation for how each odd
/// field is read.
pub fn node_reading(v: &Value, seen_at: Timestamp) -> Option<NodeSnapshot> {
    let Some(name) = name_of(v) else {
        tracing::warn!(kind = "Node", "ignoring a Node without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Node", name, seen_at };
    let created = r.time(v, &["metadata", "creationTimestamp"], "metadata.creationTimestamp").unwrap_or(seen_at);
    let mut labels = BTreeMap::new();
    match at(v, &["metadata", "labels"]) {
        None => {}
        Some(Value::Object(m)) => {
            for (k, val) in m {
                match val.as_str() {
                    Some(s) => {
                        labels.insert(k.clone(), s.to_string());
                    }
                    None => r.odd("metadata.labels", &format!("label {k:?} is a {}; skipped", json_type(val))),
                }
            }
        }
        Some(x) => r.odd("metadata.labels", &format!("expected an object, found {}; no labels read", json_type(x))),
    }
    let mut conditions: Vec<NodeCondition> = Vec::new();
    let mut seen_types: Vec<String> = Vec::new();
    for c in r.list(v, &["status", "conditions"], "status.conditions").unwrap_or_default() {
        let Some(type_) = c.get("type").and_then(Value::as_str) else {
            r.odd("status.conditions", "a condition without a readable type; skipped");
            continue;
        };
        if seen_types.iter().any(|t| t == type_) {
            r.odd("status.conditions", &format!("condition {type_} listed twice; the first is read"));
            continue;
        }
        seen_types.push(type_.to_string());
        let status = match c.get("status").and_then(Value::as_str) {
            Some("True") => ConditionStatus::True,
            Some("False") => ConditionStatus::False,
            Some("Unknown") => ConditionStatus::Unknown,
            other => {
                r.odd("status.conditions", &format!("condition {type_} has status {other:?}; read as absent"));
                continue;
            }
        };
        let field = |f: &str| format!("status.conditions[{type_}].{f}");
        conditions.push(NodeCondition {
            kind: ConditionType::parse(type_),
            status,
            reason: r.text(c, &["reason"], &field("reason")).unwrap_or_default().to_string(),
            message: r.text(c, &["message"], &field("message")).unwrap_or_default().to_string(),
            last_heartbeat: r.time(c, &["lastHeartbeatTime"], &field("lastHeartbeatTime")).unwrap_or(Timestamp::EPOCH),
            last_transition: r
                .time(c, &["lastTransitionTime"], &field("lastTransitionTime"))
                .unwrap_or(Timestamp::EPOCH),
        });
    }
    let raw_taints = r.list(v, &["spec", "taints"], "spec.taints").unwrap_or_default();
    if raw_taints.len() > MANY_TAINTS {
        r.odd("spec.taints", &format!("{} taints, an unusually long list; all read", raw_taints.len()));
    }
    let mut taints: Vec<Taint> = Vec::with_capacity(raw_taints.len().min(MANY_TAINTS));
    for t in raw_taints {
        let (Some(key), Some(eff)) = (t.get("key").and_then(Value::as_str), t.get("effect").and_then(Value::as_str))
        else {
            r.odd("spec.taints", "a taint without a readable key or effect; skipped");
            continue;
        };
        let Some(e) = effect(eff) else {
            r.odd("spec.taints", &format!("taint {key} has unknown effect {eff:?}; skipped"));
            continue;
        };
        if taints.iter().any(|k| k.key == key && k.effect == e) {
            r.odd("spec.taints", &format!("taint {key}:{eff} listed twice; read once"));
            continue;
        }
        taints.push(Taint {
            key: key.to_string(),
            value: r.text(t, &["value"], "spec.taints[].value").unwrap_or_default().to_string(),
            effect: e,
            time_added: r.time(t, &["timeAdded"], "spec.taints[].timeAdded"),
        });
    }
    let unschedulable = match at(v, &["spec", "unschedulable"]) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(x) => {
            r.odd("spec.unschedulable", &format!("expected a boolean, found {}; read as false", json_type(x)));
            false
        }
    };
    Some(NodeSnapshot { allocatable: None, name: name.to_string(), created, labels, conditions, taints, unschedulable })
}

/// The toleration an unreadable one reads as: every taint, forever.
fn tolerate_everything() -> Toleration {
    Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        seconds: None,
    }
}

/// One toleration, or `None` when it cannot be read as written.
fn toleration(t: &Value) -> Option<Toleration> {
    if !t.is_object() {
        return None;
    }
    let opt_str = |f: &str| match t.get(f) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.as_str())),
        Some(_) => None,
    };
    let operator = match opt_str("operator")? {
        None | Some("" | "Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(_) => return None,
    };
    let effect = match opt_str("effect")? {
        None | Some("") => None,
        Some(e) => Some(effect(e)?),
    };
    let seconds = match t.get("tolerationSeconds") {
        None | Some(Value::Null) => None,
        Some(x) => Some(x.as_i64()?),
    };
    Some(Toleration {
        key: opt_str("key")?.unwrap_or_default().to_string(),
        operator,
        value: opt_str("value")?.unwrap_or_default().to_string(),
        effect,
        seconds,
    })
}

/// What the engine reads of a Pod's JSON, or `None` (logged) when it has
/// no name, namespace or uid: every write to a pod carries its uid as a
/// precondition, so a pod without one could never be written safely. See
/// the module's documentation for how each odd field is read.
pub fn pod_reading(v: &Value, seen_at: Timestamp) -> Option<PodSnapshot> {
    let ns = at(v, &["metadata", "namespace"]).and_then(Value::as_str).filter(|n| !n.is_empty());
    let (Some(name), Some(ns)) = (name_of(v), ns) else {
        tracing::warn!(
            kind = "Pod",
            name = ?at(v, &["metadata", "name"]),
            namespace = ?at(v, &["metadata", "namespace"]),
            "ignoring a Pod without a readable name or namespace"
        );
        return None;
    };
    let key = format!("{ns}/{name}");
    let r = Reading { kind: "Pod", name: &key, seen_at };
    let Some(uid) = at(v, &["metadata", "uid"]).and_then(Value::as_str).filter(|u| !u.is_empty()) else {
        r.odd("metadata.uid", "no readable uid; the pod is ignored (it could not be written safely)");
        return None;
    };
    let daemonset = match r.list(v, &["metadata", "ownerReferences"], "metadata.ownerReferences") {
        Err(()) => true,
        Ok(refs) => refs.iter().any(|o| {
            let kind = o.get("kind").and_then(Value::as_str);
            let controller = match o.get("controller") {
                None | Some(Value::Null) => Some(false),
                Some(c) => c.as_bool(),
            };
            match (kind, controller) {
                (Some(k), Some(c)) => k == "DaemonSet" && c,
                _ => {
                    r.odd("metadata.ownerReferences", "an unreadable owner reference; read as a DaemonSet's pod");
                    true
                }
            }
        }),
    };
    let ready = match r.list(v, &["status", "conditions"], "status.conditions") {
        Err(()) => None,
        Ok(cs) => cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")).map(|c| {
            match c.get("status").and_then(Value::as_str) {
                Some("True") => true,
                Some("False") => false,
                other => {
                    r.odd("status.conditions", &format!("Ready has status {other:?}; read as not ready"));
                    false
                }
            }
        }),
    };
    let tolerations = match r.list(v, &["spec", "tolerations"], "spec.tolerations") {
        Err(()) => vec![tolerate_everything()],
        Ok(ts) => ts
            .iter()
            .map(|t| {
                toleration(t).unwrap_or_else(|| {
                    r.odd("spec.tolerations", &format!("unreadable toleration {t}; read as tolerating every taint"));
                    tolerate_everything()
                })
            })
            .collect(),
    };
    Some(PodSnapshot {
        scheduling: None,
        key: key.clone(),
        uid: uid.to_string(),
        node: r.text(v, &["spec", "nodeName"], "spec.nodeName").filter(|n| !n.is_empty()).map(str::to_string),
        daemonset,
        ready,
        terminating: at(v, &["metadata", "deletionTimestamp"]).is_some(),
        tolerations,
    })
}

/// The observation a node Lease's JSON gives: its name and
/// `spec.renewTime`. `None` for Leases outside `kube-node-lease` or
/// without a name.
pub fn lease_reading(v: &Value, seen_at: Timestamp) -> Option<Observation> {
    if at(v, &["metadata", "namespace"]).and_then(Value::as_str) != Some(NODE_LEASE_NAMESPACE) {
        return None;
    }
    let Some(node) = name_of(v) else {
        tracing::warn!(kind = "Lease", "ignoring a node Lease without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Lease", name: node, seen_at };
    let renew = r.time(v, &["spec", "renewTime"], "spec.renewTime");
    Some(Observation::LeaseUpserted { node: node.to_string(), renew })
}

/// [`node_reading`] of a typed Node (as the writer's requests return it),
/// seen now.
pub fn node_snapshot(node: &Node) -> Option<NodeSnapshot> {
    node_reading(&serde_json::to_value(node).ok()?, wall_clock_now())
}

/// [`pod_reading`] of a typed Pod, seen now.
pub fn pod_snapshot(pod: &Pod) -> Option<PodSnapshot> {
    pod_reading(&serde_json::to_value(pod).ok()?, wall_clock_now())
}

/// [`lease_reading`] of a typed Lease, seen now.
pub fn lease_observation(lease: &Lease) -> Option<Observation> {
    lease_reading(&serde_json::to_value(lease).ok()?, wall_clock_now())
}

#[cfg(test)]
mod tests {
    //! One test per kind of malformed object: each shows the object is
    //! read (or ignored) without a panic, and read the conservative way.

    use super::*;
    use nodewarden_model::Span;
    use serde_json::json;

    /// When the objects of these tests are seen: 2025-01-01T00:00:00Z.
    fn seen() -> Timestamp {
        Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
    }

    fn node(v: Value) -> NodeSnapshot {
        node_reading(&v, seen()).expect("a named node is read")
    }

    fn pod(v: Value) -> PodSnapshot {
        pod_reading(&v, seen()).expect("an identified pod is read")
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
        let typed =
            serde_json::from_value::<Node>(json!({"metadata": {"name": "n", "creationTimestamp": "yesterday"}}));
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
        assert!(
            matches!(lease("soon", seen()), Some(Observation::LeaseUpserted { renew: Some(r), .. }) if r == seen())
        );
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
        assert!(node_reading(&json!({"metadata": {}}), seen()).is_none());
        assert!(node_reading(&json!({"metadata": {"name": 3}}), seen()).is_none());
        assert!(node_reading(&json!([1, 2]), seen()).is_none());
        assert!(pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns"}}), seen()).is_none());
        assert!(pod_reading(&json!({"metadata": {"name": "p", "uid": "u"}}), seen()).is_none());
        assert!(pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns", "uid": 1}}), seen()).is_none());
        assert!(lease_reading(&json!({"metadata": {"namespace": NODE_LEASE_NAMESPACE}}), seen()).is_none());
        assert!(
            lease_reading(&json!({"metadata": {"name": "n1", "namespace": "kube-system"}}), seen()).is_none(),
            "not a node Lease"
        );
    }

    #[test]
    fn unreadable_tolerations_tolerate_everything_in_their_place() {
        let all = tolerate_everything();
        let p = pod_with_tolerations(json!([
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "k", "operator": "Sideways"},
            {"key": "k", "effect": "Whenever"},
            {"key": "k", "tolerationSeconds": "300"},
            {"key": "k", "tolerationSeconds": 1.5},
            {"key": ["k"]},
            "node.kubernetes.io/unreachable",
            {"key": "k", "value": "v", "tolerationSeconds": -5},
        ]));
        assert_eq!(p.tolerations[0].seconds, Some(300));
        assert_eq!(&p.tolerations[1..7], vec![all.clone(); 6].as_slice());
        assert_eq!(p.tolerations[7].seconds, Some(-5), "a negative time is valid: evict at once");
        let p = pod_with_tolerations(json!("all of them"));
        assert_eq!(p.tolerations, vec![all]);
    }

    #[test]
    fn unreadable_owner_references_spare_the_pod_as_a_daemonsets() {
        let with = |refs: Value| {
            pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": refs}}))
        };
        assert!(with(json!([{"kind": "DaemonSet", "name": "d", "controller": true}])).daemonset);
        assert!(!with(json!([{"kind": "ReplicaSet", "name": "r", "controller": true}])).daemonset);
        assert!(!with(json!([{"kind": "DaemonSet", "name": "d"}])).daemonset);
        assert!(with(json!([{"kind": "DaemonSet", "controller": "true"}])).daemonset);
        assert!(with(json!({"kind": "DaemonSet"})).daemonset);
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "deletionTimestamp": "soon"}}));
        assert!(p.terminating, "any deletionTimestamp means terminating");
    }

    #[test]
    fn a_list_page_with_a_malformed_object_decodes_whole() {
        let page = json!({
            "apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"},
            "items": [
                {"metadata": {"name": "good", "resourceVersion": "5"}},
                {"metadata": {"name": "bad", "resourceVersion": "6", "creationTimestamp": "9999-12-31T23:59:59Z"},
                 "spec": {"taints": 12}},
                17,
            ],
        });
        assert!(serde_json::from_value::<kube::core::ObjectList<Node>>(page.clone()).is_err());
        let list: kube::core::ObjectList<crate::Trimmed<Node>> = serde_json::from_value(page).expect("lenient page");
        let names: Vec<_> = list.items.iter().map(|n| n.metadata.name.clone()).collect();
        assert_eq!(names, [Some("good".into()), Some("bad".into()), None]);
        assert_eq!(list.items[1].metadata.resource_version.as_deref(), Some("6"));
        assert!(matches!(&list.items[1].reading, Some(Observation::NodeUpserted(n)) if n.name == "bad"));
        assert!(list.items[2].reading.is_none());
    }

    /// Answers every write as done, and records the pods deleted.
    #[derive(Default)]
    struct Accepting {
        deleted: Vec<String>,
    }

    impl nodewarden_controller::ClusterApi for Accepting {
        fn apply(&mut self, _now: Timestamp, action: &nodewarden_engine::Action) -> nodewarden_controller::Applied {
            if let nodewarden_engine::ActionKind::DeletePod { pod, .. } = &action.kind {
                self.deleted.push(pod.clone());
            }
            let done = nodewarden_engine::WriteOutcome::Done;
            nodewarden_controller::Applied {
                observations: vec![Observation::WriteFinished { id: action.id, outcome: done.clone() }],
                outcome: action.kind.slot().map(|_| done),
                violation: None,
            }
        }
    }

    #[test]
    fn malformed_pods_on_a_tainted_node_are_not_evicted() {
        let start = seen();
        let mut c = nodewarden_controller::Controller::new(nodewarden_model::ControllerConfig::default(), start)
            .expect("default configuration");
        let ready = |name: &str, status: &str| {
            json!({"metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z",
                                "labels": {"topology.kubernetes.io/zone": "z"}},
                   "spec": {"taints": if status == "True" { json!([]) } else {
                       json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                               "timeAdded": "2024-12-31T23:59:00Z"}]) }},
                   "status": {"conditions": [{"type": "Ready", "status": status,
                       "lastHeartbeatTime": "2024-12-31T23:59:59Z"}]}})
        };
        for (name, status) in [("dead", "Unknown"), ("a", "True"), ("b", "True"), ("c", "True")] {
            c.observe(start, Observation::NodeUpserted(node(ready(name, status))));
        }
        let on_dead = |name: &str, tolerations: Value| {
            json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
                   "spec": {"nodeName": "dead", "tolerations": tolerations}})
        };
        for p in [
            on_dead("plain", json!([])),
            on_dead("garbled", json!("all")),
            on_dead(
                "sideways",
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Sideways",
                                        "effect": "NoExecute", "tolerationSeconds": 0}]),
            ),
            on_dead(
                "stringly",
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                        "effect": "NoExecute", "tolerationSeconds": "0"}]),
            ),
        ] {
            c.observe(start, Observation::PodUpserted(pod(p)));
        }
        let mut api = Accepting::default();
        for i in 0..120 {
            let now = start + Span::from_secs(5 * i);
            for n in ["a", "b", "c"] {
                c.observe(now, Observation::LeaseUpserted { node: n.into(), renew: Some(now) });
            }
            let _ = c.step(now, &mut api, &mut |_| {});
        }
        // The pod without tolerations shows the taint does evict; the
        // malformed ones stay.
        assert_eq!(api.deleted, ["ns/plain"]);
    }
}
