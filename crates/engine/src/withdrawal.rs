//! Why a write was withdrawn before it was sent: the verdict of the
//! send-time judge ([`crate::engine::Engine::still_true`]) and of the
//! senders around it, as data.
//!
//! A reason travels a long way: from the engine's check (or the safety
//! interlock, or a sender that cannot ask) through the controller's loop
//! and the kube writer back into the engine as
//! [`WriteOutcome::Withdrawn`](crate::observation::WriteOutcome::Withdrawn),
//! and into logs, transcripts and scenario outputs. As a string, every hop
//! could only print it and a test could only search it for words; as an
//! enum, each hop can ask what happened (which node, which taint, which
//! rule), and the words are written once, here, by [`Display`]. Those words
//! are part of the outputs the transcripts pin, so they do not change when
//! the type around them does.

use std::fmt::{self, Display};

use nodewarden_model::Taint;

/// Why a write did not go out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Withdrawal {
    /// The engine would no longer make the change: a fact it was decided
    /// on changed while the write waited.
    NoLongerTrue(Changed),
    /// The safety interlock, asked again at send time against its mirror
    /// of the cluster as it now is, objects. The rule is named as the
    /// controller names it (its snake_case name), since its type lives
    /// above the engine.
    Interlock {
        /// The invariant the write would break.
        invariant: &'static str,
        /// The interlock's account of why, free text.
        detail: String,
    },
    /// The sender's view of the cluster is not current (a watch down, the
    /// API server silent): nothing decided from an aging view goes out,
    /// and the write was not asked about.
    NotCurrent {
        /// What is not current: a watched kind, or the API server.
        view: &'static str,
    },
    /// Nobody is left to judge the write: the engine has stopped (the
    /// process is shutting down).
    EngineStopped,
    /// Nobody is there to judge the write: the controller is not running
    /// (in a simulation, crashed or between replicas), and a write decided
    /// by a controller that is gone does not go out on its behalf.
    ControllerDown,
    /// A deletion found its pod already gone (HTTP 404): nothing was
    /// deleted, and nothing is to be retried.
    AlreadyGone,
}

/// The fact that changed under a write between its decision and its send,
/// as the engine's send-time check found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// The pod is no longer known.
    PodGone,
    /// A pod of the same name is another object now.
    PodRecreated {
        /// The uid the pod has now.
        uid: String,
    },
    /// The pod a deletion or eviction was decided for left the node the
    /// decision was about.
    PodNotOnNode {
        /// The node the decision was about.
        node: String,
    },
    /// A deletion or eviction found its pod on its way out already.
    PodAlreadyTerminating,
    /// A mark, or the taking back of a disruption condition, found its pod
    /// terminating: it has left its Services' endpoints, and a deletion of
    /// it stands.
    PodTerminating,
    /// The pod's deletion, which its disruption condition announces, was
    /// called off.
    DeletionCalledOff,
    /// The disruption condition being taken back has a deletion to announce
    /// again.
    DeletionStandsAgain,
    /// The node is no longer known.
    NodeGone {
        /// The node.
        node: String,
    },
    /// A node about to be written Unknown was heard from (a Lease renewal,
    /// a status post) after the pass that decided it.
    HeardFromSinceDecision {
        /// The node.
        node: String,
    },
    /// A node whose pods a legacy eviction was deleting was heard from
    /// since the last monitor pass: a sign of life the eviction pass
    /// defers for.
    HeardFromSinceLastPass {
        /// The node.
        node: String,
    },
    /// A taint about to be added is not the one the node's conditions call
    /// for now.
    TaintNoLongerCalledFor {
        /// The node.
        node: String,
        /// The taint the patch would add.
        taint: Taint,
    },
    /// A taint about to be removed is called for again by the node's
    /// conditions.
    TaintCalledForAgain {
        /// The node.
        node: String,
        /// The taint the patch would remove.
        taint: Taint,
    },
    /// The taint manager let go of the basis the deletion was decided on.
    TaintManagerCalledOff,
    /// The pod's node carries no NoExecute taint now.
    NoNoExecuteTaint {
        /// The node.
        node: String,
    },
    /// The pod tolerates its node's NoExecute taints for good now.
    ToleratedNow {
        /// The node.
        node: String,
    },
    /// Legacy eviction: the node is no longer marked for eviction.
    NoLongerMarked {
        /// The node.
        node: String,
    },
    /// The node is Ready again.
    NodeReadyAgain {
        /// The node.
        node: String,
    },
}

