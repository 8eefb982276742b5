//! What the simulated scheduler and the rescheduler's checks read and do:
//! allocatable, the requests bound to each node, the first-fit pass that
//! binds pending pods, and the fewest evictions that would make room.
//!
//! Invariant: scheduling is tracked only when a scheduler or the
//! rescheduler runs (`with_scheduling`), so a node lifecycle run pays
//! nothing for it and its observations stay as they were.

use std::collections::BTreeMap;

use nodewarden_engine::{NodeSnapshot, Observation};
use nodewarden_model::{ConditionStatus, ConditionType, Placement, Resources, Timestamp};
use tracing::warn;

use super::Cluster;
use super::objects::SimPod;
use crate::rules::pod::{POD_READY, POD_SCHEDULED};
use crate::scenario::{AllocatableSpec, DEFAULT_ALLOCATABLE};
use crate::scheduler::{self, NodeView, PodView};

impl Cluster {
    /// Runs the simulated scheduler (`scheduler`), and sends pods'
    /// scheduling data and nodes' allocatable to the controller (`report`,
    /// when it runs the rescheduler). With either, pods and nodes keep
    /// what the scheduler reads, evictions honour budgets and grace
    /// periods, and controllers recreate the pods they own.
    pub fn with_scheduling(mut self, scheduler: bool, report: bool) -> Cluster {
        self.scheduler = scheduler;
        self.report = report;
        self
    }

    /// True when pods and nodes keep what the scheduler reads.
    pub fn tracks_scheduling(&self) -> bool {
        self.scheduler || self.report
    }

    /// The node's allocatable, when tracked.
    pub fn allocatable(&self, node: &str) -> Option<Resources> {
        self.allocatable.get(node).copied()
    }

    /// Sets a node's allocatable (tracked only when a scheduler or the
    /// rescheduler runs).
    pub fn set_allocatable(&mut self, node: &str, allocatable: &AllocatableSpec) -> Vec<Observation> {
        if !self.tracks_scheduling() || !self.nodes.contains_key(node) {
            warn!(node, "set-allocatable: no such node now, or no scheduler runs; ignored");
            return Vec::new();
        }
        let alloc = allocatable.resources();
        self.allocatable.insert(node.to_string(), alloc);
        self.epoch += 1;
        if self.report {
            return self.update_node(node, "set-allocatable", |n| n.allocatable = Some(alloc));
        }
        Vec::new()
    }

    /// The requests bound to each node, by pods that are not gone.
    fn used(&self) -> BTreeMap<&str, Resources> {
        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for p in self.pods.values().filter(|p| !p.deleted) {
            if let Some(n) = &p.node {
                *used.entry(n.as_str()).or_default() += p.requests();
            }
        }
        used
    }

