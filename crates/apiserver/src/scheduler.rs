//! The served cluster's scheduler, when asked for ([`ServeOptions::scheduler`](crate::ServeOptions),
//! or a scenario file's `cluster.scheduler`): the simulator's own first fit
//! ([`nodewarden_sim::scheduler`]) run over the stored objects, so a
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
//! Reading: a pod's requests are its containers' summed against its
//! largest init container, plus overhead; a quantity that cannot be read
//! makes the pod fit nowhere, and a node selector or required affinity
//! that cannot be read matches no node (kube-scheduler would not place
//! what it cannot read either). A node without `status.allocatable` has
//! room for nothing.

use std::collections::BTreeMap;

use nodewarden_model::resources::{parse_bytes, parse_cpu_millis};
use nodewarden_model::scheduling::{NodeSelectorTerm, Requirement, SelectorOperator};
use nodewarden_model::{ConditionStatus, ConditionType, NodeAffinity, Placement, Resources, Toleration};
use nodewarden_sim::scheduler::{NodeView, PodView, first_fit, unschedulable_message};
use serde_json::{Value, json};

use crate::cluster::ServedCluster;
use crate::convert;
use crate::resource::Kind;

/// The default scheduler's name; pods naming another are left alone.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

fn quantity(v: &Value, cpu: bool) -> Option<u64> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    if cpu { parse_cpu_millis(&text).ok() } else { parse_bytes(&text).ok() }
}

/// cpu and memory of a resource list; `None` when a present amount cannot
/// be read.
fn amounts(list: Option<&Value>) -> Option<(u64, u64)> {
    let Some(list) = list.filter(|l| !l.is_null()) else { return Some((0, 0)) };
    let one = |k: &str, cpu: bool| match list.get(k) {
        None | Some(Value::Null) => Some(0),
        Some(x) => quantity(x, cpu),
    };
    list.is_object().then_some(())?;
    Some((one("cpu", true)?, one("memory", false)?))
}

fn container(c: &Value) -> Option<(u64, u64)> {
    let req = c.pointer("/resources/requests");
    let lim = c.pointer("/resources/limits");
    let (rc, rm) = amounts(req)?;
    let (lc, lm) = amounts(lim)?;
    let has = |k: &str| req.and_then(|r| r.get(k)).is_some_and(|x| !x.is_null());
    Some((if has("cpu") { rc } else { lc }, if has("memory") { rm } else { lm }))
}

/// The pod's effective requests (one pod slot included), as
/// kube-scheduler adds them; `None` when they cannot be read.
pub fn pod_requests(v: &Value) -> Option<Resources> {
    let list = |p: &str| match v.pointer(p) {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(a)) => Some(a.clone()),
        Some(_) => None,
    };
    let (mut cpu, mut mem) = (0u64, 0u64);
    for c in list("/spec/containers")? {
        let (c_, m) = container(&c)?;
        cpu = cpu.saturating_add(c_);
        mem = mem.saturating_add(m);
    }
    let (mut init_cpu, mut init_mem, mut side_cpu, mut side_mem) = (0u64, 0u64, 0u64, 0u64);
    for c in list("/spec/initContainers")? {
        let (c_, m) = container(&c)?;
        if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            cpu = cpu.saturating_add(c_);
            mem = mem.saturating_add(m);
            side_cpu = side_cpu.saturating_add(c_);
            side_mem = side_mem.saturating_add(m);
            init_cpu = init_cpu.max(side_cpu);
            init_mem = init_mem.max(side_mem);
        } else {
            init_cpu = init_cpu.max(c_.saturating_add(side_cpu));
            init_mem = init_mem.max(m.saturating_add(side_mem));
        }
    }
    let (oc, om) = amounts(v.pointer("/spec/overhead"))?;
    Some(Resources::pod(cpu.max(init_cpu).saturating_add(oc), mem.max(init_mem).saturating_add(om)))
}

fn requirements(v: Option<&Value>) -> Option<Vec<Requirement>> {
    let Some(list) = v.filter(|l| !l.is_null()) else { return Some(Vec::new()) };
    list.as_array()?
        .iter()
        .map(|e| {
            let operator = match e.get("operator")?.as_str()? {
                "In" => SelectorOperator::In,
                "NotIn" => SelectorOperator::NotIn,
                "Exists" => SelectorOperator::Exists,
                "DoesNotExist" => SelectorOperator::DoesNotExist,
                "Gt" => SelectorOperator::Gt,
                "Lt" => SelectorOperator::Lt,
                _ => return None,
            };
            let values = match e.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(vs) => vs.as_array()?.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<_>>()?,
            };
            Some(Requirement { key: e.get("key")?.as_str()?.to_string(), operator, values })
        })
        .collect()
}

