//! What the engine concluded about the cluster, whether or not a write
//! followed: the shadow's side of a comparison with kube-controller-manager.
//!
//! Actions are not enough for that comparison. A `--dry-run` replica beside
//! kube-controller-manager sees the cluster as kube-controller-manager
//! leaves it: once kube-controller-manager has written a node Unknown, the
//! engine observes the node Unknown and has nothing left to write, and a pod
//! kube-controller-manager deleted first is never deleted by the engine. A
//! [`Judgement`] records the conclusion itself (this node is silent past its
//! grace, this node's queue released it for its taint, this pod's toleration
//! ran out at this instant), with the facts it rests on, at the instant the
//! engine reached it, whatever the cluster already showed.
//!
//! Judgements are kept only when a driver asks for them
//! ([`Engine::keep_judgements`](crate::Engine::keep_judgements)); otherwise
//! the systems record nothing.

use nodewarden_model::{Span, Taint, Timestamp};

use crate::explain::{TaintingFacts, Verdict};

/// One conclusion of the engine about one node (or a pod on it).
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// When the engine made the change, or would have: the monitor or
    /// tainting pass that reached it; for a pod deletion, its deadline
    /// (which may lie ahead when the pod went away before it).
    pub at: Timestamp,
    /// The node concerned; for a pod deletion, the pod's node.
    pub node: String,
    /// What was concluded, with the facts behind it.
    pub what: Judged,
}

/// The conclusions a shadow compares, one per upstream decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Judged {
    /// No heartbeat within the grace period: Ready and the node's other
    /// conditions become Unknown (`tryUpdateNodeHealth`). Reached once per
    /// silence (per probe time), whether this engine writes the Unknown or
    /// finds it already written.
    Silent {
        /// The probe time: when the engine last saw a new heartbeat, or
        /// first saw the node.
        probe: Timestamp,
        /// The grace period that applied.
        grace: Span,
        /// The probe time is the engine's first sight of the node, not a
        /// heartbeat: what it knows of the silence began before it looked.
        first_sight: bool,
    },
    /// The node's pods are marked not Ready (`MarkPodsNotReady`), which
    /// upstream does when it turns a node's Ready condition from True.
    /// Reached with [`Judged::Silent`]: for a node this engine turns from
    /// True, when pods are bound to it; for one another writer left
    /// Unknown, always (that writer marked the pods it saw, some of which
    /// it may have deleted since).
    PodsNotReady {
        /// Pods bound to the node at that instant.
        pods: usize,
    },
    /// A node lifecycle taint the node's Ready condition calls for
    /// (`not-ready` or `unreachable`; NoSchedule from the node handlers,
    /// NoExecute when its zone's queue released it or at an immediate
    /// swap), whether the engine adds it or finds it there.
    Taint {
        /// The taint (key and effect).
        taint: Taint,
        /// For a NoExecute taint: the zone, its state and rate, and when the
        /// node was queued (`None` for an immediate swap's queue time).
        released: Option<TaintingFacts>,
    },
    /// The taint manager's deletion of a pod, due at [`Judgement::at`]:
    /// fired, or cut short by the pod's own deletion (observed terminating
    /// or gone before its deadline).
    PodDeletion {
        /// `namespace/name`.
        pod: String,
        /// The rule that made it due (the untolerated taint, or the
        /// toleration that ran out).
        verdict: Verdict,
        /// When the deadline was set: when the taint was seen.
        scheduled_at: Timestamp,
    },
    /// Legacy mode: the node's pods deleted after `pod-eviction-timeout`,
    /// when its zone's eviction queue released it.
    LegacyEviction {
        /// Pods bound to the node at that instant (DaemonSet pods
        /// included: upstream deletes none of them, but their count tells
        /// nothing it needs).
        pods: usize,
        /// The timeout that ran out and since when.
        verdict: Verdict,
    },
}

/// The engine's record of its judgements: off unless a driver asks.
#[derive(bevy_ecs::prelude::Resource, Debug, Default)]
pub(crate) struct Judgements {
    /// Keep them (a shadow asked).
    pub on: bool,
    /// Reached since the driver last took them, in order.
    pub list: Vec<Judgement>,
}

impl Judgements {
    /// Records `what` about `node` at `at`, if judgements are kept.
    /// `what` is built only then.
    pub fn note(&mut self, at: Timestamp, node: &str, what: impl FnOnce() -> Judged) {
        if self.on {
            self.list.push(Judgement { at, node: node.to_string(), what: what() });
        }
    }
}
