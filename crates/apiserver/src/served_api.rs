//! nodewarden's controller in-process (`--controller`): its actions land
//! on the store as a client's writes would ([`ServedApi`], an
//! implementation of [`ClusterApi`]), and it observes the store through
//! watch subscriptions ([`Feeds`]). It is a client like any other: an
//! injected API fault refuses its writes and cuts its watches (it relists
//! when the API is back). This module decides nothing.

use std::sync::Arc;

use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ActionKind, EventType as EngineEventType, ObjectRef, Observation, WriteOutcome};
use nodewarden_model::{DeletionMode, Timestamp};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::clock::TimeBase;
use crate::convert::{self, NODE_LEASE_NAMESPACE};
use crate::faults::Verdict;
use crate::resource::Kind;
use crate::server::Shared;
use crate::store::{Change, EventType, Inner, Obj, key_of};

/// The observation a stored object gives, if the engine watches its kind.
pub fn observe(kind: Kind, obj: &Obj, deleted: bool, time: &TimeBase) -> Option<Observation> {
    match (kind, deleted) {
        (Kind::Node, false) => Some(Observation::NodeUpserted(convert::node_snapshot(&obj.value(), time))),
        (Kind::Node, true) => Some(Observation::NodeDeleted { name: obj.name().to_string() }),
        (Kind::Pod, false) => Some(Observation::PodUpserted(convert::pod_snapshot(&obj.value()))),
        (Kind::Pod, true) => Some(Observation::PodDeleted { key: obj.key.clone() }),
        (Kind::Lease, _) if obj.namespace() != NODE_LEASE_NAMESPACE => None,
        (Kind::Lease, false) => Some(Observation::LeaseUpserted {
            node: obj.name().to_string(),
            renew: convert::lease_renew(&obj.value(), time),
        }),
        (Kind::Lease, true) => Some(Observation::LeaseDeleted { node: obj.name().to_string() }),
        _ => None,
    }
}

/// The whole cluster as the engine's initial list: nodes, Leases, pods.
pub fn state(sh: &Shared) -> Vec<Observation> {
    let s = sh.store.lock();
    let mut out = Vec::new();
    for kind in [Kind::Node, Kind::Lease, Kind::Pod] {
        let snap = s.snapshot(kind);
        out.extend(snap.iter_from("", None).filter_map(|o| observe(kind, o, false, &sh.time)));
    }
    out
}

/// The controller's watches on nodes, Leases and pods.
pub struct Feeds {
    rx: Vec<(Kind, broadcast::Receiver<Arc<Change>>)>,
    relist: bool,
}

impl Feeds {
    /// Watches from now.
    pub fn subscribe(sh: &Shared) -> Feeds {
        let mut s = sh.store.lock();
        let rx = [Kind::Node, Kind::Lease, Kind::Pod]
            .into_iter()
            .filter_map(|k| {
                let rv = s.rv();
                s.watch(k, Some(rv)).ok().map(|w| (k, w.rx))
            })
            .collect();
        Feeds { rx, relist: false }
    }

    /// What arrived since the last call. During an outage nothing does
    /// (and the watches are dropped); afterwards the whole state comes
    /// again, as after a relist.
    pub fn drain(&mut self, sh: &Shared, outage: bool) -> Vec<Observation> {
        if outage {
            self.relist = true;
            for (_, rx) in &mut self.rx {
                *rx = rx.resubscribe();
            }
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.relist {
            self.relist = false;
            *self = Feeds::subscribe(sh);
            return state(sh);
        }
        let mut lagged = false;
        for (kind, rx) in &mut self.rx {
            loop {
                match rx.try_recv() {
                    Ok(c) => out.extend(observe(*kind, &c.obj, c.kind == EventType::Deleted, &sh.time)),
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Lagged(_) | broadcast::error::TryRecvError::Closed) => {
                        lagged = true;
                        break;
                    }
                }
            }
        }
        if lagged {
            *self = Feeds::subscribe(sh);
            return state(sh);
        }
        out
    }
}