    /// Every node as the scheduler sees it, in name order.
    fn node_views<'a>(&'a self, used: &BTreeMap<&str, Resources>) -> Vec<NodeView<'a>> {
        self.nodes
            .values()
            .map(|n| NodeView {
                name: &n.name,
                labels: &n.labels,
                taints: &n.taints,
                ready: n.conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::True),
                unschedulable: n.unschedulable,
                allocatable: self.allocatable.get(&n.name).copied().unwrap_or(DEFAULT_ALLOCATABLE),
                used: used.get(n.name.as_str()).copied().unwrap_or_default(),
            })
            .collect()
    }

    /// The fewest pods whose eviction from a single node would let pod
    /// `key` fit there, ignoring budgets and grace periods: only nodes it
    /// may use otherwise (Ready, schedulable, taints tolerated, placement),
    /// never evicting a critical addon, a DaemonSet or a mirror pod or a
    /// terminating one. Per node, the evictable pods are taken largest
    /// first (by CPU, then memory), which is exact when one resource falls
    /// short. `None`: no node could take it even emptied of evictable pods.
    pub fn fewest_evictions_for(&self, key: &str) -> Option<usize> {
        let pod = self.pods.get(key).filter(|p| !p.deleted)?;
        let no_placement = Placement::default();
        let view = PodView {
            requests: pod.requests(),
            tolerations: &pod.tolerations,
            placement: pod.scheduling.as_ref().map_or(&no_placement, |s| &s.placement),
        };
        let used = self.used();
        let mut by_node: BTreeMap<&str, Vec<Resources>> = BTreeMap::new();
        for p in self.pods.values().filter(|p| !p.deleted && !p.terminating && !p.daemonset) {
            let Some(node) = &p.node else { continue };
            let protected = p.scheduling.as_ref().is_some_and(|s| {
                s.mirror || {
                    let ns = p.key.split_once('/').map_or("", |(ns, _)| ns);
                    nodewarden_model::scheduling::is_critical_addon(
                        ns,
                        s.critical_annotation,
                        s.priority_class.as_deref(),
                    )
                }
            });
            if !protected {
                by_node.entry(node.as_str()).or_default().push(p.requests());
            }
        }
        let mut best: Option<usize> = None;
        for node in self.node_views(&used) {
            let mut candidates = by_node.remove(node.name).unwrap_or_default();
            candidates.sort_by(|a, b| b.cpu_millis.cmp(&a.cpu_millis).then(b.memory_bytes.cmp(&a.memory_bytes)));
            let mut n = node;
            for count in 0..=candidates.len() {
                if scheduler::fits(&view, &n).is_ok() {
                    best = Some(best.map_or(count, |b| b.min(count)));
                    break;
                }
                if !matches!(scheduler::fits(&view, &n), Err(scheduler::Misfit::Insufficient(_))) {
                    break;
                }
                if let Some(c) = candidates.get(count) {
                    n.used = n.used.saturating_sub(c);
                }
            }
        }
        best
    }

    /// One first-fit pass over the pending pods ([`crate::scheduler`]).
    pub(super) fn schedule(&mut self, now: Timestamp) -> Vec<Observation> {
        let mut pending: Vec<&SimPod> = self
            .pods
            .values()
            .filter(|p| !p.deleted && !p.terminating && p.node.is_none() && p.scheduling.is_some())
            .collect();
        if pending.is_empty() {
            return Vec::new();
        }
        pending.sort_by_key(|p| p.seq());
        let used = self.used();
        let no_placement = Placement::default();
        let views: Vec<PodView<'_>> = pending
            .iter()
            .map(|p| PodView {
                requests: p.requests(),
                tolerations: &p.tolerations,
                placement: p.scheduling.as_ref().map_or(&no_placement, |s| &s.placement),
            })
            .collect();
        let mut nodes = self.node_views(&used);
        let placed = scheduler::first_fit(&views, &mut nodes);
        let decisions: Vec<(String, Option<String>)> = pending
            .iter()
            .zip(placed)
            .map(|(p, i)| (p.key.clone(), i.and_then(|i| nodes.get(i)).map(|n| n.name.to_string())))
            .collect();
        let mut out = Vec::new();
        for (key, node) in decisions {
            match node {
                Some(node) => out.extend(self.update_pod(&key, "bind", |p| {
                    p.node = Some(node);
                    if let Some(s) = &mut p.scheduling {
                        s.unschedulable_since = None;
                    }
                    p.conditions.insert(POD_SCHEDULED, ConditionStatus::True);
                    // Its kubelet starts it at once.
                    if let Some(r) = p.conditions.get_mut(POD_READY) {
                        *r = ConditionStatus::True;
                    }
                })),
                None => out.extend(self.update_pod(&key, "mark-unschedulable", |p| {
                    if let Some(s) = &mut p.scheduling
                        && s.unschedulable_since.is_none()
                    {
                        s.unschedulable_since = Some(now);
                    }
                    p.conditions.insert(POD_SCHEDULED, ConditionStatus::False);
                })),
            }
        }
        out
    }
}