/// Node selector and required node affinity; one that cannot be read
/// matches no node.
pub fn placement(v: &Value) -> Placement {
    let read = || -> Option<Placement> {
        let node_selector = match v.pointer("/spec/nodeSelector") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(m) => m
                .as_object()?
                .iter()
                .map(|(k, x)| x.as_str().map(|s| (k.clone(), s.to_string())))
                .collect::<Option<_>>()?,
        };
        let required = v
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution")
            .filter(|r| !r.is_null());
        let affinity = match required {
            None => None,
            Some(r) => Some(NodeAffinity {
                node_selector_terms: match r.get("nodeSelectorTerms") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(ts) => ts
                        .as_array()?
                        .iter()
                        .map(|t| {
                            Some(NodeSelectorTerm {
                                match_expressions: requirements(t.get("matchExpressions"))?,
                                match_fields: requirements(t.get("matchFields"))?,
                            })
                        })
                        .collect::<Option<_>>()?,
                },
            }),
        };
        Some(Placement { node_selector, affinity })
    };
    read().unwrap_or_else(|| Placement { node_selector: BTreeMap::new(), affinity: Some(NodeAffinity::default()) })
}

/// `status.allocatable` (cpu, memory, pods); nothing when absent or
/// unreadable.
pub fn allocatable(v: &Value) -> Resources {
    let Some(a) = v.pointer("/status/allocatable").filter(|a| a.is_object()) else { return Resources::ZERO };
    let get = |k: &str, cpu: bool| a.get(k).and_then(|x| quantity(x, cpu));
    match (get("cpu", true), get("memory", false), get("pods", false)) {
        (Some(cpu_millis), Some(memory_bytes), Some(pods)) => Resources { cpu_millis, memory_bytes, pods },
        _ => Resources::ZERO,
    }
}

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
    requests: Option<Resources>,
    tolerations: Vec<Toleration>,
    placement: Placement,
    value: Value,
}

/// One scheduling pass over the store. Returns how many pods it bound.
pub fn pass(sh: &ServedCluster) -> usize {
    let mut s = sh.store.lock();
    let now = sh.time.now();
    let pods: Vec<Value> = s.snapshot(Kind::Pod).iter_from("", None).map(|o| o.value()).collect();
    let mut used: BTreeMap<String, Resources> = BTreeMap::new();
    let mut pending: Vec<Pending> = Vec::new();
    for v in pods {
        let phase_done = matches!(v.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
        let key = format!(
            "{}/{}",
            v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default(),
            v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
        );
        match v.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            // Bound pods take their room until they are gone, terminating
            // ones included (the scheduler's cache keeps them).
            Some(node) => {
                if !phase_done {
                    let r = pod_requests(&v).unwrap_or(Resources::pod(u64::MAX, u64::MAX));
                    *used.entry(node.to_string()).or_default() += r;
                }
            }
            None => {
                let terminating = v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
                let scheduler = v.pointer("/spec/schedulerName").and_then(Value::as_str).unwrap_or(DEFAULT_SCHEDULER);
                if terminating || phase_done || scheduler != DEFAULT_SCHEDULER {
                    continue;
                }
                pending.push(Pending {
                    key,
                    created: v.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string(),
                    requests: pod_requests(&v),
                    tolerations: v
                        .pointer("/spec/tolerations")
                        .and_then(Value::as_array)
                        .map_or_else(Vec::new, |ts| ts.iter().map(convert::toleration).collect()),
                    placement: placement(&v),
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
    let snaps: Vec<_> = node_values.iter().map(|v| (convert::node_snapshot(v, &sh.time), allocatable(v))).collect();
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
    // A pod whose requests cannot be read fits nowhere.
    let views: Vec<PodView<'_>> = pending
        .iter()
        .map(|p| PodView {
            requests: p.requests.unwrap_or(Resources::pod(u64::MAX, u64::MAX)),
            tolerations: &p.tolerations,
            placement: &p.placement,
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
