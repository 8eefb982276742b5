//! An in-memory cluster: nodes, Leases, pods and Events, changed by the
//! scenario (as users, kubelets and other controllers would) and by the
//! engine's [`Action`]s (as the API server would apply them).
//!
//! Every change returns the [`Observation`]s a watch would deliver, so the
//! runner can feed them to the engine. Writes of the controller are counted
//! per object, and writes the controller must never make (to a pod that is
//! terminating or already deleted; legacy eviction's `NodeLost` status
//! write to a terminating pod excepted) are reported as contract violations.
//!
//! [`Cluster::from_scenario`] builds the world a scenario file describes at
//! t=0: the cluster and the simulated kubelets of its nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use nodewarden_controller::Applied;
use nodewarden_controller::ClusterApi;
use nodewarden_engine::{
    Action, ActionId, ActionKind, Event, NodeSnapshot, ObjectRef, Observation, PodSnapshot, WriteOutcome,
};
use nodewarden_model::{
    ConditionStatus, ConditionType, DeletionMode, NodeCondition, Taint, Timestamp, Toleration, ZoneKey, keys,
};
use tracing::warn;

use crate::admission::AdmissionDefaults;
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::scenario::{NodeSpec, PodSpec, Scenario};

/// A pod as the simulated API server stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPod {
    /// `namespace/name`.
    pub key: String,
    /// `metadata.uid`, `uid-<n>` in creation order.
    pub uid: String,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// Owned by a DaemonSet.
    pub daemonset: bool,
    /// Has a deletion timestamp.
    pub terminating: bool,
    /// `spec.tolerations`, admission defaults included.
    pub tolerations: Vec<Toleration>,
    /// Pod conditions by type (`Ready`, `DisruptionTarget`, ...).
    pub conditions: BTreeMap<String, ConditionStatus>,
    /// `status.reason` (`NodeLost` after a legacy eviction).
    pub reason: Option<String>,
    /// Gone from the API; the last state is kept so it stays checkable.
    pub deleted: bool,
    /// Deletion attempts the API server will still refuse.
    pub refuse_deletions: u32,
}

/// The pod condition type that [`SimPod::ready`] reads.
pub const POD_READY: &str = "Ready";
/// The pod condition the taint manager adds before deleting.
pub const POD_DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The pod `status.reason` a legacy eviction sets.
pub const POD_REASON_NODE_LOST: &str = "NodeLost";

impl SimPod {
    /// The Ready condition as a boolean; `None` when the pod has none.
    pub fn ready(&self) -> Option<bool> {
        self.conditions.get(POD_READY).map(|s| *s == ConditionStatus::True)
    }

    /// What a watch would deliver for this pod.
    pub fn snapshot(&self) -> PodSnapshot {
        PodSnapshot {
            scheduling: None,
            key: self.key.clone(),
            uid: self.uid.clone(),
            node: self.node.clone(),
            daemonset: self.daemonset,
            ready: self.ready(),
            terminating: self.terminating,
            tolerations: self.tolerations.clone(),
        }
    }
}

/// An Event the controller recorded, with when.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedEvent {
    /// When it was recorded.
    pub at: Timestamp,
    /// The Event.
    pub event: Event,
}

/// The simulated cluster.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    admission: AdmissionDefaults,
    nodes: BTreeMap<String, NodeSnapshot>,
    ever_nodes: BTreeSet<String>,
    /// Hashed: renewed thousands of times per simulated second at scale;
    /// [`Cluster::state`] sorts them.
    leases: HashMap<String, Timestamp>,
    pods: BTreeMap<String, SimPod>,
    deleted_uids: BTreeSet<String>,
    writes: BTreeMap<ObjectRef, u64>,
    events: Vec<RecordedEvent>,
    next_uid: u64,
}

/// The reason the kubelet (or the file) gives a Ready status.
fn ready_reason(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "KubeletReady",
        ConditionStatus::False => "KubeletNotReady",
        ConditionStatus::Unknown => nodewarden_model::condition::REASON_STATUS_UNKNOWN,
    }
}