/// Writes what a scenario event did in the simulator's cluster to the store.
pub fn write_observation(s: &mut Inner, time: &TimeBase, lease_duration: i64, o: Observation) {
    match o {
        Observation::NodeUpserted(n) => {
            let v = match s.get(Kind::Node, &n.name) {
                Some(cur) => {
                    let mut v = cur.value();
                    let fresh = convert::node_json(&n, &cur.uid, 0, time);
                    v["metadata"]["labels"] = fresh["metadata"]["labels"].clone();
                    v["spec"]["taints"] = fresh["spec"].get("taints").cloned().unwrap_or(json!([]));
                    v["spec"]["unschedulable"] = json!(n.unschedulable);
                    v["status"]["conditions"] = fresh["status"]["conditions"].clone();
                    v
                }
                None => {
                    let uid = s.next_uid();
                    convert::node_json(&n, &uid, s.count(Kind::Node), time)
                }
            };
            s.commit(Kind::Node, &n.name, v, false);
        }
        Observation::NodeDeleted { name } => {
            if let Some(o) = s.get(Kind::Node, &name) {
                s.commit(Kind::Node, &name, o.value(), true);
            }
        }
        Observation::LeaseUpserted { node, renew } => {
            let key = key_of(NODE_LEASE_NAMESPACE, &node);
            let Some(renew) = renew else { return };
            let v = match s.get(Kind::Lease, &key) {
                Some(l) => {
                    let mut v = l.value();
                    v["spec"]["renewTime"] = json!(time.micro_time(renew));
                    v
                }
                None => {
                    let node_uid = s.get(Kind::Node, &node).map(|n| n.uid.clone()).unwrap_or_default();
                    let uid = s.next_uid();
                    convert::lease_json(&node, &node_uid, &uid, renew, lease_duration, time)
                }
            };
            s.commit(Kind::Lease, &key, v, false);
        }
        Observation::LeaseDeleted { node } => {
            let key = key_of(NODE_LEASE_NAMESPACE, &node);
            if let Some(o) = s.get(Kind::Lease, &key) {
                s.commit(Kind::Lease, &key, o.value(), true);
            }
        }
        Observation::PodUpserted(p) => {
            let uid = match s.get(Kind::Pod, &p.key) {
                Some(cur) => cur.uid.clone(),
                None => s.next_uid(),
            };
            let host = p.node.as_ref().and_then(|n| s.get(Kind::Node, n)).and_then(|n| {
                n.value().pointer("/status/addresses/0/address").and_then(Value::as_str).map(str::to_string)
            });
            let v = convert::pod_json(&p, &uid, time.now(), host.as_deref(), "10.251.0.1", time);
            s.commit(Kind::Pod, &p.key, v, false);
        }
        Observation::PodDeleted { key } => {
            if let Some(o) = s.get(Kind::Pod, &key) {
                s.commit(Kind::Pod, &key, o.value(), true);
            }
        }
        // Scenario events write no budgets; the store's budgets come from
        // the API (kubectl, tests).
        Observation::WriteFinished { .. } | Observation::BudgetUpserted(_) | Observation::BudgetDeleted { .. } => {}
    }
}

/// The controller's actions, carried out on the store.
pub struct ServedApi<'a> {
    /// The served cluster.
    pub shared: &'a Shared,
}

fn failed(id: nodewarden_engine::ActionId, why: String, current: Option<Observation>) -> Applied {
    let mut observations = vec![Observation::WriteFinished { id, outcome: WriteOutcome::Failed(why.clone()) }];
    observations.extend(current);
    Applied { observations, outcome: Some(WriteOutcome::Failed(why)), violation: None }
}

fn set_condition(list: &mut Vec<Value>, cond: Value) {
    match list.iter_mut().find(|c| c["type"] == cond["type"]) {
        Some(c) => *c = cond,
        None => list.push(cond),
    }
}

