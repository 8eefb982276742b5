//! Pods as the API server holds them and their kubelet reports them.

use nodewarden_engine::PodSnapshot;
use nodewarden_model::scheduling::{CRITICAL_POD_ANNOTATION, MIRROR_POD_ANNOTATION};
use nodewarden_model::{PodScheduling, Timestamp, Toleration, TolerationOperator};
use serde_json::{Map, Value, json};

use super::selector::requirement_json;
use crate::time::TimeBase;

/// A toleration as the API writes it.
pub fn toleration_json(t: &Toleration) -> Value {
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
pub fn running_status(
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
