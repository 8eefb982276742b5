//! One external step applied to a simulated cluster, the same way on the
//! engine's side and the model's: the step's small numbers become names,
//! zones, taints and scheduling facts, and the cluster's answer is what a
//! watch would deliver.

use std::collections::BTreeMap;

use nodewarden_cluster::PodSpec;
use nodewarden_engine::{BudgetSnapshot, NodeSnapshot, Observation};
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, SYSTEM_NAMESPACE};
use nodewarden_model::{
    ConditionStatus, ConditionType, LabelSelector, NodeCondition, Resources, Span, Taint, Timestamp, Toleration,
    TolerationOperator, keys,
};

use super::World;
use super::plan::{NODES, OtherCondition, PODS, SchedPick, Status, Step, TaintPick, ZONES};

fn node_name(i: u8) -> String {
    format!("n{}", i % NODES)
}

/// Pods live in `kube-system` when the rescheduler runs (critical addons
/// must, and budgets cover pods of their own namespace).
fn pod_name(i: u8, rescheduler: bool) -> String {
    if rescheduler { format!("{SYSTEM_NAMESPACE}/p{}", i % PODS) } else { format!("ns/p{}", i % PODS) }
}

fn zone_labels(zone: u8) -> [(String, String); 2] {
    [
        (keys::LABEL_TOPOLOGY_REGION.to_string(), "r".to_string()),
        // Most nodes share zone 0, so that zones fill up enough for partial
        // disruption (more than 2 not ready) to happen.
        (keys::LABEL_TOPOLOGY_ZONE.to_string(), format!("z{}", if zone < 160 { 0 } else { zone % ZONES })),
    ]
}

fn ready_reason(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "KubeletReady",
        ConditionStatus::False => "KubeletNotReady",
        ConditionStatus::Unknown => "NodeStatusUnknown",
    }
}

/// The taints a step sets: at most 3, possibly both `not-ready` and
/// `unreachable` NoExecute (the invariant only forbids the controller from
/// bringing them together).
fn user_taints(picks: &[TaintPick], now: Timestamp) -> Vec<Taint> {
    picks.iter().take(3).map(|p| p.taint(now)).collect()
}

/// Applies one external step to a cluster; returns what a watch delivers.
pub(super) fn apply_step(world: &mut World, step: &Step, now: Timestamp, rescheduler: bool) -> Vec<Observation> {
    let out = apply_to_cluster(world, step, now, rescheduler);
    out.into_iter().map(|o| world.side.decorate(o)).collect()
}

// One match over every step kind, so the compiler checks that each is
// applied; each arm is a few lines, and the longer ones call the helpers
// below.
fn apply_to_cluster(world: &mut World, step: &Step, now: Timestamp, rescheduler: bool) -> Vec<Observation> {
    let pod_name = |i: u8| pod_name(i, rescheduler);
    let c = &mut world.cluster;
    match step {
        Step::AddNode { node, zone, ready, created_ago, lease, kubelet, excluded, taints, size } => {
            let name = node_name(*node);
            let created = now - Span::from_secs(i64::from(*created_ago));
            let mut labels: BTreeMap<String, String> = zone_labels(*zone).into_iter().collect();
            if *excluded {
                labels.insert(keys::LABEL_EXCLUDE_DISRUPTION.to_string(), String::new());
            }
            let allocatable = rescheduler.then(|| node_size(&mut labels, *size));
            let snapshot = NodeSnapshot {
                version: 0,
                allocatable,
                name: name.clone(),
                created,
                labels,
                conditions: ready_condition(*ready, now, created),
                taints: user_taints(taints, now),
                unschedulable: false,
            };
            world.kubelets.stop(&name);
            let mut out = c.put_node(snapshot);
            if *lease {
                out.extend(c.set_lease(&name, now));
            }
            if *kubelet {
                out.extend(world.kubelets.start(&name, now, c));
            }
            out
        }
        Step::DeleteNode { node } => {
            let name = node_name(*node);
            world.kubelets.stop(&name);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            c.delete_node(&name)
        }
        Step::SetReady { node, status } => c.set_ready(&node_name(*node), (*status).into(), now),
        Step::RemoveReady { node } => c.remove_condition(&node_name(*node), &ConditionType::Ready),
        Step::SetCondition { node, kind, status } => {
            c.set_condition(&node_name(*node), &condition_type(*kind), (*status).into(), now)
        }
        Step::RenewLease { node } => {
            let name = node_name(*node);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            c.set_lease(&name, now)
        }
        Step::SetTaints { node, taints } => {
            let taints = user_taints(taints, now);
            c.set_taints(&node_name(*node), &taints)
        }
        Step::SetUnschedulable { node, value } => c.set_unschedulable(&node_name(*node), *value),
        Step::SetLabels { node, zone, excluded, os } => {
            c.set_labels(&node_name(*node), &label_patch(*zone, *excluded, *os))
        }
        Step::AddPod { pod, node, daemonset, ready, terminating, tolerations, sched } => {
            let name = pod_name(*pod);
            let mut tolerations: Vec<Toleration> = tolerations.iter().take(3).map(|t| t.toleration()).collect();
            let sched = sched.filter(|_| rescheduler);
            let mut out = record_scheduling(world, &name, sched, node.is_some(), now, &mut tolerations);
            out.extend(world.cluster.add_pod(&PodSpec {
                name,
                node: node.map(node_name),
                daemonset: *daemonset,
                ready: *ready,
                terminating: *terminating,
                tolerations,
                refuse_deletions: 0,
                scheduling: Default::default(),
            }));
            out
        }
        Step::DeletePod { pod } => {
            let key = pod_name(*pod);
            if c.pod(&key).is_none_or(|p| p.deleted) {
                return Vec::new();
            }
            c.delete_pod(&key)
        }
        Step::BindPod { pod, node } => {
            // The API server refuses to change a pod's node once set.
            let key = pod_name(*pod);
            if c.pod(&key).is_none_or(|p| p.node.is_some()) {
                return Vec::new();
            }
            // The scheduler bound it: it is no longer Unschedulable.
            if let Some(facts) = world.side.pods.get_mut(&key) {
                facts.unschedulable_since = None;
                facts.placement = nodewarden_model::Placement::default();
            }
            world.cluster.bind_pod(&key, &node_name(*node))
        }
        Step::SetTolerations { pod, tolerations } => {
            let tolerations: Vec<Toleration> = tolerations.iter().take(3).map(|t| t.toleration()).collect();
            c.set_tolerations(&pod_name(*pod), &tolerations)
        }
        Step::KubeletStop { node } => {
            world.kubelets.stop(&node_name(*node));
            Vec::new()
        }
        Step::KubeletStart { node } => {
            let name = node_name(*node);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            world.kubelets.start(&name, now, c)
        }
        Step::Advance { .. } | Step::AdvanceSecs { .. } | Step::RestartController => Vec::new(),
    }
}

