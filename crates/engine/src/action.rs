//! What the engine asks for: `Action`s out, one API write (or Event) each.
//!
//! Every action is idempotent (applying it twice leaves the object as
//! applying it once) and names the object it expects (pods by uid), so an
//! adapter may retry freely. The engine issues at most one write per object
//! and [`WriteSlot`] at a time and waits for
//! [`Observation::WriteFinished`](crate::Observation::WriteFinished) before
//! issuing another for that slot.

use std::collections::BTreeMap;
use std::fmt;

use nodewarden_model::{NodeCondition, PodKey, Taint};

/// Identifies an action, so its outcome can be reported back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActionId(pub u64);

/// The object an Event is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectRef {
    /// A node, by name.
    Node(String),
    /// A pod, by `namespace/name`.
    Pod(PodKey),
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectRef::Node(n) => f.write_str(n),
            ObjectRef::Pod(p) => f.write_str(p),
        }
    }
}

/// Normal or Warning, as Kubernetes Events are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something an operator may want to look at.
    Warning,
}

/// A Kubernetes Event the controller records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What it is about.
    pub object: ObjectRef,
    /// Normal or Warning.
    pub kind: EventType,
    /// Upstream's reason string (`NodeNotReady`, `RegisteredNode`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

/// The part of an object a write touches. Writes to different slots of one
/// object touch disjoint fields, so they may be in flight together. Public
/// because whoever applies the writes (an adapter, the simulator, the
/// invariant checker) needs the same notion of "the same write in flight".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteSlot {
    /// A node's status conditions.
    NodeStatus,
    /// A node's controller-owned NoSchedule taints.
    NoScheduleTaints,
    /// A node's `not-ready`/`unreachable` NoExecute taints.
    NoExecuteTaints,
    /// A node's reconciled labels.
    NodeLabels,
    /// A pod's status.
    PodStatus,
    /// A pod's deletion.
    PodDeletion,
    /// A node's `CriticalAddonsOnly` taint, added and removed by the
    /// critical-addon rescheduler.
    CriticalAddonsTaint,
}

/// One write to the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionKind {
    /// Set these node conditions (matched by type; other conditions stay).
    UpdateNodeConditions {
        /// The node.
        node: String,
        /// The conditions after the update.
        conditions: Vec<NodeCondition>,
        /// Precondition: the node's `resourceVersion` the decision was made
        /// on (0: unknown; a sender then reads the node, lets the engine
        /// see it before the write is judged, and guards the write with the
        /// version read: a status write never goes unguarded). A node that changed since (a kubelet's
        /// status post on its way when the controller decided) refuses the
        /// write, and the controller decides again from what it then sees,
        /// as upstream's `UpdateStatus` conflicts; a stale Unknown never
        /// overwrites a fresh heartbeat.
        version: u64,
    },
    /// Add and remove taints in one patch. Taints in `remove` are matched by
    /// key and effect; a taint in `add` replaces one with the same key and
    /// effect. A not-ready/unreachable swap is one such patch.
    PatchNodeTaints {
        /// The node.
        node: String,
        /// Taints to add (or replace).
        add: Vec<Taint>,
        /// Taints to remove.
        remove: Vec<Taint>,
        /// Which controller loop owns these taints.
        slot: WriteSlot,
    },
    /// Set these labels to these values.
    PatchNodeLabels {
        /// The node.
        node: String,
        /// Labels to set.
        labels: BTreeMap<String, String>,
    },
    /// Set the pod's Ready condition to False (`MarkPodsNotReady`).
    MarkPodNotReady {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
    },
    /// Set `status.reason = NodeLost` before a legacy deletion.
    SetPodNodeLost {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
        /// The node it was lost with.
        node: String,
    },
    /// Add the `DisruptionTarget` condition (reason `DeletionByTaintManager`)
    /// before a taint-based deletion, as current upstream does.
    AddPodDisruptionTarget {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
    },
    /// Set the `DisruptionTarget` condition False on a pod whose deletion
    /// was called off after [`ActionKind::AddPodDisruptionTarget`] landed
    /// (its node came back while the deletion waited): the pod keeps
    /// running, and the condition must not say it is about to go.
    /// Upstream's disruption controller does the same to such a condition
    /// two minutes on; this does it as soon as the deletion is called off.
    ClearPodDisruptionTarget {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
    },
    /// Delete the pod.
    DeletePod {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
        /// Plain delete, or the Eviction API (which honours disruption budgets).
        mode: nodewarden_model::DeletionMode,
        /// Why: the recorded facts and the rule that made it due.
        why: Box<crate::explain::Explanation>,
    },
    /// Evict the pod through the Eviction API to make room for a critical
    /// addon (the rescheduler). Kept apart from [`ActionKind::DeletePod`]:
    /// the pod's node is healthy, so node-lifecycle's rules do not explain
    /// it, the rescheduler's do.
    EvictForAddon {
        /// The pod.
        pod: PodKey,
        /// Precondition: the pod's uid.
        uid: String,
        /// `deleteOptions.gracePeriodSeconds` to send; `None` keeps the
        /// pod's own (it is already no longer than the rescheduler's).
        grace: Option<nodewarden_model::Span>,
        /// Why: the addon, the node and tier, the pods chosen and why.
        why: Box<crate::explain::AddonEviction>,
    },
    /// Record an Event (not a write to the object it names).
    RecordEvent(Event),
}

