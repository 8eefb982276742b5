//! Components of node, pod and zone entities.
//!
//! Hot components (read by the health pass for every node, every period)
//! are small and `Copy`; whole objects (condition lists, labels, taints) sit
//! in separate components that only the cold paths touch.

use std::collections::BTreeMap;

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, NodeCondition, Taint, Timestamp, Toleration, ZoneKey};

use crate::engine::ZoneState;
use crate::queue::RateLimitedTimedQueue;

/// A node's name (also its Lease's name).
#[derive(Component, Debug, Clone)]
pub struct NodeName(pub String);

/// Node metadata and spec fields the cold paths read.
#[derive(Component, Debug, Clone)]
pub struct NodeMeta {
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
}

/// The Ready condition, reduced to what the health pass compares.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyView {
    /// `None` when the node has no Ready condition.
    pub status: Option<ConditionStatus>,
    /// Its `lastHeartbeatTime`.
    pub heartbeat: Timestamp,
    /// Its `lastTransitionTime`.
    pub transition: Timestamp,
}

impl ReadyView {
    /// The view of a condition list.
    pub fn of(conditions: &[NodeCondition]) -> ReadyView {
        conditions.iter().find(|c| c.kind == nodewarden_model::ConditionType::Ready).map_or(
            ReadyView { status: None, heartbeat: Timestamp::MIN, transition: Timestamp::MIN },
            |c| ReadyView { status: Some(c.status), heartbeat: c.last_heartbeat, transition: c.last_transition },
        )
    }
}

/// The node's full condition list, as last observed (or written).
#[derive(Component, Debug, Clone, Default)]
pub struct NodeConditions(pub Vec<NodeCondition>);

/// The node's Lease as last observed.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseView {
    /// The Lease exists.
    pub present: bool,
    /// Its `spec.renewTime`, if set.
    pub renew: Option<Timestamp>,
}

/// What the controller remembers about a node's heartbeats
/// (upstream `nodeHealthData`). `None` until the first monitor pass sees
/// the node.
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct Health(pub Option<HealthRecord>);

/// Controller-side timestamps, in the controller's own clock (B1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthRecord {
    /// When a heartbeat (status or Lease) was last observed.
    pub probe: Timestamp,
    /// When the Ready condition was last observed to change.
    pub ready_transition: Timestamp,
    /// The saved Ready condition's heartbeat and transition times; `None`
    /// when the saved status had no Ready condition.
    pub saved_ready: Option<(Timestamp, Timestamp)>,
    /// The saved Lease's renew time; `None` when no Lease was saved.
    pub saved_lease: Option<Option<Timestamp>>,
}

/// The node's taints as last observed (or written).
#[derive(Component, Debug, Clone, Default)]
pub struct NodeTaints(pub Vec<Taint>);

/// Legacy-mode eviction status of a node (`nodeEvictionMap`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EvictionStatus {
    /// Nothing planned.
    #[default]
    Unmarked,
    /// Queued in the zone's pod evictor.
    ToBeEvicted,
    /// Its pods were deleted; newly found pods go at once while it stays down.
    Evicted,
}

/// Small per-node flags that let the health pass skip healthy nodes without
/// touching their taint lists or their zone's queue.
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct NodeFlags {
    /// Carries `not-ready:NoExecute`.
    pub not_ready_taint: bool,
    /// Carries `unreachable:NoExecute`.
    pub unreachable_taint: bool,
    /// In its zone's queue set (queued or processed-but-not-removed).
    pub queued: bool,
    /// Legacy-mode eviction status.
    pub eviction: EvictionStatus,
}

impl NodeFlags {
    /// Recomputes the taint bits from a taint list.
    pub fn refresh_taints(&mut self, taints: &[Taint]) {
        use nodewarden_model::{TaintEffect::NoExecute, keys};
        self.not_ready_taint = taints.iter().any(|t| t.is(keys::TAINT_NOT_READY, NoExecute));
        self.unreachable_taint = taints.iter().any(|t| t.is(keys::TAINT_UNREACHABLE, NoExecute));
    }