impl From<Changed> for Withdrawal {
    fn from(changed: Changed) -> Withdrawal {
        Withdrawal::NoLongerTrue(changed)
    }
}

impl Display for Withdrawal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Withdrawal::NoLongerTrue(changed) => changed.fmt(f),
            Withdrawal::Interlock { invariant, detail } => {
                write!(f, "the safety interlock objects now ({invariant}): {detail}")
            }
            Withdrawal::NotCurrent { view } => {
                write!(f, "the {view} view is not current: nothing decided before goes out")
            }
            Withdrawal::EngineStopped => f.write_str("the engine has stopped"),
            Withdrawal::ControllerDown => f.write_str("the controller is not running"),
            Withdrawal::AlreadyGone => f.write_str("already gone (404): nothing to delete"),
        }
    }
}

impl Display for Changed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Changed::PodGone => f.write_str("the pod is gone"),
            Changed::PodRecreated { uid } => write!(f, "the pod was re-created (uid {uid} now)"),
            Changed::PodNotOnNode { node } => write!(f, "the pod is no longer bound to node {node}"),
            Changed::PodAlreadyTerminating => f.write_str("the pod is already terminating"),
            Changed::PodTerminating => f.write_str("the pod is terminating"),
            Changed::DeletionCalledOff => f.write_str("its deletion was called off"),
            Changed::DeletionStandsAgain => f.write_str("a deletion of the pod stands again"),
            Changed::NodeGone { node } => write!(f, "node {node} is gone"),
            Changed::HeardFromSinceDecision { node } => write!(f, "node {node} was heard from since the decision"),
            Changed::HeardFromSinceLastPass { node } => write!(f, "node {node} was heard from since the last pass"),
            Changed::TaintNoLongerCalledFor { node, taint } => {
                write!(f, "node {node} no longer calls for {}", taint.short())
            }
            Changed::TaintCalledForAgain { node, taint } => write!(f, "node {node} calls for {} again", taint.short()),
            Changed::TaintManagerCalledOff => f.write_str("the taint manager called the deletion off"),
            Changed::NoNoExecuteTaint { node } => write!(f, "node {node} carries no NoExecute taint now"),
            Changed::ToleratedNow { node } => write!(f, "the pod tolerates node {node}'s NoExecute taints now"),
            Changed::NoLongerMarked { node } => write!(f, "node {node} is no longer marked for eviction"),
            Changed::NodeReadyAgain { node } => write!(f, "node {node} is Ready again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_model::{TaintEffect, keys};

    use super::*;

    /// The words are what logs, transcripts and scenario outputs showed
    /// when the reasons were strings; they must read the same.
    #[test]
    fn reasons_read_as_they_always_have() {
        let taint = Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute);
        let cases: [(Withdrawal, &str); 7] = [
            (Changed::PodRecreated { uid: "u2".into() }.into(), "the pod was re-created (uid u2 now)"),
            (
                Changed::TaintNoLongerCalledFor { node: "n1".into(), taint }.into(),
                "node n1 no longer calls for node.kubernetes.io/unreachable:NoExecute",
            ),
            (
                Withdrawal::Interlock { invariant: "never_both_noexecute_taints", detail: "both".into() },
                "the safety interlock objects now (never_both_noexecute_taints): both",
            ),
            (
                Withdrawal::NotCurrent { view: "nodes" },
                "the nodes view is not current: nothing decided before goes out",
            ),
            (Withdrawal::EngineStopped, "the engine has stopped"),
            (Withdrawal::ControllerDown, "the controller is not running"),
            (Withdrawal::AlreadyGone, "already gone (404): nothing to delete"),
        ];
        for (withdrawal, words) in cases {
            assert_eq!(withdrawal.to_string(), words);
        }
    }
}
