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
use std::ops::Bound;

pub use nodewarden_controller::Applied;
use nodewarden_controller::ClusterApi;
use nodewarden_engine::{
    Action, ActionId, ActionKind, BudgetSnapshot, Event, NodeSnapshot, ObjectRef, Observation, PodSnapshot,
    WriteOutcome,
};
use nodewarden_model::{
    CompactName, ConditionStatus, ConditionType, DeletionMode, NodeCondition, Placement, PodScheduling, Resources,
    Span, Taint, Timestamp, Toleration, ZoneKey, keys,
};
use tracing::warn;

use crate::admission::AdmissionDefaults;
use crate::kubelet::{KubeletTiming, Kubelets, NodeHandle};
use crate::scenario::{
    AllocatableSpec, BudgetSpec, DEFAULT_ALLOCATABLE, IntOrPercent, NodeSpec, PodSchedulingSpec, PodSpec, Scenario,
};
use crate::scheduler::{self, NodeView, PodView};

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
    /// What the scheduler and the rescheduler read (requests, owner,
    /// placement, Unschedulable since when); `None` when the cluster runs
    /// neither and the file gave none of it, so node lifecycle pays nothing.
    pub scheduling: Option<Box<PodScheduling>>,
    /// Send [`SimPod::scheduling`] to the controller (only when it runs
    /// the rescheduler, so other runs' observations stay as they were).
    pub report_scheduling: bool,
}

/// The pod condition type that [`SimPod::ready`] reads.
pub const POD_READY: &str = "Ready";
/// The pod condition the taint manager adds before deleting.
pub const POD_DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The pod `status.reason` a legacy eviction sets.
pub use nodewarden_model::keys::POD_REASON_NODE_LOST;
/// The pod condition the scheduler sets (False when it fits nowhere).
pub const POD_SCHEDULED: &str = "PodScheduled";
/// The Eviction API's refusal when a budget allows no disruption (429).
pub const BUDGET_REFUSAL: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The Eviction API's refusal when several budgets cover the pod (500).
pub const SEVERAL_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

impl SimPod {
    /// The Ready condition as a boolean; `None` when the pod has none.
    pub fn ready(&self) -> Option<bool> {
        self.conditions.get(POD_READY).map(|s| *s == ConditionStatus::True)
    }

    /// What a watch would deliver for this pod.
    pub fn snapshot(&self) -> PodSnapshot {
        PodSnapshot {
            version: 0,
            node_lost: self.reason.as_deref() == Some(POD_REASON_NODE_LOST),
            key: self.key.clone(),
            uid: self.uid.clone(),
            node: self.node.clone(),
            daemonset: self.daemonset,
            ready: self.ready(),
            terminating: self.terminating,
            tolerations: self.tolerations.clone(),
            scheduling: if self.report_scheduling { self.scheduling.clone() } else { None },
        }
    }

    /// Marked `PodScheduled=False`, reason Unschedulable, and not bound.
    pub fn unschedulable(&self) -> bool {
        !self.deleted
            && self.node.is_none()
            && self.scheduling.as_ref().is_some_and(|s| s.unschedulable_since.is_some())
    }

    /// Creation order, the number in its uid (`uid-<n>`): the scheduler's
    /// queue order.
    pub fn seq(&self) -> u64 {
        self.uid.strip_prefix("uid-").and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
    }

    /// Terminating (deletion timestamp set) and not gone yet.
    pub fn is_terminating(&self) -> bool {
        self.terminating && !self.deleted
    }

    /// Its requests (none, one pod slot, when nothing was said).
    pub fn requests(&self) -> Resources {
        self.scheduling.as_ref().map_or(Resources::pod(0, 0), |s| s.requests)
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
    /// What the kubelets and the timeline read and write at every renewal,
    /// one row per name that ever had a node or a Lease (rows are never
    /// removed): a kubelet keeps its node's row ([`NodeHandle`]), so a
    /// renewal is no search by name. [`Cluster::state`] sorts the Leases.
    rows: Vec<NodeRow>,
    /// Each name's row.
    row_of: HashMap<CompactName, u32, Hasher>,
    pods: BTreeMap<String, SimPod>,
    deleted_uids: BTreeSet<String>,
    writes: BTreeMap<ObjectRef, u64>,
    events: Vec<RecordedEvent>,
    next_uid: u64,
    /// Run the simulated scheduler.
    scheduler: bool,
    /// Send pods' scheduling data and nodes' allocatable to the
    /// controller (it runs the rescheduler).
    report: bool,
    /// Nodes' allocatable, when a scheduler or the rescheduler runs.
    allocatable: BTreeMap<String, Resources>,
    budgets: BTreeMap<String, SimBudget>,
    /// Graceful deletions in progress: (deadline, pod key).
    graceful: BTreeSet<(Timestamp, String)>,
    /// Bumped by every change a scheduler verdict or a budget can depend
    /// on; housekeeping reruns only when it moved.
    epoch: u64,
    scheduled_epoch: u64,
    budgets_epoch: u64,
}

/// A PodDisruptionBudget as the simulated API server and disruption
/// controller keep it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimBudget {
    /// Its spec as the file gave it.
    pub spec: BudgetSpec,
    /// `status.disruptionsAllowed` as last published.
    pub allowed: u32,
}

/// What the disruption controller computes for a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetStatus {
    /// Matching pods that are not terminating (the controller's scale).
    pub expected: u32,
    /// Of those, bound and Ready.
    pub healthy: u32,
    /// How many must stay healthy.
    pub desired: u32,
    /// `healthy - desired`, never below zero.
    pub allowed: u32,
}

/// The hasher of the cluster's hashed maps (looked up, never iterated in
/// an order that matters).
type Hasher = foldhash::fast::RandomState;

/// A node's Ready status; `None` when it has no Ready condition.
fn ready_of(node: &NodeSnapshot) -> Option<ConditionStatus> {
    node.conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status)
}

/// A `not-ready` or `unreachable` NoExecute taint (what the timeline
/// counts as tainted).
pub(crate) fn is_controller_noexecute(t: &Taint) -> bool {
    t.effect == nodewarden_model::TaintEffect::NoExecute
        && (t.key == keys::TAINT_NOT_READY || t.key == keys::TAINT_UNREACHABLE)
}

/// One name's row in [`Cluster`]'s node table.
#[derive(Clone, Debug)]
struct NodeRow {
    /// The name.
    name: CompactName,
    /// The node's Ready status (`Some(None)`: no Ready condition); `None`
    /// while no node of this name exists.
    ready: Option<Option<ConditionStatus>>,
    /// The Lease's renew time; `None` while there is no Lease.
    lease: Option<Timestamp>,
    /// The node carries a `not-ready` or `unreachable` NoExecute taint.
    noexecute: bool,
}

/// A node as the timeline samples it ([`Cluster::node_summaries`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeSummary<'a> {
    /// Its row in the cluster's node table (stable for the name).
    pub(crate) row: usize,
    /// Its name.
    pub(crate) name: &'a str,
    /// Its Ready status; `None` without a Ready condition.
    pub(crate) ready: Option<ConditionStatus>,
    /// It carries a `not-ready` or `unreachable` NoExecute taint.
    pub(crate) noexecute: bool,
}