/// True when a node change can change a scheduling verdict (not a mere
/// heartbeat).
pub(super) fn scheduling_view_changed(a: &NodeSnapshot, b: &NodeSnapshot) -> bool {
    let ready = |n: &NodeSnapshot| n.conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status);
    a.taints != b.taints
        || a.unschedulable != b.unschedulable
        || a.labels != b.labels
        || a.allocatable != b.allocatable
        || ready(a) != ready(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::*;

    #[test]
    fn scheduler_binds_first_fit_and_marks_the_rest_unschedulable() {
        let mut c = world(&format!(
            "{NODES}pods:\n\
                 - {{name: d/p1, requests: {{cpu: 600m}}}}\n\
                 - {{name: d/p2, requests: {{cpu: 600m}}}}\n\
                 - {{name: d/p3, requests: {{cpu: 300m}}}}\n\
                 - {{name: d/p4, requests: {{cpu: 600m}}}}\n"
        ));
        let obs = c.housekeeping(t(5));
        assert_eq!(bound(&c, "d/p1").as_deref(), Some("a"));
        assert_eq!(bound(&c, "d/p2").as_deref(), Some("b"));
        assert_eq!(bound(&c, "d/p3").as_deref(), Some("a"));
        assert_eq!(bound(&c, "d/p4"), None);
        let p4 = c.pod("d/p4").unwrap();
        assert!(p4.unschedulable());
        assert_eq!(p4.scheduling.as_ref().unwrap().unschedulable_since, Some(t(5)));
        assert_eq!(p4.conditions[POD_SCHEDULED], ConditionStatus::False);
        // Four watch events: three binds and the mark.
        assert_eq!(obs.len(), 4, "{obs:?}");
        assert!(obs.iter().any(|o| matches!(o, Observation::PodUpserted(p) if p.node.as_deref() == Some("a"))));
        // Nothing changed: nothing to do, and the mark keeps its time.
        assert!(c.housekeeping(t(9)).is_empty());
        // Room appears (p2 deleted): p4 is bound, no longer unschedulable.
        c.delete_pod("d/p2");
        c.housekeeping(t(12));
        assert_eq!(bound(&c, "d/p4").as_deref(), Some("b"));
        assert!(!c.pod("d/p4").unwrap().unschedulable());
        assert_eq!(c.pod("d/p4").unwrap().conditions[POD_SCHEDULED], ConditionStatus::True);
    }

    /// The `mark-unschedulable` event, in a file without the
    /// scheduler: a pod (a controller's replacement too) is marked at
    /// the event's time, keeps its first mark, and a bound pod is left
    /// alone. With the rescheduler on, the controller hears of it.
    #[test]
    fn mark_unschedulable_is_the_schedulers_verdict_without_the_scheduler() {
        let mut c = world(
            "config: {enable-rescheduler: true}\n\
                 nodes: [{name: a, ready: \"True\"}]\n\
                 pods:\n\
                 - {name: kube-system/dns, owner: ReplicaSet, priority-class: system-cluster-critical}\n\
                 - {name: d/web, node: a}\n",
        );
        let obs = c.mark_unschedulable("kube-system/dns", t(3));
        let dns = c.pod("kube-system/dns").unwrap();
        assert!(dns.unschedulable());
        assert_eq!(dns.conditions[POD_SCHEDULED], ConditionStatus::False);
        assert!(matches!(obs.as_slice(), [Observation::PodUpserted(p)]
                if p.scheduling.as_ref().and_then(|s| s.unschedulable_since) == Some(t(3))));
        assert!(c.mark_unschedulable("kube-system/dns", t(7)).is_empty(), "the first mark stays");
        assert!(c.mark_unschedulable("d/web", t(7)).is_empty(), "a bound pod");
        assert!(!c.pod("d/web").unwrap().unschedulable());
        assert!(c.mark_unschedulable("d/nothing", t(7)).is_empty());
        // Its replacement, which no file can define, is marked by name.
        c.delete_pod("kube-system/dns");
        assert!(!c.pod("kube-system/dns-r1").unwrap().unschedulable(), "no scheduler marks it");
        c.mark_unschedulable("kube-system/dns-r1", t(9));
        let r1 = c.pod("kube-system/dns-r1").unwrap();
        assert_eq!(r1.scheduling.as_ref().and_then(|s| s.unschedulable_since), Some(t(9)));
        // Without scheduling facts the pod gets them (default grace).
        let mut plain = world("pods: [{name: d/p}]\n");
        plain.mark_unschedulable("d/p", t(1));
        let s = plain.pod("d/p").unwrap().scheduling.clone().unwrap();
        assert_eq!(
            (s.unschedulable_since, s.termination_grace),
            (Some(t(1)), PodScheduling::DEFAULT_TERMINATION_GRACE)
        );
    }

    #[test]
    fn scheduler_respects_node_state_taints_and_placement() {
        let mut c = world(
            r#"
cluster: {scheduler: true}
nodes:
- {name: a, ready: "False"}
- {name: b, ready: "True", unschedulable: true}
- {name: c, ready: "True", taints: [{key: CriticalAddonsOnly, value: nodewarden, effect: NoSchedule}]}
- {name: d, ready: "True", labels: {disk: ssd}}
- {name: e, ready: "True"}
pods:
- {name: d/plain}
- {name: kube-system/dns, tolerations: [{key: CriticalAddonsOnly, operator: Exists}]}
- {name: d/ssd, node-selector: {disk: ssd}}
- name: d/not-e
  affinity: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: NotIn, values: [d, e]}]}]}
