//! Taint writes: NoExecute decisions and the tainting pass (§E), NoSchedule
//! condition taints and label reconciliation (§D), and the legacy eviction
//! pass with `DeletePods` (§J4).

use std::collections::BTreeMap;

use nodewarden_cluster::Cluster;
use nodewarden_engine::{ActionKind, WriteSlot};
use nodewarden_model::{ConditionStatus, ConditionType, Span, Taint, TaintEffect, Timestamp, keys};

use super::queue::RefAttempt;
use super::{Eviction, ReferenceModel, zone_of};

fn noexecute(key: &str) -> Taint {
    Taint::new(key, TaintEffect::NoExecute)
}

fn has(taints: &[Taint], key: &str, effect: TaintEffect) -> bool {
    taints.iter().any(|t| t.key == key && t.effect == effect)
}

/// The NoExecute taint for a Ready status, and its opposite.
fn wanted_for(status: ConditionStatus) -> Option<(&'static str, &'static str)> {
    match status {
        ConditionStatus::True => None,
        ConditionStatus::False => Some((keys::TAINT_NOT_READY, keys::TAINT_UNREACHABLE)),
        ConditionStatus::Unknown => Some((keys::TAINT_UNREACHABLE, keys::TAINT_NOT_READY)),
    }
}

/// The NoSchedule taint keys a node's conditions and spec call for (§D1).
fn noschedule_wanted(conditions: &[nodewarden_model::NodeCondition], unschedulable: bool) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = conditions
        .iter()
        .filter_map(|c| match (&c.kind, c.status) {
            (ConditionType::Ready, ConditionStatus::False) => Some(keys::TAINT_NOT_READY),
            (ConditionType::Ready, ConditionStatus::Unknown) => Some(keys::TAINT_UNREACHABLE),
            (ConditionType::MemoryPressure, ConditionStatus::True) => Some(keys::TAINT_MEMORY_PRESSURE),
            (ConditionType::DiskPressure, ConditionStatus::True) => Some(keys::TAINT_DISK_PRESSURE),
            (ConditionType::PidPressure, ConditionStatus::True) => Some(keys::TAINT_PID_PRESSURE),
            (ConditionType::NetworkUnavailable, ConditionStatus::True) => Some(keys::TAINT_NETWORK_UNAVAILABLE),
            _ => None,
        })
        .collect();
    if unschedulable {
        out.push(keys::TAINT_UNSCHEDULABLE);
    }
    out
}

const MANAGED_NOSCHEDULE: [&str; 7] = [
    keys::TAINT_NOT_READY,
    keys::TAINT_UNREACHABLE,
    keys::TAINT_MEMORY_PRESSURE,
    keys::TAINT_DISK_PRESSURE,
    keys::TAINT_PID_PRESSURE,
    keys::TAINT_NETWORK_UNAVAILABLE,
    keys::TAINT_UNSCHEDULABLE,
];

impl ReferenceModel {
    /// Swaps `wanted` in and `opposite` out in one patch (`SwapNodeControllerTaint`).
    /// A taint already there with the same key, effect and value is kept as
    /// it is. Returns whether a write was made.
    fn swap_taint(&mut self, now: Timestamp, cluster: &mut Cluster, name: &str, wanted: &str, opposite: &str) -> bool {
        let Some(node) = cluster.node(name) else { return false };
        let mut add = vec![];
        if !node.taints.iter().any(|t| t.key == wanted && t.effect == TaintEffect::NoExecute && t.value.is_empty()) {
            let mut t = noexecute(wanted);
            t.time_added = Some(now);
            add.push(t);
        }
        let remove: Vec<Taint> =
            if has(&node.taints, opposite, TaintEffect::NoExecute) { vec![noexecute(opposite)] } else { vec![] };
        if add.is_empty() && remove.is_empty() {
            return false;
        }
        let kind =
            ActionKind::PatchNodeTaints { node: name.to_string(), add, remove, slot: WriteSlot::NoExecuteTaints };
        self.write(now, cluster, kind)
    }

