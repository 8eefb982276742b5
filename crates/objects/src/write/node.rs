//! Nodes as a kubelet registers and updates them.

use nodewarden_engine::NodeSnapshot;
use nodewarden_model::{NodeCondition, Resources, Taint};
use serde_json::{Map, Value, json};

use crate::time::TimeBase;

/// The kubelet version the simulated nodes report.
pub const KUBELET_VERSION: &str = "v1.33.0-nodewarden-sim";

/// A taint as the API writes it.
pub fn taint_json(t: &Taint, time: &TimeBase) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect.as_str()});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    if let Some(at) = t.time_added {
        v["timeAdded"] = json!(time.time(at));
    }
    v
}

/// A node condition as the API writes it.
pub fn condition_json(c: &NodeCondition, time: &TimeBase) -> Value {
    json!({
        "type": c.kind.as_str(),
        "status": c.status.as_str(),
        "reason": c.reason,
        "message": c.message,
        "lastHeartbeatTime": time.time(c.last_heartbeat),
        "lastTransitionTime": time.time(c.last_transition),
    })
}

/// A node's internal IP, made from its index.
pub fn node_ip(index: usize) -> String {
    format!("10.{}.{}.{}", 64 + (index >> 16) % 64, (index >> 8) & 0xff, index & 0xff)
}

/// A node's `status.allocatable` (and capacity): what the simulator gave
/// it (a scenario's, for the scheduler and the rescheduler), or, when it
/// gave nothing, a common 8-core machine.
pub fn resources_json(allocatable: Option<Resources>) -> Value {
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
