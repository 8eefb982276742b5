//! Components of node, pod and zone entities.
//!
//! Hot components (read by the health pass for every node, every period)
//! are small and `Copy`; whole objects (condition lists, labels, taints) sit
//! in separate components that only the cold paths touch.

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::prelude::*;
use nodewarden_model::{
    ConditionStatus, ControllerConfig, NodeCondition, Span, Taint, Timestamp, Toleration, ZoneKey, ZoneState, keys,
};

use crate::action::ActionKind;
use crate::explain::{NodeFacts, TaintingFacts, Verdict};
use crate::queue::RateLimitedTimedQueue;

/// A node's name (also its Lease's name).
#[derive(Component, Debug, Clone)]
pub struct NodeName(pub String);

/// Node metadata and spec fields the cold paths read.
#[derive(Component, Debug, Clone)]
pub struct NodeMeta {
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// The labels label reconciliation compares; no other label is read
    /// after ingest (the zone and the disruption exclusion are taken from
    /// the snapshot there), so no other is kept.
    pub labels: ReconciledLabels,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
}

/// The values of the label pairs `reconcileNodeLabels` keeps equal
/// ([`keys::RECONCILED_LABELS`]): for each pair, the stable label's value
/// then the deprecated (beta) one's. Keeping these four instead of the
/// whole label map saves most of a node's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconciledLabels(pub [[Option<Box<str>>; 2]; keys::RECONCILED_LABELS.len()]);

