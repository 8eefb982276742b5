//! What the engine is told: the `Observation`s an adapter (kube watchers, or
//! the simulator) sends in.
//!
//! Snapshots are whole objects, as a watch delivers them: the engine diffs
//! them against what it knew. The adapter turns API objects into these plain
//! values, so the engine never sees a malformed object, only a missing
//! field (`None`).

use std::collections::BTreeMap;

use nodewarden_model::{
    ConditionStatus, ConditionType, LabelSelector, NodeCondition, PodKey, PodScheduling, Resources, Taint, Timestamp,
    Toleration,
};

use crate::action::ActionId;
use crate::withdrawal::Withdrawal;

/// A node as the API server stores it, reduced to what the controller reads.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSnapshot {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion` read as a number: the order of this
    /// object's versions. A snapshot older than the one the engine holds
    /// (a late watch event, the echo of a write that an answer already
    /// overtook) is passed over, so nothing goes back in time. 0 means
    /// unknown: such a snapshot is always taken in.
    pub version: u64,
    /// `metadata.creationTimestamp`: the start of the startup grace period.
    pub created: Timestamp,
    /// `metadata.labels`: zone, exclusion, os/arch.
    pub labels: BTreeMap<String, String>,
    /// `status.conditions`, in API order.
    pub conditions: Vec<NodeCondition>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `status.allocatable` (cpu, memory, pods), for the rescheduler's fit
    /// checks; `None` when the driver does not run the rescheduler, or the
    /// node has not reported it (no addon is placed there then).
    pub allocatable: Option<Resources>,
}

/// A pod, reduced to what the controller reads.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSnapshot {
    /// `namespace/name`.
    pub key: PodKey,
    /// `metadata.uid`: every write to the pod carries it as a precondition.
    pub uid: String,
    /// `metadata.resourceVersion` read as a number; see
    /// [`NodeSnapshot::version`].
    pub version: u64,
    /// `spec.nodeName`, `None` while unscheduled.
    pub node: Option<String>,
    /// Owned (as controller) by a DaemonSet. Legacy eviction never deletes
    /// these. Decided from the owner reference alone: a DaemonSet pod whose
    /// DaemonSet is gone is still spared (safer than upstream's lister check).
    pub daemonset: bool,
    /// The pod's Ready condition: `None` when it has none.
    pub ready: Option<bool>,
    /// Has a deletion timestamp: the controller leaves it alone.
    pub terminating: bool,
    /// `status.reason` is `NodeLost`: legacy eviction's status write is
    /// already there (upstream's `SetPodTerminationReason` then writes
    /// nothing), for instance after a restart of the controller.
    pub node_lost: bool,
    /// `spec.tolerations`, in pod order (order matters for matching).
    pub tolerations: Vec<Toleration>,
    /// What the critical-addon rescheduler reads (requests, priority,
    /// owner, placement, scheduling state). `None` when the driver does not
    /// run the rescheduler: node lifecycle never reads it, and boxing keeps
    /// the snapshot small for the drivers that leave it out.
    pub scheduling: Option<Box<PodScheduling>>,
}

impl NodeSnapshot {
    /// A node `name` created at `created`, with no labels, conditions or
    /// taints: a node as registered before its kubelet's first status.
    /// Adapters and tests fill in the rest with the builders below.
    pub fn new(name: impl Into<String>, created: Timestamp) -> NodeSnapshot {
        NodeSnapshot {
            name: name.into(),
            version: 0,
            created,
            labels: BTreeMap::new(),
            conditions: Vec::new(),
            taints: Vec::new(),
            unschedulable: false,
            allocatable: None,
        }
    }

    /// The same node in `zone` (its `topology.kubernetes.io/zone` label).
    pub fn in_zone(mut self, zone: &str) -> NodeSnapshot {
        self.labels.insert(nodewarden_model::keys::LABEL_TOPOLOGY_ZONE.to_string(), zone.to_string());
        self
    }

    /// The same node with only a Ready condition of `status`, reported and
    /// last changed at `at`.
    pub fn with_ready(mut self, status: ConditionStatus, at: Timestamp) -> NodeSnapshot {
        self.conditions = vec![NodeCondition::posted(ConditionType::Ready, status, "", at, at)];
        self
    }

    /// The same node with these taints.
    pub fn with_taints(mut self, taints: Vec<Taint>) -> NodeSnapshot {
        self.taints = taints;
        self
    }
}

