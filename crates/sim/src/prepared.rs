//! A simulation source built elsewhere: a cluster, its kubelets and a
//! fault plan already in place (for example from a snapshot of a real
//! cluster, `nodewarden sim --from-snapshot`), and the per-pod log a
//! what-if report is built from.
//!
//! Kept apart from [`crate::simulation`] so the driver only gains one
//! `Source` variant: whoever builds the cluster owns its shape.

use nodewarden_cluster::admission::AdmissionDefaults;
use nodewarden_cluster::cluster::Cluster;
use nodewarden_cluster::faults::FaultPlan;
use nodewarden_cluster::kubelet::{KubeletTiming, Kubelets};
use nodewarden_model::{Span, Timestamp};

/// A cluster ready to simulate, as [`crate::Source::Prepared`] takes it.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// What the summary calls the run.
    pub name: String,
    /// One line on what happens.
    pub description: String,
    /// The admission defaults the cluster was built with (for the report).
    pub admission: AdmissionDefaults,
    /// The kubelets' periods.
    pub timing: KubeletTiming,
    /// Nodes, Leases and pods as of t=0.
    pub cluster: Cluster,
    /// Kubelets already scheduled (nodes that were down have none).
    pub kubelets: Kubelets,
    /// What happens, and when.
    pub plan: FaultPlan,
    /// Simulated time when the options give none.
    pub duration: Span,
}

/// What happened to one pod, as the simulated API server carried it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodChangeKind {
    /// The controller set its Ready condition to False (`MarkPodsNotReady`).
    NotReady,
    /// The controller deleted it.
    Deleted,
}

/// One controller write to a pod that took effect, with when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodChange {
    /// When it landed.
    pub at: Timestamp,
    /// `namespace/name`.
    pub pod: String,
    /// What it did.
    pub kind: PodChangeKind,
}
