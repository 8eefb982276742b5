//! Rules for PodDisruptionBudgets: the status the disruption controller
//! publishes and the verdict of the Eviction API on a pod budgets cover.
//!
//! Both back ends (the typed simulated cluster and the served JSON one)
//! call these, so a budget reads the same in replay and over the wire.
//! Where they used to differ, upstream's meaning was taken:
//! - a healthy pod is one not being deleted and Ready (upstream
//!   `countHealthyPods`); being bound is not asked for, as a pod that runs
//!   nowhere is never Ready anyway;
//! - `maxUnavailable` is read before `minAvailable`, an integer
//!   `minAvailable` expects every matching pod (terminating ones too), a
//!   percentage is scaled rounding up, and a budget with neither allows
//!   nothing (upstream `getExpectedPodCount` and `updatePdbStatus`);
//! - the Eviction API lets a pod that is not running (Pending, Succeeded,
//!   Failed) or is terminating go without asking its budgets (upstream
//!   `canIgnorePDB`).
//!
//! Invariant: the numbers come only from the pods given (those the
//! budget's selector picks in its namespace, deleted ones left out) and the
//! budget's spec.

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
    /// The pods the budget expects: every matching pod for an integer
    /// `minAvailable`, else the owners' scale (here: the matching pods not
    /// terminating, as a replaced pod's successor stands for it).
    pub expected: u32,
    /// Matching pods that are [`PodHealth::healthy`].
    pub healthy: u32,
    /// How many must stay healthy.
    pub desired: u32,
    /// `healthy - desired`, never below zero, and zero while nothing is
    /// expected.
    pub allowed: u32,
}

/// What the disruption controller and the Eviction API read of one pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodHealth {
    /// It has a deletion timestamp.
    pub terminating: bool,
    /// Its phase is neither Pending, Succeeded nor Failed (a pod the
    /// simulated cluster has bound counts as running).
    pub running: bool,
    /// Its Ready condition; `None` when it has none.
    pub ready: Option<bool>,
}

impl PodHealth {
    /// Healthy as the disruption controller counts it (upstream
    /// `countHealthyPods`): not being deleted, and Ready.
    pub fn healthy(self) -> bool {
        !self.terminating && self.ready == Some(true)
    }
}

/// A budget's status over the pods its selector picks (upstream
/// `getExpectedPodCount`, `countHealthyPods`, `updatePdbStatus`):
/// with `max_unavailable`, desired is the scale less that (a percentage of
/// the scale, rounded up), at least 0; with an integer `min_available`,
/// desired is that number and every matching pod is expected; with a
/// percentage, that share of the scale rounded up; with neither, nothing is
/// expected or desired. Allowed is healthy minus desired, at least 0, and 0
/// when nothing is expected (so a budget whose pods are not there yet
/// protects them as they come).
pub fn budget_status(
    pods: impl IntoIterator<Item = PodHealth>,
    min_available: Option<IntOrPercent>,
    max_unavailable: Option<IntOrPercent>,
) -> BudgetStatus {
    let (mut all, mut scale, mut healthy) = (0u32, 0u32, 0u32);
    for p in pods {
        all += 1;
        scale += u32::from(!p.terminating);
        healthy += u32::from(p.healthy());
    }
    let (expected, desired) = match (max_unavailable, min_available) {
        (Some(max), _) => (scale, scale.saturating_sub(max.scaled(scale))),
        (None, Some(IntOrPercent::Int(n))) => (all, n),
        (None, Some(pct)) => (scale, pct.scaled(scale)),
        (None, None) => (0, 0),
    };
    let allowed = if expected == 0 { 0 } else { healthy.saturating_sub(desired) };
    BudgetStatus { expected, healthy, desired, allowed }
}

/// What an eviction the Eviction API lets through does to the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    /// Nothing: no budget applies, or an unready pod goes while its budget
    /// is met.
    Free,
    /// It takes one of the budget's `disruptionsAllowed` (upstream
    /// `checkAndDecrement`).
    TakesOne,
}

