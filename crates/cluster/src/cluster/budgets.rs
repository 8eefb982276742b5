//! PodDisruptionBudgets in the simulated cluster: the stored budgets, the
//! status the disruption controller publishes, and the Eviction API's
//! verdict on a pod they cover.
//!
//! Invariant: a budget's published `disruptionsAllowed` is recomputed
//! whenever pods changed (the epoch moved) before the controller can act on
//! it again, and only a change is published.

use std::collections::BTreeMap;
use std::ops::Bound;

use nodewarden_engine::Observation;
use tracing::warn;

use super::Cluster;
use super::objects::{EMPTY_LABELS, SimBudget, SimPod, budget_snapshot};
use crate::rules;
use crate::rules::budget::{BudgetStatus, PodHealth};
use crate::scenario::BudgetSpec;

impl Cluster {
    /// Every budget, by key.
    pub fn budgets(&self) -> &BTreeMap<String, SimBudget> {
        &self.budgets
    }

    /// Creates or replaces a budget; the controller hears of it.
    pub fn put_budget(&mut self, spec: &BudgetSpec) -> Vec<Observation> {
        let status = self.budget_status(spec);
        let budget = SimBudget { spec: spec.clone(), allowed: status.allowed };
        let obs = Observation::BudgetUpserted(budget_snapshot(&spec.name, &budget));
        self.budgets.insert(spec.name.clone(), budget);
        vec![obs]
    }

    /// Deletes a budget.
    pub fn delete_budget(&mut self, key: &str) -> Vec<Observation> {
        if self.budgets.remove(key).is_none() {
            warn!(budget = key, "delete-budget: no such budget now");
            return Vec::new();
        }
        vec![Observation::BudgetDeleted { key: key.to_string() }]
    }

    /// Pods of `namespace` (not deleted) that `spec`'s selector matches.
    fn budget_pods<'a>(&'a self, spec: &'a BudgetSpec) -> impl Iterator<Item = &'a SimPod> + 'a {
        let ns = spec.name.split_once('/').map_or(spec.name.as_str(), |(ns, _)| ns);
        let start = format!("{ns}/");
        self.pods
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(&start))
            .map(|(_, p)| p)
            .filter(|p| !p.deleted)
            .filter(|p| spec.selector.matches(p.scheduling.as_ref().map_or(&EMPTY_LABELS, |s| &s.labels)))
    }

    /// What the disruption controller publishes for a budget now
    /// ([`rules::budget::budget_status`] over the pods its selector picks).
    pub fn budget_status(&self, spec: &BudgetSpec) -> BudgetStatus {
        let pods = self.budget_pods(spec).map(pod_health);
        rules::budget::budget_status(pods, spec.min_available, spec.max_unavailable)
    }

    /// The Eviction API's verdict on this pod now
    /// ([`rules::budget::eviction_verdict`]), given the budgets of its
    /// namespace whose selector picks it.
    pub(super) fn eviction_verdict(&self, pod: &SimPod) -> Result<(), &'static str> {
        // The disruption it takes needs no record: the status is recomputed
        // from the pods, where the evicted one no longer counts.
        let labels = pod.scheduling.as_ref().map_or(&EMPTY_LABELS, |s| &s.labels);
        let ns = pod.key.split_once('/').map_or("", |(ns, _)| ns);
        let covering: Vec<BudgetStatus> = self
            .budgets
            .values()
            .filter(|b| b.spec.name.split_once('/').is_some_and(|(bns, _)| bns == ns))
            .filter(|b| b.spec.selector.matches(labels))
            .map(|b| self.budget_status(&b.spec))
            .collect();
        rules::budget::eviction_verdict(pod_health(pod), &covering).map(|_| ())
    }

    /// Re-computes every budget's `disruptionsAllowed` when pods changed;
    /// a `BudgetUpserted` for each that moved.
    pub(super) fn publish_budgets(&mut self) -> Vec<Observation> {
        if self.budgets.is_empty() || self.budgets_epoch == self.epoch {
            return Vec::new();
        }
        self.budgets_epoch = self.epoch;
        let fresh: Vec<(String, u32)> =
            self.budgets.iter().map(|(k, b)| (k.clone(), self.budget_status(&b.spec).allowed)).collect();
        let mut out = Vec::new();
        for (k, allowed) in fresh {
            if let Some(b) = self.budgets.get_mut(&k)
                && b.allowed != allowed
            {
                b.allowed = allowed;
                out.push(Observation::BudgetUpserted(budget_snapshot(&k, b)));
            }
        }
        out
    }
}

