//! nodewarden's controller in-process (`--controller`): its actions land
//! on the store as a client's writes would ([`ServedApi`], an
//! implementation of [`ClusterApi`]), and it observes the store through
//! watch subscriptions ([`Feeds`]). It is a client like any other: an
//! injected API fault refuses its writes and cuts its watches (it relists
//! when the API is back). This module decides nothing.
//!
//! The controller sees what `nodewarden run` would see against this
//! server, so that a run here says something about a run there:
//! - it reads the stored objects with the adapter's own readings
//!   (`nodewarden_objects`), malformed objects included: the same
//!   readings the served cluster uses for its own rules;
//! - with the critical-addon rescheduler on (`enable-rescheduler`), it
//!   reads pods' and nodes' scheduling facts ([`Detail::Scheduling`]) and
//!   watches PodDisruptionBudgets, as the adapter does;
//! - it lives on the Unix clock, as the adapter does: its `now`, and every
//!   time it reads or writes, is Unix time ([`TimeBase::unix_timestamp`]),
//!   while the simulated cluster keeps its own clock ([`TimeBase`]).
//!
//! Invariant: every action is judged against the stored object under the
//! store's lock, with the same preconditions an HTTP client's write meets
//! (uid, budgets through the eviction), and faults refuse it as they would
//! refuse that client.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, MutexGuard};

use nodewarden_cluster::rules::node as node_rules;
use nodewarden_cluster::rules::pod::POD_DISRUPTION_TARGET;
use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{
    Action, ActionKind, DISRUPTION_TARGET_TAKEN_BACK, EventType as EngineEventType, ObjectKind, ObjectRef, Observation,
    WriteOutcome,
};
use nodewarden_model::{ControllerConfig, DeletionMode, Timestamp};
use nodewarden_objects::{Detail, budget_reading, lease_reading, node_reading, pod_reading};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::cluster::ServedCluster;
use crate::cluster::requested_grace;
use crate::error::ApiError;
use crate::faults::Verdict;
use crate::pdb::EvictionRequest;
use crate::resource::Kind;
use crate::store::{Change, EventType, Inner, Obj, key_of};
use nodewarden_objects::NODE_LEASE_NAMESPACE;
use nodewarden_objects::TimeBase;
use nodewarden_objects::write as convert;

/// How the in-process controller reads the store: how much of each Node
/// and Pod, and which kinds it watches. Chosen from its configuration as
/// `nodewarden run` chooses it, so the rescheduler gets its facts (and
/// budgets) exactly when it runs, and node lifecycle alone pays nothing
/// for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reader {
    /// What is read of Nodes and Pods.
    pub detail: Detail,
}

impl Reader {
    /// The reading `nodewarden run` makes with this configuration.
    pub fn for_config(config: &ControllerConfig) -> Reader {
        Reader { detail: if config.enable_rescheduler { Detail::Scheduling } else { Detail::Lifecycle } }
    }