impl ReconciledLabels {
    /// The reconciled labels of a node's label map.
    pub fn of(labels: &BTreeMap<String, String>) -> ReconciledLabels {
        ReconciledLabels(
            keys::RECONCILED_LABELS
                .map(|(stable, beta)| [stable, beta].map(|k| labels.get(k).map(|v| v.as_str().into()))),
        )
    }
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

/// Controller-side timestamps, in the controller's own clock (B1): what
/// the controller remembers about a node's heartbeats as of a monitor
/// pass (the monitor's `Health` component keeps it).
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

/// How long a node may go unheard before the monitor writes it Unknown:
/// `node-monitor-grace-period` when its status has a Ready condition,
/// `node-startup-grace-period` when it has none (a kubelet that never
/// posted status, B5, or a Ready condition that was removed, B10).
///
/// The one place this choice is made: the pass that finds a node overdue,
/// the quiet nodes' buckets, the Unknown write's log line and a deletion's
/// recorded facts all ask it, so they cannot disagree. `has_ready`: the
/// node has a Ready condition as the pass sees it, before the pass's own
/// Unknown write gives it one. The send-time check asks nothing of it: a
/// node found overdue stays overdue until a heartbeat is heard, since time
/// only moves forward (`send_check`), whereas asking again of the view the
/// write left (a Ready condition now) would pick the other grace.
pub fn grace_for(cfg: &ControllerConfig, has_ready: bool) -> Span {
    if has_ready { cfg.node_monitor_grace_period } else { cfg.node_startup_grace_period }
}

/// What the controller knows of a node's heartbeats, in the form a deletion's
/// [`Explanation`](crate::explain::Explanation) records it: `health` is the
/// node's record as of the last monitor pass (`Health::record`). Lives
/// with the components it reads, so the boundary type knows nothing of the
/// ECS.
pub fn node_facts(
    health: Option<HealthRecord>,
    ready: &ReadyView,
    lease: &LeaseView,
    cfg: &ControllerConfig,
) -> NodeFacts {
    NodeFacts {
        ready: ready.status,
        ready_since: health.map(|h| h.ready_transition),
        last_heartbeat_seen: health.map(|h| h.probe),
        status_heartbeat: ready.status.map(|_| ready.heartbeat),
        lease_renewed: lease.renew.filter(|_| lease.present),
        grace: grace_for(cfg, ready.status.is_some()),
    }
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
    /// Whether node lifecycle's bookkeeping has this NoExecute taint of
    /// its own on the node (not-ready or unreachable; false for others).
    pub fn carries(&self, taint: &Taint) -> bool {
        match taint.key.as_str() {
            nodewarden_model::keys::TAINT_NOT_READY => self.not_ready_taint,
            nodewarden_model::keys::TAINT_UNREACHABLE => self.unreachable_taint,
            _ => false,
        }
    }

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

/// What the engine has observed of a node, apart from its own writes:
/// the newest version taken in and the NoExecute taints it carried.
///
/// [`NodeTaints`] also holds the engine's own taint writes from the moment
/// they are issued (node lifecycle's bookkeeping, as upstream keeps the
/// object an update returned); the taint manager reads these instead, so
/// a toleration's countdown starts when the taint is observed on the
/// node, as upstream's taint manager starts it when its informer delivers
/// the update, and never while the write is still on its way.
#[derive(Component, Debug, Clone, Default)]
pub struct ObservedNode {
    /// `metadata.resourceVersion` of the newest snapshot taken in (0:
    /// unknown).
    pub version: u64,
    /// The NoExecute taints of that snapshot.
    pub noexecute: Vec<Taint>,
    /// A write of ours to the node finished since that snapshot: the next
    /// one is taken in at `version` too (it comes with the answer, and the
    /// watch may have shown that version while the write was on the
    /// books), but never an older one.
    pub retake: bool,
}

/// A pod, as last observed (or written).
///
/// There can be a million of these, so the row is kept small and the
/// strings shared: the key is kept here only (the pod index finds pods by
/// it without a copy), the node name is the same allocation as the index's
/// by-node key, and the tolerations one interned list shared by every pod
/// that carries the same ([`crate::resources::TolerationSets`]).
#[derive(Component, Debug, Clone)]
pub struct Pod {
    /// `namespace/name`.
    pub key: Box<str>,
    /// `metadata.uid`.
    pub uid: Box<str>,
    /// `metadata.resourceVersion` of the newest snapshot taken in (0:
    /// unknown); an older one is passed over.
    pub version: u64,
    /// `spec.nodeName`.
    pub node: Option<Arc<str>>,
    /// Owned by a DaemonSet.
    pub daemonset: bool,
    /// Its Ready condition, if it has one.
    pub ready: Option<bool>,
    /// Has a deletion timestamp.
    pub terminating: bool,
    /// Its tolerations, in order.
    pub tolerations: Arc<[Toleration]>,
    /// What the controller has done to it. A field rather than a component
    /// of its own: it fits in the row's padding, and each component costs
    /// every pod a column and bevy's change ticks.
    pub progress: PodProgress,
}

impl Pod {
    /// Takes back this pod's `DisruptionTarget` condition when nothing
    /// stands behind it any more: it landed, and the pod's deletion was
    /// called off (none under way, none `scheduled`) while the pod runs on.
    /// Returns the write that sets it False, with the pod's books updated;
    /// `None` when the condition is not ours to take back or a deletion
    /// still stands. Asked wherever a deletion can be called off: the
    /// taint manager's cancellation, a deadline that fires without a
    /// basis, a deletion withdrawn unsent, and the condition landing after
    /// its deletion was called off.
    pub fn take_back_disruption_target(&mut self, scheduled: bool) -> Option<ActionKind> {
        let progress = &self.progress;
        if !progress.disruption_target_landed || progress.deletion_requested || scheduled || self.terminating {
            return None;
        }
        self.progress.disruption_target = false;
        self.progress.disruption_target_landed = false;
        tracing::info!(pod = %self.key, "deletion called off after its DisruptionTarget condition landed; setting it False");
        Some(ActionKind::ClearPodDisruptionTarget { pod: self.key.to_string(), uid: self.uid.to_string() })
    }
}

/// What the controller has done to a pod.
#[derive(Debug, Clone, Default)]
pub struct PodProgress {
    /// A deletion was issued and has not been refused.
    pub deletion_requested: bool,
    /// `status.reason = NodeLost` was written (legacy mode), or observed on
    /// the pod (written by an earlier life of the controller).
    pub node_lost: bool,
    /// The `DisruptionTarget` condition was issued (taint-based mode).
    pub disruption_target: bool,
    /// ... and the API server accepted it: the pod carries it until it is
    /// gone or the condition is taken back
    /// ([`ActionKind::ClearPodDisruptionTarget`](crate::action::ActionKind::ClearPodDisruptionTarget)).
    pub disruption_target_landed: bool,
    /// Its not-ready mark is decided and not yet built: the pod waits in
    /// the outbox's wanted marks (see [`Outbox::want_mark`]), and the mark
    /// is built, from the pod as it then is, when a sender has room.
    ///
    /// [`Outbox::want_mark`]: crate::resources::Outbox::want_mark
    pub mark_wanted: bool,
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

/// The pod's scheduled deletion, if any, and the basis of its taint-based
/// deletion (kept after the deadline fires, for the retry of a refused
/// deletion). Always present on pods, so scheduling and cancelling never
/// move the entity between archetypes. Boxed, and one component rather
/// than two: every pod has it but few have anything in it, and the table
/// row (with bevy's change ticks for each component) is paid by every pod.
#[derive(Component, Debug, Clone, Default)]
pub struct PendingDeletion(Option<Box<Scheduled>>);

/// What [`PendingDeletion`] holds when it holds anything.
#[derive(Debug, Clone, Default)]
struct Scheduled {
    deadline: Option<Deadline>,
    basis: Option<Basis>,
}

impl PendingDeletion {
    /// Neither a deletion scheduled nor a basis kept.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The scheduled deletion, if any.
    pub fn get(&self) -> Option<Deadline> {
        self.0.as_ref().and_then(|s| s.deadline)
    }

    /// Schedules (or, with `None`, calls off) the deletion; returns the one
    /// it replaces. The basis is left as it is.
    pub fn set(&mut self, deadline: Option<Deadline>) -> Option<Deadline> {
        if deadline.is_none() && self.0.is_none() {
            // Nothing to call off (most pods, most of the time): no box.
            return None;
        }
        let old = self.get();
        self.scheduled().deadline = deadline;
        self.shrink();
        old
    }

    /// The basis of the pending (or last fired) taint-based deletion.
    pub fn basis(&self) -> Option<&Basis> {
        self.0.as_ref().and_then(|s| s.basis.as_ref())
    }

    /// Records (or, with `None`, forgets) the basis.
    pub fn set_basis(&mut self, basis: Option<Basis>) {
        if basis.is_none() && self.0.is_none() {
            return;
        }
        self.scheduled().basis = basis;
        self.shrink();
    }

    fn scheduled(&mut self) -> &mut Scheduled {
        self.0.get_or_insert_default()
    }

    /// Frees the box once there is nothing in it.
    fn shrink(&mut self) {
        if self.0.as_ref().is_some_and(|s| s.deadline.is_none() && s.basis.is_none()) {
            self.0 = None;
        }
    }
}

/// How the controller's own NoExecute taint got onto the node: kept for
/// explanations (it is ignored once the taint it describes is gone).
#[derive(Component, Debug, Clone, Default)]
pub struct TaintRecord(pub Option<TaintingFacts>);

/// The facts a scheduled taint-based deletion was decided on.
#[derive(Debug, Clone, PartialEq)]
pub struct Basis {
    /// The node's NoExecute taints at the time.
    pub taints: Vec<Taint>,
    /// The rule that applied.
    pub verdict: Verdict,
    /// When the deletion was scheduled.
    pub scheduled_at: Timestamp,
}

impl Basis {
    /// What a shadow is told of pod `pod`'s deletion on this basis
    /// ([`crate::judgement::Judged::PodDeletion`]): fired, or cut short by
    /// the pod's own deletion.
    pub fn judged(&self, pod: &str) -> crate::judgement::Judged {
        crate::judgement::Judged::PodDeletion {
            pod: pod.to_string(),
            verdict: self.verdict.clone(),
            scheduled_at: self.scheduled_at,
        }
    }
}

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
