//! Rules for the controller's writes to a pod: the preconditions every write
//! passes, what each status write changes, and how a deletion or eviction
//! ends (refused, terminating for a grace period, or gone).
//!
//! Invariant: a write names the pod by key and uid, and nothing is changed
//! unless the pod of that key has that uid now; a write to a pod that is
//! being deleted is refused, except the one status write upstream's legacy
//! eviction makes to every pod of the node.

use crate::rules::pod_conditions::PodConditions;

use nodewarden_model::{ConditionStatus, DeletionMode, Span};

/// The pod condition type a pod's readiness is read from (upstream
/// `PodReady`): the engine, the budgets and the kubelets all go by it.
pub const POD_READY: &str = "Ready";
/// The pod condition the taint manager adds before it deletes a pod
/// (upstream `DisruptionTarget`, reason `DeletionByTaintManager`), so the
/// pod's owner can tell why it went.
pub const POD_DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The pod `status.reason` a legacy eviction sets (upstream
/// `MarkPodsNotReady`' sibling `SetPodTerminationReason`).
pub use nodewarden_model::keys::POD_REASON_NODE_LOST;
/// The pod condition the scheduler sets: False (reason Unschedulable) when
/// the pod fits nowhere, True once bound. The rescheduler acts on the False.
pub const POD_SCHEDULED: &str = "PodScheduled";
/// The name under which a legacy eviction's `NodeLost` status write is
/// judged: the one controller write a terminating pod accepts.
pub const SET_POD_NODE_LOST: &str = "set-pod-node-lost";
/// What a plain deletion is refused with while the pod's scenario says
/// deletions fail, standing for a validating webhook.
pub const WEBHOOK_REFUSAL: &str = "admission webhook denied the request";

/// Why a controller write to a pod was not carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRefusal {
    /// What the API server answers (the write fails with this).
    pub reason: String,
    /// Set when the controller must never have sent the write (a contract
    /// violation the runner reports); `None` for an ordinary race.
    pub violation: Option<String>,
}

/// What the store holds under the key a pod write names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodAtKey<'a> {
    /// No pod (never created, or deleted).
    Missing,
    /// A pod with this uid, terminating or not.
    Present {
        /// Its `metadata.uid`.
        uid: &'a str,
        /// It has a deletion timestamp.
        terminating: bool,
    },
}

/// The checks a controller write `what` to pod `key` with uid precondition
/// `uid` passes before it changes anything, in order: a write to a uid the
/// cluster already deleted is a violation (the controller acted on a pod it
/// saw go); a missing pod is NotFound; another uid fails the precondition
/// (upstream `metav1.Preconditions{UID}`, a 409); a terminating pod accepts
/// only [`SET_POD_NODE_LOST`] (upstream's legacy `DeletePods` writes
/// `NodeLost` to every pod of the node, terminating ones included, and the
/// API server takes a status write on a pod being deleted); any other write
/// to it is a violation.
pub fn check_pod_write(
    what: &str,
    key: &str,
    uid: &str,
    uid_deleted: bool,
    current: PodAtKey<'_>,
) -> Result<(), WriteRefusal> {
    if uid_deleted {
        return Err(WriteRefusal {
            reason: format!("pod {key} (uid {uid}) not found: it was deleted"),
            violation: Some(format!("{what} on pod {key} (uid {uid}), which was already deleted")),
        });
    }
    let PodAtKey::Present { uid: stored, terminating } = current else {
        return Err(WriteRefusal { reason: format!("pod {key} not found"), violation: None });
    };
    if stored != uid {
        let reason = format!("precondition failed: uid {uid}, but pod {key} has uid {stored}");
        return Err(WriteRefusal { reason, violation: None });
    }
    if terminating && what != SET_POD_NODE_LOST {
        return Err(WriteRefusal {
            reason: format!("pod {key} is terminating"),
            violation: Some(format!("{what} on pod {key}, which is terminating")),
        });
    }
    Ok(())
}

/// `MarkPodsNotReady` (upstream `nodeutil.MarkPodsNotReady`): the pod's
/// Ready condition becomes False; a pod without one is left as it is.
pub fn mark_not_ready(conditions: &mut PodConditions) {
    if let Some(s) = conditions.get_mut(POD_READY) {
        *s = ConditionStatus::False;
    }
}

/// The taint manager's `DisruptionTarget=True` condition, added (or set)
/// before the deletion.
pub fn add_disruption_target(conditions: &mut PodConditions) {
    conditions.insert(POD_DISRUPTION_TARGET, ConditionStatus::True);
}

/// A `DisruptionTarget` condition taken back (set False) after the
/// deletion it announced was called off.
pub fn clear_disruption_target(conditions: &mut PodConditions) {
    conditions.insert(POD_DISRUPTION_TARGET, ConditionStatus::False);
}