    /// The kinds the controller watches: nodes, Leases and pods, and
    /// budgets when the rescheduler runs.
    pub fn kinds(&self) -> &'static [Kind] {
        match self.detail {
            Detail::Lifecycle => &[Kind::Node, Kind::Lease, Kind::Pod],
            Detail::Scheduling => &[Kind::Node, Kind::Lease, Kind::Pod, Kind::PodDisruptionBudget],
        }
    }

    /// The observation a stored object gives, if the controller watches
    /// its kind; `seen_at` (Unix time) is what an unreadable timestamp
    /// reads as. An object the adapter cannot name gives none (it logs it).
    pub fn observe(&self, kind: Kind, obj: &Obj, deleted: bool, seen_at: Timestamp) -> Option<Observation> {
        match (kind, deleted) {
            (Kind::Node, false) => node_reading(&obj.value(), seen_at, self.detail).map(Observation::NodeUpserted),
            (Kind::Node, true) => Some(Observation::NodeDeleted { name: obj.name().to_string() }),
            (Kind::Pod, false) => pod_reading(&obj.value(), seen_at, self.detail).map(Observation::PodUpserted),
            (Kind::Pod, true) => Some(Observation::PodDeleted { key: obj.key.clone() }),
            (Kind::Lease, _) if obj.namespace() != NODE_LEASE_NAMESPACE => None,
            (Kind::Lease, false) => lease_reading(&obj.value(), seen_at),
            (Kind::Lease, true) => Some(Observation::LeaseDeleted { node: obj.name().to_string() }),
            (Kind::PodDisruptionBudget, _) if self.detail == Detail::Lifecycle => None,
            (Kind::PodDisruptionBudget, false) => budget_reading(&obj.value(), seen_at),
            (Kind::PodDisruptionBudget, true) => Some(Observation::BudgetDeleted { key: obj.key.clone() }),
            _ => None,
        }
    }

    /// The whole cluster as the controller's initial list: nodes, Leases,
    /// pods (and budgets), seen at `seen_at`.
    pub fn state(&self, sh: &ServedCluster, seen_at: Timestamp) -> Vec<Observation> {
        self.listed(sh, seen_at).observations
    }

    /// The whole cluster as a list gives it: what [`Reader::state`] gives,
    /// and per kind the keys the list showed (an object the adapter cannot
    /// read is not shown, as in `nodewarden run`).
    pub fn listed(&self, sh: &ServedCluster, seen_at: Timestamp) -> Listed {
        let s = sh.store.lock();
        let mut listed = Listed::default();
        for &kind in self.kinds() {
            let Some(engine_kind) = engine_kind(kind) else { continue };
            let mut present = HashSet::new();
            let snap = s.snapshot(kind);
            for o in snap.iter_from("", None) {
                if let Some(obs) = self.observe(kind, o, false, seen_at) {
                    if let Some((_, key)) = obs.key() {
                        present.insert(key.to_owned());
                    }
                    listed.observations.push(obs);
                }
            }
            listed.present.push((engine_kind, present));
        }
        listed
    }
}

/// The engine's name for a kind the controller watches.
fn engine_kind(kind: Kind) -> Option<ObjectKind> {
    match kind {
        Kind::Node => Some(ObjectKind::Node),
        Kind::Lease => Some(ObjectKind::Lease),
        Kind::Pod => Some(ObjectKind::Pod),
        Kind::PodDisruptionBudget => Some(ObjectKind::Budget),
        _ => None,
    }
}

/// A list of every kind the controller watches.
#[derive(Debug, Default)]
pub struct Listed {
    /// The objects, read.
    pub observations: Vec<Observation>,
    /// Per kind, the keys shown (node and Lease names, `namespace/name`).
    pub present: Vec<(ObjectKind, HashSet<String>)>,
}

/// What the controller's watches delivered since the last look.
#[derive(Debug)]
pub enum Delivered {
    /// Changes, in order.
    Changes(Vec<Observation>),
    /// The watches lost track (an outage, or they fell behind) and listed
    /// everything again.
    Relisted(Listed),
}

/// The controller's watches on the kinds its [`Reader`] reads.
pub struct Feeds {
    reader: Reader,
    rx: Vec<(Kind, broadcast::Receiver<Arc<Change>>)>,
    relist: bool,
}

impl Feeds {
    /// Watches from now.
    pub fn subscribe(sh: &ServedCluster, reader: Reader) -> Feeds {
        let mut s = sh.store.lock();
        let rx = reader
            .kinds()
            .iter()
            .filter_map(|&k| {
                let rv = s.rv();
                s.watch(k, Some(rv)).ok().map(|w| (k, w.rx))
            })
            .collect();
        Feeds { reader, rx, relist: false }
    }