"#,
        );
        c.housekeeping(t(0));
        assert_eq!(bound(&c, "d/plain").as_deref(), Some("d"));
        assert_eq!(bound(&c, "kube-system/dns").as_deref(), Some("c"));
        assert_eq!(bound(&c, "d/ssd").as_deref(), Some("d"));
        assert!(c.pod("d/not-e").unwrap().unschedulable(), "a, b, c are out, d and e excluded");
    }

    #[test]
    fn terminating_pods_hold_their_room_until_gone() {
        let mut c = world(&format!(
            "{NODES}pods:\n\
                 - {{name: d/old, node: a, requests: {{cpu: 1}}, grace-period: 20s}}\n\
                 - {{name: d/full, node: b, requests: {{cpu: 1}}}}\n\
                 - {{name: d/new, requests: {{cpu: 1}}}}\n"
        ));
        c.housekeeping(t(0));
        assert!(c.pod("d/new").unwrap().unschedulable());
        let r = c.apply_action(t(1), &evict(1, &c, "d/old", None));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert!(matches!(&r.observations[1], Observation::PodUpserted(p) if p.terminating));
        assert!(c.pod("d/old").unwrap().is_terminating());
        assert_eq!(c.next_due(), Some(t(21)), "its own grace period");
        c.housekeeping(t(20));
        assert!(c.pod("d/new").unwrap().unschedulable(), "still there at 20s");
        let obs = c.housekeeping(t(21));
        assert!(obs.contains(&Observation::PodDeleted { key: "d/old".into() }), "{obs:?}");
        assert!(c.pod("d/old").unwrap().deleted);
        assert_eq!(bound(&c, "d/new").as_deref(), Some("a"));
        assert_eq!(c.next_due(), None);
    }

    #[test]
    fn eviction_grace_overrides_and_zero_is_at_once() {
        let mut c = world(&format!(
            "{NODES}pods:\n\
                 - {{name: d/long, node: a, grace-period: 5m}}\n\
                 - {{name: d/now, node: a, grace-period: 5m}}\n"
        ));
        c.apply_action(t(1), &evict(1, &c, "d/long", Some(Span::from_secs(10))));
        assert_eq!(c.next_due(), Some(t(11)));
        let r = c.apply_action(t(1), &evict(2, &c, "d/now", Some(Span::ZERO)));
        assert_eq!(r.observations[1], Observation::PodDeleted { key: "d/now".into() });
        // Evicting a terminating pod is a contract violation.
        let r = c.apply_action(t(2), &evict(3, &c, "d/long", None));
        assert!(r.violation.is_some(), "{r:?}");
    }

    /// The loop as the rescheduler will drive it: the addon fits
    /// nowhere; the node is tainted `CriticalAddonsOnly` and pods are
    /// evicted with a short grace; their replacements cannot use the
    /// room; when the grace ends the addon is bound there.
    #[test]
    fn room_made_by_taint_and_evictions_goes_to_the_addon() {
        let mut c = world(&format!(
            "{NODES}pods:\n\
                 - {{name: d/w1, node: a, owner: ReplicaSet, requests: {{cpu: 600m}}, grace-period: 5m}}\n\
                 - {{name: d/w2, node: a, owner: ReplicaSet, requests: {{cpu: 400m}}}}\n\
                 - {{name: d/w3, node: b, owner: ReplicaSet, requests: {{cpu: 1}}}}\n\
                 - {{name: kube-system/dns, owner: ReplicaSet, requests: {{cpu: 500m}}, priority-class: system-cluster-critical, \
                    tolerations: [{{key: CriticalAddonsOnly, operator: Exists}}]}}\n"
        ));
        c.housekeeping(t(0));
        assert!(c.pod("kube-system/dns").unwrap().unschedulable());
        let taint = nodewarden_model::Taint {
            value: nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_VALUE.into(),
            ..nodewarden_model::Taint::new(
                nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_TAINT,
                nodewarden_model::TaintEffect::NoSchedule,
            )
        };
        let patch = ActionKind::PatchNodeTaints {
            node: "a".into(),
            add: vec![taint],
            remove: vec![],
            slot: nodewarden_engine::WriteSlot::CriticalAddonsTaint,
        };
        assert_eq!(c.apply_action(t(20), &act(1, patch)).outcome, Some(WriteOutcome::Done));
        let r = c.apply_action(t(20), &evict(2, &c, "d/w1", Some(Span::from_secs(10))));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        c.housekeeping(t(20));
        // The replacement exists, cannot use the tainted room, and the
        // terminating pod still holds it.
        assert!(c.pod("d/w1-r1").unwrap().unschedulable());
        assert_eq!(bound(&c, "kube-system/dns"), None);
        assert_eq!(c.next_due(), Some(t(30)));
        c.housekeeping(t(30));
        assert_eq!(bound(&c, "kube-system/dns").as_deref(), Some("a"));
        assert!(c.pod("d/w1-r1").unwrap().unschedulable());
    }

    #[test]
    fn unschedulable_since_now_is_the_creation_instant() {
        let mut c = world(NODES);
        let s = parse_scenario("pods: [{name: d/p, unschedulable-since: now}]").unwrap_or_else(|e| panic!("{e}"));
        c.add_pod_at(&s.pods[0], t(7));
        assert_eq!(c.pod("d/p").and_then(|p| p.scheduling.as_ref()?.unschedulable_since), Some(t(7)));
    }

    #[test]
    fn node_lifecycle_runs_send_no_scheduling_data() {
        let mut plain = cluster();
        assert!(!plain.tracks_scheduling());
        assert!(plain.pod("default/p").unwrap().scheduling.is_none());
        assert!(plain.housekeeping(t(1)).is_empty());
        assert_eq!(plain.next_due(), None);
        // The rescheduler on: pods and nodes carry it to the controller.
        let s = parse_scenario(
            "config: {enable-rescheduler: true}\nnodes: [{name: a, ready: 'True'}]\npods: [{name: d/p, node: a}]",
        )
        .unwrap();
        let (c, _) = Cluster::from_scenario(&s);
        let state = c.state();
        assert!(
            state
                .iter()
                .any(|o| matches!(o, Observation::NodeUpserted(n) if n.allocatable == Some(DEFAULT_ALLOCATABLE)))
        );
        assert!(state.iter().any(|o| matches!(o, Observation::PodUpserted(p) if p.scheduling.is_some())));
        // The scheduler alone: kept for it, not sent.
        let s = parse_scenario(
            "cluster: {scheduler: true}\nnodes: [{name: a, ready: 'True'}]\npods: [{name: d/p, node: a}]",
        )
        .unwrap();
        let (c, _) = Cluster::from_scenario(&s);
        assert!(c.pod("d/p").unwrap().scheduling.is_some());
        assert!(c.state().iter().all(|o| match o {
            Observation::PodUpserted(p) => p.scheduling.is_none(),
            Observation::NodeUpserted(n) => n.allocatable.is_none(),
            _ => true,
        }));
    }
}