impl ClusterApi for ServedApi<'_> {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        let sh = self.shared;
        let time = sh.time;
        let id = action.id;
        if let ActionKind::RecordEvent(ev) = &action.kind {
            if matches!(sh.faults.verdict(), Verdict::Proceed(_)) {
                record_event(sh, now, ev);
            }
            return Applied::default();
        }
        match sh.faults.verdict() {
            Verdict::Abort => return failed(id, "the API server cannot be reached".into(), None),
            Verdict::Fail(e, _) => return failed(id, e.to_string(), None),
            Verdict::Proceed(_) => {}
        }
        let mut s = sh.store.lock();
        let (kind, key) = match &action.kind {
            ActionKind::UpdateNodeConditions { node, .. }
            | ActionKind::PatchNodeTaints { node, .. }
            | ActionKind::PatchNodeLabels { node, .. } => (Kind::Node, node.clone()),
            ActionKind::MarkPodNotReady { pod, .. }
            | ActionKind::SetPodNodeLost { pod, .. }
            | ActionKind::AddPodDisruptionTarget { pod, .. }
            | ActionKind::DeletePod { pod, .. }
            | ActionKind::EvictForAddon { pod, .. } => (Kind::Pod, pod.clone()),
            ActionKind::RecordEvent(_) => return Applied::default(),
        };
        let Some(cur) = s.get(kind, &key) else {
            let gone = match kind {
                Kind::Node => Observation::NodeDeleted { name: key.clone() },
                _ => Observation::PodDeleted { key: key.clone() },
            };
            return failed(
                id,
                format!("{} {key:?} not found", if kind == Kind::Node { "nodes" } else { "pods" }),
                Some(gone),
            );
        };
        let current = observe(kind, &cur, false, &time);
        let uid_ok = |uid: &str| cur.uid == uid;
        let mut v = cur.value();
        match &action.kind {
            ActionKind::UpdateNodeConditions { conditions, .. } => {
                let mut list = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
                for c in conditions {
                    set_condition(&mut list, convert::condition_json(c, &time));
                }
                v["status"]["conditions"] = Value::Array(list);
            }
            ActionKind::PatchNodeTaints { add, remove, .. } => {
                let mut taints: Vec<Value> =
                    v.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
                let same = |t: &Value, key: &str, effect: &str| t["key"] == key && t["effect"] == effect;
                taints.retain(|t| !remove.iter().any(|r| same(t, &r.key, r.effect.as_str())));
                for a in add {
                    taints.retain(|t| !same(t, &a.key, a.effect.as_str()));
                    taints.push(convert::taint_json(a, &time));
                }
                v["spec"]["taints"] = Value::Array(taints);
            }
            ActionKind::PatchNodeLabels { labels, .. } => {
                for (k, val) in labels {
                    v["metadata"]["labels"][k] = json!(val);
                }
            }
            ActionKind::MarkPodNotReady { uid, .. }
            | ActionKind::SetPodNodeLost { uid, .. }
            | ActionKind::AddPodDisruptionTarget { uid, .. }
            | ActionKind::DeletePod { uid, .. }
            | ActionKind::EvictForAddon { uid, .. }
                if !uid_ok(uid) =>
            {
                return failed(
                    id,
                    format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
                    current,
                );
            }
            ActionKind::MarkPodNotReady { .. } => {
                if let Some(cs) = v.pointer_mut("/status/conditions").and_then(Value::as_array_mut)
                    && let Some(c) = cs.iter_mut().find(|c| c["type"] == "Ready")
                    && c["status"] != "False"
                {
                    c["status"] = json!("False");
                    c["lastTransitionTime"] = json!(time.time(now));
                }
            }
            ActionKind::SetPodNodeLost { node, .. } => {
                v["status"]["reason"] = json!("NodeLost");
                v["status"]["message"] =
                    json!(format!("Node {node} which was running pod {} is unresponsive", cur.name()));
            }
            ActionKind::AddPodDisruptionTarget { .. } => {
                let mut list = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
                set_condition(
                    &mut list,
                    json!({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager", "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": time.time(now)}),
                );
                v["status"]["conditions"] = Value::Array(list);
            }
            ActionKind::DeletePod { pod, .. } | ActionKind::EvictForAddon { pod, .. } => {
                if matches!(
                    action.kind,
                    ActionKind::DeletePod { mode: DeletionMode::Evict, .. } | ActionKind::EvictForAddon { .. }
                ) {
                    drop(s);
                    let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
                    let mut body = json!({"apiVersion": "policy/v1", "kind": "Eviction"});
                    if let ActionKind::EvictForAddon { grace: Some(g), .. } = &action.kind {
                        body["deleteOptions"] = json!({"gracePeriodSeconds": g.as_secs_f64().ceil() as i64});
                    }
                    return match crate::pdb::evict(sh, body, false, ns, name) {
                        Ok(_) => Applied {
                            observations: vec![
                                Observation::WriteFinished { id, outcome: WriteOutcome::Done },
                                Observation::PodDeleted { key: pod.clone() },
                            ],
                            outcome: Some(WriteOutcome::Done),
                            violation: None,
                        },
                        Err(e) => failed(id, e.to_string(), current),
                    };
                }
                s.commit(Kind::Pod, &key, v, true);
                return Applied {
                    observations: vec![
                        Observation::WriteFinished { id, outcome: WriteOutcome::Done },
                        Observation::PodDeleted { key },
                    ],
                    outcome: Some(WriteOutcome::Done),
                    violation: None,
                };
            }
            ActionKind::RecordEvent(_) => return Applied::default(),
        }
        let obj = s.commit(kind, &key, v, false);
        let mut observations = vec![Observation::WriteFinished { id, outcome: WriteOutcome::Done }];
        observations.extend(observe(kind, &obj, false, &time));
        Applied { observations, outcome: Some(WriteOutcome::Done), violation: None }
    }
}

fn record_event(sh: &Shared, now: Timestamp, ev: &nodewarden_engine::Event) {
    let mut s = sh.store.lock();
    let (kind, ns, name, uid) = match &ev.object {
        ObjectRef::Node(n) => {
            ("Node", "default".to_string(), n.clone(), s.get(Kind::Node, n).map(|o| o.uid.clone()).unwrap_or_default())
        }
        ObjectRef::Pod(p) => {
            let (ns, name) = p.split_once('/').unwrap_or(("default", p));
            ("Pod", ns.to_string(), name.to_string(), s.get(Kind::Pod, p).map(|o| o.uid.clone()).unwrap_or_default())
        }
    };
    if s.get(Kind::Namespace, &ns).is_none() {
        return;
    }
    let seq = s.rv() + 1;
    let ev_name = format!("{name}.{seq:x}");
    let at = sh.time.time(now);
    let v = json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": ev_name, "namespace": ns, "uid": s.next_uid(), "creationTimestamp": at},
        "involvedObject": {"kind": kind, "name": name, "uid": uid, "namespace": if kind == "Pod" { ns.clone() } else { String::new() }, "apiVersion": "v1"},
        "reason": ev.reason,
        "message": ev.message,
        "source": {"component": "node-controller"},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
        "type": match ev.kind { EngineEventType::Normal => "Normal", EngineEventType::Warning => "Warning" },
        "reportingComponent": "node-controller",
        "reportingInstance": "",
    });
    s.commit(Kind::Event, &key_of(&ns, &ev_name), v, false);
}