    /// What arrived since the last call, read as seen at `seen_at` (Unix
    /// time). During an outage nothing does (and the watches are dropped);
    /// afterwards the whole state comes again, as after a relist.
    pub fn drain(&mut self, sh: &ServedCluster, outage: bool, seen_at: Timestamp) -> Delivered {
        if outage {
            self.relist = true;
            for (_, rx) in &mut self.rx {
                *rx = rx.resubscribe();
            }
            return Delivered::Changes(Vec::new());
        }
        let mut out = Vec::new();
        if self.relist {
            self.relist = false;
            *self = Feeds::subscribe(sh, self.reader);
            return Delivered::Relisted(self.reader.listed(sh, seen_at));
        }
        let mut lagged = false;
        for (kind, rx) in &mut self.rx {
            loop {
                match rx.try_recv() {
                    Ok(c) => {
                        out.extend(self.reader.observe(*kind, &c.obj, c.kind == EventType::Deleted, seen_at));
                    }
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Lagged(_) | broadcast::error::TryRecvError::Closed) => {
                        lagged = true;
                        break;
                    }
                }
            }
        }
        if lagged {
            *self = Feeds::subscribe(sh, self.reader);
            return Delivered::Relisted(self.reader.listed(sh, seen_at));
        }
        Delivered::Changes(out)
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
                    // A node the event gave an allocatable (add-node of a
                    // file that keeps scheduling facts) reports it.
                    if n.allocatable.is_some() {
                        v["status"]["allocatable"] = fresh["status"]["allocatable"].clone();
                        v["status"]["capacity"] = fresh["status"]["capacity"].clone();
                    }
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
        // Budgets are written from the scenario's own spec (the world's
        // `add-budget`), never from the engine's reduced view of one.
        Observation::WriteFinished { .. } | Observation::BudgetUpserted(_) | Observation::BudgetDeleted { .. } => {}
    }
}

/// The controller's actions, carried out on the store. The `now` it is
/// handed, and every time an action carries, is the controller's: Unix
/// time ([`TimeBase::UNIX`]).
pub struct ServedApi<'a> {
    /// The served cluster.
    pub cluster: &'a ServedCluster,
    /// How the controller reads what a write returns (as its watches do).
    pub reader: Reader,
}

fn failed(id: nodewarden_engine::ActionId, why: String, current: Option<Observation>) -> Applied {
    let mut observations = vec![Observation::WriteFinished { id, outcome: WriteOutcome::Failed(why.clone()) }];
    observations.extend(current);
    Applied { observations, outcome: Some(WriteOutcome::Failed(why)), violation: None }
}

/// Conditions are one per `type` (their patch merge key).
fn same_type(a: &Value, b: &Value) -> bool {
    a["type"] == b["type"]
}

/// Taints are one per key and effect (upstream `Taint.MatchTaint`).
fn same_taint(a: &Value, b: &Value) -> bool {
    a["key"] == b["key"] && a["effect"] == b["effect"]
}

impl ClusterApi for ServedApi<'_> {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        let sh = self.cluster;
        // The controller's times are Unix time: written as they are.
        let time = TimeBase::UNIX;
        let reader = self.reader;
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
            | ActionKind::ClearPodDisruptionTarget { pod, .. }
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
        let current = reader.observe(kind, &cur, false, now);
        let mut v = cur.value();
        match &action.kind {
            ActionKind::MarkPodNotReady { uid, .. }
            | ActionKind::SetPodNodeLost { uid, .. }
            | ActionKind::AddPodDisruptionTarget { uid, .. }
            | ActionKind::ClearPodDisruptionTarget { uid, .. }
            | ActionKind::DeletePod { uid, .. }
            | ActionKind::EvictForAddon { uid, .. }
                if cur.uid != *uid =>
            {
                return failed(
                    id,
                    format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
                    current,
                );
            }
            ActionKind::DeletePod { pod, .. } | ActionKind::EvictForAddon { pod, .. } => {
                return delete_pod(sh, s, action, pod, key, v, current);
            }
            ActionKind::RecordEvent(_) => return Applied::default(),
            other => edit(other, &mut v, &time, now, cur.name()),
        }
        let obj = s.commit(kind, &key, v, false);
        let mut observations = vec![Observation::WriteFinished { id, outcome: WriteOutcome::Done }];
        observations.extend(reader.observe(kind, &obj, false, now));
        Applied { observations, outcome: Some(WriteOutcome::Done), violation: None }
    }
}