/// With the rescheduler, a node's size from a step's `size`: allocatable
/// cpu 500m to 2000m, 2 to 5 pod slots, and the label `pool=p0`/`p1`.
fn node_size(labels: &mut BTreeMap<String, String>, size: u8) -> Resources {
    labels.insert("pool".into(), format!("p{}", size % 2));
    Resources {
        cpu_millis: 500 * (u64::from(size / 2 % 4) + 1),
        memory_bytes: 1 << 30,
        pods: u64::from(size / 8 % 4) + 2,
    }
}

/// A new node's conditions: its Ready condition, if the step gives one,
/// with a heartbeat of now and a transition at its creation.
fn ready_condition(ready: Option<Status>, now: Timestamp, created: Timestamp) -> Vec<NodeCondition> {
    ready
        .map(|s| {
            let status = ConditionStatus::from(s);
            NodeCondition {
                kind: ConditionType::Ready,
                status,
                reason: ready_reason(status).to_string(),
                message: String::new(),
                last_heartbeat: now,
                last_transition: created,
            }
        })
        .into_iter()
        .collect()
}

/// What the rescheduler reads of a new pod, kept beside the cluster: its
/// scheduling facts (`None`: it has none, or the rescheduler does not
/// run), the `CriticalAddonsOnly` toleration an addon may carry, and the
/// budget of its app when the pick sets one (returned as its watch event).
fn record_scheduling(
    world: &mut World,
    name: &str,
    sched: Option<SchedPick>,
    bound: bool,
    now: Timestamp,
    tolerations: &mut Vec<Toleration>,
) -> Vec<Observation> {
    let mut out = Vec::new();
    match sched {
        Some(s) => {
            let facts = s.facts(now, bound);
            if facts.critical_annotation && s.tolerates_reservation {
                tolerations.push(Toleration {
                    key: CRITICAL_ADDONS_ONLY_TAINT.into(),
                    operator: TolerationOperator::Exists,
                    ..Toleration::default()
                });
            }
            if let Some(allowed) = s.budget {
                let key = format!("{SYSTEM_NAMESPACE}/{}", facts.labels["app"]);
                let budget = BudgetSnapshot {
                    key: key.clone(),
                    selector: LabelSelector { match_labels: facts.labels.clone(), match_expressions: vec![] },
                    disruptions_allowed: u32::from(allowed % 3),
                };
                world.side.budgets.insert(key, budget.clone());
                out.push(Observation::BudgetUpserted(budget));
            }
            world.side.pods.insert(name.to_string(), facts);
        }
        None => {
            world.side.pods.remove(name);
        }
    }
    out
}

/// The condition type a step's [`OtherCondition`] names.
fn condition_type(kind: OtherCondition) -> ConditionType {
    match kind {
        OtherCondition::Memory => ConditionType::MemoryPressure,
        OtherCondition::Disk => ConditionType::DiskPressure,
        OtherCondition::Pid => ConditionType::PidPressure,
        OtherCondition::Network => ConditionType::NetworkUnavailable,
    }
}

/// The label changes of a `SetLabels` step (`None`: the label removed).
fn label_patch(zone: Option<u8>, excluded: Option<bool>, os: Option<bool>) -> BTreeMap<String, Option<String>> {
    let mut labels: BTreeMap<String, Option<String>> = BTreeMap::new();
    if let Some(z) = zone {
        labels.extend(zone_labels(z).into_iter().map(|(k, v)| (k, Some(v))));
    }
    if let Some(x) = excluded {
        labels.insert(keys::LABEL_EXCLUDE_DISRUPTION.to_string(), x.then(String::new));
    }
    if let Some(o) = os {
        labels.insert(keys::LABEL_OS.to_string(), o.then(|| "linux".to_string()));
    }
    labels
}