    /// True when a Ready node needs no work from the health pass.
    pub fn is_clean(&self) -> bool {
        !self.not_ready_taint && !self.unreachable_taint && !self.queued && self.eviction == EvictionStatus::Unmarked
    }
}

/// The zone a node belongs to.
#[derive(Component, Debug, Clone, Copy)]
pub struct InZone {
    /// The zone entity.
    pub zone: Entity,
    /// Its dense index, for per-pass tallies.
    pub slot: u32,
}

/// Marks a node labelled `node.kubernetes.io/exclude-disruption`: monitored
/// and tainted, but not counted in its zone.
#[derive(Component, Debug, Clone, Copy)]
pub struct ExcludedFromDisruption;

/// The NoExecute taints the taint manager last acted on for a node.
#[derive(Component, Debug, Clone, Default)]
pub struct SeenNoExecute(pub Vec<Taint>);

/// A pod, as last observed (or written).
#[derive(Component, Debug, Clone)]
pub struct Pod {
    /// `namespace/name`.
    pub key: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// Owned by a DaemonSet.
    pub daemonset: bool,
    /// Its Ready condition, if it has one.
    pub ready: Option<bool>,
    /// Has a deletion timestamp.
    pub terminating: bool,
    /// Its tolerations, in order.
    pub tolerations: Vec<Toleration>,
}

/// What the controller has done to a pod.
#[derive(Component, Debug, Clone, Default)]
pub struct PodProgress {
    /// A deletion was issued and has not been refused.
    pub deletion_requested: bool,
    /// `status.reason = NodeLost` was written (legacy mode).
    pub node_lost: bool,
    /// The `DisruptionTarget` condition was written (taint-based mode).
    pub disruption_target: bool,
    /// Refused deletions so far (for backoff).
    pub failed_deletions: u32,
}

/// A pod deletion the taint manager scheduled (`TimedWorkerQueue` entry),
/// or a refused deletion waiting for its retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When it was scheduled (`CreatedAt`).
    pub created: Timestamp,
    /// When it fires.
    pub fire_at: Timestamp,
    /// Matches the live timer-heap entry for it.
    pub seq: u64,
}

/// The pod's scheduled deletion, if any. Always present on pods, so
/// scheduling and cancelling never move the entity between archetypes.
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct PendingDeletion(pub Option<Deadline>);

/// How the controller's own NoExecute taint got onto the node: kept for
/// explanations (it is ignored once the taint it describes is gone).
#[derive(Component, Debug, Clone, Default)]
pub struct TaintRecord(pub Option<crate::explain::TaintingFacts>);

/// The facts a scheduled taint-based deletion was decided on.
#[derive(Debug, Clone, PartialEq)]
pub struct Basis {
    /// The node's NoExecute taints at the time.
    pub taints: Vec<Taint>,
    /// The rule that applied.
    pub verdict: crate::explain::Verdict,
    /// When the deletion was scheduled.
    pub scheduled_at: Timestamp,
}

/// The basis of the pod's pending taint-based deletion, if any.
#[derive(Component, Debug, Clone, Default)]
pub struct DeletionBasis(pub Option<Basis>);

/// A zone: its key, disruption state and rate-limited queue.
#[derive(Component, Debug)]
pub struct Zone {
    /// The zone's key.
    pub key: ZoneKey,
    /// Dense index for tallies.
    pub slot: u32,
    /// State after the last monitor pass; `None` when it has none.
    pub state: Option<ZoneState>,
    /// Counted nodes at the last pass.
    pub size: usize,
    /// Counted not-ready nodes at the last pass.
    pub not_ready: usize,
    /// The NoExecute tainting queue (or the pod-eviction queue in legacy mode).
    pub queue: RateLimitedTimedQueue<Entity>,
}