/// Edits the stored object `v` as the action asks (every action but a
/// deletion or an Event, which [`ServedApi::apply`] handles itself).
fn edit(kind: &ActionKind, v: &mut Value, time: &TimeBase, now: Timestamp, pod_name: &str) {
    match kind {
        ActionKind::UpdateNodeConditions { conditions, .. } => {
            let mut list = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let updates: Vec<Value> = conditions.iter().map(|c| convert::condition_json(c, time)).collect();
            node_rules::merge_by(&mut list, &updates, same_type);
            v["status"]["conditions"] = Value::Array(list);
        }
        ActionKind::PatchNodeTaints { add, remove, .. } => {
            let mut taints: Vec<Value> =
                v.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default();
            let add: Vec<Value> = add.iter().map(|t| convert::taint_json(t, time)).collect();
            let remove: Vec<Value> = remove.iter().map(|t| convert::taint_json(t, time)).collect();
            node_rules::patch_by(&mut taints, &add, &remove, same_taint);
            v["spec"]["taints"] = Value::Array(taints);
        }
        ActionKind::PatchNodeLabels { labels, .. } => {
            let mut stored: BTreeMap<String, String> = v
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, x)| (k.clone(), x.as_str().unwrap_or_default().to_string())).collect())
                .unwrap_or_default();
            node_rules::merge_labels(&mut stored, labels);
            // Only the labels the patch names are written: any other stays
            // as stored, malformed or not.
            for k in labels.keys() {
                v["metadata"]["labels"][k] = json!(stored[k]);
            }
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
            v["status"]["message"] = json!(format!("Node {node} which was running pod {} is unresponsive", pod_name));
        }
        ActionKind::AddPodDisruptionTarget { .. } => {
            let mut list = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let target = json!({"type": POD_DISRUPTION_TARGET, "status": "True", "reason": "DeletionByTaintManager", "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": time.time(now)});
            node_rules::merge_by(&mut list, &[target], same_type);
            v["status"]["conditions"] = Value::Array(list);
        }
        ActionKind::ClearPodDisruptionTarget { .. } => {
            let mut list = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let taken_back = json!({"type": POD_DISRUPTION_TARGET, "status": "False", "reason": DISRUPTION_TARGET_TAKEN_BACK.0, "message": DISRUPTION_TARGET_TAKEN_BACK.1, "lastTransitionTime": time.time(now)});
            node_rules::merge_by(&mut list, &[taken_back], same_type);
            v["status"]["conditions"] = Value::Array(list);
        }
        ActionKind::DeletePod { .. } | ActionKind::EvictForAddon { .. } | ActionKind::RecordEvent(_) => {}
    }
}

/// Deletes the pod: through the eviction (its budget and grace) when the
/// action evicts, at once otherwise; either way the controller hears of
/// the deletion at once, as the adapter's answer tells it.
fn delete_pod(
    sh: &ServedCluster,
    mut s: MutexGuard<'_, Inner>,
    action: &Action,
    pod: &str,
    key: String,
    v: Value,
    current: Option<Observation>,
) -> Applied {
    let id = action.id;
    if matches!(action.kind, ActionKind::DeletePod { mode: DeletionMode::Evict, .. } | ActionKind::EvictForAddon { .. })
    {
        drop(s);
        let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
        let grace = match &action.kind {
            ActionKind::EvictForAddon { grace: Some(g), .. } => Some(requested_grace(g.as_secs_f64().ceil() as i64)),
            _ => None,
        };
        let eviction = EvictionRequest { namespace: ns, name, uid: None, grace, dry: false };
        return match crate::pdb::evict(sh, &eviction) {
            Ok(_) => Applied {
                observations: vec![
                    Observation::WriteFinished { id, outcome: WriteOutcome::Done },
                    Observation::PodDeleted { key: pod.to_string() },
                ],
                outcome: Some(WriteOutcome::Done),
                violation: None,
            },
            Err(e) => failed(id, ApiError::from(e).to_string(), current),
        };
    }
    s.commit(Kind::Pod, &key, v, true);
    Applied {
        observations: vec![
            Observation::WriteFinished { id, outcome: WriteOutcome::Done },
            Observation::PodDeleted { key },
        ],
        outcome: Some(WriteOutcome::Done),
        violation: None,
    }
}