/// Brings a node's row in line with the node (after any change to it).
fn sync_row(rows: &mut [NodeRow], row_of: &HashMap<CompactName, u32, Hasher>, node: &NodeSnapshot) {
    if let Some(&r) = row_of.get(node.name.as_str())
        && let Some(row) = rows.get_mut(r as usize)
    {
        row.ready = Some(ready_of(node));
        row.noexecute = node.taints.iter().any(is_controller_noexecute);
    }
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
        version: 0,
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

    fn read(&mut self, object: &ObjectRef) -> Vec<Observation> {
        match object {
            ObjectRef::Node(name) => match self.nodes.get(name) {
                Some(n) => vec![Observation::NodeUpserted(n.clone())],
                None => vec![Observation::NodeDeleted { name: name.clone() }],
            },
            ObjectRef::Pod(key) => match self.pods.get(key).filter(|p| !p.deleted) {
                Some(p) => vec![Observation::PodUpserted(p.snapshot())],
                None => vec![Observation::PodDeleted { key: key.clone() }],
            },
        }
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
        let mut cluster = Cluster::new(AdmissionDefaults::from(&scenario.cluster))
            .with_scheduling(scenario.cluster.scheduler, scenario.config.enable_rescheduler);
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
        for b in &scenario.budgets {
            cluster.put_budget(b);
        }
        (cluster, kubelets)
    }

    /// Runs the simulated scheduler (`scheduler`), and sends pods'
    /// scheduling data and nodes' allocatable to the controller (`report`,
    /// when it runs the rescheduler). With either, pods and nodes keep
    /// what the scheduler reads, evictions honour budgets and grace
    /// periods, and controllers recreate the pods they own.
    pub fn with_scheduling(mut self, scheduler: bool, report: bool) -> Cluster {
        self.scheduler = scheduler;
        self.report = report;
        self
    }

    /// True when pods and nodes keep what the scheduler reads.
    pub fn tracks_scheduling(&self) -> bool {
        self.scheduler || self.report
    }

    /// The node's allocatable, when tracked.
    pub fn allocatable(&self, node: &str) -> Option<Resources> {
        self.allocatable.get(node).copied()
    }

    /// Every budget, by key.
    pub fn budgets(&self) -> &BTreeMap<String, SimBudget> {
        &self.budgets
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

    /// The node's stored Ready status: `None` when the node does not exist,
    /// `Some(None)` when it has no Ready condition.
    pub fn ready_status(&self, name: &str) -> Option<Option<ConditionStatus>> {
        self.find_row(name).and_then(|r| r.ready)
    }

    /// The node's Lease renew time; `None` when it has no Lease.
    pub fn lease(&self, name: &str) -> Option<Timestamp> {
        self.find_row(name).and_then(|r| r.lease)
    }

    fn find_row(&self, name: &str) -> Option<&NodeRow> {
        self.row_of.get(name).and_then(|&r| self.rows.get(r as usize))
    }

    /// The name's row, made on first use.
    fn row(&mut self, name: &str) -> u32 {
        if let Some(&r) = self.row_of.get(name) {
            return r;
        }
        let r = u32::try_from(self.rows.len()).unwrap_or(u32::MAX);
        let name = CompactName::from(name);
        self.rows.push(NodeRow { name: name.clone(), ready: None, lease: None, noexecute: false });
        self.row_of.insert(name, r);
        r
    }

    /// A kubelet's handle on the node's row (made now if the name has
    /// none yet).
    pub fn node_handle(&mut self, name: &str) -> NodeHandle {
        let r = self.row(name);
        NodeHandle::at_row(self.rows[r as usize].name.clone(), r)
    }

    /// The row a handle names, if it is that node's row here.
    fn row_at(&self, handle: &NodeHandle) -> Option<usize> {
        let r = handle.row()? as usize;
        self.rows.get(r).filter(|row| row.name == *handle.compact_name()).map(|_| r)
    }

    /// [`Cluster::ready_status`] through a kubelet's handle.
    pub fn ready_status_at(&self, handle: &NodeHandle) -> Option<Option<ConditionStatus>> {
        match self.row_at(handle) {
            Some(r) => self.rows[r].ready,
            None => self.ready_status(handle.name()),
        }
    }

    /// [`Cluster::set_lease`] through a kubelet's handle, appending the
    /// observation (if the renew time moved) to `out`.
    pub fn set_lease_at(&mut self, handle: &NodeHandle, renew: Timestamp, out: &mut Vec<Observation>) {
        let Some(r) = self.row_at(handle) else {
            out.extend(self.set_lease(handle.name(), renew));
            return;
        };
        let row = &mut self.rows[r];
        if row.lease == Some(renew) {
            return;
        }
        row.lease = Some(renew);
        // The name from the handle, which the kubelet just read.
        out.push(Observation::LeaseUpserted { node: String::from(handle.name()), renew: Some(renew) });
    }

    /// Every node that exists now, as the timeline samples it, in no
    /// particular order.
    pub(crate) fn node_summaries(&self) -> impl Iterator<Item = NodeSummary<'_>> {
        self.rows.iter().enumerate().filter_map(|(row, r)| {
            r.ready.map(|ready| NodeSummary { row, name: r.name.as_str(), ready, noexecute: r.noexecute })
        })
    }

    /// The pod's current or last state (deleted pods stay, marked).
    pub fn pod(&self, key: &str) -> Option<&SimPod> {
        self.pods.get(key)
    }

    /// The pods of one namespace ever created, deleted ones included, by key.
    pub fn pods_in<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a SimPod> + 'a {
        let start = format!("{namespace}/");
        self.pods
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(&start))
            .map(|(_, p)| p)
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
        let mut leases: Vec<(&str, Timestamp)> =
            self.rows.iter().filter_map(|r| r.lease.map(|renew| (r.name.as_str(), renew))).collect();
        leases.sort_unstable();
        out.extend(
            leases
                .into_iter()
                .map(|(node, renew)| Observation::LeaseUpserted { node: node.to_string(), renew: Some(renew) }),
        );
        out.extend(self.pods.values().filter(|p| !p.deleted).map(|p| Observation::PodUpserted(p.snapshot())));
        out.extend(self.budgets.iter().map(|(k, b)| Observation::BudgetUpserted(budget_snapshot(k, b))));
        out
    }

    /// Creates (or replaces) the node a spec describes, with its Lease.
    pub fn add_node(&mut self, spec: &NodeSpec, now: Timestamp) -> Vec<Observation> {
        let (mut node, lease) = node_from_spec(spec, now);
        if self.tracks_scheduling() {
            let alloc = spec.allocatable.as_ref().map_or(DEFAULT_ALLOCATABLE, |a| a.resources());
            self.allocatable.insert(spec.name.clone(), alloc);
            if self.report {
                node.allocatable = Some(alloc);
            }
        }
        let mut out = self.put_node(node);
        if let Some(renew) = lease {
            out.extend(self.set_lease(&spec.name, renew));
        }
        out
    }

    /// Stores a node as given.
    pub fn put_node(&mut self, node: NodeSnapshot) -> Vec<Observation> {
        if self.nodes.get(&node.name) == Some(&node) {
            self.ever_nodes.insert(node.name.clone());
            return Vec::new();
        }
        self.put_node_unobserved(node.clone());
        vec![Observation::NodeUpserted(node)]
    }

    /// [`Cluster::put_node`] for building a cluster before anything watches
    /// it: no observation is made.
    pub fn put_node_unobserved(&mut self, node: NodeSnapshot) {
        self.ever_nodes.insert(node.name.clone());
        self.row(&node.name);
        sync_row(&mut self.rows, &self.row_of, &node);
        self.epoch += 1;
        self.nodes.insert(node.name.clone(), node);
    }

    /// Deletes a node and its Lease; its pods stay bound.
    pub fn delete_node(&mut self, name: &str) -> Vec<Observation> {
        let mut out = Vec::new();
        let row = self.row_of.get(name).map(|&r| r as usize);
        if self.nodes.remove(name).is_some() {
            if let Some(r) = row {
                self.rows[r].ready = None;
                self.rows[r].noexecute = false;
            }
            self.epoch += 1;
            self.allocatable.remove(name);
            out.push(Observation::NodeDeleted { name: name.to_string() });
        } else {
            warn!(node = name, "delete-node: no such node now");
        }
        if let Some(r) = row
            && self.rows[r].lease.take().is_some()
        {
            out.push(Observation::LeaseDeleted { node: name.to_string() });
        }
        out
    }

    /// Sets (creating if needed) the node's Lease renew time.
    pub fn set_lease(&mut self, node: &str, renew: Timestamp) -> Vec<Observation> {
        let r = self.row(node) as usize;
        if self.rows[r].lease.replace(renew) == Some(renew) {
            return Vec::new();
        }
        vec![Observation::LeaseUpserted { node: node.to_string(), renew: Some(renew) }]
    }

    /// Posts a Ready status: heartbeat = now, transition = now only if the
    /// status changed (rule 3).
    pub fn set_ready(&mut self, node: &str, status: ConditionStatus, now: Timestamp) -> Vec<Observation> {
        // What `update_node` does, without its copy of the whole node: every
        // kubelet posts its status every few minutes.
        let Some(n) = self.nodes.get_mut(node) else {
            warn!(node, "set-ready: no such node now; ignored");
            return Vec::new();
        };
        let reason = ready_reason(status);
        let before = n
            .conditions
            .iter()
            .find(|c| c.kind == ConditionType::Ready)
            .map(|c| (c.status, c.last_heartbeat, c.reason == reason && c.message.is_empty()));
        if before == Some((status, now, true)) {
            return Vec::new();
        }
        post_condition(n, ConditionType::Ready, status, reason, now);
        sync_row(&mut self.rows, &self.row_of, n);
        // The scheduler reads Ready's status (`scheduling_view_changed`).
        if before.map(|(s, _, _)| s) != Some(status) {
            self.epoch += 1;
        }
        vec![Observation::NodeUpserted(n.clone())]
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
        self.add_pod_at(spec, Timestamp::EPOCH)
    }

    /// [`Cluster::add_pod`] at `now` (what `unschedulable-since: now`
    /// stands for).
    pub fn add_pod_at(&mut self, spec: &PodSpec, now: Timestamp) -> Vec<Observation> {
        let pod = self.new_pod(spec, now);
        self.insert_pod(pod)
    }

    /// [`Cluster::add_pod`] for building a cluster before anything watches
    /// it: no observation is made (a generated fleet's million pods are
    /// listed once, when the controller starts).
    pub fn add_pod_unobserved(&mut self, spec: &PodSpec) {
        let pod = self.new_pod(spec, Timestamp::EPOCH);
        self.epoch += 1;
        self.pods.insert(pod.key.clone(), pod);
    }

    /// The pod a spec describes, admitted, with the next uid.
    fn new_pod(&mut self, spec: &PodSpec, now: Timestamp) -> SimPod {
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
        let sched = &spec.scheduling;
        let scheduling = (self.tracks_scheduling() || **sched != PodSchedulingSpec::default()).then(|| {
            Box::new(PodScheduling {
                requests: sched.requests.resources(),
                priority_class: sched.priority_class.clone(),
                critical_annotation: sched.critical,
                mirror: sched.mirror,
                controller_kind: if spec.daemonset { Some("DaemonSet".to_string()) } else { sched.owner.clone() },
                termination_grace: sched.grace_period.unwrap_or(PodScheduling::DEFAULT_TERMINATION_GRACE),
                labels: sched.labels.clone(),
                placement: Placement { node_selector: sched.node_selector.clone(), affinity: sched.affinity.clone() },
                unschedulable_since: sched.unschedulable_since.map(|t| t.resolve(now)),
            })
        });
        if scheduling.as_ref().is_some_and(|s| s.unschedulable_since.is_some()) {
            conditions.insert(POD_SCHEDULED.to_string(), ConditionStatus::False);
        }
        SimPod {
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
            scheduling,
            report_scheduling: self.report,
        }
    }

    fn insert_pod(&mut self, pod: SimPod) -> Vec<Observation> {
        self.epoch += 1;
        let snapshot = pod.snapshot();
        self.pods.insert(pod.key.clone(), pod);
        vec![Observation::PodUpserted(snapshot)]
    }

    /// Deletes a pod (as a user would); its last state stays checkable. A
    /// pod a controller owns is recreated when the cluster tracks
    /// scheduling.
    pub fn delete_pod(&mut self, key: &str) -> Vec<Observation> {
        match self.pods.get_mut(key) {
            Some(p) if !p.deleted => {
                p.deleted = true;
                self.deleted_uids.insert(p.uid.clone());
                self.epoch += 1;
                let mut out = vec![Observation::PodDeleted { key: key.to_string() }];
                out.extend(self.recreate(key));
                out
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

    /// Binds a pod to a node (as the scheduler's `bind` would): it is no
    /// longer Unschedulable.
    pub fn bind_pod(&mut self, key: &str, node: &str) -> Vec<Observation> {
        self.update_pod(key, "bind-pod", |p| {
            p.node = Some(node.to_string());
            if let Some(s) = &mut p.scheduling {
                s.unschedulable_since = None;
            }
            if let Some(c) = p.conditions.get_mut(POD_SCHEDULED) {
                *c = ConditionStatus::True;
            }
        })
    }

    /// Marks an unbound pod `PodScheduled=False`, reason `Unschedulable`,
    /// as the scheduler does when it finds no room (the `mark-unschedulable`
    /// event, for files without the simulated scheduler). A pod already
    /// marked keeps its first time, as the scheduler keeps it; a bound,
    /// terminating or missing pod is left alone (logged).
    pub fn mark_unschedulable(&mut self, key: &str, now: Timestamp) -> Vec<Observation> {
        match self.pods.get(key).filter(|p| !p.deleted) {
            None => {
                warn!(pod = key, "mark-unschedulable: no such pod now; ignored");
                return Vec::new();
            }
            Some(p) if p.node.is_some() || p.terminating => {
                warn!(pod = key, "mark-unschedulable: the pod is bound or terminating; ignored");
                return Vec::new();
            }
            Some(_) => {}
        }
        self.update_pod(key, "mark-unschedulable", |p| {
            let s = p.scheduling.get_or_insert_with(|| {
                Box::new(PodScheduling {
                    termination_grace: PodScheduling::DEFAULT_TERMINATION_GRACE,
                    ..PodScheduling::default()
                })
            });
            s.unschedulable_since.get_or_insert(now);
            p.conditions.insert(POD_SCHEDULED.to_string(), ConditionStatus::False);
        })
    }

    /// Sets a node's allocatable (tracked only when a scheduler or the
    /// rescheduler runs).
    pub fn set_allocatable(&mut self, node: &str, allocatable: &AllocatableSpec) -> Vec<Observation> {
        if !self.tracks_scheduling() || !self.nodes.contains_key(node) {
            warn!(node, "set-allocatable: no such node now, or no scheduler runs; ignored");
            return Vec::new();
        }
        let alloc = allocatable.resources();
        self.allocatable.insert(node.to_string(), alloc);
        self.epoch += 1;
        if self.report {
            return self.update_node(node, "set-allocatable", |n| n.allocatable = Some(alloc));
        }
        Vec::new()
    }

    /// Creates or replaces a budget; the controller hears of it.
    pub fn put_budget(&mut self, spec: &BudgetSpec) -> Vec<Observation> {
        let status = self.budget_status(spec);
        let budget = SimBudget { spec: spec.clone(), allowed: status.allowed };
        let obs = Observation::BudgetUpserted(budget_snapshot(&spec.name, &budget));
        self.budgets.insert(spec.name.clone(), budget);
        vec![obs]
    }

    /// Deletes a budget.
    pub fn delete_budget(&mut self, key: &str) -> Vec<Observation> {
        if self.budgets.remove(key).is_none() {
            warn!(budget = key, "delete-budget: no such budget now");
            return Vec::new();
        }
        vec![Observation::BudgetDeleted { key: key.to_string() }]
    }

    /// Pods of `namespace` (not deleted) that `spec`'s selector matches.
    fn budget_pods<'a>(&'a self, spec: &'a BudgetSpec) -> impl Iterator<Item = &'a SimPod> + 'a {
        let ns = spec.name.split_once('/').map_or(spec.name.as_str(), |(ns, _)| ns);
        let start = format!("{ns}/");
        self.pods
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(&start))
            .map(|(_, p)| p)
            .filter(|p| !p.deleted)
            .filter(|p| spec.selector.matches(p.scheduling.as_ref().map_or(&EMPTY_LABELS, |s| &s.labels)))
    }

    /// What the disruption controller computes for a budget now: expected
    /// = matching pods not terminating (a stand-in for the owners' scale:
    /// a replaced pod's successor counts, the terminating one does not),
    /// healthy = those bound and Ready, desired from `min-available`
    /// (percentages of expected, rounded up) or expected minus
    /// `max-unavailable` (rounded up), allowed = healthy - desired, at
    /// least 0.
    pub fn budget_status(&self, spec: &BudgetSpec) -> BudgetStatus {
        let (mut expected, mut healthy) = (0u32, 0u32);
        for p in self.budget_pods(spec).filter(|p| !p.terminating) {
            expected += 1;
            if p.node.is_some() && p.ready() == Some(true) {
                healthy += 1;
            }
        }
        let desired = match (spec.min_available, spec.max_unavailable) {
            (Some(min), _) => min.scaled(expected),
            (None, Some(max)) => expected.saturating_sub(max.scaled(expected)),
            // Neither (only from code; files must give one): policy's
            // old default, minAvailable 1.
            (None, None) => IntOrPercent::Int(1).scaled(expected),
        };
        BudgetStatus { expected, healthy, desired, allowed: healthy.saturating_sub(desired) }
    }

    /// Whether the Eviction API lets this pod go now, as upstream's
    /// eviction handler decides: pods not running (unbound) and
    /// terminating pods always; several budgets: 500; a healthy pod needs
    /// `disruptionsAllowed > 0`; an unhealthy one, that the budget is met
    /// (`IfHealthyBudget`, the default policy).
    fn eviction_refusal(&self, pod: &SimPod) -> Option<String> {
        if pod.node.is_none() || pod.terminating {
            return None;
        }
        let labels = pod.scheduling.as_ref().map_or(&EMPTY_LABELS, |s| &s.labels);
        let ns = pod.key.split_once('/').map_or("", |(ns, _)| ns);
        let covering: Vec<&SimBudget> = self
            .budgets
            .values()
            .filter(|b| b.spec.name.split_once('/').is_some_and(|(bns, _)| bns == ns))
            .filter(|b| b.spec.selector.matches(labels))
            .collect();
        match covering.as_slice() {
            [] => None,
            [b] => {
                let status = self.budget_status(&b.spec);
                let healthy = pod.ready() == Some(true);
                let ok = if healthy { status.allowed > 0 } else { status.healthy >= status.desired };
                (!ok).then(|| BUDGET_REFUSAL.to_string())
            }
            _ => Some(SEVERAL_BUDGETS.to_string()),
        }
    }

    /// The pod's controller creates its replacement, as a ReplicaSet does
    /// as soon as a pod is terminating or gone: same spec, a new name
    /// (`<name>-r<N>`, the first N free), a new uid, unscheduled and not
    /// Ready. Only when the cluster tracks scheduling, and only for pods
    /// with a controller that is not a DaemonSet (its pod is per node) and
    /// that are not mirror pods.
    fn recreate(&mut self, key: &str) -> Vec<Observation> {
        if !self.tracks_scheduling() {
            return Vec::new();
        }
        let Some(old) = self.pods.get(key) else { return Vec::new() };
        let Some(sched) = old.scheduling.as_ref() else { return Vec::new() };
        if old.daemonset || sched.mirror || sched.controller_kind.as_deref().is_none_or(|k| k == "DaemonSet") {
            return Vec::new();
        }
        let base = replacement_base(key);
        let new_key = (1u64..)
            .map(|n| format!("{base}-r{n}"))
            .find(|k| self.pods.get(k).is_none_or(|p| p.deleted) && k != key)
            .unwrap_or_else(|| format!("{base}-r"));
        self.next_uid += 1;
        let mut scheduling = sched.clone();
        scheduling.unschedulable_since = None;
        let mut conditions = BTreeMap::new();
        if old.conditions.contains_key(POD_READY) {
            conditions.insert(POD_READY.to_string(), ConditionStatus::False);
        }
        let pod = SimPod {
            key: new_key,
            uid: format!("uid-{}", self.next_uid),
            node: None,
            daemonset: false,
            terminating: false,
            tolerations: old.tolerations.clone(),
            conditions,
            reason: None,
            deleted: false,
            refuse_deletions: 0,
            scheduling: Some(scheduling),
            report_scheduling: self.report,
        };
        self.insert_pod(pod)
    }

    /// The earliest instant housekeeping has something to do by itself (a
    /// graceful deletion ends); `None` when nothing is pending.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.graceful.first().map(|(t, _)| *t)
    }

    /// What happens in the cluster without anyone asking, at `now`: pods
    /// whose grace period is over go; the scheduler binds what fits and
    /// marks the rest Unschedulable; the disruption controller publishes
    /// changed budgets. Returns what the watches deliver. Costs nothing
    /// when the cluster tracks no scheduling and has no budget.
    pub fn housekeeping(&mut self, now: Timestamp) -> Vec<Observation> {
        let mut out = Vec::new();
        while let Some((at, key)) = self.graceful.first().cloned() {
            if at > now {
                break;
            }
            self.graceful.pop_first();
            if let Some(p) = self.pods.get_mut(&key).filter(|p| !p.deleted && p.terminating) {
                p.deleted = true;
                self.deleted_uids.insert(p.uid.clone());
                self.epoch += 1;
                out.push(Observation::PodDeleted { key });
            }
        }
        if self.scheduler && self.scheduled_epoch != self.epoch {
            out.extend(self.schedule(now));
            self.scheduled_epoch = self.epoch;
        }
        out.extend(self.publish_budgets());
        out
    }

    /// Re-computes every budget's `disruptionsAllowed` when pods changed;
    /// a `BudgetUpserted` for each that moved.
    fn publish_budgets(&mut self) -> Vec<Observation> {
        if self.budgets.is_empty() || self.budgets_epoch == self.epoch {
            return Vec::new();
        }
        self.budgets_epoch = self.epoch;
        let fresh: Vec<(String, u32)> =
            self.budgets.iter().map(|(k, b)| (k.clone(), self.budget_status(&b.spec).allowed)).collect();
        let mut out = Vec::new();
        for (k, allowed) in fresh {
            if let Some(b) = self.budgets.get_mut(&k)
                && b.allowed != allowed
            {
                b.allowed = allowed;
                out.push(Observation::BudgetUpserted(budget_snapshot(&k, b)));
            }
        }
        out
    }

    /// The requests bound to each node, by pods that are not gone.
    fn used(&self) -> BTreeMap<&str, Resources> {
        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for p in self.pods.values().filter(|p| !p.deleted) {
            if let Some(n) = &p.node {
                *used.entry(n.as_str()).or_default() += p.requests();
            }
        }
        used
    }

    /// Every node as the scheduler sees it, in name order.
    fn node_views<'a>(&'a self, used: &BTreeMap<&str, Resources>) -> Vec<NodeView<'a>> {
        self.nodes
            .values()
            .map(|n| NodeView {
                name: &n.name,
                labels: &n.labels,
                taints: &n.taints,
                ready: n.conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::True),
                unschedulable: n.unschedulable,
                allocatable: self.allocatable.get(&n.name).copied().unwrap_or(DEFAULT_ALLOCATABLE),
                used: used.get(n.name.as_str()).copied().unwrap_or_default(),
            })
            .collect()
    }

    /// The fewest pods whose eviction from a single node would let pod
    /// `key` fit there, ignoring budgets and grace periods: only nodes it
    /// may use otherwise (Ready, schedulable, taints tolerated, placement),
    /// never evicting a critical addon, a DaemonSet or a mirror pod or a
    /// terminating one. Per node, the evictable pods are taken largest
    /// first (by CPU, then memory), which is exact when one resource falls
    /// short. `None`: no node could take it even emptied of evictable pods.
    pub fn fewest_evictions_for(&self, key: &str) -> Option<usize> {
        let pod = self.pods.get(key).filter(|p| !p.deleted)?;
        let no_placement = Placement::default();
        let view = PodView {
            requests: pod.requests(),
            tolerations: &pod.tolerations,
            placement: pod.scheduling.as_ref().map_or(&no_placement, |s| &s.placement),
        };
        let used = self.used();
        let mut by_node: BTreeMap<&str, Vec<Resources>> = BTreeMap::new();
        for p in self.pods.values().filter(|p| !p.deleted && !p.terminating && !p.daemonset) {
            let Some(node) = &p.node else { continue };
            let protected = p.scheduling.as_ref().is_some_and(|s| {
                s.mirror || {
                    let ns = p.key.split_once('/').map_or("", |(ns, _)| ns);
                    nodewarden_model::scheduling::is_critical_addon(
                        ns,
                        s.critical_annotation,
                        s.priority_class.as_deref(),
                    )
                }
            });
            if !protected {
                by_node.entry(node.as_str()).or_default().push(p.requests());
            }
        }
        let mut best: Option<usize> = None;
        for node in self.node_views(&used) {
            let mut candidates = by_node.remove(node.name).unwrap_or_default();
            candidates.sort_by(|a, b| b.cpu_millis.cmp(&a.cpu_millis).then(b.memory_bytes.cmp(&a.memory_bytes)));
            let mut n = node;
            for count in 0..=candidates.len() {
                if scheduler::fits(&view, &n).is_ok() {
                    best = Some(best.map_or(count, |b| b.min(count)));
                    break;
                }
                if !matches!(scheduler::fits(&view, &n), Err(scheduler::Misfit::Insufficient(_))) {
                    break;
                }
                if let Some(c) = candidates.get(count) {
                    n.used = n.used.saturating_sub(c);
                }
            }
        }
        best
    }

    /// One first-fit pass over the pending pods ([`crate::scheduler`]).
    fn schedule(&mut self, now: Timestamp) -> Vec<Observation> {
        let mut pending: Vec<&SimPod> = self
            .pods
            .values()
            .filter(|p| !p.deleted && !p.terminating && p.node.is_none() && p.scheduling.is_some())
            .collect();
        if pending.is_empty() {
            return Vec::new();
        }
        pending.sort_by_key(|p| p.seq());
        let used = self.used();
        let no_placement = Placement::default();
        let views: Vec<PodView<'_>> = pending
            .iter()
            .map(|p| PodView {
                requests: p.requests(),
                tolerations: &p.tolerations,
                placement: p.scheduling.as_ref().map_or(&no_placement, |s| &s.placement),
            })
            .collect();
        let mut nodes = self.node_views(&used);
        let placed = scheduler::first_fit(&views, &mut nodes);
        let decisions: Vec<(String, Option<String>)> = pending
            .iter()
            .zip(placed)
            .map(|(p, i)| (p.key.clone(), i.and_then(|i| nodes.get(i)).map(|n| n.name.to_string())))
            .collect();
        let mut out = Vec::new();
        for (key, node) in decisions {
            match node {
                Some(node) => out.extend(self.update_pod(&key, "bind", |p| {
                    p.node = Some(node);
                    if let Some(s) = &mut p.scheduling {
                        s.unschedulable_since = None;
                    }
                    p.conditions.insert(POD_SCHEDULED.to_string(), ConditionStatus::True);
                    // Its kubelet starts it at once.
                    if let Some(r) = p.conditions.get_mut(POD_READY) {
                        *r = ConditionStatus::True;
                    }
                })),
                None => out.extend(self.update_pod(&key, "mark-unschedulable", |p| {
                    if let Some(s) = &mut p.scheduling
                        && s.unschedulable_since.is_none()
                    {
                        s.unschedulable_since = Some(now);
                    }
                    p.conditions.insert(POD_SCHEDULED.to_string(), ConditionStatus::False);
                })),
            }
        }
        out
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
        sync_row(&mut self.rows, &self.row_of, node);
        if scheduling_view_changed(&before, node) {
            self.epoch += 1;
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
        let obs = Observation::PodUpserted(pod.snapshot());
        self.epoch += 1;
        vec![obs]
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
            ActionKind::UpdateNodeConditions { node, conditions, .. } => self.node_write(id, node, |n| {
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
            ActionKind::DeletePod { pod, uid, mode, .. } => {
                self.remove_pod(now, id, "delete-pod", pod, uid, *mode, Some(Span::ZERO))
            }
            ActionKind::EvictForAddon { pod, uid, grace, .. } => {
                self.remove_pod(now, id, "evict-for-addon", pod, uid, DeletionMode::Evict, *grace)
            }
        }
    }

    /// A pod deletion, plain or through the Eviction API: refused while the
    /// pod's `refuse-deletions` count lasts, as a webhook or a budget would.
    ///
    /// When the cluster tracks scheduling, an eviction also honours the
    /// budgets ([`Cluster::budget_status`]; refused with upstream's
    /// message), the pod goes terminating for `grace` (`None`: its own
    /// `terminationGracePeriodSeconds`) and is gone when it ends (zero:
    /// at once), and its controller recreates it. Otherwise the pod is
    /// gone at once, as before. The node lifecycle controller's deletions
    /// pass `Some(0)`: their pods are on dead nodes, whose kubelet cannot
    /// hold them, and instant removal keeps the node lifecycle runs as
    /// they were.
    #[allow(clippy::too_many_arguments)]
    fn remove_pod(
        &mut self,
        now: Timestamp,
        id: ActionId,
        what: &'static str,
        pod: &str,
        uid: &str,
        mode: DeletionMode,
        grace: Option<Span>,
    ) -> Applied {
        let refusal = match mode {
            DeletionMode::Delete => "admission webhook denied the request",
            DeletionMode::Evict => BUDGET_REFUSAL,
        };
        let tracks = self.tracks_scheduling();
        let budget_refusal = match self.pods.get(pod) {
            Some(p) if tracks && mode == DeletionMode::Evict && !p.deleted && p.uid == uid => self.eviction_refusal(p),
            _ => None,
        };
        let mut graceful = None;
        let mut applied = self.pod_write(id, what, pod, uid, |p| {
            if p.refuse_deletions > 0 {
                p.refuse_deletions -= 1;
                return Err(refusal.to_string());
            }
            if let Some(r) = budget_refusal {
                return Err(r);
            }
            let grace = if tracks {
                grace.unwrap_or_else(|| p.scheduling.as_ref().map_or(Span::ZERO, |s| s.termination_grace))
            } else {
                Span::ZERO
            };
            if grace > Span::ZERO {
                p.terminating = true;
                graceful = Some(now + grace);
            } else {
                p.deleted = true;
            }
            Ok(())
        });
        if applied.outcome == Some(WriteOutcome::Done) {
            if let Some(at) = graceful {
                self.graceful.insert((at, pod.to_string()));
            }
            applied.observations.extend(self.recreate(pod));
            applied.observations.extend(self.publish_budgets());
        }
        applied
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
        sync_row(&mut self.rows, &self.row_of, node);
        self.epoch += 1;
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
        self.epoch += 1;
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

static EMPTY_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// A budget as the controller sees it.
fn budget_snapshot(key: &str, b: &SimBudget) -> BudgetSnapshot {
    BudgetSnapshot { key: key.to_string(), selector: b.spec.selector.clone(), disruptions_allowed: b.allowed }
}

/// The name a replacement is derived from: the pod's, without a
/// `-r<digits>` suffix a previous replacement added.
pub fn replacement_base(key: &str) -> &str {
    match key.rsplit_once("-r") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => key,
    }
}

/// True when a node change can change a scheduling verdict (not a mere
/// heartbeat).
fn scheduling_view_changed(a: &NodeSnapshot, b: &NodeSnapshot) -> bool {
    let ready = |n: &NodeSnapshot| n.conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status);
    a.taints != b.taints
        || a.unschedulable != b.unschedulable
        || a.labels != b.labels
        || a.allocatable != b.allocatable
        || ready(a) != ready(b)
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
            allocatable: None,
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
            scheduling: Default::default(),
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
            &act(
                1,
                ActionKind::UpdateNodeConditions {
                    node: "a".into(),
                    conditions: vec![unknown.clone(), mem],
                    version: 0,
                },
            ),
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

    mod scheduling {
        use nodewarden_engine::explain::{AddonEviction, PreparationTier};
        use nodewarden_model::Resources;

        use super::*;
        use crate::validate::parse_scenario;

        fn world(yaml: &str) -> Cluster {
            let s = parse_scenario(yaml).unwrap_or_else(|e| panic!("{e}"));
            Cluster::from_scenario(&s).0
        }

        const NODES: &str = r#"
cluster: {scheduler: true}
nodes:
- {name: a, ready: "True", allocatable: {cpu: 1, memory: 1Gi, pods: 10}}
- {name: b, ready: "True", allocatable: {cpu: "1", memory: 1Gi, pods: 10}}
"#;

        fn evict(id: u64, c: &Cluster, pod: &str, grace: Option<Span>) -> Action {
            let uid = c.pod(pod).map(|p| p.uid.clone()).unwrap_or_default();
            let why = Box::new(AddonEviction {
                pod: pod.into(),
                node: "a".into(),
                addon: "kube-system/dns".into(),
                unschedulable_since: t(0),
                needed: Resources::pod(100, 0),
                free_before: Resources::ZERO,
                tier: PreparationTier::AllowedAndQuick,
                victims: vec![pod.into()],
                freed: Resources::ZERO,
                budgets: vec![],
                pod_grace: Span::from_secs(30),
                grace: grace.unwrap_or(Span::from_secs(30)),
                decided_at: t(0),
            });
            act(id, ActionKind::EvictForAddon { pod: pod.into(), uid, grace, why })
        }

        fn bound(c: &Cluster, pod: &str) -> Option<String> {
            c.pod(pod).and_then(|p| p.node.clone())
        }

        #[test]
        fn scheduler_binds_first_fit_and_marks_the_rest_unschedulable() {
            let mut c = world(&format!(
                "{NODES}pods:\n\
                 - {{name: d/p1, requests: {{cpu: 600m}}}}\n\
                 - {{name: d/p2, requests: {{cpu: 600m}}}}\n\
                 - {{name: d/p3, requests: {{cpu: 300m}}}}\n\
                 - {{name: d/p4, requests: {{cpu: 600m}}}}\n"
            ));
            let obs = c.housekeeping(t(5));
            assert_eq!(bound(&c, "d/p1").as_deref(), Some("a"));
            assert_eq!(bound(&c, "d/p2").as_deref(), Some("b"));
            assert_eq!(bound(&c, "d/p3").as_deref(), Some("a"));
            assert_eq!(bound(&c, "d/p4"), None);
            let p4 = c.pod("d/p4").unwrap();
            assert!(p4.unschedulable());
            assert_eq!(p4.scheduling.as_ref().unwrap().unschedulable_since, Some(t(5)));
            assert_eq!(p4.conditions[POD_SCHEDULED], ConditionStatus::False);
            // Four watch events: three binds and the mark.
            assert_eq!(obs.len(), 4, "{obs:?}");
            assert!(obs.iter().any(|o| matches!(o, Observation::PodUpserted(p) if p.node.as_deref() == Some("a"))));
            // Nothing changed: nothing to do, and the mark keeps its time.
            assert!(c.housekeeping(t(9)).is_empty());
            // Room appears (p2 deleted): p4 is bound, no longer unschedulable.
            c.delete_pod("d/p2");
            c.housekeeping(t(12));
            assert_eq!(bound(&c, "d/p4").as_deref(), Some("b"));
            assert!(!c.pod("d/p4").unwrap().unschedulable());
            assert_eq!(c.pod("d/p4").unwrap().conditions[POD_SCHEDULED], ConditionStatus::True);
        }

        /// The `mark-unschedulable` event, in a file without the
        /// scheduler: a pod (a controller's replacement too) is marked at
        /// the event's time, keeps its first mark, and a bound pod is left
        /// alone. With the rescheduler on, the controller hears of it.
        #[test]
        fn mark_unschedulable_is_the_schedulers_verdict_without_the_scheduler() {
            let mut c = world(
                "config: {enable-rescheduler: true}\n\
                 nodes: [{name: a, ready: \"True\"}]\n\
                 pods:\n\
                 - {name: kube-system/dns, owner: ReplicaSet, priority-class: system-cluster-critical}\n\
                 - {name: d/web, node: a}\n",
            );
            let obs = c.mark_unschedulable("kube-system/dns", t(3));
            let dns = c.pod("kube-system/dns").unwrap();
            assert!(dns.unschedulable());
            assert_eq!(dns.conditions[POD_SCHEDULED], ConditionStatus::False);
            assert!(matches!(obs.as_slice(), [Observation::PodUpserted(p)]
                if p.scheduling.as_ref().and_then(|s| s.unschedulable_since) == Some(t(3))));
            assert!(c.mark_unschedulable("kube-system/dns", t(7)).is_empty(), "the first mark stays");
            assert!(c.mark_unschedulable("d/web", t(7)).is_empty(), "a bound pod");
            assert!(!c.pod("d/web").unwrap().unschedulable());
            assert!(c.mark_unschedulable("d/nothing", t(7)).is_empty());
            // Its replacement, which no file can define, is marked by name.
            c.delete_pod("kube-system/dns");
            assert!(!c.pod("kube-system/dns-r1").unwrap().unschedulable(), "no scheduler marks it");
            c.mark_unschedulable("kube-system/dns-r1", t(9));
            let r1 = c.pod("kube-system/dns-r1").unwrap();
            assert_eq!(r1.scheduling.as_ref().and_then(|s| s.unschedulable_since), Some(t(9)));
            // Without scheduling facts the pod gets them (default grace).
            let mut plain = world("pods: [{name: d/p}]\n");
            plain.mark_unschedulable("d/p", t(1));
            let s = plain.pod("d/p").unwrap().scheduling.clone().unwrap();
            assert_eq!(
                (s.unschedulable_since, s.termination_grace),
                (Some(t(1)), PodScheduling::DEFAULT_TERMINATION_GRACE)
            );
        }

        #[test]
        fn scheduler_respects_node_state_taints_and_placement() {
            let mut c = world(
                r#"
cluster: {scheduler: true}
nodes:
- {name: a, ready: "False"}
- {name: b, ready: "True", unschedulable: true}
- {name: c, ready: "True", taints: [{key: CriticalAddonsOnly, value: nodewarden, effect: NoSchedule}]}
- {name: d, ready: "True", labels: {disk: ssd}}
- {name: e, ready: "True"}
pods:
- {name: d/plain}
- {name: kube-system/dns, tolerations: [{key: CriticalAddonsOnly, operator: Exists}]}
- {name: d/ssd, node-selector: {disk: ssd}}
- name: d/not-e
  affinity: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [d, e]}]}]}