/// Whether the Eviction API lets `pod` go now, given the status of every
/// budget that covers it (upstream `EvictionREST.Create`): a pod that is
/// not running or is terminating goes regardless of budgets
/// (`canIgnorePDB`); several budgets refuse with [`SEVERAL_BUDGETS`]; under
/// one budget an unready pod goes free while the budget is met and wants
/// some healthy pods (`currentHealthy >= desiredHealthy > 0`), and any
/// other pod needs `disruptionsAllowed > 0` and takes one, else
/// [`BUDGET_REFUSAL`].
pub fn eviction_verdict(pod: PodHealth, covering: &[BudgetStatus]) -> Result<Disruption, &'static str> {
    if !pod.running || pod.terminating {
        return Ok(Disruption::Free);
    }
    match covering {
        [] => Ok(Disruption::Free),
        [status] => {
            if pod.ready != Some(true) && status.healthy >= status.desired && status.desired > 0 {
                Ok(Disruption::Free)
            } else if status.allowed > 0 {
                Ok(Disruption::TakesOne)
            } else {
                Err(BUDGET_REFUSAL)
            }
        }
        _ => Err(SEVERAL_BUDGETS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntOrPercent::{Int, Percent};

    fn pod(running: bool, ready: Option<bool>) -> PodHealth {
        PodHealth { terminating: false, running, ready }
    }

    fn going(ready: Option<bool>) -> PodHealth {
        PodHealth { terminating: true, running: true, ready }
    }

    /// Disagreement (a): the simulated cluster asked for a bound pod, the
    /// served one for Ready alone; upstream asks for Ready and not being
    /// deleted.
    #[test]
    fn healthy_means_ready_and_not_being_deleted() {
        assert!(pod(true, Some(true)).healthy());
        assert!(pod(false, Some(true)).healthy());
        assert!(!pod(true, Some(false)).healthy());
        assert!(!pod(true, None).healthy());
        assert!(!going(Some(true)).healthy());
    }

    /// Disagreement (b): maxUnavailable first, percentages rounded up, an
    /// integer minAvailable over every matching pod, neither set allows
    /// nothing.
    #[test]
    fn desired_and_expected_follow_the_disruption_controller() {
        let ready = |n| vec![pod(true, Some(true)); n];
        let s = budget_status(ready(4), Some(Percent(50)), Some(Int(3)));
        assert_eq!((s.expected, s.desired, s.allowed), (4, 1, 3));
        assert_eq!(budget_status(ready(3), Some(Percent(50)), None).desired, 2);
        assert_eq!(budget_status(ready(4), None, Some(Percent(30))).desired, 2);
        assert_eq!(budget_status(ready(1), None, Some(Int(3))).desired, 0);
        assert_eq!(
            budget_status(ready(3), None, None),
            BudgetStatus { expected: 0, healthy: 3, desired: 0, allowed: 0 }
        );
        assert_eq!(budget_status([], Some(Int(0)), None).allowed, 0);
    }

    /// Disagreement (c): every matching pod counts for an integer
    /// minAvailable, terminating ones too; the scale leaves them out; none
    /// of them is healthy.
    #[test]
    fn terminating_pods_are_expected_only_by_an_integer_min_available() {
        let pods = [pod(true, Some(true)), pod(true, Some(true)), pod(false, None), going(Some(true))];
        let s = budget_status(pods, Some(Int(1)), None);
        assert_eq!(s, BudgetStatus { expected: 4, healthy: 2, desired: 1, allowed: 1 });
        let s = budget_status(pods, None, Some(Int(1)));
        assert_eq!(s, BudgetStatus { expected: 3, healthy: 2, desired: 2, allowed: 0 });
    }

    #[test]
    fn eviction_verdicts() {
        let met = BudgetStatus { expected: 2, healthy: 1, desired: 1, allowed: 0 };
        let spare = BudgetStatus { allowed: 1, ..met };
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[]), Ok(Disruption::Free));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[met]), Err(BUDGET_REFUSAL));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[spare]), Ok(Disruption::TakesOne));
        // Unready: free while the budget is met and wants healthy pods.
        assert_eq!(eviction_verdict(pod(true, Some(false)), &[met]), Ok(Disruption::Free));
        let short = BudgetStatus { healthy: 0, ..met };
        assert_eq!(eviction_verdict(pod(true, Some(false)), &[short]), Err(BUDGET_REFUSAL));
        let none_wanted = BudgetStatus { expected: 2, healthy: 0, desired: 0, allowed: 0 };
        assert_eq!(eviction_verdict(pod(true, None), &[none_wanted]), Err(BUDGET_REFUSAL));
        // An unready pod under a budget that wants none healthy takes one.
        let loose = BudgetStatus { expected: 2, healthy: 1, desired: 0, allowed: 1 };
        assert_eq!(eviction_verdict(pod(true, None), &[loose]), Ok(Disruption::TakesOne));
        assert_eq!(eviction_verdict(pod(true, Some(true)), &[spare, spare]), Err(SEVERAL_BUDGETS));
        // Not running: budgets do not apply.
        assert_eq!(eviction_verdict(pod(false, None), &[short, short]), Ok(Disruption::Free));
    }

    /// Disagreement (d): a pod already terminating is evicted without its
    /// budgets being asked, as upstream's `canIgnorePDB` lets it go.
    #[test]
    fn a_terminating_pod_is_evicted_whatever_its_budgets_say() {
        let exhausted = BudgetStatus { expected: 1, healthy: 0, desired: 1, allowed: 0 };
        assert_eq!(eviction_verdict(going(Some(true)), &[exhausted]), Ok(Disruption::Free));
        assert_eq!(eviction_verdict(going(None), &[exhausted, exhausted]), Ok(Disruption::Free));
    }
}