    /// `markNodeAsReachable`: both controller NoExecute taints go (whoever
    /// added them) and the node leaves its zone's queue.
    pub(super) fn mark_reachable(&mut self, now: Timestamp, cluster: &mut Cluster, name: &str) {
        let Some(node) = cluster.node(name) else { return };
        let zone = zone_of(&node.labels);
        let remove: Vec<Taint> = [keys::TAINT_UNREACHABLE, keys::TAINT_NOT_READY]
            .into_iter()
            .filter(|k| has(&node.taints, k, TaintEffect::NoExecute))
            .map(noexecute)
            .collect();
        if !remove.is_empty() {
            let kind = ActionKind::PatchNodeTaints {
                node: name.to_string(),
                add: vec![],
                remove,
                slot: WriteSlot::NoExecuteTaints,
            };
            self.write(now, cluster, kind);
        }
        if let Some(q) = self.queues.get_mut(&zone) {
            q.remove(&name.to_string());
        }
    }

    /// `processTaintBaseEviction` on the current Ready status (§E1–E4).
    /// While every zone is down the immediate swap is not made either (our
    /// choice): the node is queued, and queues are paused.
    pub(super) fn taint_decision(
        &mut self,
        now: Timestamp,
        cluster: &mut Cluster,
        name: &str,
        status: ConditionStatus,
    ) {
        let Some((wanted, opposite)) = wanted_for(status) else {
            self.mark_reachable(now, cluster, name);
            return;
        };
        let Some(node) = cluster.node(name) else { return };
        let has_wanted = has(&node.taints, wanted, TaintEffect::NoExecute);
        let has_opposite = has(&node.taints, opposite, TaintEffect::NoExecute);
        if has_opposite && !self.all_down {
            self.swap_taint(now, cluster, name, wanted, opposite);
            return;
        }
        let zone = zone_of(&node.labels);
        if let Some(q) = self.queues.get_mut(&zone) {
            // E3: a node processed earlier whose taint is gone (removed by
            // hand) is queued again; one still waiting keeps its place
            // (ours: upstream re-queues it too, moving it to the back).
            if !has_wanted && q.done.contains(name) {
                q.remove(&name.to_string());
            }
            q.add(name.to_string(), now);
        }
    }

