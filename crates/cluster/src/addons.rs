//! The `critical-addon` built-in simulation: a full cluster that loses its
//! DNS and metrics addons, and what the report says about each addon.
//!
//! The cluster ([`build`]): the generated fleet's nodes (4 CPU, 16Gi, 110
//! pods each, the default allocatable) with, on every node, one DaemonSet
//! pod and ordinary pods whose CPU requests fill the node to within 0 to
//! 40 millicores. Ordinary pods belong to 24 apps spread over 8
//! namespaces; most are ReplicaSet pods with a 30 s grace period, some
//! StatefulSet pods (60 s), some ReplicaSet pods with a 5 minute grace
//! period, and some bare pods. Every third app has a budget
//! (`min-available: 90%`), every ninth one that allows nothing
//! (`max-unavailable: 0`). The three addons (`kube-system/coredns-a`,
//! `coredns-b` at 300m, `metrics-server` at 400m; ReplicaSet pods with
//! priority class `system-cluster-critical`, tolerating
//! `CriticalAddonsOnly`) run on the first node, which crashes at 1m. The
//! taint manager deletes them when their tolerations run out; their
//! ReplicaSets recreate them, and the scheduler finds no room anywhere.
//! Memory is plentiful: only CPU ever falls short.
//!
//! The report ([`AddonOutcome`]), per addon (its replacements counted as
//! the same addon): when it became Unschedulable, when it was bound and
//! where, how many pods were evicted for it, and the **minimum**: the
//! fewest pods on any single node whose removal makes it fit, ignoring
//! budgets and grace periods (never a critical, DaemonSet or mirror pod;
//! only nodes the addon may use), computed on the cluster as it was when
//! the addon became Unschedulable. Per node the evictable pods are taken
//! largest first, which is exact when one resource falls short (as here).

use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use nodewarden_model::scheduling::is_critical_addon;
use nodewarden_model::{Span, Timestamp, Toleration, TolerationOperator};

use crate::cluster::Cluster;
use crate::fleet::{self, FleetSpec, Layout};
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::rng::Rng;
use crate::rules::recreate::replacement_base;
use crate::scenario::{
    AllocatableSpec, BudgetSpec, CpuQuantity, IntOrPercent, MemoryQuantity, PodSchedulingSpec, PodSpec, RequestsSpec,
};

/// Apps the ordinary pods belong to.
const APPS: u64 = 24;
/// Namespaces the apps live in.
const NAMESPACES: u64 = 8;
/// The addons: name, CPU (millicores), memory (MiB).
const ADDONS: [(&str, u64, u64); 3] = [("coredns-a", 300, 70), ("coredns-b", 300, 70), ("metrics-server", 400, 200)];