impl ActionKind {
    /// Whether `other` asks for the same change as this: equal, except that
    /// taints compare without their `timeAdded` (the same taint added again
    /// a moment later is the same write; the API keeps the first).
    pub fn same_change(&self, other: &ActionKind) -> bool {
        match (self, other) {
            (
                ActionKind::PatchNodeTaints { node, add, remove, slot },
                ActionKind::PatchNodeTaints { node: n2, add: a2, remove: r2, slot: s2 },
            ) => {
                let same = |x: &[Taint], y: &[Taint]| {
                    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.same_as(b) && a.value == b.value)
                };
                node == n2 && slot == s2 && same(add, a2) && same(remove, r2)
            }
            _ => self == other,
        }
    }

    /// The write's short name, as logs and metric labels spell it
    /// (`delete_pod`, `patch_node_taints`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::UpdateNodeConditions { .. } => "update_node_conditions",
            ActionKind::PatchNodeTaints { .. } => "patch_node_taints",
            ActionKind::PatchNodeLabels { .. } => "patch_node_labels",
            ActionKind::MarkPodNotReady { .. } => "mark_pod_not_ready",
            ActionKind::SetPodNodeLost { .. } => "set_pod_node_lost",
            ActionKind::AddPodDisruptionTarget { .. } => "add_pod_disruption_target",
            ActionKind::ClearPodDisruptionTarget { .. } => "clear_pod_disruption_target",
            ActionKind::DeletePod { .. } => "delete_pod",
            ActionKind::EvictForAddon { .. } => "evict_for_addon",
            ActionKind::RecordEvent(_) => "record_event",
        }
    }

    /// The object and slot this write occupies; `None` for Events. The
    /// engine keeps at most one write per slot in flight; drivers use this
    /// to tell writes (which get an outcome back) from Events (which don't).
    pub fn slot(&self) -> Option<(ObjectRef, WriteSlot)> {
        match self {
            ActionKind::UpdateNodeConditions { node, .. } => {
                Some((ObjectRef::Node(node.clone()), WriteSlot::NodeStatus))
            }
            ActionKind::PatchNodeTaints { node, slot, .. } => Some((ObjectRef::Node(node.clone()), *slot)),
            ActionKind::PatchNodeLabels { node, .. } => Some((ObjectRef::Node(node.clone()), WriteSlot::NodeLabels)),
            ActionKind::MarkPodNotReady { pod, .. }
            | ActionKind::SetPodNodeLost { pod, .. }
            | ActionKind::AddPodDisruptionTarget { pod, .. }
            | ActionKind::ClearPodDisruptionTarget { pod, .. } => {
                Some((ObjectRef::Pod(pod.clone()), WriteSlot::PodStatus))
            }
            ActionKind::DeletePod { pod, .. } | ActionKind::EvictForAddon { pod, .. } => {
                Some((ObjectRef::Pod(pod.clone()), WriteSlot::PodDeletion))
            }
            ActionKind::RecordEvent(_) => None,
        }
    }
}

/// The reason and message of a `DisruptionTarget` condition taken back
/// ([`ActionKind::ClearPodDisruptionTarget`]). Ours: upstream has no such
/// write (its disruption controller sets a stale one False after two
/// minutes, leaving the taint manager's reason and message beside it).
pub const DISRUPTION_TARGET_TAKEN_BACK: (&str, &str) =
    ("DeletionCancelled", "Taint manager: the deletion was called off; the pod keeps running");

/// An action with its id.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// Report the outcome under this id.
    pub id: ActionId,
    /// What to do.
    pub kind: ActionKind,
}