impl PodSnapshot {
    /// A Ready pod `key` (`namespace/name`) with uid `uid`, bound to `node`
    /// (`None`: not scheduled), tolerating nothing, owned by no DaemonSet.
    /// Adapters and tests fill in the rest with the builders below.
    pub fn new(key: impl Into<PodKey>, uid: impl Into<String>, node: Option<&str>) -> PodSnapshot {
        PodSnapshot {
            key: key.into(),
            uid: uid.into(),
            version: 0,
            node: node.map(str::to_string),
            daemonset: false,
            ready: Some(true),
            terminating: false,
            node_lost: false,
            tolerations: Vec::new(),
            scheduling: None,
        }
    }

    /// The same pod with these tolerations, in this order.
    pub fn tolerating(mut self, tolerations: Vec<Toleration>) -> PodSnapshot {
        self.tolerations = tolerations;
        self
    }

    /// The same pod owned by a DaemonSet (legacy eviction spares it).
    pub fn of_daemonset(mut self) -> PodSnapshot {
        self.daemonset = true;
        self
    }
}

/// A PodDisruptionBudget, reduced to what the rescheduler reads: which
/// pods it covers and how many of them may be disrupted now.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetSnapshot {
    /// `namespace/name`.
    pub key: String,
    /// `spec.selector`, applied to pods of the budget's namespace.
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`, as the disruption controller last
    /// computed it.
    pub disruptions_allowed: u32,
}

/// How a write the engine asked for ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The API server accepted it.
    Done,
    /// It was refused or failed for good; the adapter re-sends the object's
    /// current state right after, so the engine converges on the truth.
    Failed(String),
    /// Never sent: by the time it could go out, it was no longer true
    /// ([`Engine::still_true`](crate::engine::Engine::still_true)). Not a
    /// refusal: nothing is retried on its basis, no failure is counted;
    /// the engine decides again from what it observes next.
    Withdrawn(Withdrawal),
}

/// The kinds of object the engine keeps by key ([`Engine::known_keys`](crate::Engine::known_keys)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// Nodes, by name.
    Node,
    /// Node Leases, by node name.
    Lease,
    /// Pods, by `namespace/name`.
    Pod,
    /// PodDisruptionBudgets, by `namespace/name` (kept only while the
    /// rescheduler runs).
    Budget,
}

/// One thing the engine learns about the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// A node was added or changed.
    NodeUpserted(NodeSnapshot),
    /// A node was deleted.
    NodeDeleted {
        /// Its name.
        name: String,
    },
    /// A pod was added or changed.
    PodUpserted(PodSnapshot),
    /// A pod was deleted (gone from the API, not merely terminating).
    PodDeleted {
        /// Its `namespace/name`.
        key: PodKey,
    },
    /// The node's Lease (namespace `kube-node-lease`) was added or renewed.
    LeaseUpserted {
        /// The node (and Lease) name.
        node: String,
        /// `spec.renewTime`; `None` when unset.
        renew: Option<Timestamp>,
    },
    /// The node's Lease was deleted.
    LeaseDeleted {
        /// The node (and Lease) name.
        node: String,
    },
    /// A PodDisruptionBudget was added or changed.
    BudgetUpserted(BudgetSnapshot),
    /// A PodDisruptionBudget was deleted.
    BudgetDeleted {
        /// Its `namespace/name`.
        key: String,
    },
    /// A write the engine issued has finished.
    WriteFinished {
        /// The action it answers.
        id: ActionId,
        /// Accepted or refused.
        outcome: WriteOutcome,
    },
}

impl Observation {
    /// The kind and key of the object this observation is about (`None`
    /// for a write's outcome): what a re-list collects of what it showed.
    pub fn key(&self) -> Option<(ObjectKind, &str)> {
        match self {
            Observation::NodeUpserted(n) => Some((ObjectKind::Node, &n.name)),
            Observation::NodeDeleted { name } => Some((ObjectKind::Node, name)),
            Observation::PodUpserted(p) => Some((ObjectKind::Pod, &p.key)),
            Observation::PodDeleted { key } => Some((ObjectKind::Pod, key)),
            Observation::LeaseUpserted { node, .. } | Observation::LeaseDeleted { node } => {
                Some((ObjectKind::Lease, node))
            }
            Observation::BudgetUpserted(b) => Some((ObjectKind::Budget, &b.key)),
            Observation::BudgetDeleted { key } => Some((ObjectKind::Budget, key)),
            Observation::WriteFinished { .. } => None,
        }
    }

    /// The observation that the object of `kind` keyed `key` is gone: what a
    /// driver reports for an object a re-list no longer shows.
    pub fn deletion(kind: ObjectKind, key: String) -> Observation {
        match kind {
            ObjectKind::Node => Observation::NodeDeleted { name: key },
            ObjectKind::Lease => Observation::LeaseDeleted { node: key },
            ObjectKind::Pod => Observation::PodDeleted { key },
            ObjectKind::Budget => Observation::BudgetDeleted { key },
        }
    }
}