/// What the budget rules read of a stored pod: an unbound pod is Pending,
/// a bound one running (the simulated kubelets start a pod when bound).
fn pod_health(p: &SimPod) -> PodHealth {
    PodHealth { terminating: p.terminating, running: p.node.is_some(), ready: p.ready() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::*;

    #[test]
    fn budgets_compute_disruptions_allowed() {
        for (spec, pods, want) in [
            ("min-available: 2", 3, 1),
            ("min-available: 3", 3, 0),
            ("min-available: 50%", 3, 1),
            ("max-unavailable: 1", 4, 1),
            ("max-unavailable: 0", 4, 0),
            ("max-unavailable: 30%", 4, 2),
            ("min-available: 0%", 2, 2),
        ] {
            let c = budget_world(&format!("{{name: d/b, selector: {{matchLabels: {{app: w}}}}, {spec}}}"), pods);
            assert_eq!(allowed(&c), want, "{spec} over {pods} pods");
        }
    }

    #[test]
    fn evictions_honour_budgets_and_publish_changes() {
        let mut c = budget_world("{name: d/b, selector: {matchLabels: {app: w}}, min-available: 2}", 3);
        assert_eq!(allowed(&c), 1);
        let r = c.apply_action(t(1), &evict(1, &c, "d/w0", None));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        let published: Vec<u32> = r
            .observations
            .iter()
            .filter_map(|o| match o {
                Observation::BudgetUpserted(b) => Some(b.disruptions_allowed),
                _ => None,
            })
            .collect();
        assert_eq!(published, [0], "{r:?}");
        let r = c.apply_action(t(2), &evict(2, &c, "d/w1", None));
        assert_eq!(r.outcome, Some(WriteOutcome::Failed(BUDGET_REFUSAL.to_string())));
        assert!(r.violation.is_none());
        assert!(!c.pod("d/w1").unwrap().deleted);
        // A plain deletion is not an eviction: budgets do not apply.
        let delete = act(
            3,
            ActionKind::DeletePod {
                pod: "d/w1".into(),
                uid: c.pod("d/w1").unwrap().uid.clone(),
                mode: DeletionMode::Delete,
                why: why(),
            },
        );
        assert_eq!(c.apply_action(t(3), &delete).outcome, Some(WriteOutcome::Done));
        // Pods outside the selector are not covered.
        assert_eq!(c.apply_action(t(4), &evict(4, &c, "d/other", None)).outcome, Some(WriteOutcome::Done));
    }

    #[test]
    fn several_budgets_refuse_and_unhealthy_pods_go_while_the_budget_holds() {
        let mut c = budget_world("{name: d/b, selector: {matchLabels: {app: w}}, min-available: 1}", 2);
        c.put_budget(&crate::scenario::BudgetSpec {
            name: "d/all".into(),
            selector: Default::default(),
            min_available: None,
            max_unavailable: Some(IntOrPercent::Int(5)),
        });
        let r = c.apply_action(t(1), &evict(1, &c, "d/w0", None));
        assert_eq!(r.outcome, Some(WriteOutcome::Failed(SEVERAL_BUDGETS.to_string())));
        c.delete_budget("d/all");
        // w0 not Ready: evictable while the budget is met (1 healthy of 1 desired).
        let uid = c.pod("d/w0").unwrap().uid.clone();
        c.apply_action(t(2), &act(2, ActionKind::MarkPodNotReady { pod: "d/w0".into(), uid }));
        let r = c.apply_action(t(3), &evict(3, &c, "d/w0", None));
        assert_eq!(r.outcome, Some(WriteOutcome::Done), "{r:?}");
    }
}