/// The grace period a deletion runs with. Without scheduling tracked the
/// cluster stands for the node lifecycle runs, where a pod is gone at once;
/// with it, the grace the request asked for, else the pod's own
/// `terminationGracePeriodSeconds` (upstream `BeforeDelete`), else none.
pub fn deletion_grace(tracks_scheduling: bool, requested: Option<Span>, pod_grace: Option<Span>) -> Span {
    if tracks_scheduling { requested.unwrap_or_else(|| pod_grace.unwrap_or(Span::ZERO)) } else { Span::ZERO }
}

/// How a deletion the checks let through ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// Refused with this reason; the pod has `refusals_left` refusals to
    /// give after this one.
    Refused {
        /// What the API server answers.
        reason: String,
        /// The pod's remaining scripted refusals.
        refusals_left: u32,
    },
    /// The pod is terminating, gone when this grace period ends.
    Terminating(Span),
    /// The pod is gone now.
    Gone,
}

/// The end of a deletion (`mode` Delete) or an eviction (`mode` Evict),
/// once the write's checks passed: a pod with scripted refusals left
/// refuses (a webhook for a deletion, a budget's 429 for an eviction) and
/// uses one up; then the eviction verdict `eviction` (from
/// [`crate::rules::budget::eviction_verdict`]; `Ok` for a plain deletion)
/// can refuse; otherwise the pod terminates for `grace`, or is gone at once
/// when `grace` is zero.
pub fn deletion(mode: DeletionMode, refusals_left: u32, eviction: Result<(), String>, grace: Span) -> Deletion {
    if refusals_left > 0 {
        let reason = match mode {
            DeletionMode::Delete => WEBHOOK_REFUSAL,
            DeletionMode::Evict => crate::rules::budget::BUDGET_REFUSAL,
        };
        return Deletion::Refused { reason: reason.to_string(), refusals_left: refusals_left - 1 };
    }
    if let Err(reason) = eviction {
        return Deletion::Refused { reason, refusals_left };
    }
    if grace > Span::ZERO { Deletion::Terminating(grace) } else { Deletion::Gone }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(uid: &str, terminating: bool) -> PodAtKey<'_> {
        PodAtKey::Present { uid, terminating }
    }

    #[test]
    fn checks_come_in_order() {
        let deleted = check_pod_write("delete-pod", "d/p", "u1", true, at("u1", false)).unwrap_err();
        assert!(deleted.violation.is_some());
        let missing = check_pod_write("delete-pod", "d/p", "u1", false, PodAtKey::Missing).unwrap_err();
        assert_eq!(missing, WriteRefusal { reason: "pod d/p not found".into(), violation: None });
        let other = check_pod_write("delete-pod", "d/p", "u1", false, at("u2", true)).unwrap_err();
        assert!(other.reason.starts_with("precondition failed") && other.violation.is_none());
        assert!(check_pod_write("delete-pod", "d/p", "u1", false, at("u1", true)).unwrap_err().violation.is_some());
        assert_eq!(check_pod_write(SET_POD_NODE_LOST, "d/p", "u1", false, at("u1", true)), Ok(()));
        assert_eq!(check_pod_write("delete-pod", "d/p", "u1", false, at("u1", false)), Ok(()));
    }

    #[test]
    fn deletions_refuse_then_terminate_or_go() {
        let budget = Err(crate::rules::budget::BUDGET_REFUSAL.to_string());
        assert_eq!(
            deletion(DeletionMode::Delete, 2, Ok(()), Span::ZERO),
            Deletion::Refused { reason: WEBHOOK_REFUSAL.into(), refusals_left: 1 }
        );
        assert_eq!(
            deletion(DeletionMode::Evict, 0, budget.clone(), Span::ZERO),
            Deletion::Refused { reason: crate::rules::budget::BUDGET_REFUSAL.into(), refusals_left: 0 }
        );
        assert_eq!(
            deletion(DeletionMode::Evict, 0, Ok(()), Span::from_secs(30)),
            Deletion::Terminating(Span::from_secs(30))
        );
        assert_eq!(deletion(DeletionMode::Delete, 0, Ok(()), Span::ZERO), Deletion::Gone);
        assert_eq!(deletion_grace(false, Some(Span::from_secs(5)), Some(Span::from_secs(9))), Span::ZERO);
        assert_eq!(deletion_grace(true, None, Some(Span::from_secs(9))), Span::from_secs(9));
        assert_eq!(deletion_grace(true, Some(Span::ZERO), Some(Span::from_secs(9))), Span::ZERO);
        assert_eq!(deletion_grace(true, None, None), Span::ZERO);
    }
}
