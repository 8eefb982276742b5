//! Full Kubernetes objects (JSON) to and from what nodewarden's engine
//! observes: [`NodeSnapshot`] and [`PodSnapshot`].
//!
//! One module, so the served cluster, the in-process controller and (later)
//! the kube adapter read objects the same way. Reading never fails: a
//! missing or malformed field reads as absent, as the engine expects.
//!
//! Invariant: what these functions write is a whole object as a real
//! cluster would hold it, and reading one back gives what was written.

use std::collections::BTreeMap;

use nodewarden_engine::{NodeSnapshot, PodSnapshot};
use nodewarden_model::PodScheduling;
use nodewarden_model::scheduling::{CRITICAL_POD_ANNOTATION, MIRROR_POD_ANNOTATION};
use nodewarden_model::{
    ConditionStatus, ConditionType, NodeCondition, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator,
};
use serde_json::{Map, Value, json};

use crate::clock::TimeBase;

/// The namespace of node Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The kubelet version the simulated nodes report.
pub(crate) const KUBELET_VERSION: &str = "v1.33.0-nodewarden-sim";

fn effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

fn status(s: &str) -> ConditionStatus {
    match s {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A taint as the API writes it.
pub(crate) fn taint_json(t: &Taint, time: &TimeBase) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    if let Some(at) = t.time_added {
        v["timeAdded"] = json!(time.time(at));
    }
    v
}

/// A taint from the API; `None` for an unknown effect.
pub(crate) fn taint(v: &Value, time: &TimeBase) -> Option<Taint> {
    Some(Taint {
        key: s(v, "key").to_string(),
        value: s(v, "value").to_string(),
        effect: effect(s(v, "effect"))?,
        time_added: v.get("timeAdded").and_then(Value::as_str).and_then(|t| time.parse(t)),
    })
}

/// A toleration as the API writes it.
pub(crate) fn toleration_json(t: &Toleration) -> Value {
    let mut v = Map::new();
    if !t.key.is_empty() {
        v.insert("key".into(), json!(t.key));
    }
    v.insert(
        "operator".into(),
        json!(match t.operator {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        }),
    );
    if !t.value.is_empty() {
        v.insert("value".into(), json!(t.value));
    }
    if let Some(e) = t.effect {
        v.insert("effect".into(), json!(e.as_str()));
    }
    if let Some(secs) = t.seconds {
        v.insert("tolerationSeconds".into(), json!(secs));
    }
    Value::Object(v)
}

/// A toleration from the API.
pub(crate) fn toleration(v: &Value) -> Toleration {
    Toleration {
        key: s(v, "key").to_string(),
        operator: if s(v, "operator") == "Exists" { TolerationOperator::Exists } else { TolerationOperator::Equal },
        value: s(v, "value").to_string(),
        effect: effect(s(v, "effect")),
        seconds: v.get("tolerationSeconds").and_then(Value::as_i64),
    }
}

/// A node condition as the API writes it.
pub(crate) fn condition_json(c: &NodeCondition, time: &TimeBase) -> Value {
    json!({
        "type": c.kind.as_str(),
        "status": c.status.as_str(),
        "reason": c.reason,
        "message": c.message,
        "lastHeartbeatTime": time.time(c.last_heartbeat),
        "lastTransitionTime": time.time(c.last_transition),
    })
}

fn condition(v: &Value, time: &TimeBase) -> NodeCondition {
    let at = |k: &str| v.get(k).and_then(Value::as_str).and_then(|t| time.parse(t)).unwrap_or(Timestamp::EPOCH);
    NodeCondition {
        kind: ConditionType::parse(s(v, "type")),
        status: status(s(v, "status")),
        reason: s(v, "reason").to_string(),
        message: s(v, "message").to_string(),
        last_heartbeat: at("lastHeartbeatTime"),
        last_transition: at("lastTransitionTime"),
    }
}

/// `metadata.resourceVersion` as the number the store writes (0 when it
/// is not one).
fn resource_version(meta: &Value) -> u64 {
    meta.get("resourceVersion").and_then(Value::as_str).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// What the engine reads of a Node, as the simulator reads it: for the
/// served cluster's own kubelets and scheduler, and for judging a served
/// run (`cargo xtask wire`) by replay's rules.
pub fn node_snapshot(v: &Value, time: &TimeBase) -> NodeSnapshot {
    let meta = &v["metadata"];
    NodeSnapshot {
        version: resource_version(meta),
        allocatable: None,
        name: s(meta, "name").to_string(),
        created: meta
            .get("creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| time.parse(t))
            .unwrap_or(Timestamp::EPOCH),
        labels: string_map(&meta["labels"]),
        conditions: v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |cs| cs.iter().map(|c| condition(c, time)).collect()),
        taints: v
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |ts| ts.iter().filter_map(|t| taint(t, time)).collect()),
        unschedulable: v.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// A string map (labels, annotations).
pub(crate) fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
        .unwrap_or_default()
}

/// True when the pod is owned (as controller) by a DaemonSet.
pub(crate) fn owned_by_daemonset(v: &Value) -> bool {
    v.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|refs| {
        refs.iter().any(|r| s(r, "kind") == "DaemonSet" && r.get("controller").and_then(Value::as_bool) == Some(true))
    })
}

/// The pod's Ready condition.
pub(crate) fn pod_ready(v: &Value) -> Option<bool> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| s(c, "type") == "Ready"))
        .map(|c| s(c, "status") == "True")
}