    /// `doNoScheduleTaintingPass` and `reconcileNodeLabels`, for every node
    /// (a level-triggered reading of "on every node event").
    pub(super) fn noschedule_and_labels(&mut self, now: Timestamp, cluster: &mut Cluster) {
        let names: Vec<String> = cluster.nodes().map(|n| n.name.clone()).collect();
        for name in names {
            let Some(node) = cluster.node(&name) else { continue };
            let wanted = noschedule_wanted(&node.conditions, node.unschedulable);
            let have: Vec<&Taint> = node
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::NoSchedule && MANAGED_NOSCHEDULE.contains(&t.key.as_str()))
                .collect();
            let add: Vec<Taint> = wanted
                .iter()
                .filter(|k| !have.iter().any(|t| t.key == **k))
                .map(|k| Taint { time_added: Some(now), ..Taint::new(*k, TaintEffect::NoSchedule) })
                .collect();
            let remove: Vec<Taint> =
                have.iter().filter(|t| !wanted.contains(&t.key.as_str())).map(|t| (*t).clone()).collect();
            let mut labels = BTreeMap::new();
            for (stable, beta) in keys::RECONCILED_LABELS {
                if let Some(v) = node.labels.get(stable)
                    && node.labels.get(beta) != Some(v)
                {
                    labels.insert(beta.to_string(), v.clone());
                }
            }
            if !add.is_empty() || !remove.is_empty() {
                let kind =
                    ActionKind::PatchNodeTaints { node: name.clone(), add, remove, slot: WriteSlot::NoScheduleTaints };
                self.write(now, cluster, kind);
            }
            if !labels.is_empty() {
                self.write(now, cluster, ActionKind::PatchNodeLabels { node: name.clone(), labels });
            }
        }
    }

    /// `doNoExecuteTaintingPass` (§E5).
    /// Nothing drains while every zone is down, not even the queue of a
    /// zone without state (our choice; upstream leaves it running).
    pub(super) fn tainting_pass(&mut self, now: Timestamp, cluster: &mut Cluster) {
        if self.all_down {
            return;
        }
        let zones: Vec<_> = self.queues.keys().cloned().collect();
        for zone in zones {
            let Some(mut q) = self.queues.remove(&zone) else { continue };
            let mut swaps = vec![];
            q.try_drain(now, |name| {
                let Some(node) = cluster.node(name) else { return RefAttempt::Done };
                let Some(ready) = node.conditions.iter().find(|c| c.kind == ConditionType::Ready) else {
                    return RefAttempt::Retry(Span::from_millis(50));
                };
                if let Some((wanted, opposite)) = wanted_for(ready.status) {
                    // Applied right away, so the next item sees the cluster as it is.
                    swaps.push((name.clone(), wanted, opposite));
                }
                RefAttempt::Done
            });
            self.queues.insert(zone, q);
            for (name, wanted, opposite) in swaps {
                self.swap_taint(now, cluster, &name, wanted, opposite);
            }
        }
    }

    /// `doEvictionPass` (§J4): each node drained has its pods deleted.
    pub(super) fn legacy_pass(&mut self, now: Timestamp, cluster: &mut Cluster) {
        if self.all_down {
            return;
        }
        let zones: Vec<_> = self.queues.keys().cloned().collect();
        for zone in zones {
            let Some(mut q) = self.queues.remove(&zone) else { continue };
            let mut drained = vec![];
            q.try_drain(now, |name| {
                if cluster.node(name).is_none() {
                    return RefAttempt::Done;
                }
                // Ours (docs/semantics.md): a queued node that is Ready, has
                // sent a heartbeat the monitor has not taken in, or is no
                // longer past the timeout waits for the next monitor pass.
                if !self.legacy_still_due(now, cluster, name) {
                    return RefAttempt::Retry(self.cfg.node_monitor_period);
                }
                drained.push(name.clone());
                RefAttempt::Done
            });
            self.queues.insert(zone, q);
            for name in drained {
                self.delete_pods(now, cluster, &name, None);
                self.evictions.insert(name, Eviction::Evicted);
            }
        }
    }

    /// `DeletePods` for the node's pods (or just `only`): `NodeLost` first,
    /// on every pod, terminating ones included (J4); then deletion, sparing
    /// terminating and DaemonSet pods.
    pub(super) fn delete_pods(&mut self, now: Timestamp, cluster: &mut Cluster, node: &str, only: Option<&str>) {
        let pods: Vec<_> = cluster
            .pods()
            .filter(|p| !p.deleted && p.node.as_deref() == Some(node))
            .filter(|p| only.is_none_or(|k| k == p.key))
            .map(|p| (p.key.clone(), p.uid.clone(), p.daemonset, p.terminating, p.reason.clone()))
            .collect();
        for (key, uid, daemonset, terminating, reason) in pods {
            if reason.as_deref() != Some(nodewarden_cluster::cluster::POD_REASON_NODE_LOST) {
                let kind = ActionKind::SetPodNodeLost { pod: key.clone(), uid: uid.clone(), node: node.to_string() };
                self.write(now, cluster, kind);
            }
            if terminating || daemonset {
                continue;
            }
            let kind = ActionKind::DeletePod {
                pod: key.clone(),
                uid,
                mode: self.cfg.pod_deletion_mode,
                why: super::taint_manager::why(&key, node, now),
            };
            self.write(now, cluster, kind);
        }
    }
}
