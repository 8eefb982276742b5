//! Rules for PodDisruptionBudgets: the status the disruption controller
//! publishes and the verdict of the Eviction API on a pod budgets cover.
//!
//! Invariant: the numbers come only from the pods given (those the budget's
//! selector picks in its namespace) and the budget's spec; a healthy pod is
//! one that is bound and Ready, and a terminating pod is neither expected
//! nor healthy.

use crate::scenario::IntOrPercent;

/// The Eviction API's refusal when a budget allows no disruption (upstream
/// eviction REST handler, HTTP 429).
pub const BUDGET_REFUSAL: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
/// The Eviction API's refusal when several budgets cover the pod (upstream
/// eviction REST handler, HTTP 500).
pub const SEVERAL_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// What the disruption controller computes for a budget, published as its
/// `status` (`expectedPods`, `currentHealthy`, `desiredHealthy`,
/// `disruptionsAllowed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetStatus {
    /// Matching pods that are not terminating (the controller's scale).
    pub expected: u32,
    /// Of those, bound and Ready.
    pub healthy: u32,
    /// How many must stay healthy.
    pub desired: u32,
    /// `healthy - desired`, never below zero.
    pub allowed: u32,
}

/// What the disruption controller and the Eviction API read of one pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodHealth {
    /// It has a deletion timestamp.
    pub terminating: bool,
    /// It is bound to a node (`spec.nodeName`).
    pub bound: bool,
    /// Its Ready condition; `None` when it has none.
    pub ready: Option<bool>,
}

impl PodHealth {
    /// Healthy as the disruption controller counts it (upstream
    /// `countHealthyPods`: Ready and not being deleted); here a pod must
    /// also be bound, as a pod that runs nowhere cannot be Ready in fact.
    pub fn healthy(self) -> bool {
        self.bound && self.ready == Some(true)
    }
}

/// How many pods must stay healthy out of `expected` (upstream
/// `getExpectedPodCount` and `desiredHealthy`): `min-available` (a
/// percentage of expected, rounded up), else expected minus
/// `max-unavailable` (rounded up), else policy/v1beta1's default,
/// `minAvailable: 1` (only code builds such a budget; a file must give one).
pub fn desired_healthy(
    expected: u32,
    min_available: Option<IntOrPercent>,
    max_unavailable: Option<IntOrPercent>,
) -> u32 {
    match (min_available, max_unavailable) {
        (Some(min), _) => min.scaled(expected),
        (None, Some(max)) => expected.saturating_sub(max.scaled(expected)),
        (None, None) => IntOrPercent::Int(1).scaled(expected),
    }
}

/// A budget's status over the pods its selector picks (deleted pods left
/// out by the caller): expected counts those not terminating (a stand-in
/// for the owners' scale: a replaced pod's successor counts, the
/// terminating one does not), healthy those of them [`PodHealth::healthy`],
/// allowed is healthy minus desired, at least 0.
pub fn budget_status(
    pods: impl IntoIterator<Item = PodHealth>,
    min_available: Option<IntOrPercent>,
    max_unavailable: Option<IntOrPercent>,
) -> BudgetStatus {
    let (mut expected, mut healthy) = (0u32, 0u32);
    for p in pods.into_iter().filter(|p| !p.terminating) {
        expected += 1;
        if p.healthy() {
            healthy += 1;
        }
    }
    let desired = desired_healthy(expected, min_available, max_unavailable);
    BudgetStatus { expected, healthy, desired, allowed: healthy.saturating_sub(desired) }
}

/// Whether the Eviction API lets `pod` go now, given the status of every
/// budget that covers it (upstream `EvictionREST.Create`): a pod that is
/// not running (unbound here) or is terminating goes regardless of budgets;
/// several budgets refuse with [`SEVERAL_BUDGETS`]; under one budget a
/// healthy pod needs `disruptionsAllowed > 0` and an unhealthy one needs
/// the budget met (`currentHealthy >= desiredHealthy`, the default
/// `IfHealthyBudget` policy), else [`BUDGET_REFUSAL`].
pub fn eviction_verdict(pod: PodHealth, covering: &[BudgetStatus]) -> Result<(), &'static str> {
    if !pod.bound || pod.terminating {
        return Ok(());
    }
    match covering {
        [] => Ok(()),
        [status] => {
            let ok = if pod.healthy() { status.allowed > 0 } else { status.healthy >= status.desired };
            if ok { Ok(()) } else { Err(BUDGET_REFUSAL) }
        }
        _ => Err(SEVERAL_BUDGETS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(bound: bool, ready: Option<bool>) -> PodHealth {
        PodHealth { terminating: false, bound, ready }
    }

    #[test]
    fn healthy_means_bound_and_ready() {
        assert!(pod(true, Some(true)).healthy());
        assert!(!pod(false, Some(true)).healthy());
        assert!(!pod(true, Some(false)).healthy());
        assert!(!pod(true, None).healthy());
    }

    #[test]
    fn desired_follows_min_then_max_then_the_old_default() {
        use IntOrPercent::{Int, Percent};
        assert_eq!(desired_healthy(4, Some(Percent(50)), Some(Int(3))), 2);
        assert_eq!(desired_healthy(3, Some(Percent(50)), None), 2);
        assert_eq!(desired_healthy(4, None, Some(Percent(30))), 2);
        assert_eq!(desired_healthy(1, None, Some(Int(3))), 0);
        assert_eq!(desired_healthy(0, None, None), 1);
    }

    #[test]
    fn status_leaves_terminating_pods_out() {
        let pods = [
            pod(true, Some(true)),
            pod(true, Some(true)),
            pod(false, Some(true)),
            PodHealth { terminating: true, bound: true, ready: Some(true) },
        ];
        let s = budget_status(pods, Some(IntOrPercent::Int(1)), None);
        assert_eq!(s, BudgetStatus { expected: 3, healthy: 2, desired: 1, allowed: 1 });
    }

    #[test]
    fn eviction_verdicts() {
        let met = BudgetStatus { expected: 2, healthy: 1, desired: 1, allowed: 0 };
        let spare = BudgetStatus { allowed: 1, ..met };
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[]), Ok(()));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[met]), Err(BUDGET_REFUSAL));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[spare]), Ok(()));
        // Unhealthy: only that the budget is met.
        assert_eq!(eviction_verdict(pod(true, Some(false)), &[met]), Ok(()));
        let short = BudgetStatus { healthy: 0, ..met };
        assert_eq!(eviction_verdict(pod(true, Some(false)), &[short]), Err(BUDGET_REFUSAL));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[spare, spare]), Err(SEVERAL_BUDGETS));
        // Not running, or terminating: budgets do not apply.
        assert_eq!(eviction_verdict(pod(false, None), &[short, short]), Ok(()));
        let going = PodHealth { terminating: true, ..pod(true, Some(true)) };
        assert_eq!(eviction_verdict(going, &[met]), Ok(()));
    }
}