/// What the engine reads of a Pod, as the simulator reads it: for judging
/// a served run (`cargo xtask wire`) by replay's rules.
pub fn pod_snapshot(v: &Value) -> PodSnapshot {
    let meta = &v["metadata"];
    PodSnapshot {
        version: resource_version(meta),
        node_lost: v.pointer("/status/reason").and_then(Value::as_str)
            == Some(nodewarden_model::keys::POD_REASON_NODE_LOST),
        scheduling: None,
        key: format!("{}/{}", s(meta, "namespace"), s(meta, "name")),
        uid: s(meta, "uid").to_string(),
        node: v.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string),
        daemonset: owned_by_daemonset(v),
        ready: pod_ready(v),
        terminating: meta.get("deletionTimestamp").is_some_and(|d| !d.is_null()),
        tolerations: v
            .pointer("/spec/tolerations")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |ts| ts.iter().map(toleration).collect()),
    }
}

/// A node's internal IP, made from its index.
pub(crate) fn node_ip(index: usize) -> String {
    format!("10.{}.{}.{}", 64 + (index >> 16) % 64, (index >> 8) & 0xff, index & 0xff)
}

/// A node's `status.allocatable` (and capacity): what the simulator gave
/// it (a scenario's, for the scheduler and the rescheduler), or, when it
/// gave nothing, a common 8-core machine.
pub(crate) fn resources_json(allocatable: Option<nodewarden_model::Resources>) -> Value {
    match allocatable {
        Some(a) => json!({"cpu": format!("{}m", a.cpu_millis), "memory": a.memory_bytes.to_string(),
                          "pods": a.pods.to_string(), "ephemeral-storage": "100Gi"}),
        None => json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}),
    }
}

/// A whole Node as a kubelet registers it, from what the simulator holds,
/// so tests can store nodes exactly as the served cluster writes its own.
pub fn node_json(n: &NodeSnapshot, uid: &str, index: usize, time: &TimeBase) -> Value {
    let mut labels = n.labels.clone();
    labels.entry("kubernetes.io/hostname".into()).or_insert_with(|| n.name.clone());
    let mut spec = Map::new();
    if !n.taints.is_empty() {
        spec.insert("taints".into(), Value::Array(n.taints.iter().map(|t| taint_json(t, time)).collect()));
    }
    if n.unschedulable {
        spec.insert("unschedulable".into(), json!(true));
    }
    spec.insert("providerID".into(), json!(format!("nodewarden-sim://{}", n.name)));
    let resources = resources_json(n.allocatable);
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": n.name,
            "uid": uid,
            "creationTimestamp": time.time(n.created),
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": n.conditions.iter().map(|c| condition_json(c, time)).collect::<Vec<_>>(),
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": n.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": format!("{:032x}", index),
                "systemUUID": uid,
                "bootID": uid,
                "kernelVersion": "6.8.0-nodewarden",
                "osImage": "nodewarden simulated node",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    })
}

