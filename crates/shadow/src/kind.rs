//! What is compared and what the comparison says: the kinds of decision
//! both controllers make, and the five verdicts on a pair.
//!
//! Both are typed all the way through; their labels (`as_str`) are the
//! spellings of the metric labels, the log fields and the summary's JSON,
//! so a dashboard, a log search and `nodewarden shadow report` use one
//! vocabulary.

use std::fmt;

use nodewarden_model::TaintEffect;
use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use serde::{Deserialize, Serialize};

/// One kind of node lifecycle decision, as both kube-controller-manager
/// and nodewarden make it. Each is compared per object: the node, or for
/// [`DecisionKind::PodDeletion`] the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DecisionKind {
    /// The node's Ready condition turned Unknown (`NodeStatusUnknown`):
    /// its kubelet fell silent past the grace period.
    #[serde(rename = "unknown")]
    Unknown,
    /// `node.kubernetes.io/not-ready:NoSchedule` added.
    #[serde(rename = "noschedule-not-ready")]
    NoScheduleNotReady,
    /// `node.kubernetes.io/unreachable:NoSchedule` added.
    #[serde(rename = "noschedule-unreachable")]
    NoScheduleUnreachable,
    /// `node.kubernetes.io/not-ready:NoExecute` added.
    #[serde(rename = "noexecute-not-ready")]
    NoExecuteNotReady,
    /// `node.kubernetes.io/unreachable:NoExecute` added.
    #[serde(rename = "noexecute-unreachable")]
    NoExecuteUnreachable,
    /// The node's pods marked not Ready (`MarkPodsNotReady`).
    #[serde(rename = "pods-not-ready")]
    PodsNotReady,
    /// The taint manager deleted one pod (object: the pod).
    #[serde(rename = "pod-deletion")]
    PodDeletion,
    /// Legacy mode: the node's pods deleted after `pod-eviction-timeout`.
    #[serde(rename = "legacy-deletion")]
    LegacyDeletion,
}

impl DecisionKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [DecisionKind; 8] = [
        DecisionKind::Unknown,
        DecisionKind::NoScheduleNotReady,
        DecisionKind::NoScheduleUnreachable,
        DecisionKind::NoExecuteNotReady,
        DecisionKind::NoExecuteUnreachable,
        DecisionKind::PodsNotReady,
        DecisionKind::PodDeletion,
        DecisionKind::LegacyDeletion,
    ];

    /// The label: metric label value, log field and JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Unknown => "unknown",
            DecisionKind::NoScheduleNotReady => "noschedule-not-ready",
            DecisionKind::NoScheduleUnreachable => "noschedule-unreachable",
            DecisionKind::NoExecuteNotReady => "noexecute-not-ready",
            DecisionKind::NoExecuteUnreachable => "noexecute-unreachable",
            DecisionKind::PodsNotReady => "pods-not-ready",
            DecisionKind::PodDeletion => "pod-deletion",
            DecisionKind::LegacyDeletion => "legacy-deletion",
        }
    }

    /// The kind of adding the taint `key` with `effect`; `None` for any
    /// taint but the four the node lifecycle controller manages.
    pub fn of_taint(key: &str, effect: TaintEffect) -> Option<DecisionKind> {
        match (key, effect) {
            (TAINT_NOT_READY, TaintEffect::NoSchedule) => Some(DecisionKind::NoScheduleNotReady),
            (TAINT_UNREACHABLE, TaintEffect::NoSchedule) => Some(DecisionKind::NoScheduleUnreachable),
            (TAINT_NOT_READY, TaintEffect::NoExecute) => Some(DecisionKind::NoExecuteNotReady),
            (TAINT_UNREACHABLE, TaintEffect::NoExecute) => Some(DecisionKind::NoExecuteUnreachable),
            _ => None,
        }
    }

    /// True for the kinds whose object is the node (every kind but a pod
    /// deletion): the ones a new episode of the node opens again.
    pub fn is_about_node(self) -> bool {
        self != DecisionKind::PodDeletion
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the comparison of one decision says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// Both made it, within the tolerance of each other.
    #[serde(rename = "agree")]
    Agree,
    /// Both made it; nodewarden earlier by more than the tolerance.
    #[serde(rename = "earlier")]
    Earlier,
    /// Both made it; nodewarden later by more than the tolerance.
    #[serde(rename = "later")]
    Later,
    /// Nodewarden made it and kube-controller-manager did not, within the
    /// window.
    #[serde(rename = "only-nodewarden")]
    OnlyNodewarden,
    /// kube-controller-manager made it and nodewarden did not, within the
    /// window.
    #[serde(rename = "only-upstream")]
    OnlyUpstream,
}

impl Verdict {
    /// Every verdict, in the order reports list them.
    pub const ALL: [Verdict; 5] =
        [Verdict::Agree, Verdict::Earlier, Verdict::Later, Verdict::OnlyNodewarden, Verdict::OnlyUpstream];

    /// The label: metric label value, log field and JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Earlier => "earlier",
            Verdict::Later => "later",
            Verdict::OnlyNodewarden => "only-nodewarden",
            Verdict::OnlyUpstream => "only-upstream",
        }
    }

    /// True for every verdict but [`Verdict::Agree`]: what is logged and
    /// kept for the summary.
    pub fn is_disagreement(self) -> bool {
        self != Verdict::Agree
    }

    /// True for the two verdicts where only one side decided.
    pub fn is_one_sided(self) -> bool {
        matches!(self, Verdict::OnlyNodewarden | Verdict::OnlyUpstream)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which controller a decision is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The engine's judgement.
    Nodewarden,
    /// kube-controller-manager's change, seen on the API server.
    Upstream,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_json_spelling_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for k in DecisionKind::ALL {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.as_str()));
            assert!(seen.insert(k.as_str()));
        }
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{}\"", v.as_str()));
            assert!(seen.insert(v.as_str()));
        }
    }

    #[test]
    fn only_the_four_lifecycle_taints_have_a_kind() {
        assert_eq!(
            DecisionKind::of_taint(TAINT_UNREACHABLE, TaintEffect::NoExecute),
            Some(DecisionKind::NoExecuteUnreachable)
        );
        assert_eq!(
            DecisionKind::of_taint(TAINT_NOT_READY, TaintEffect::NoSchedule),
            Some(DecisionKind::NoScheduleNotReady)
        );
        assert_eq!(DecisionKind::of_taint(TAINT_NOT_READY, TaintEffect::PreferNoSchedule), None);
        assert_eq!(DecisionKind::of_taint("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule), None);
    }
}