/// Builds the full cluster into `cluster` (which must track scheduling),
/// with the fleet's nodes and kubelets; returns the layout.
pub fn build(spec: &FleetSpec, timing: &KubeletTiming, cluster: &mut Cluster, kubelets: &mut Kubelets) -> Layout {
    let layout = fleet::build(&FleetSpec { pods_per_node: 0, ..*spec }, timing, cluster, kubelets);
    let mut rng = Rng::stream(spec.seed, 20);
    let per_node = spec.pods_per_node.max(2);
    for (i, node) in layout.nodes.iter().enumerate() {
        cluster.set_allocatable(node, &AllocatableSpec::default());
        let alloc = cluster.allocatable(node).map_or(4000, |a| a.cpu_millis);
        let mut target = alloc.saturating_sub(100 + rng.below(41));
        // DaemonSet pods tolerate both taints forever, as the DaemonSet
        // controller makes them.
        let forever = |key: &str| Toleration {
            key: key.to_string(),
            operator: TolerationOperator::Exists,
            effect: Some(nodewarden_model::TaintEffect::NoExecute),
            ..Toleration::default()
        };
        cluster.add_pod(&PodSpec {
            tolerations: vec![forever(TAINT_NOT_READY), forever(TAINT_UNREACHABLE)],
            ..pod(
                format!("kube-system/ds-{i:06}"),
                node,
                PodSchedulingSpec { requests: requests(100, 50), ..PodSchedulingSpec::default() },
                true,
            )
        });
        if i == 0 {
            for (name, cpu, mem) in ADDONS {
                target = target.saturating_sub(cpu);
                cluster.add_pod(&PodSpec {
                    tolerations: vec![Toleration {
                        key: nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_TAINT.to_string(),
                        operator: TolerationOperator::Exists,
                        ..Toleration::default()
                    }],
                    ..pod(
                        format!("kube-system/{name}"),
                        node,
                        PodSchedulingSpec {
                            owner: Some("ReplicaSet".into()),
                            priority_class: Some("system-cluster-critical".into()),
                            labels: [("k8s-app".to_string(), name.to_string())].into(),
                            requests: requests(cpu, mem),
                            ..PodSchedulingSpec::default()
                        },
                        false,
                    )
                });
            }
        }
        // Sizes drawn, then scaled so the node is filled to `target`.
        let count = per_node - 1;
        let sizes: Vec<u64> = (0..count).map(|_| [60, 80, 100, 120, 150, 200, 250][rng.below(7) as usize]).collect();
        let total: u64 = sizes.iter().sum::<u64>().max(1);
        let mut left = target;
        for (j, size) in sizes.iter().enumerate() {
            let cpu = if j + 1 == count { left } else { (size * target / total).min(left) };
            left -= cpu;
            let app = rng.below(APPS);
            let ns = format!("team-{}", app % NAMESPACES);
            let draw = rng.below(10);
            let (owner, grace) = match draw {
                0 => (None, 30),
                1 => (Some("StatefulSet"), 60),
                2 => (Some("ReplicaSet"), 300),
                _ => (Some("ReplicaSet"), 30),
            };
            cluster.add_pod(&pod(
                format!("{ns}/app{app:02}-{i:06}-{j:02}"),
                node,
                PodSchedulingSpec {
                    owner: owner.map(str::to_string),
                    grace_period: Some(Span::from_secs(grace)),
                    labels: [("app".to_string(), format!("app{app:02}"))].into(),
                    requests: requests(cpu, 64 << rng.below(4)),
                    ..PodSchedulingSpec::default()
                },
                false,
            ));
        }
    }
    for app in (0..APPS).filter(|a| a % 3 == 0) {
        let (min_available, max_unavailable) =
            if app % 9 == 0 { (None, Some(IntOrPercent::Int(0))) } else { (Some(IntOrPercent::Percent(90)), None) };
        cluster.put_budget(&BudgetSpec {
            name: format!("team-{}/app{app:02}", app % NAMESPACES),
            selector: nodewarden_model::LabelSelector {
                match_labels: [("app".to_string(), format!("app{app:02}"))].into(),
                match_expressions: vec![],
            },
            min_available,
            max_unavailable,
        });
    }
    layout
}

fn requests(cpu_millis: u64, memory_mib: u64) -> RequestsSpec {
    RequestsSpec { cpu: Some(CpuQuantity(cpu_millis)), memory: Some(MemoryQuantity(memory_mib << 20)) }
}

fn pod(name: String, node: &str, scheduling: PodSchedulingSpec, daemonset: bool) -> PodSpec {
    PodSpec { daemonset, scheduling: Box::new(scheduling), ..PodSpec::bound(&name, node) }
}

/// What happened to one critical addon (its replacements included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddonOutcome {
    /// The addon's original `namespace/name`.
    pub addon: String,
    /// When (a replacement of) it was first marked Unschedulable.
    pub unschedulable_since: Option<Timestamp>,
    /// When it was next bound, and to which node.
    pub bound: Option<(Timestamp, String)>,
    /// Pods the controller evicted for it (evictions that went through).
    pub evicted: u64,
    /// Evictions for it the API refused (budgets).
    pub refused: u64,
    /// The fewest pods whose eviction from one node would have made it
    /// fit, when it became Unschedulable; `None`: no node could take it
    /// even empty.
    pub minimum: Option<u64>,
}

/// Follows the critical addons of a cluster through a run.
#[derive(Clone, Debug, Default)]
pub struct AddonTracker {
    addons: Vec<AddonOutcome>,
}