/// A whole running Pod, from what the simulator holds, so tests can store
/// pods exactly as the served cluster writes its own.
pub fn pod_json(
    p: &PodSnapshot,
    uid: &str,
    created: Timestamp,
    host_ip: Option<&str>,
    pod_ip: &str,
    time: &TimeBase,
) -> Value {
    let (ns, name) = p.key.split_once('/').unwrap_or(("default", &p.key));
    let mut meta = json!({"name": name, "namespace": ns, "uid": uid, "creationTimestamp": time.time(created)});
    let app = if p.daemonset { name.rsplit_once('-').map_or(name, |(a, _)| a) } else { "workload" };
    meta["labels"] = json!({"app": app});
    if p.daemonset {
        meta["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": app, "uid": format!("ds-{ns}-{app}"),
            "controller": true, "blockOwnerDeletion": true,
        }]);
    }
    if p.terminating {
        meta["deletionTimestamp"] = json!(time.time(created));
        meta["deletionGracePeriodSeconds"] = json!(30);
    }
    let mut spec = json!({
        "containers": [{
            "name": "main",
            "image": "registry.k8s.io/pause:3.10",
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "resources": {},
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "enableServiceLinks": true,
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": p.tolerations.iter().map(toleration_json).collect::<Vec<_>>(),
    });
    if let Some(node) = &p.node {
        spec["nodeName"] = json!(node);
    }
    let mut v = json!({"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec});
    let running = p.node.is_some() && host_ip.is_some();
    v["status"] = running_status(running, p.ready.unwrap_or(true), created, host_ip, pod_ip, time);
    if !running && let Some(ready) = p.ready {
        // A pod the scenario says is (or is not) ready keeps that Ready
        // condition while Pending (unbound, or on a node that is not
        // Ready), as replay holds it: node lifecycle marks such a pod not
        // ready when its node is, and only a pod with a Ready condition.
        let r = if ready { "True" } else { "False" };
        v["status"]["conditions"] = json!([{"type": "Ready", "status": r, "lastProbeTime": null,
            "lastTransitionTime": time.time(created)}]);
    }
    if let Some(sched) = &p.scheduling {
        with_scheduling(&mut v, sched, p.node.is_none(), time);
    }
    v
}

/// A scenario file's PodDisruptionBudget as the API holds it (its status
/// is the served disruption controller's, [`crate::pdb::refresh`]).
pub(crate) fn budget_json(
    b: &nodewarden_sim::scenario::BudgetSpec,
    ns: &str,
    name: &str,
    uid: &str,
    time: &TimeBase,
) -> Value {
    use nodewarden_sim::scenario::IntOrPercent;
    let amount = |a: &IntOrPercent| match a {
        IntOrPercent::Int(n) => json!(n),
        IntOrPercent::Percent(p) => json!(format!("{p}%")),
    };
    let mut selector = Map::new();
    if !b.selector.match_labels.is_empty() {
        selector.insert("matchLabels".into(), json!(b.selector.match_labels));
    }
    if !b.selector.match_expressions.is_empty() {
        selector.insert("matchExpressions".into(), b.selector.match_expressions.iter().map(requirement_json).collect());
    }
    let mut spec = json!({"selector": selector});
    if let Some(m) = &b.min_available {
        spec["minAvailable"] = amount(m);
    }
    if let Some(m) = &b.max_unavailable {
        spec["maxUnavailable"] = amount(m);
    }
    json!({
        "kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1,
                     "creationTimestamp": time.time(Timestamp::EPOCH)},
        "spec": spec,
    })
}

/// A label requirement as the API writes it.
fn requirement_json(r: &nodewarden_model::scheduling::Requirement) -> Value {
    use nodewarden_model::scheduling::SelectorOperator as Op;
    let op = match r.operator {
        Op::In => "In",
        Op::NotIn => "NotIn",
        Op::Exists => "Exists",
        Op::DoesNotExist => "DoesNotExist",
        Op::Gt => "Gt",
        Op::Lt => "Lt",
    };
    let mut v = json!({"key": r.key, "operator": op});
    if !r.values.is_empty() {
        v["values"] = json!(r.values);
    }
    v
}

/// What the simulator knows of a pod's scheduling (a scenario's critical
/// addons and the pods around them), written into the pod as the API
/// holds it: requests, priority class, annotations, labels, owner,
/// termination grace, node selector, required node affinity, and
/// `PodScheduled=False/Unschedulable` for an unbound pod the simulated
/// scheduler has given up on.
fn with_scheduling(v: &mut Value, s: &PodScheduling, unbound: bool, time: &TimeBase) {
    let r = &s.requests;
    v["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": format!("{}m", r.cpu_millis), "memory": r.memory_bytes.to_string()}});
    v["spec"]["terminationGracePeriodSeconds"] = json!(s.termination_grace.as_nanos() / 1_000_000_000);
    if let Some(pc) = &s.priority_class {
        v["spec"]["priorityClassName"] = json!(pc);
    }
    let mut annotations = Map::new();
    if s.critical_annotation {
        annotations.insert(CRITICAL_POD_ANNOTATION.into(), json!(""));
    }
    if s.mirror {
        annotations.insert(MIRROR_POD_ANNOTATION.into(), json!("nodewarden-sim"));
    }
    if !annotations.is_empty() {
        v["metadata"]["annotations"] = Value::Object(annotations);
    }
    if !s.labels.is_empty() {
        v["metadata"]["labels"] = json!(s.labels);
    }
    if let Some(kind) = &s.controller_kind
        && v.pointer("/metadata/ownerReferences").is_none()
    {
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let owner = name.rsplit_once('-').map_or(name.as_str(), |(o, _)| o).to_string();
        v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner,
            "uid": format!("owner-{owner}"), "controller": true, "blockOwnerDeletion": true}]);
    }
    if !s.placement.node_selector.is_empty() {
        v["spec"]["nodeSelector"] = json!(s.placement.node_selector);
    }
    if let Some(a) = &s.placement.affinity {
        let terms: Vec<Value> = a
            .node_selector_terms
            .iter()
            .map(|t| {
                let mut term = Map::new();
                if !t.match_expressions.is_empty() {
                    term.insert("matchExpressions".into(), t.match_expressions.iter().map(requirement_json).collect());
                }
                if !t.match_fields.is_empty() {
                    term.insert("matchFields".into(), t.match_fields.iter().map(requirement_json).collect());
                }
                Value::Object(term)
            })
            .collect();
        v["spec"]["affinity"] =
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    }
    if unbound && let Some(since) = s.unschedulable_since {
        let scheduled = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/0 nodes are available (nodewarden sim)", "lastProbeTime": null,
            "lastTransitionTime": time.time(since)});
        match v.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
            Some(cs) => {
                cs.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                cs.push(scheduled);
            }
            None => v["status"]["conditions"] = json!([scheduled]),
        }
    }
}