fn record_event(sh: &ServedCluster, now: Timestamp, ev: &nodewarden_engine::Event) {
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
    let at = TimeBase::UNIX.time(now);
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

#[cfg(test)]
mod tests {
    use nodewarden_engine::PodSnapshot;
    use nodewarden_model::{PodScheduling, Resources, Span};

    use super::*;
    use crate::store::{Store, StoreLimits};

    /// A pod with scheduling facts, a node with an allocatable and a
    /// budget, stored as the served cluster writes them, then read by the
    /// controller with and without the rescheduler.
    #[test]
    fn the_rescheduler_flag_decides_what_the_controller_reads() {
        let time = TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 };
        let seen = time.unix_timestamp(Timestamp::EPOCH + Span::from_secs(60));
        let store = Store::new(StoreLimits::default());
        let mut s = store.lock();
        let scheduling = PodScheduling {
            requests: Resources::pod(250, 64 << 20),
            priority_class: Some("system-cluster-critical".into()),
            unschedulable_since: Some(Timestamp::EPOCH + Span::from_secs(5)),
            ..PodScheduling::default()
        };
        let pod = PodSnapshot {
            version: 0,
            node_lost: false,
            key: "kube-system/dns".into(),
            uid: "u1".into(),
            node: None,
            daemonset: false,
            ready: None,
            terminating: false,
            tolerations: vec![],
            scheduling: Some(Box::new(scheduling.clone())),
        };
        let pod = s.commit(
            Kind::Pod,
            "kube-system/dns",
            convert::pod_json(&pod, "u1", Timestamp::EPOCH, None, "10.0.0.1", &time),
            false,
        );
        let node = nodewarden_engine::NodeSnapshot {
            version: 0,
            name: "a".into(),
            created: Timestamp::EPOCH,
            labels: Default::default(),
            conditions: vec![],
            taints: vec![],
            unschedulable: false,
            allocatable: Some(Resources { cpu_millis: 2000, memory_bytes: 4 << 30, pods: 10 }),
        };
        let node = s.commit(Kind::Node, "a", convert::node_json(&node, "nu", 0, &time), false);
        let spec = nodewarden_cluster::scenario::BudgetSpec {
            name: "default/web".into(),
            selector: nodewarden_model::LabelSelector {
                match_labels: [("app".to_string(), "web".to_string())].into(),
                match_expressions: vec![],
            },
            min_available: Some(nodewarden_cluster::scenario::IntOrPercent::Int(1)),
            max_unavailable: None,
        };
        let budget = s.commit(
            Kind::PodDisruptionBudget,
            "default/web",
            crate::populate::budget_json(&spec, "default", "web", "bu", &time),
            false,
        );

        let off = Reader::for_config(&ControllerConfig::default());
        assert_eq!(off.kinds(), [Kind::Node, Kind::Lease, Kind::Pod]);
        match off.observe(Kind::Pod, &pod, false, seen) {
            Some(Observation::PodUpserted(p)) => assert_eq!(p.scheduling, None),
            other => panic!("{other:?}"),
        }
        match off.observe(Kind::Node, &node, false, seen) {
            Some(Observation::NodeUpserted(n)) => assert_eq!(n.allocatable, None),
            other => panic!("{other:?}"),
        }
        assert_eq!(off.observe(Kind::PodDisruptionBudget, &budget, false, seen), None);

        let on = Reader::for_config(&ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() });
        assert_eq!(on.kinds(), [Kind::Node, Kind::Lease, Kind::Pod, Kind::PodDisruptionBudget]);
        match on.observe(Kind::Pod, &pod, false, seen) {
            Some(Observation::PodUpserted(p)) => {
                let got =
                    p.scheduling.as_deref().map(|s| (s.requests, s.priority_class.clone(), s.unschedulable_since));
                // Read on the controller's clock: Unix time.
                let since = time.unix_timestamp(Timestamp::EPOCH + Span::from_secs(5));
                assert_eq!(got, Some((scheduling.requests, scheduling.priority_class.clone(), Some(since))));
            }
            other => panic!("{other:?}"),
        }
        match on.observe(Kind::Node, &node, false, seen) {
            Some(Observation::NodeUpserted(n)) => {
                assert_eq!(n.allocatable, Some(Resources { cpu_millis: 2000, memory_bytes: 4 << 30, pods: 10 }));
            }
            other => panic!("{other:?}"),
        }
        // No status yet (the disruption controller has not run): it allows
        // nothing, as the adapter reads it.
        match on.observe(Kind::PodDisruptionBudget, &budget, false, seen) {
            Some(Observation::BudgetUpserted(b)) => {
                assert_eq!((b.key.as_str(), b.disruptions_allowed), ("default/web", 0))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            on.observe(Kind::PodDisruptionBudget, &budget, true, seen),
            Some(Observation::BudgetDeleted { key: "default/web".into() })
        );
        drop(s);
    }
}
