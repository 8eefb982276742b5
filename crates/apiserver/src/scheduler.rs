//! The served cluster's scheduler, when asked for ([`ServeOptions::scheduler`](crate::ServeOptions),
//! or a scenario file's `cluster.scheduler`): the simulator's own first fit
//! ([`nodewarden_cluster::scheduler`]) run over the stored objects, so a
//! critical addon nodewarden makes room for gets bound as in replay and
//! `nodewarden sim`, and through the same rules.
//!
//! A pass takes the pods that are unbound, not terminating and meant for
//! the default scheduler, in creation order, and the nodes in name order;
//! a pod that fits is bound (as `pods/binding` binds it, [`crate::binding`]);
//! one that fits nowhere is marked `PodScheduled=False`, reason
//! `Unschedulable`, with upstream's `0/N nodes are available: ...` message,
//! keeping the time it was first marked. Only changes are written.
//!
//! Reading: pods and nodes are read as the rescheduler reads them
//! (`nodewarden_objects`, [`Detail::Scheduling`]): a pod's requests are
//! its containers' summed against its largest init container, plus
//! overhead; a quantity that cannot be read fills that resource, so the
//! pod fits nowhere, and a node selector or required affinity that cannot
//! be read matches no node (kube-scheduler would not place what it cannot
//! read either). A node without a readable `status.allocatable` has room
//! for nothing.

use std::collections::BTreeMap;

use nodewarden_cluster::scheduler::{NodeView, PodView, first_fit, unschedulable_message};
use nodewarden_engine::PodSnapshot;
use nodewarden_model::{ConditionStatus, ConditionType, PodScheduling, Resources};
use nodewarden_objects::{Detail, Reader};
use serde_json::{Value, json};

use crate::cluster::ServedCluster;
use crate::resource::Kind;

/// The default scheduler's name; pods naming another are left alone.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Marks the pod `PodScheduled=False`, reason `Unschedulable`, with
/// `message`, as the scheduler does when it finds no room: the transition
/// time is `at` unless the pod was marked so already (it keeps its first
/// time). False when nothing changed.
pub fn mark_unschedulable(v: &mut Value, message: &str, at: &str) -> bool {
    let mut conditions: Vec<Value> =
        v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let old = conditions.iter().position(|c| c["type"] == "PodScheduled");
    let since = old
        .and_then(|i| conditions.get(i))
        .filter(|c| c["status"] == "False" && c["reason"] == "Unschedulable")
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(at));
    let cond = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": message, "lastProbeTime": null, "lastTransitionTime": since});
    match old {
        Some(i) if conditions[i] == cond => return false,
        Some(i) => conditions[i] = cond,
        None => conditions.push(cond),
    }
    v["status"]["conditions"] = Value::Array(conditions);
    true
}

struct Pending {
    key: String,
    created: String,
    pod: PodSnapshot,
    scheduling: PodScheduling,
    value: Value,
}

/// One scheduling pass over the store. Returns how many pods it bound.
pub fn pass(sh: &ServedCluster) -> usize {
    let mut s = sh.store.lock();
    let now = sh.time.now();
    let pods: Vec<Value> = s.snapshot(Kind::Pod).iter_from("", None).map(|o| o.value()).collect();
    let mut used: BTreeMap<String, Resources> = BTreeMap::new();
    let mut pending: Vec<Pending> = Vec::new();
    let reader = Reader::new(Detail::Scheduling).on(sh.time);
    for v in pods {
        // A pod that cannot be named or written (no uid) is no scheduler's.
        let Some(mut pod) = reader.pod(&v, now) else { continue };
        let Some(scheduling) = pod.scheduling.take() else { continue };
        match &pod.node {
            // Bound pods take their room until they are gone, terminating
            // ones included (the scheduler's cache keeps them); a finished
            // pod requests nothing.
            Some(node) => *used.entry(node.clone()).or_default() += scheduling.requests,
            None => {
                let finished =
                    matches!(v.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
                let scheduler = v.pointer("/spec/schedulerName").and_then(Value::as_str).unwrap_or(DEFAULT_SCHEDULER);
                if pod.terminating || finished || scheduler != DEFAULT_SCHEDULER {
                    continue;
                }
                pending.push(Pending {
                    key: pod.key.clone(),
                    created: v.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string(),
                    pod,
                    scheduling: *scheduling,
                    value: v,
                });
            }
        }
    }
    if pending.is_empty() {
        return 0;
    }
    pending.sort_by(|a, b| (&a.created, &a.key).cmp(&(&b.created, &b.key)));
    let node_values: Vec<Value> = s.snapshot(Kind::Node).iter_from("", None).map(|o| o.value()).collect();
    let snaps: Vec<_> = node_values
        .iter()
        .filter_map(|v| reader.node(v, now))
        .map(|n| {
            let alloc = n.allocatable.unwrap_or(Resources::ZERO);
            (n, alloc)
        })
        .collect();
    let mut nodes: Vec<NodeView<'_>> = snaps
        .iter()
        .map(|(n, alloc)| NodeView {
            name: &n.name,
            labels: &n.labels,
            taints: &n.taints,
            ready: n.conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::True),
            unschedulable: n.unschedulable,
            allocatable: *alloc,
            used: used.get(&n.name).copied().unwrap_or_default(),
        })
        .collect();
    // A pod whose requests cannot be read requests the most there is: it
    // fits nowhere.
    let views: Vec<PodView<'_>> = pending
        .iter()
        .map(|p| PodView {
            requests: p.scheduling.requests,
            tolerations: &p.pod.tolerations,
            placement: &p.scheduling.placement,
        })
        .collect();
    let before: Vec<NodeView<'_>> = nodes.clone();
    let placed = first_fit(&views, &mut nodes);
    let at = sh.time.time(now);
    let mut bound = 0;
    let mut writes: Vec<(String, Value)> = Vec::new();
    for ((p, view), target) in pending.iter().zip(&views).zip(placed) {
        let mut v = p.value.clone();
        match target.and_then(|i| nodes.get(i)) {
            Some(node) => {
                crate::binding::assign(&s, sh, &mut v, node.name, now);
                bound += 1;
            }
            None => {
                if !mark_unschedulable(&mut v, &unschedulable_message(view, &before), &at) {
                    continue;
                }
            }
        }
        writes.push((p.key.clone(), v));
    }
    for (key, v) in writes {
        s.commit(Kind::Pod, &key, v, false);
    }
    bound
}