/// The status a kubelet posts for a pod it runs (or Pending when unbound).
pub(crate) fn running_status(
    running: bool,
    ready: bool,
    started: Timestamp,
    host_ip: Option<&str>,
    pod_ip: &str,
    time: &TimeBase,
) -> Value {
    if !running {
        return json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    let at = time.time(started);
    let r = if ready { "True" } else { "False" };
    let cond = |t: &str, st: &str| json!({"type": t, "status": st, "lastProbeTime": null, "lastTransitionTime": at});
    json!({
        "phase": "Running",
        "conditions": [
            cond("PodReadyToStartContainers", "True"),
            cond("Initialized", "True"),
            cond("Ready", r),
            cond("ContainersReady", r),
            cond("PodScheduled", "True"),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": at,
        "containerStatuses": [{
            "name": "main",
            "state": {"running": {"startedAt": at}},
            "lastState": {},
            "ready": ready,
            "restartCount": 0,
            "image": "registry.k8s.io/pause:3.10",
            "imageID": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
            "containerID": "containerd://0000000000000000000000000000000000000000000000000000000000000000",
            "started": true,
        }],
        "qosClass": "BestEffort",
    })
}

/// A node's Lease, as its kubelet keeps it.
pub(crate) fn lease_json(
    node: &str,
    node_uid: &str,
    uid: &str,
    renew: Timestamp,
    duration_secs: i64,
    time: &TimeBase,
) -> Value {
    lease_json_created(node, node_uid, uid, renew, renew, duration_secs, time)
}

/// A node's Lease created at `created`.
pub(crate) fn lease_json_created(
    node: &str,
    node_uid: &str,
    uid: &str,
    created: Timestamp,
    renew: Timestamp,
    duration_secs: i64,
    time: &TimeBase,
) -> Value {
    json!({
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {
            "name": node,
            "namespace": NODE_LEASE_NAMESPACE,
            "uid": uid,
            "creationTimestamp": time.time(created),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": duration_secs,
            "renewTime": time.micro_time(renew),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_pod_round_trip_through_json() {
        let time = TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 };
        let t = |s: i64| Timestamp::from_nanos(s * 1_000_000_000);
        let node = NodeSnapshot {
            version: 0,
            allocatable: None,
            name: "n1".into(),
            created: t(-100),
            labels: BTreeMap::from([("topology.kubernetes.io/zone".into(), "a".into())]),
            conditions: vec![NodeCondition {
                kind: ConditionType::Ready,
                status: ConditionStatus::True,
                reason: "KubeletReady".into(),
                message: String::new(),
                last_heartbeat: t(5),
                last_transition: t(-100),
            }],
            taints: vec![Taint { time_added: Some(t(3)), ..Taint::new("k", TaintEffect::NoExecute) }],
            unschedulable: true,
        };
        let v = node_json(&node, "u", 1, &time);
        let mut back = node_snapshot(&v, &time);
        assert_eq!(back.labels.remove("kubernetes.io/hostname").as_deref(), Some("n1"));
        assert_eq!(back, node);
        let pod = PodSnapshot {
            version: 0,
            node_lost: false,
            scheduling: None,
            key: "ns/p".into(),
            uid: "pu".into(),
            node: Some("n1".into()),
            daemonset: true,
            ready: Some(true),
            terminating: false,
            tolerations: vec![Toleration {
                key: "k".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: Some(TaintEffect::NoExecute),
                seconds: Some(30),
            }],
        };
        let v = pod_json(&pod, "pu", t(0), Some("10.0.0.1"), "10.1.0.1", &time);
        assert_eq!(pod_snapshot(&v), pod);
    }
}
