//! What the harness's simulated API server knows beyond the simulator's
//! cluster, for the critical-addon rescheduler: each pod's scheduling
//! facts and the PodDisruptionBudgets, with the Eviction API's budget
//! check.
//!
//! The cluster keeps pods without scheduling facts; [`SchedSide`] keeps
//! them by pod key and puts them on every pod snapshot the engine is sent
//! ([`SchedSide::decorate`]), and carries out evictions for an addon as
//! the API server would: refused (429) while a budget covering the pod
//! allows no disruption, otherwise the pod goes and each budget covering
//! it allows one fewer. Both sides of the harness (engine and reference
//! model) write through it, so they meet the same API.

use std::collections::BTreeMap;

use nodewarden_cluster::Cluster;
use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ActionId, ActionKind, BudgetSnapshot, Observation, WriteOutcome};
use nodewarden_model::{PodScheduling, Timestamp};

/// Scheduling facts and budgets of one harness world.
#[derive(Clone, Debug, Default)]
pub struct SchedSide {
    /// Scheduling facts by pod key (absent: the pod has none).
    pub pods: BTreeMap<String, PodScheduling>,
    /// Budgets by `namespace/name`.
    pub budgets: BTreeMap<String, BudgetSnapshot>,
}

fn namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

impl SchedSide {
    /// The observation as a watch that reads the whole pod delivers it:
    /// pod snapshots carry their scheduling facts.
    pub fn decorate(&self, obs: Observation) -> Observation {
        match obs {
            Observation::PodUpserted(mut p) => {
                p.scheduling = self.pods.get(&p.key).map(|s| Box::new(s.clone()));
                Observation::PodUpserted(p)
            }
            other => other,
        }
    }

    /// Budgets covering the pod `key`, by key.
    pub fn covering(&self, key: &str) -> Vec<String> {
        let Some(facts) = self.pods.get(key) else { return Vec::new() };
        self.budgets
            .values()
            .filter(|b| namespace(&b.key) == namespace(key) && b.selector.matches(&facts.labels))
            .map(|b| b.key.clone())
            .collect()
    }

    /// Carries out `action` on `cluster` as the API server would, budgets
    /// included; the observations come back decorated.
    pub fn apply(&mut self, cluster: &mut Cluster, now: Timestamp, action: &Action) -> Applied {
        if let ActionKind::EvictForAddon { pod, .. } = &action.kind {
            let covering = self.covering(pod);
            let live = cluster.pod(pod).is_some_and(|p| !p.deleted);
            if live && covering.iter().any(|b| self.budgets[b].disruptions_allowed == 0) {
                let reason = "429: Cannot evict pod as it would violate the pod's disruption budget.".to_string();
                let state = cluster.pod(pod).map(|p| p.snapshot()).map(Observation::PodUpserted);
                return Applied {
                    observations: std::iter::once(Observation::WriteFinished {
                        id: action.id,
                        outcome: WriteOutcome::Failed(reason.clone()),
                    })
                    .chain(state.map(|o| self.decorate(o)))
                    .collect(),
                    outcome: Some(WriteOutcome::Failed(reason)),
                    violation: None,
                };
            }
            let mut applied = cluster.apply_action(now, action);
            applied.observations = applied.observations.into_iter().map(|o| self.decorate(o)).collect();
            if matches!(applied.outcome, Some(WriteOutcome::Done)) {
                for b in covering {
                    let budget = self.budgets.get_mut(&b).expect("covering budgets exist");
                    budget.disruptions_allowed -= 1;
                    applied.observations.push(Observation::BudgetUpserted(budget.clone()));
                }
            }
            return applied;
        }
        let mut applied = cluster.apply_action(now, action);
        applied.observations = applied.observations.into_iter().map(|o| self.decorate(o)).collect();
        applied
    }

    /// Applies a write made directly (by the reference model), numbered
    /// `id`; true when it was accepted.
    pub fn write(&mut self, cluster: &mut Cluster, now: Timestamp, id: u64, kind: ActionKind) -> bool {
        let applied = self.apply(cluster, now, &Action { id: ActionId(id), kind });
        !matches!(applied.outcome, Some(WriteOutcome::Failed(_)))
    }
}

/// A cluster and its side, as the [`ClusterApi`] the engine's loop writes to.
pub struct SideApi<'a> {
    /// The cluster.
    pub cluster: &'a mut Cluster,
    /// Its scheduling facts and budgets.
    pub side: &'a mut SchedSide,
}

impl ClusterApi for SideApi<'_> {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        self.side.apply(self.cluster, now, action)
    }

    fn read(&mut self, object: &nodewarden_engine::ObjectRef) -> Vec<nodewarden_engine::Observation> {
        self.cluster.read(object)
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_cluster::{AdmissionDefaults, PodSpec};
    use nodewarden_engine::PodSnapshot;
    use nodewarden_model::{LabelSelector, Span};

    use super::*;

    fn evict(key: &str) -> Action {
        let why = nodewarden_engine::AddonEviction {
            pod: key.into(),
            node: "n".into(),
            addon: "kube-system/dns".into(),
            unschedulable_since: Timestamp::EPOCH,
            needed: nodewarden_model::Resources::ZERO,
            free_before: nodewarden_model::Resources::ZERO,
            tier: nodewarden_engine::PreparationTier::Any,
            victims: vec![key.into()],
            freed: nodewarden_model::Resources::ZERO,
            budgets: vec![],
            pod_grace: Span::from_secs(30),
            grace: Span::from_secs(10),
            decided_at: Timestamp::EPOCH,
        };
        Action {
            id: ActionId(1),
            kind: ActionKind::EvictForAddon { pod: key.into(), uid: "uid-1".into(), grace: None, why: Box::new(why) },
        }
    }

    #[test]
    fn budgets_refuse_then_allow_and_count_down() {
        let mut cluster = Cluster::new(AdmissionDefaults::default());
        let obs = cluster.add_pod(&PodSpec::bound("kube-system/p0", "n"));
        let mut side = SchedSide::default();
        side.pods.insert("kube-system/p0".into(), PodScheduling::default());
        let Observation::PodUpserted(PodSnapshot { scheduling, .. }) = side.decorate(obs[0].clone()) else {
            panic!("a pod")
        };
        assert!(scheduling.is_some(), "decorated");
        side.budgets.insert(
            "kube-system/b".into(),
            BudgetSnapshot { key: "kube-system/b".into(), selector: LabelSelector::default(), disruptions_allowed: 0 },
        );
        let refused = side.apply(&mut cluster, Timestamp::EPOCH, &evict("kube-system/p0"));
        assert!(matches!(refused.outcome, Some(WriteOutcome::Failed(_))));
        assert!(!cluster.pod("kube-system/p0").unwrap().deleted);
        side.budgets.get_mut("kube-system/b").unwrap().disruptions_allowed = 1;
        let done = side.apply(&mut cluster, Timestamp::EPOCH, &evict("kube-system/p0"));
        assert_eq!(done.outcome, Some(WriteOutcome::Done));
        assert!(cluster.pod("kube-system/p0").unwrap().deleted);
        assert_eq!(side.budgets["kube-system/b"].disruptions_allowed, 0);
        assert!(done.observations.iter().any(|o| matches!(o, Observation::BudgetUpserted(_))));
    }
}