"#,
            );
            c.housekeeping(t(0));
            assert_eq!(bound(&c, "d/plain").as_deref(), Some("d"));
            assert_eq!(bound(&c, "kube-system/dns").as_deref(), Some("c"));
            assert_eq!(bound(&c, "d/ssd").as_deref(), Some("d"));
            assert!(c.pod("d/not-e").unwrap().unschedulable(), "a, b, c are out, d and e excluded");
        }

        #[test]
        fn terminating_pods_hold_their_room_until_gone() {
            let mut c = world(&format!(
                "{NODES}pods:\n\
                 - {{name: d/old, node: a, requests: {{cpu: 1}}, grace-period: 20s}}\n\
                 - {{name: d/full, node: b, requests: {{cpu: 1}}}}\n\
                 - {{name: d/new, requests: {{cpu: 1}}}}\n"
            ));
            c.housekeeping(t(0));
            assert!(c.pod("d/new").unwrap().unschedulable());
            let r = c.apply_action(t(1), &evict(1, &c, "d/old", None));
            assert_eq!(r.outcome, Some(WriteOutcome::Done));
            assert!(matches!(&r.observations[1], Observation::PodUpserted(p) if p.terminating));
            assert!(c.pod("d/old").unwrap().is_terminating());
            assert_eq!(c.next_due(), Some(t(21)), "its own grace period");
            c.housekeeping(t(20));
            assert!(c.pod("d/new").unwrap().unschedulable(), "still there at 20s");
            let obs = c.housekeeping(t(21));
            assert!(obs.contains(&Observation::PodDeleted { key: "d/old".into() }), "{obs:?}");
            assert!(c.pod("d/old").unwrap().deleted);
            assert_eq!(bound(&c, "d/new").as_deref(), Some("a"));
            assert_eq!(c.next_due(), None);
        }

        #[test]
        fn eviction_grace_overrides_and_zero_is_at_once() {
            let mut c = world(&format!(
                "{NODES}pods:\n\
                 - {{name: d/long, node: a, grace-period: 5m}}\n\
                 - {{name: d/now, node: a, grace-period: 5m}}\n"
            ));
            c.apply_action(t(1), &evict(1, &c, "d/long", Some(Span::from_secs(10))));
            assert_eq!(c.next_due(), Some(t(11)));
            let r = c.apply_action(t(1), &evict(2, &c, "d/now", Some(Span::ZERO)));
            assert_eq!(r.observations[1], Observation::PodDeleted { key: "d/now".into() });
            // Evicting a terminating pod is a contract violation.
            let r = c.apply_action(t(2), &evict(3, &c, "d/long", None));
            assert!(r.violation.is_some(), "{r:?}");
        }

        #[test]
        fn owned_pods_are_recreated_unscheduled_bare_and_daemonset_pods_are_not() {
            let mut c = world(&format!(
                "{NODES}pods:\n\
                 - {{name: d/web-1, node: a, owner: ReplicaSet, labels: {{app: web}}, requests: {{cpu: 100m}}, grace-period: 0s}}\n\
                 - {{name: d/bare, node: a, grace-period: 0s}}\n\
                 - {{name: d/ds, node: a, daemonset: true, grace-period: 0s}}\n"
            ));
            let r = c.apply_action(t(1), &evict(1, &c, "d/web-1", None));
            let Some(Observation::PodUpserted(new)) = r.observations.get(2) else { panic!("{r:?}") };
            assert_eq!(new.key, "d/web-1-r1");
            assert_eq!(new.node, None);
            assert_ne!(new.uid, c.pod("d/web-1").unwrap().uid);
            let p = c.pod("d/web-1-r1").unwrap();
            assert_eq!(p.scheduling.as_ref().unwrap().labels["app"], "web");
            assert_eq!(p.requests().cpu_millis, 100);
            assert_eq!(p.ready(), Some(false));
            // Its own replacement is named from the same base.
            c.housekeeping(t(2));
            assert_eq!(bound(&c, "d/web-1-r1").as_deref(), Some("a"));
            assert_eq!(c.pod("d/web-1-r1").unwrap().ready(), Some(true), "started by its kubelet");
            c.apply_action(t(3), &evict(2, &c, "d/web-1-r1", None));
            assert!(c.pod("d/web-1-r2").is_some());
            let before = c.pods().count();
            c.apply_action(t(4), &evict(3, &c, "d/bare", None));
            c.apply_action(t(4), &evict(4, &c, "d/ds", None));
            assert_eq!(c.pods().count(), before, "nothing recreated");
            assert_eq!(replacement_base("d/web-1-r12"), "d/web-1");
            assert_eq!(replacement_base("d/worker"), "d/worker");
        }

        fn budget_world(budget: &str, pods: usize) -> Cluster {
            let mut y = format!("{NODES}budgets:\n- {budget}\npods:\n");
            for i in 0..pods {
                y.push_str(&format!("- {{name: d/w{i}, node: a, labels: {{app: w}}, grace-period: 0s}}\n"));
            }
            y.push_str("- {name: d/other, node: a, labels: {app: x}, grace-period: 0s}\n");
            world(&y)
        }

        fn allowed(c: &Cluster) -> u32 {
            c.budgets().values().next().map_or(99, |b| b.allowed)
        }

        #[test]
        fn budgets_compute_disruptions_allowed() {
            for (spec, pods, want) in [
                ("min-available: 2", 3, 1),
                ("min-available: 3", 3, 0),
                ("min-available: 50%", 3, 1),
                ("max-unavailable: 1", 4, 1),
                ("max-unavailable: 0", 4, 0),
                ("max-unavailable: 30%", 4, 2),
                ("min-available: 0%", 2, 2),
            ] {
                let c = budget_world(&format!("{{name: d/b, selector: {{matchLabels: {{app: w}}}}, {spec}}}"), pods);
                assert_eq!(allowed(&c), want, "{spec} over {pods} pods");
            }
        }

        #[test]
        fn evictions_honour_budgets_and_publish_changes() {
            let mut c = budget_world("{name: d/b, selector: {matchLabels: {app: w}}, min-available: 2}", 3);
            assert_eq!(allowed(&c), 1);
            let r = c.apply_action(t(1), &evict(1, &c, "d/w0", None));
            assert_eq!(r.outcome, Some(WriteOutcome::Done));
            let published: Vec<u32> = r
                .observations
                .iter()
                .filter_map(|o| match o {
                    Observation::BudgetUpserted(b) => Some(b.disruptions_allowed),
                    _ => None,
                })
                .collect();
            assert_eq!(published, [0], "{r:?}");
            let r = c.apply_action(t(2), &evict(2, &c, "d/w1", None));
            assert_eq!(r.outcome, Some(WriteOutcome::Failed(BUDGET_REFUSAL.to_string())));
            assert!(r.violation.is_none());
            assert!(!c.pod("d/w1").unwrap().deleted);
            // A plain deletion is not an eviction: budgets do not apply.
            let delete = act(
                3,
                ActionKind::DeletePod {
                    pod: "d/w1".into(),
                    uid: c.pod("d/w1").unwrap().uid.clone(),
                    mode: DeletionMode::Delete,
                    why: why(),
                },
            );
            assert_eq!(c.apply_action(t(3), &delete).outcome, Some(WriteOutcome::Done));
            // Pods outside the selector are not covered.
            assert_eq!(c.apply_action(t(4), &evict(4, &c, "d/other", None)).outcome, Some(WriteOutcome::Done));
        }

        #[test]
        fn several_budgets_refuse_and_unhealthy_pods_go_while_the_budget_holds() {
            let mut c = budget_world("{name: d/b, selector: {matchLabels: {app: w}}, min-available: 1}", 2);
            c.put_budget(&crate::scenario::BudgetSpec {
                name: "d/all".into(),
                selector: Default::default(),
                min_available: None,
                max_unavailable: Some(IntOrPercent::Int(5)),
            });
            let r = c.apply_action(t(1), &evict(1, &c, "d/w0", None));
            assert_eq!(r.outcome, Some(WriteOutcome::Failed(SEVERAL_BUDGETS.to_string())));
            c.delete_budget("d/all");
            // w0 not Ready: evictable while the budget is met (1 healthy of 1 desired).
            let uid = c.pod("d/w0").unwrap().uid.clone();
            c.apply_action(t(2), &act(2, ActionKind::MarkPodNotReady { pod: "d/w0".into(), uid }));
            let r = c.apply_action(t(3), &evict(3, &c, "d/w0", None));
            assert_eq!(r.outcome, Some(WriteOutcome::Done), "{r:?}");
        }

        /// The loop as the rescheduler will drive it: the addon fits
        /// nowhere; the node is tainted `CriticalAddonsOnly` and pods are
        /// evicted with a short grace; their replacements cannot use the
        /// room; when the grace ends the addon is bound there.
        #[test]
        fn room_made_by_taint_and_evictions_goes_to_the_addon() {
            let mut c = world(&format!(
                "{NODES}pods:\n\
                 - {{name: d/w1, node: a, owner: ReplicaSet, requests: {{cpu: 600m}}, grace-period: 5m}}\n\
                 - {{name: d/w2, node: a, owner: ReplicaSet, requests: {{cpu: 400m}}}}\n\
                 - {{name: d/w3, node: b, owner: ReplicaSet, requests: {{cpu: 1}}}}\n\
                 - {{name: kube-system/dns, owner: ReplicaSet, requests: {{cpu: 500m}}, priority-class: system-cluster-critical, \
                    tolerations: [{{key: CriticalAddonsOnly, operator: Exists}}]}}\n"
            ));
            c.housekeeping(t(0));
            assert!(c.pod("kube-system/dns").unwrap().unschedulable());
            let taint = nodewarden_model::Taint {
                value: nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_VALUE.into(),
                ..nodewarden_model::Taint::new(
                    nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_TAINT,
                    nodewarden_model::TaintEffect::NoSchedule,
                )
            };
            let patch = ActionKind::PatchNodeTaints {
                node: "a".into(),
                add: vec![taint],
                remove: vec![],
                slot: nodewarden_engine::WriteSlot::CriticalAddonsTaint,
            };
            assert_eq!(c.apply_action(t(20), &act(1, patch)).outcome, Some(WriteOutcome::Done));
            let r = c.apply_action(t(20), &evict(2, &c, "d/w1", Some(Span::from_secs(10))));
            assert_eq!(r.outcome, Some(WriteOutcome::Done));
            c.housekeeping(t(20));
            // The replacement exists, cannot use the tainted room, and the
            // terminating pod still holds it.
            assert!(c.pod("d/w1-r1").unwrap().unschedulable());
            assert_eq!(bound(&c, "kube-system/dns"), None);
            assert_eq!(c.next_due(), Some(t(30)));
            c.housekeeping(t(30));
            assert_eq!(bound(&c, "kube-system/dns").as_deref(), Some("a"));
            assert!(c.pod("d/w1-r1").unwrap().unschedulable());
        }

        #[test]
        fn unschedulable_since_now_is_the_creation_instant() {
            let mut c = world(NODES);
            let s = parse_scenario("pods: [{name: d/p, unschedulable-since: now}]").unwrap_or_else(|e| panic!("{e}"));
            c.add_pod_at(&s.pods[0], t(7));
            assert_eq!(c.pod("d/p").and_then(|p| p.scheduling.as_ref()?.unschedulable_since), Some(t(7)));
        }

        #[test]
        fn node_lifecycle_runs_send_no_scheduling_data() {
            let mut plain = cluster();
            assert!(!plain.tracks_scheduling());
            assert!(plain.pod("default/p").unwrap().scheduling.is_none());
            assert!(plain.housekeeping(t(1)).is_empty());
            assert_eq!(plain.next_due(), None);
            // The rescheduler on: pods and nodes carry it to the controller.
            let s = parse_scenario(
                "config: {enable-rescheduler: true}\nnodes: [{name: a, ready: 'True'}]\npods: [{name: d/p, node: a}]",
            )
            .unwrap();
            let (c, _) = Cluster::from_scenario(&s);
            let state = c.state();
            assert!(
                state
                    .iter()
                    .any(|o| matches!(o, Observation::NodeUpserted(n) if n.allocatable == Some(DEFAULT_ALLOCATABLE)))
            );
            assert!(state.iter().any(|o| matches!(o, Observation::PodUpserted(p) if p.scheduling.is_some())));
            // The scheduler alone: kept for it, not sent.
            let s = parse_scenario(
                "cluster: {scheduler: true}\nnodes: [{name: a, ready: 'True'}]\npods: [{name: d/p, node: a}]",
            )
            .unwrap();
            let (c, _) = Cluster::from_scenario(&s);
            assert!(c.pod("d/p").unwrap().scheduling.is_some());
            assert!(c.state().iter().all(|o| match o {
                Observation::PodUpserted(p) => p.scheduling.is_none(),
                Observation::NodeUpserted(n) => n.allocatable.is_none(),
                _ => true,
            }));
        }
    }
}