impl AddonTracker {
    /// Tracks every critical addon the cluster has now (none when it keeps
    /// no scheduling data).
    pub fn new(cluster: &Cluster) -> AddonTracker {
        let addons = cluster
            .pods_in("kube-system")
            .filter(|p| !p.deleted)
            .filter(|p| {
                p.scheduling.as_ref().is_some_and(|s| {
                    is_critical_addon("kube-system", s.critical_annotation, s.priority_class.as_deref())
                })
            })
            .map(|p| AddonOutcome { addon: p.key.clone(), ..AddonOutcome::default() })
            .collect();
        AddonTracker { addons }
    }

    /// True when there is nothing to follow.
    pub fn is_empty(&self) -> bool {
        self.addons.is_empty()
    }

    /// Looks at the addons' current incarnations at `now`.
    pub fn observe(&mut self, now: Timestamp, cluster: &Cluster) {
        for a in &mut self.addons {
            let current = cluster
                .pods_in("kube-system")
                .filter(|p| !p.deleted && replacement_base(&p.key) == a.addon)
                .max_by_key(|p| p.seq());
            let Some(p) = current else { continue };
            if a.unschedulable_since.is_none() && p.unschedulable() {
                a.unschedulable_since = p.scheduling.as_ref().and_then(|s| s.unschedulable_since).or(Some(now));
                a.minimum = cluster.fewest_evictions_for(&p.key).map(|n| n as u64);
            }
            if a.unschedulable_since.is_some()
                && a.bound.is_none()
                && let Some(node) = &p.node
            {
                a.bound = Some((now, node.clone()));
            }
        }
    }

    /// Counts an eviction made for `addon` (the pod key the controller
    /// named; a replacement counts for its original).
    pub fn evicted(&mut self, addon: &str, done: bool) {
        let base = replacement_base(addon);
        if let Some(a) = self.addons.iter_mut().find(|a| a.addon == base) {
            if done {
                a.evicted += 1;
            } else {
                a.refused += 1;
            }
        }
    }

    /// What happened, per addon, in name order.
    pub fn outcomes(&self) -> Vec<AddonOutcome> {
        self.addons.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::AdmissionDefaults;

    fn cluster(nodes: usize) -> Cluster {
        let mut c = Cluster::new(AdmissionDefaults::default()).with_scheduling(true, true);
        let timing = KubeletTiming::default();
        let mut k = Kubelets::new(timing);
        build(&FleetSpec { nodes, zones: 3, pods_per_node: 30, seed: 1 }, &timing, &mut c, &mut k);
        c
    }

    #[test]
    fn the_cluster_is_full_and_nothing_pending() {
        let mut c = cluster(12);
        for n in c.nodes().map(|n| n.name.clone()).collect::<Vec<_>>() {
            let used: u64 =
                c.pods().filter(|p| p.node.as_deref() == Some(n.as_str())).map(|p| p.requests().cpu_millis).sum();
            assert!((3960..=4000).contains(&used), "{n}: {used}m used");
        }
        assert!(
            c.housekeeping(Timestamp::EPOCH)
                .iter()
                .all(|o| !matches!(o, nodewarden_engine::Observation::PodUpserted(_)))
        );
        assert!(c.budgets().len() == 8);
        let t = AddonTracker::new(&c);
        assert_eq!(t.outcomes().len(), 3);
    }

    #[test]
    fn a_lost_addon_is_unschedulable_and_its_minimum_is_known() {
        let mut c = cluster(12);
        let mut t = AddonTracker::new(&c);
        let later = Timestamp::EPOCH + Span::from_secs(5);
        // Its node is lost (the room it leaves there is no use).
        c.set_ready("node-000000", nodewarden_model::ConditionStatus::Unknown, later);
        c.delete_pod("kube-system/metrics-server");
        c.housekeeping(later);
        t.observe(later, &c);
        let m = &t.outcomes()[2];
        assert_eq!(m.addon, "kube-system/metrics-server");
        assert_eq!(m.unschedulable_since, Some(later));
        // 400m against at most 40m free, pods of at most a few hundred
        // millicores: at least two pods, and few.
        assert!(m.minimum.is_some_and(|n| (2..=8).contains(&n)), "{m:?}");
        assert_eq!(m.bound, None);
        t.evicted("kube-system/metrics-server-r1", true);
        t.evicted("kube-system/metrics-server-r1", false);
        assert_eq!((t.outcomes()[2].evicted, t.outcomes()[2].refused), (1, 1));
    }
}