/// Builds the node a [`NodeSpec`] describes, and its Lease renew time, as
/// of `now` (the time `now` in the spec stands for).
pub fn node_from_spec(spec: &NodeSpec, now: Timestamp) -> (NodeSnapshot, Option<Timestamp>) {
    let created = spec.created.map_or(now, |t| t.resolve(now));
    let mut labels = spec.labels.clone();
    if let Some(zone) = &spec.zone {
        let key = ZoneKey::parse(zone);
        if !key.region.is_empty() {
            labels.insert(keys::LABEL_TOPOLOGY_REGION.to_string(), key.region);
        }
        if !key.zone.is_empty() {
            labels.insert(keys::LABEL_TOPOLOGY_ZONE.to_string(), key.zone);
        }
    }
    let heartbeat = spec.heartbeat.map_or(now, |t| t.resolve(now));
    let transition = spec.transition.map_or(created, |t| t.resolve(now));
    let mut conditions = Vec::new();
    if let Some(status) = spec.ready {
        conditions.push(NodeCondition {
            kind: ConditionType::Ready,
            status,
            reason: ready_reason(status).to_string(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: transition,
        });
    }
    for (kind, status) in &spec.conditions {
        conditions.push(NodeCondition {
            kind: kind.clone(),
            status: *status,
            reason: String::new(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: transition,
        });
    }
    let node = NodeSnapshot {
        allocatable: None,
        name: spec.name.clone(),
        created,
        labels,
        conditions,
        taints: spec.taints.clone(),
        unschedulable: spec.unschedulable,
    };
    (node, spec.lease.map(|t| t.resolve(now)))
}

/// Sets condition `kind` to `status` with heartbeat `now`; the transition
/// time moves to `now` only when the status changes (or the condition is new).
fn post_condition(node: &mut NodeSnapshot, kind: ConditionType, status: ConditionStatus, reason: &str, now: Timestamp) {
    match node.conditions.iter_mut().find(|c| c.kind == kind) {
        Some(c) => {
            if c.status != status {
                c.last_transition = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = String::new();
            c.last_heartbeat = now;
        }
        None => node.conditions.push(NodeCondition {
            kind,
            status,
            reason: reason.to_string(),
            message: String::new(),
            last_heartbeat: now,
            last_transition: now,
        }),
    }
}

/// The simulated cluster is where replay and `nodewarden sim` carry out
/// the controller's actions: each lands at once, as a fast API server's
/// would, and answers with the object's new (or, refused, current) state.
impl ClusterApi for Cluster {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        self.apply_action(now, action)
    }
}

impl Cluster {
    /// An empty cluster whose admission adds `admission`'s tolerations.
    pub fn new(admission: AdmissionDefaults) -> Cluster {
        Cluster { admission, ..Cluster::default() }
    }

    /// The cluster a scenario file describes at t=0 (admission defaults
    /// applied to its pods) and the simulated kubelets of its
    /// `kubelet: true` nodes, scheduled from t=0.
    pub fn from_scenario(scenario: &Scenario) -> (Cluster, Kubelets) {
        let mut cluster = Cluster::new(AdmissionDefaults::from(&scenario.cluster));
        let mut kubelets = Kubelets::new(KubeletTiming::from(&scenario.cluster.kubelet));
        for n in &scenario.nodes {
            cluster.add_node(n, Timestamp::EPOCH);
            if n.kubelet {
                kubelets.schedule(&n.name, Timestamp::EPOCH);
            }
        }
        for p in &scenario.pods {
            cluster.add_pod(p);
        }
        (cluster, kubelets)
    }

    /// The node, if it exists now.
    pub fn node(&self, name: &str) -> Option<&NodeSnapshot> {
        self.nodes.get(name)
    }

    /// Every node that exists now, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeSnapshot> {
        self.nodes.values()
    }

    /// True when a node of this name existed at some point.
    pub fn node_ever_existed(&self, name: &str) -> bool {
        self.ever_nodes.contains(name)
    }

    /// The node's Lease renew time; `None` when it has no Lease.
    pub fn lease(&self, name: &str) -> Option<Timestamp> {
        self.leases.get(name).copied()
    }

    /// The pod's current or last state (deleted pods stay, marked).
    pub fn pod(&self, key: &str) -> Option<&SimPod> {
        self.pods.get(key)
    }

    /// Every pod ever created, deleted ones included, by key.
    pub fn pods(&self) -> impl Iterator<Item = &SimPod> {
        self.pods.values()
    }

    /// Writes the controller made to this object so far (rule 11).
    pub fn writes(&self, object: &ObjectRef) -> u64 {
        self.writes.get(object).copied().unwrap_or(0)
    }

    /// Writes the controller made to the whole cluster so far.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }

    /// Every Event the controller recorded, in order.
    pub fn events(&self) -> &[RecordedEvent] {
        &self.events
    }

    /// The whole current state as a watch's initial list would deliver it:
    /// nodes, then Leases, then pods (deleted pods are not listed).
    pub fn state(&self) -> Vec<Observation> {
        let mut out: Vec<Observation> = self.nodes.values().cloned().map(Observation::NodeUpserted).collect();
        let mut leases: Vec<(&String, &Timestamp)> = self.leases.iter().collect();
        leases.sort_unstable();
        out.extend(
            leases
                .into_iter()
                .map(|(node, renew)| Observation::LeaseUpserted { node: node.clone(), renew: Some(*renew) }),
        );
        out.extend(self.pods.values().filter(|p| !p.deleted).map(|p| Observation::PodUpserted(p.snapshot())));
        out
    }

    /// Creates (or replaces) the node a spec describes, with its Lease.
    pub fn add_node(&mut self, spec: &NodeSpec, now: Timestamp) -> Vec<Observation> {
        let (node, lease) = node_from_spec(spec, now);
        let mut out = self.put_node(node);
        if let Some(renew) = lease {
            out.extend(self.set_lease(&spec.name, renew));
        }
        out
    }

    /// Stores a node as given.
    pub fn put_node(&mut self, node: NodeSnapshot) -> Vec<Observation> {
        self.ever_nodes.insert(node.name.clone());
        if self.nodes.get(&node.name) == Some(&node) {
            return Vec::new();
        }
        self.nodes.insert(node.name.clone(), node.clone());
        vec![Observation::NodeUpserted(node)]
    }

    /// Deletes a node and its Lease; its pods stay bound.
    pub fn delete_node(&mut self, name: &str) -> Vec<Observation> {
        let mut out = Vec::new();
        if self.nodes.remove(name).is_some() {
            out.push(Observation::NodeDeleted { name: name.to_string() });
        } else {
            warn!(node = name, "delete-node: no such node now");
        }
        if self.leases.remove(name).is_some() {
            out.push(Observation::LeaseDeleted { node: name.to_string() });
        }
        out
    }

    /// Sets (creating if needed) the node's Lease renew time.
    pub fn set_lease(&mut self, node: &str, renew: Timestamp) -> Vec<Observation> {
        match self.leases.get_mut(node) {
            Some(r) if *r == renew => return Vec::new(),
            Some(r) => *r = renew,
            None => {
                self.leases.insert(node.to_string(), renew);
            }
        }
        vec![Observation::LeaseUpserted { node: node.to_string(), renew: Some(renew) }]
    }

    /// Posts a Ready status: heartbeat = now, transition = now only if the
    /// status changed (rule 3).
    pub fn set_ready(&mut self, node: &str, status: ConditionStatus, now: Timestamp) -> Vec<Observation> {
        self.update_node(node, "set-ready", |n| {
            post_condition(n, ConditionType::Ready, status, ready_reason(status), now);
        })
    }

    /// Posts another condition, the same way; Ready is not touched.
    pub fn set_condition(
        &mut self,
        node: &str,
        kind: &ConditionType,
        status: ConditionStatus,
        now: Timestamp,
    ) -> Vec<Observation> {
        self.update_node(node, "set-condition", |n| post_condition(n, kind.clone(), status, "", now))
    }

    /// Removes a condition (Ready included).
    pub fn remove_condition(&mut self, node: &str, kind: &ConditionType) -> Vec<Observation> {
        self.update_node(node, "remove-condition", |n| n.conditions.retain(|c| &c.kind != kind))
    }

    /// Replaces the node's taints.
    pub fn set_taints(&mut self, node: &str, taints: &[Taint]) -> Vec<Observation> {
        self.update_node(node, "set-taints", |n| n.taints = taints.to_vec())
    }

    /// Sets `spec.unschedulable`.
    pub fn set_unschedulable(&mut self, node: &str, value: bool) -> Vec<Observation> {
        self.update_node(node, "set-unschedulable", |n| n.unschedulable = value)
    }

    /// Merges labels; a `None` value removes the label.
    pub fn set_labels(&mut self, node: &str, labels: &BTreeMap<String, Option<String>>) -> Vec<Observation> {
        self.update_node(node, "set-labels", |n| {
            for (k, v) in labels {
                match v {
                    Some(v) => {
                        n.labels.insert(k.clone(), v.clone());
                    }
                    None => {
                        n.labels.remove(k);
                    }
                }
            }
        })
    }

    /// Creates a pod: admission adds its default tolerations, and it gets
    /// the next uid. A deleted pod of the same name is replaced.
    pub fn add_pod(&mut self, spec: &PodSpec) -> Vec<Observation> {
        if self.pods.get(&spec.name).is_some_and(|p| !p.deleted) {
            warn!(pod = %spec.name, "add-pod: the pod exists; replacing it");
        }
        self.next_uid += 1;
        let mut tolerations = spec.tolerations.clone();
        self.admission.admit(&mut tolerations);
        let mut conditions = BTreeMap::new();
        if let Some(ready) = spec.ready {
            let status = if ready { ConditionStatus::True } else { ConditionStatus::False };
            conditions.insert(POD_READY.to_string(), status);
        }
        let pod = SimPod {
            key: spec.name.clone(),
            uid: format!("uid-{}", self.next_uid),
            node: spec.node.clone(),
            daemonset: spec.daemonset,
            terminating: spec.terminating,
            tolerations,
            conditions,
            reason: None,
            deleted: false,
            refuse_deletions: spec.refuse_deletions,
        };
        let snapshot = pod.snapshot();
        self.pods.insert(spec.name.clone(), pod);
        vec![Observation::PodUpserted(snapshot)]
    }

    /// Deletes a pod (as a user would); its last state stays checkable.
    pub fn delete_pod(&mut self, key: &str) -> Vec<Observation> {
        match self.pods.get_mut(key) {
            Some(p) if !p.deleted => {
                p.deleted = true;
                self.deleted_uids.insert(p.uid.clone());
                vec![Observation::PodDeleted { key: key.to_string() }]
            }
            _ => {
                warn!(pod = key, "delete-pod: no such pod now");
                Vec::new()
            }
        }
    }

    /// Replaces a pod's tolerations (admission does not run on updates).
    pub fn set_tolerations(&mut self, key: &str, tolerations: &[Toleration]) -> Vec<Observation> {
        self.update_pod(key, "set-tolerations", |p| p.tolerations = tolerations.to_vec())
    }

    /// Binds a pod to a node.
    pub fn bind_pod(&mut self, key: &str, node: &str) -> Vec<Observation> {
        self.update_pod(key, "bind-pod", |p| p.node = Some(node.to_string()))
    }

    fn update_node(&mut self, name: &str, what: &str, f: impl FnOnce(&mut NodeSnapshot)) -> Vec<Observation> {
        let Some(node) = self.nodes.get_mut(name) else {
            warn!(node = name, "{what}: no such node now; ignored");
            return Vec::new();
        };
        let before = node.clone();
        f(node);
        if *node == before {
            return Vec::new();
        }
        vec![Observation::NodeUpserted(node.clone())]
    }

    fn update_pod(&mut self, key: &str, what: &str, f: impl FnOnce(&mut SimPod)) -> Vec<Observation> {
        let Some(pod) = self.pods.get_mut(key).filter(|p| !p.deleted) else {
            warn!(pod = key, "{what}: no such pod now; ignored");
            return Vec::new();
        };
        let before = pod.clone();
        f(pod);
        if *pod == before {
            return Vec::new();
        }
        vec![Observation::PodUpserted(pod.snapshot())]
    }

    /// Applies one engine action as the API server would, and returns what
    /// to feed back: `WriteFinished`, then the object's snapshot (after a
    /// failure, its current one). Events are recorded and are not writes.
    pub fn apply_action(&mut self, now: Timestamp, action: &Action) -> Applied {
        let id = action.id;
        match &action.kind {
            ActionKind::RecordEvent(event) => {
                self.events.push(RecordedEvent { at: now, event: event.clone() });
                Applied::default()
            }
            ActionKind::UpdateNodeConditions { node, conditions } => self.node_write(id, node, |n| {
                for c in conditions {
                    match n.conditions.iter_mut().find(|x| x.kind == c.kind) {
                        Some(x) => *x = c.clone(),
                        None => n.conditions.push(c.clone()),
                    }
                }
            }),
            ActionKind::PatchNodeTaints { node, add, remove, .. } => self.node_write(id, node, |n| {
                n.taints.retain(|t| !remove.iter().any(|r| r.same_as(t)));
                for a in add {
                    match n.taints.iter_mut().find(|t| t.same_as(a)) {
                        Some(t) => *t = a.clone(),
                        None => n.taints.push(a.clone()),
                    }
                }
            }),
            ActionKind::PatchNodeLabels { node, labels } => self.node_write(id, node, |n| {
                for (k, v) in labels {
                    n.labels.insert(k.clone(), v.clone());
                }
            }),
            ActionKind::MarkPodNotReady { pod, uid } => self.pod_write(id, "mark-pod-not-ready", pod, uid, |p| {
                if let Some(s) = p.conditions.get_mut(POD_READY) {
                    *s = ConditionStatus::False;
                }
                Ok(())
            }),
            ActionKind::SetPodNodeLost { pod, uid, .. } => self.pod_write(id, "set-pod-node-lost", pod, uid, |p| {
                p.reason = Some(POD_REASON_NODE_LOST.to_string());
                Ok(())
            }),
            ActionKind::AddPodDisruptionTarget { pod, uid } => {
                self.pod_write(id, "add-pod-disruption-target", pod, uid, |p| {
                    p.conditions.insert(POD_DISRUPTION_TARGET.to_string(), ConditionStatus::True);
                    Ok(())
                })
            }
            ActionKind::DeletePod { pod, uid, mode, .. } => self.remove_pod(id, "delete-pod", pod, uid, *mode),
            ActionKind::EvictForAddon { pod, uid, .. } => {
                self.remove_pod(id, "evict-for-addon", pod, uid, DeletionMode::Evict)
            }
        }
    }

    /// A pod deletion, plain or through the Eviction API: refused while the
    /// pod's `refuse-deletions` count lasts, as a webhook or a budget would.
    fn remove_pod(&mut self, id: ActionId, what: &'static str, pod: &str, uid: &str, mode: DeletionMode) -> Applied {
        let refusal = match mode {
            DeletionMode::Delete => "admission webhook denied the request",
            DeletionMode::Evict => "Cannot evict pod as it would violate the pod's disruption budget.",
        };
        self.pod_write(id, what, pod, uid, |p| {
            if p.refuse_deletions > 0 {
                p.refuse_deletions -= 1;
                return Err(refusal.to_string());
            }
            p.deleted = true;
            Ok(())
        })
    }

    fn count_write(&mut self, object: ObjectRef) {
        *self.writes.entry(object).or_insert(0) += 1;
    }

    fn node_write(&mut self, id: ActionId, name: &str, f: impl FnOnce(&mut NodeSnapshot)) -> Applied {
        self.count_write(ObjectRef::Node(name.to_string()));
        let Some(node) = self.nodes.get_mut(name) else {
            return Applied {
                observations: vec![
                    Observation::WriteFinished { id, outcome: WriteOutcome::Failed(format!("node {name} not found")) },
                    Observation::NodeDeleted { name: name.to_string() },
                ],
                outcome: Some(WriteOutcome::Failed(format!("node {name} not found"))),
                violation: None,
            };
        };
        f(node);
        Applied {
            observations: vec![
                Observation::WriteFinished { id, outcome: WriteOutcome::Done },
                Observation::NodeUpserted(node.clone()),
            ],
            outcome: Some(WriteOutcome::Done),
            violation: None,
        }
    }

    fn pod_write(
        &mut self,
        id: ActionId,
        what: &str,
        key: &str,
        uid: &str,
        f: impl FnOnce(&mut SimPod) -> Result<(), String>,
    ) -> Applied {
        self.count_write(ObjectRef::Pod(key.to_string()));
        let current = self.pods.get(key).filter(|p| !p.deleted);
        let current_state = match current {
            Some(p) => Observation::PodUpserted(p.snapshot()),
            None => Observation::PodDeleted { key: key.to_string() },
        };
        let refuse = |reason: String, violation: Option<String>| Applied {
            observations: vec![
                Observation::WriteFinished { id, outcome: WriteOutcome::Failed(reason.clone()) },
                current_state.clone(),
            ],
            outcome: Some(WriteOutcome::Failed(reason)),
            violation,
        };
        if self.deleted_uids.contains(uid) {
            return refuse(
                format!("pod {key} (uid {uid}) not found: it was deleted"),
                Some(format!("{what} on pod {key} (uid {uid}), which was already deleted")),
            );
        }
        let Some(pod) = self.pods.get_mut(key).filter(|p| !p.deleted) else {
            return refuse(format!("pod {key} not found"), None);
        };
        if pod.uid != uid {
            let reason = format!("precondition failed: uid {uid}, but pod {key} has uid {}", pod.uid);
            return refuse(reason, None);
        }
        // Upstream's legacy DeletePods writes status.reason=NodeLost to every
        // pod of the node, terminating ones included (J4), and the API server
        // accepts a status update on a pod that is being deleted. So that one
        // write succeeds; any other write to a terminating pod (NotReady,
        // DisruptionTarget, a deletion) is still refused as a violation.
        if pod.terminating && what != "set-pod-node-lost" {
            return refuse(
                format!("pod {key} is terminating"),
                Some(format!("{what} on pod {key}, which is terminating")),
            );
        }
        if let Err(reason) = f(pod) {
            let current = Observation::PodUpserted(pod.snapshot());
            return Applied {
                observations: vec![
                    Observation::WriteFinished { id, outcome: WriteOutcome::Failed(reason.clone()) },
                    current,
                ],
                outcome: Some(WriteOutcome::Failed(reason)),
                violation: None,
            };
        }
        let observation = if pod.deleted {
            self.deleted_uids.insert(pod.uid.clone());
            Observation::PodDeleted { key: key.to_string() }
        } else {
            Observation::PodUpserted(pod.snapshot())
        };
        Applied {
            observations: vec![Observation::WriteFinished { id, outcome: WriteOutcome::Done }, observation],
            outcome: Some(WriteOutcome::Done),
            violation: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::{EventType, WriteSlot};
    use nodewarden_model::{Span, TaintEffect};

    use super::*;
    use crate::scenario::TimeSpec;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_nanos(s * 1_000_000_000)
    }

    fn node_spec(name: &str) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            zone: Some("r1/z1".into()),
            labels: BTreeMap::new(),
            created: Some(TimeSpec::At(Span::from_secs(-3600))),
            ready: Some(ConditionStatus::True),
            heartbeat: Some(TimeSpec::At(Span::ZERO)),
            transition: None,
            conditions: BTreeMap::from([(ConditionType::DiskPressure, ConditionStatus::False)]),
            lease: Some(TimeSpec::Now),
            taints: vec![Taint::new("example.com/x", TaintEffect::NoSchedule)],
            unschedulable: false,
            kubelet: false,
        }
    }

    fn pod_spec(name: &str, node: &str) -> PodSpec {
        PodSpec {
            name: name.into(),
            node: Some(node.into()),
            daemonset: false,
            ready: Some(true),
            terminating: false,
            tolerations: vec![],
            refuse_deletions: 0,
        }
    }

    fn cluster() -> Cluster {
        let mut c = Cluster::new(AdmissionDefaults::default());
        c.add_node(&node_spec("a"), t(0));
        c.add_pod(&pod_spec("default/p", "a"));
        c
    }

    fn act(id: u64, kind: ActionKind) -> Action {
        Action { id: ActionId(id), kind }
    }

    fn why() -> Box<nodewarden_engine::Explanation> {
        Box::new(nodewarden_engine::Explanation {
            pod: "default/p".into(),
            node: "n".into(),
            node_facts: None,
            taints: vec![],
            tainting: None,
            verdict: nodewarden_engine::explain::Verdict::NotTolerated {
                taint: nodewarden_model::Taint::new("k", nodewarden_model::TaintEffect::NoExecute),
            },
            scheduled_at: t(0),
            due_at: t(0),
            deleted_at: t(0),
        })
    }

    #[test]
    fn node_from_spec_fills_labels_conditions_and_lease() {
        let (n, lease) = node_from_spec(&node_spec("a"), t(7));
        assert_eq!(n.created, t(-3600));
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_REGION], "r1");
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_ZONE], "z1");
        assert_eq!(n.conditions.len(), 2);
        assert_eq!(n.conditions[0].kind, ConditionType::Ready);
        assert_eq!(n.conditions[0].last_heartbeat, t(0));
        assert_eq!(n.conditions[0].last_transition, t(-3600));
        assert_eq!(lease, Some(t(7)));
        let mut spec = node_spec("b");
        spec.zone = Some("/z".into());
        let (n, _) = node_from_spec(&spec, t(0));
        assert!(!n.labels.contains_key(keys::LABEL_TOPOLOGY_REGION));
        assert_eq!(ZoneKey::from_labels(&n.labels).to_string(), "/z");
    }

    #[test]
    fn set_ready_moves_transition_only_on_change() {
        let mut c = cluster();
        let obs = c.set_ready("a", ConditionStatus::True, t(10));
        assert_eq!(obs.len(), 1);
        let ready = &c.node("a").unwrap().conditions[0];
        assert_eq!((ready.last_heartbeat, ready.last_transition), (t(10), t(-3600)));
        c.set_ready("a", ConditionStatus::False, t(20));
        let ready = &c.node("a").unwrap().conditions[0];
        assert_eq!((ready.status, ready.last_heartbeat, ready.last_transition), (ConditionStatus::False, t(20), t(20)));
        // Same status, same time: nothing to observe.
        assert!(c.set_ready("a", ConditionStatus::False, t(20)).is_empty());
        // Unknown node: ignored.
        assert!(c.set_ready("zz", ConditionStatus::True, t(20)).is_empty());
    }

    #[test]
    fn conditions_are_replaced_by_type() {
        let mut c = cluster();
        let unknown = NodeCondition {
            kind: ConditionType::Ready,
            status: ConditionStatus::Unknown,
            reason: "NodeStatusUnknown".into(),
            message: String::new(),
            last_heartbeat: t(0),
            last_transition: t(45),
        };
        let mem = NodeCondition { kind: ConditionType::MemoryPressure, ..unknown.clone() };
        let r = c.apply_action(
            t(45),
            &act(1, ActionKind::UpdateNodeConditions { node: "a".into(), conditions: vec![unknown.clone(), mem] }),
        );
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert!(matches!(
            r.observations[0],
            Observation::WriteFinished { id: ActionId(1), outcome: WriteOutcome::Done }
        ));
        let Observation::NodeUpserted(n) = &r.observations[1] else { panic!("{r:?}") };
        assert_eq!(n.conditions.len(), 3);
        assert_eq!(n.conditions[0], unknown);
        assert_eq!(n.conditions[2].kind, ConditionType::MemoryPressure);
        assert_eq!(c.writes(&ObjectRef::Node("a".into())), 1);
    }

    #[test]
    fn taint_patch_removes_then_adds_in_one_write() {
        let mut c = cluster();
        let nr = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        let mut ur = Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute);
        c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![nr.clone()],
                    remove: vec![],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        ur.time_added = Some(t(2));
        // Remove matches by key and effect only (the value differs here).
        let mut nr_other_value = nr.clone();
        nr_other_value.value = "whatever".into();
        c.apply_action(
            t(2),
            &act(
                2,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![ur.clone()],
                    remove: vec![nr_other_value],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        let taints: Vec<String> = c.node("a").unwrap().taints.iter().map(Taint::short).collect();
        assert_eq!(taints, ["example.com/x:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"]);
        // Adding the same key and effect replaces it.
        let mut ur2 = ur.clone();
        ur2.time_added = Some(t(3));
        c.apply_action(
            t(3),
            &act(
                3,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![ur2.clone()],
                    remove: vec![],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        assert_eq!(c.node("a").unwrap().taints[1], ur2);
        assert_eq!(c.node("a").unwrap().taints.len(), 2);
        assert_eq!(c.writes(&ObjectRef::Node("a".into())), 3);
    }

    #[test]
    fn labels_are_merged() {
        let mut c = cluster();
        c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::PatchNodeLabels { node: "a".into(), labels: BTreeMap::from([("k".into(), "v".into())]) },
            ),
        );
        let n = c.node("a").unwrap();
        assert_eq!(n.labels["k"], "v");
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_ZONE], "z1");
        c.set_labels("a", &BTreeMap::from([("k".to_string(), None)]));
        assert!(!c.node("a").unwrap().labels.contains_key("k"));
    }

    #[test]
    fn write_to_missing_node_fails_and_resends_deletion() {
        let mut c = cluster();
        let r =
            c.apply_action(t(1), &act(9, ActionKind::PatchNodeLabels { node: "zz".into(), labels: BTreeMap::new() }));
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
        assert_eq!(r.observations[1], Observation::NodeDeleted { name: "zz".into() });
        assert!(r.violation.is_none());
    }

    #[test]
    fn pod_actions() {
        let mut c = cluster();
        let uid = c.pod("default/p").unwrap().uid.clone();
        assert_eq!(uid, "uid-1");
        // Admission added the two defaults.
        assert_eq!(c.pod("default/p").unwrap().tolerations.len(), 2);
        let r =
            c.apply_action(t(1), &act(1, ActionKind::MarkPodNotReady { pod: "default/p".into(), uid: uid.clone() }));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert_eq!(c.pod("default/p").unwrap().ready(), Some(false));
        c.apply_action(
            t(2),
            &act(2, ActionKind::SetPodNodeLost { pod: "default/p".into(), uid: uid.clone(), node: "a".into() }),
        );
        assert_eq!(c.pod("default/p").unwrap().reason.as_deref(), Some("NodeLost"));
        c.apply_action(t(3), &act(3, ActionKind::AddPodDisruptionTarget { pod: "default/p".into(), uid: uid.clone() }));
        assert_eq!(c.pod("default/p").unwrap().conditions[POD_DISRUPTION_TARGET], ConditionStatus::True);
        let r = c.apply_action(
            t(4),
            &act(
                4,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: uid.clone(),
                    mode: DeletionMode::Delete,
                    why: why(),
                },
            ),
        );
        assert_eq!(r.observations[1], Observation::PodDeleted { key: "default/p".into() });
        let p = c.pod("default/p").unwrap();
        assert!(p.deleted);
        assert_eq!(p.reason.as_deref(), Some("NodeLost"));
        assert_eq!(c.writes(&ObjectRef::Pod("default/p".into())), 4);
        assert!(c.state().iter().all(|o| !matches!(o, Observation::PodUpserted(_))));
        // Writing to it again breaks the contract.
        let r = c.apply_action(
            t(5),
            &act(5, ActionKind::DeletePod { pod: "default/p".into(), uid, mode: DeletionMode::Delete, why: why() }),
        );
        assert!(r.violation.is_some());
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
    }

    #[test]
    fn mark_not_ready_leaves_pods_without_ready_alone() {
        let mut c = cluster();
        let mut spec = pod_spec("default/q", "a");
        spec.ready = None;
        c.add_pod(&spec);
        let uid = c.pod("default/q").unwrap().uid.clone();
        let r = c.apply_action(t(1), &act(1, ActionKind::MarkPodNotReady { pod: "default/q".into(), uid }));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert_eq!(c.pod("default/q").unwrap().ready(), None);
    }

    #[test]
    fn uid_precondition_and_terminating_pods() {
        let mut c = cluster();
        let r = c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: "uid-77".into(),
                    mode: DeletionMode::Delete,
                    why: why(),
                },
            ),
        );
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
        assert!(r.violation.is_none());
        assert!(matches!(&r.observations[1], Observation::PodUpserted(p) if p.uid == "uid-1"));
        assert!(!c.pod("default/p").unwrap().deleted);

        let mut spec = pod_spec("default/t", "a");
        spec.terminating = true;
        c.add_pod(&spec);
        let uid = c.pod("default/t").unwrap().uid.clone();
        let r = c.apply_action(
            t(2),
            &act(2, ActionKind::DeletePod { pod: "default/t".into(), uid, mode: DeletionMode::Delete, why: why() }),
        );
        assert!(r.violation.unwrap().contains("terminating"));
        assert!(!c.pod("default/t").unwrap().deleted);

        // Legacy eviction's NodeLost status write is the one write a
        // terminating pod accepts (J4).
        let uid = c.pod("default/t").unwrap().uid.clone();
        let lost = ActionKind::SetPodNodeLost { pod: "default/t".into(), uid, node: "a".into() };
        let r = c.apply_action(t(3), &act(3, lost));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert!(r.violation.is_none());
        assert_eq!(c.pod("default/t").unwrap().reason.as_deref(), Some("NodeLost"));
    }

    #[test]
    fn events_are_recorded_not_written() {
        let mut c = cluster();
        let ev = Event {
            object: ObjectRef::Node("a".into()),
            kind: EventType::Normal,
            reason: "NodeNotReady",
            message: "m".into(),
        };
        let r = c.apply_action(t(1), &act(1, ActionKind::RecordEvent(ev.clone())));
        assert_eq!(r, Applied::default());
        assert_eq!(c.events(), &[RecordedEvent { at: t(1), event: ev }]);
        assert_eq!(c.total_writes(), 0);
    }

    #[test]
    fn recreated_pod_gets_a_new_uid() {
        let mut c = cluster();
        c.delete_pod("default/p");
        c.add_pod(&pod_spec("default/p", "a"));
        let p = c.pod("default/p").unwrap();
        assert_eq!(p.uid, "uid-2");
        assert!(!p.deleted);
    }

    #[test]
    fn refused_deletions_fail_then_succeed() {
        let mut c = Cluster::new(AdmissionDefaults::default());
        c.add_node(&node_spec("a"), t(0));
        c.add_pod(&PodSpec { refuse_deletions: 1, ..pod_spec("default/p", "a") });
        let uid = c.pod("default/p").map(|p| p.uid.clone()).unwrap_or_default();
        let delete = |id| {
            act(
                id,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: uid.clone(),
                    mode: DeletionMode::Evict,
                    why: why(),
                },
            )
        };
        let first = c.apply_action(t(1), &delete(1));
        assert!(
            matches!(&first.outcome, Some(WriteOutcome::Failed(r)) if r.contains("disruption budget")),
            "{first:?}"
        );
        assert!(first.violation.is_none());
        assert!(!c.pod("default/p").is_some_and(|p| p.deleted));
        let second = c.apply_action(t(2), &delete(2));
        assert!(second.outcome.is_none() || second.outcome == Some(WriteOutcome::Done), "{second:?}");
        assert!(c.pod("default/p").is_some_and(|p| p.deleted));
        assert_eq!(c.writes(&ObjectRef::Pod("default/p".into())), 2);
    }

    #[test]
    fn delete_node_drops_its_lease_and_keeps_pods() {
        let mut c = cluster();
        let obs = c.delete_node("a");
        assert_eq!(
            obs,
            vec![Observation::NodeDeleted { name: "a".into() }, Observation::LeaseDeleted { node: "a".into() }]
        );
        assert!(c.node("a").is_none());
        assert!(c.node_ever_existed("a"));
        assert_eq!(c.pod("default/p").unwrap().node.as_deref(), Some("a"));
    }
}
