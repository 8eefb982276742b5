//! The order writes go out in, as data: which class a write is, the queue
//! that decides which write starts next ([`Dispatch`]), and the client's
//! token buckets that decide which class gets the next request
//! ([`Bucket`]). No I/O and no clock: the kube adapter's writer drives
//! them on the wall clock, the simulated API server with a client rate on
//! the virtual one, so a scenario file is sent in the same order in replay
//! and over the wire.

mod bucket;
mod dispatch;

pub use bucket::{Bucket, NODE_STREAK, Turn};
pub use dispatch::{COMBINED, DEFAULT_CAP, Dispatch, MAX_QUEUED_EVENTS, Pushed, Start, Write, pod_status_uid};

use nodewarden_engine::ActionKind;

/// Pods' not-ready marks a sender holds unsent at most, beyond which the
/// engine keeps them as decisions ([`crate::ClusterApi::room`]). Marks go
/// after node writes and deletions, at the rate's remainder; this many is
/// a few seconds' worth at the default 20 QPS, so the line never runs dry
/// between two wakes of the loop, and a mark that stops being true waits
/// as a decision, never built, rather than as a write.
pub const MARKS_HELD: usize = 64;

/// kube-controller-manager's `--kube-api-qps`: requests a second a client
/// sends at most, sustained.
pub const DEFAULT_QPS: f64 = 20.0;

/// kube-controller-manager's `--kube-api-burst`: requests a quiet client
/// may send at once.
pub const DEFAULT_BURST: u32 = 30;

/// How urgent a request is, most urgent first; also the `class` label of
/// the write path's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteClass {
    /// Node status, taints and labels.
    Node = 0,
    /// Pod deletions, and the status writes that go with one (the
    /// `DisruptionTarget` condition, legacy mode's `NodeLost` reason):
    /// they are sent just before it, to the same pod.
    Deletion = 1,
    /// Pods marked not ready (and a `DisruptionTarget` taken back).
    PodStatus = 2,
    /// Events.
    Event = 3,
}

impl WriteClass {
    /// Every class, most urgent first.
    pub const ALL: [WriteClass; 4] = [WriteClass::Node, WriteClass::Deletion, WriteClass::PodStatus, WriteClass::Event];

    /// The class of the requests an action makes.
    pub fn of(kind: &ActionKind) -> WriteClass {
        match kind {
            ActionKind::UpdateNodeConditions { .. }
            | ActionKind::PatchNodeTaints { .. }
            | ActionKind::PatchNodeLabels { .. } => WriteClass::Node,
            ActionKind::DeletePod { .. }
            | ActionKind::EvictForAddon { .. }
            | ActionKind::AddPodDisruptionTarget { .. }
            | ActionKind::SetPodNodeLost { .. } => WriteClass::Deletion,
            // Taking a condition back is housekeeping: it waits behind the
            // deletions, with the marks.
            ActionKind::MarkPodNotReady { .. } | ActionKind::ClearPodDisruptionTarget { .. } => WriteClass::PodStatus,
            ActionKind::RecordEvent(_) => WriteClass::Event,
        }
    }

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteClass::Node => "node",
            WriteClass::Deletion => "deletion",
            WriteClass::PodStatus => "pod_status",
            WriteClass::Event => "event",
        }
    }
}

/// Whose client the deletions are sent through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EvictionClient {
    /// The taint-eviction controller's own, as kube-controller-manager
    /// builds it: a bucket of its own at the same rate and burst.
    #[default]
    Own,
    /// Node lifecycle's (legacy mode, where node lifecycle deletes).
    Shared,
}

impl EvictionClient {
    /// The client upstream deletes through in this mode: the
    /// taint-eviction controller's own, or, in legacy mode, node
    /// lifecycle's.
    pub fn for_mode(enable_taint_manager: bool) -> EvictionClient {
        if enable_taint_manager { EvictionClient::Own } else { EvictionClient::Shared }
    }

    /// Whether a request of `class` spends the taint-eviction client's
    /// bucket (else node lifecycle's): deletions, when that client is
    /// their own.
    pub fn spends_own(self, class: WriteClass) -> bool {
        self == EvictionClient::Own && class == WriteClass::Deletion
    }
}
