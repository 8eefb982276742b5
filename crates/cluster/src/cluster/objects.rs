//! The values the simulated API server stores besides nodes: pods, the
//! Events the controller recorded and PodDisruptionBudgets. The condition
//! names and refusal texts they go with are the rules' ([`crate::rules`]).
//!
//! Invariant: these are plain values; nothing here reaches into the
//! [`Cluster`](super::Cluster)'s maps, so the storage and the rules can both
//! use them.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewarden_engine::{BudgetSnapshot, Event, PodSnapshot};
use nodewarden_model::{ConditionStatus, PodScheduling, Resources, Timestamp, Toleration};

use crate::rules::pod::{POD_READY, POD_REASON_NODE_LOST};
use crate::rules::pod_conditions::PodConditions;
use crate::scenario::BudgetSpec;

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
    /// `spec.tolerations`, admission defaults included. Shared: a fleet
    /// has a handful of distinct sets, held once each by the cluster
    /// ([`Cluster`](super::Cluster) interns them) rather than once a pod.
    pub tolerations: Arc<[Toleration]>,
    /// Pod conditions by type (`Ready`, `DisruptionTarget`, ...).
    pub conditions: PodConditions,
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
            tolerations: self.tolerations.to_vec(),
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

/// A PodDisruptionBudget as the simulated API server and disruption
/// controller keep it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimBudget {
    /// Its spec as the file gave it.
    pub spec: BudgetSpec,
    /// `status.disruptionsAllowed` as last published.
    pub allowed: u32,
}

pub(super) static EMPTY_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// A budget as the controller sees it.
pub(super) fn budget_snapshot(key: &str, b: &SimBudget) -> BudgetSnapshot {
    BudgetSnapshot { key: key.to_string(), selector: b.spec.selector.clone(), disruptions_allowed: b.allowed }
}
