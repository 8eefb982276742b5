//! The reference model: the controller's rules as one plain struct that
//! reads the whole cluster at each instant (as a lister would) and writes
//! to it directly. No ECS, no indexes, no incremental bookkeeping beyond
//! what the rules themselves remember (probe times, queues, deadlines).
//!
//! Written from `docs/upstream.md` and the choices in
//! `docs/semantics.md`: decisions on the *current* Ready condition in the
//! same pass, ties broken by node name, and within one instant the order
//! pod assignment, health monitor (with disruption handling), NoSchedule
//! taints and labels, tainting (or legacy eviction) pass, taint manager.
//!
//! Event-driven rules (pod assignment, the taint manager) are fed by
//! comparing the cluster with what the model saw at its previous instant;
//! the driver ticks after every external change, so no event is merged
//! with another.

mod monitor;
pub mod queue;
mod rescheduler;
mod taint_manager;
mod taints;

use std::collections::BTreeMap;

use nodewarden_cluster::Cluster;
use nodewarden_engine::{Action, ActionId, ActionKind, WriteOutcome, ZoneState};
use nodewarden_model::{ConditionStatus, ControllerConfig, NodeCondition, Span, Timestamp, ZoneKey, keys};

use queue::RefQueue;
use rescheduler::RefRescheduler;
use taint_manager::TaintManager;

use crate::sched::SchedSide;

/// The tainting (and legacy eviction) pass period (`NodeEvictionPeriod`).
pub const TAINTING_PERIOD: Span = Span::from_millis(100);

/// What the monitor remembers about one node (`nodeHealthData`).
#[derive(Clone, Debug, PartialEq)]
struct Health {
    probe: Timestamp,
    ready_transition: Timestamp,
    /// The Ready condition as of the last rebuild of the record.
    saved_ready: Option<NodeCondition>,
    /// The last Lease renew time that counted.
    saved_lease: Option<Timestamp>,
}

/// Legacy eviction status of a node (`nodeEvictionMap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Eviction {
    ToBeEvicted,
    Evicted,
}

/// One zone as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RefZone {
    /// The zone.
    pub key: ZoneKey,
    /// Its state; `None` when it has no counted node.
    pub state: Option<ZoneState>,
    /// Its limiter's rate.
    pub rate: f64,
}

/// The reference controller.
#[derive(Clone, Debug)]
pub struct ReferenceModel {
    cfg: ControllerConfig,
    start: Timestamp,
    next_monitor: Timestamp,
    next_tainting: Timestamp,
    /// Nodes seen by a monitor pass (the known set) and their health.
    health: BTreeMap<String, Health>,
    /// Every node as it was at the previous instant (deletions, zone moves).
    last_nodes: BTreeMap<String, ZoneKey>,
    zone_states: BTreeMap<ZoneKey, ZoneState>,
    queues: BTreeMap<ZoneKey, RefQueue<String>>,
    all_down: bool,
    evictions: BTreeMap<String, Eviction>,
    /// Pods as the pod-assignment handler last saw them: uid and node.
    assigned: BTreeMap<String, (String, Option<String>)>,
    tm: TaintManager,
    resched: RefRescheduler,
    next_id: u64,
    writes: Vec<ActionKind>,
}

/// The zone key of a node's labels (§G1): beta labels win, even empty.
pub fn zone_of(labels: &BTreeMap<String, String>) -> ZoneKey {
    let pick = |beta: &str, ga: &str| labels.get(beta).or(labels.get(ga)).cloned().unwrap_or_default();
    ZoneKey::new(
        pick(keys::LABEL_FAILURE_DOMAIN_REGION, keys::LABEL_TOPOLOGY_REGION),
        pick(keys::LABEL_FAILURE_DOMAIN_ZONE, keys::LABEL_TOPOLOGY_ZONE),
    )
}

/// The first grid point `start + k * period` at or after `t`.
pub fn grid_at_or_after(start: Timestamp, period: Span, t: Timestamp) -> Timestamp {
    if t <= start {
        return start;
    }
    let p = period.as_nanos();
    let k = ((t - start).as_nanos() + p - 1) / p;
    start + Span::from_nanos(k.saturating_mul(p))
}

impl ReferenceModel {
    /// A controller started at `start` with nothing known.
    pub fn new(cfg: ControllerConfig, start: Timestamp) -> ReferenceModel {
        ReferenceModel {
            cfg,
            start,
            next_monitor: start,
            next_tainting: start,
            health: BTreeMap::new(),
            last_nodes: BTreeMap::new(),
            zone_states: BTreeMap::new(),
            queues: BTreeMap::new(),
            all_down: false,
            evictions: BTreeMap::new(),
            assigned: BTreeMap::new(),
            tm: TaintManager::default(),
            resched: RefRescheduler::new(start),
            next_id: 0,
            writes: Vec::new(),
        }
    }

    /// Runs everything due at `now` against `cluster` (and, for the
    /// critical-addon rescheduler, its scheduling facts and budgets),
    /// applying each write at once; returns the writes made.
    pub fn tick(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide) -> Vec<ActionKind> {
        self.writes.clear();
        self.ingest(cluster);
        self.pod_assignment(now, cluster);
        if now >= self.next_monitor {
            self.monitor_pass(now, cluster);
            self.next_monitor = grid_at_or_after(self.start, self.cfg.node_monitor_period, now + Span::from_nanos(1));
        }
        self.noschedule_and_labels(now, cluster);
        if now >= self.next_tainting {
            if self.cfg.enable_taint_manager {
                self.tainting_pass(now, cluster);
            } else {
                self.legacy_pass(now, cluster);
            }
            self.next_tainting = grid_at_or_after(self.start, TAINTING_PERIOD, now + Span::from_nanos(1));
        }
        if self.cfg.enable_taint_manager {
            self.taint_manager(now, cluster);
        }
        // Last, on what node lifecycle made of the instant.
        self.rescheduler(now, cluster, side);
        std::mem::take(&mut self.writes)
    }

    /// The earliest instant at which the model has something to do.
    pub fn next_due(&self) -> Timestamp {
        let mut due = self.next_monitor;
        if self.cfg.enable_rescheduler {
            due = due.min(self.resched.next_pass);
        }
        for q in self.queues.values() {
            if let Some(at) = q.next_due() {
                due = due.min(grid_at_or_after(self.start, TAINTING_PERIOD, at.max(self.next_tainting)));
            }
        }
        if let Some(at) = self.tm.next_deadline() {
            due = due.min(at);
        }
        due
    }

    /// Every zone the model knows, by key.
    pub fn zones(&self) -> Vec<RefZone> {
        self.queues
            .iter()
            .map(|(key, q)| RefZone {
                key: key.clone(),
                state: self.zone_states.get(key).copied(),
                rate: q.bucket.rate(),
            })
            .collect()
    }

    /// Whether the model is in master disruption mode.
    pub fn all_zones_down(&self) -> bool {
        self.all_down
    }

    /// Applies one write to the cluster; true when it was accepted.
    fn write(&mut self, now: Timestamp, cluster: &mut Cluster, kind: ActionKind) -> bool {
        self.next_id += 1;
        let applied = cluster.apply_action(now, &Action { id: ActionId(self.next_id), kind: kind.clone() });
        if let ActionKind::PatchNodeTaints { node, .. } = &kind
            && self.cfg.enable_taint_manager
        {
            // Each write is a node event for the taint manager: one that
            // leaves no NoExecute taint cancels at once (I4), even if a
            // later write of this instant adds one back.
            self.taint_manager_node_event(now, cluster, node);
        }
        self.writes.push(kind);
        !matches!(applied.outcome, Some(WriteOutcome::Failed(_)))
    }

    /// What changed since the previous instant that the rules react to at
    /// once: a deleted node is forgotten (and leaves its queue), a node that
    /// moved zones leaves the old zone's queue.
    fn ingest(&mut self, cluster: &Cluster) {
        let now_nodes: BTreeMap<String, ZoneKey> =
            cluster.nodes().map(|n| (n.name.clone(), zone_of(&n.labels))).collect();
        for (name, zone) in &self.last_nodes {
            let moved = match now_nodes.get(name) {
                None => {
                    self.health.remove(name);
                    self.evictions.remove(name);
                    true
                }
                Some(z) => z != zone,
            };
            if moved {
                if let Some(q) = self.queues.get_mut(zone) {
                    q.remove(name);
                }
                if self.evictions.get(name) == Some(&Eviction::ToBeEvicted) {
                    self.evictions.remove(name);
                }
            }
        }
        self.last_nodes = now_nodes;
    }

    /// `processPod` (§H3, §J5): a pod newly bound to a node the monitor has
    /// seen, whose Ready condition is not True, is marked
    /// NotReady; in legacy mode, a pod found on an evicted node past its
    /// timeout is deleted at once.
    fn pod_assignment(&mut self, now: Timestamp, cluster: &mut Cluster) {
        let pods: Vec<(String, String, Option<String>)> =
            cluster.pods().filter(|p| !p.deleted).map(|p| (p.key.clone(), p.uid.clone(), p.node.clone())).collect();
        let mut seen = BTreeMap::new();
        let mut bound = Vec::new();
        for (key, uid, node) in pods {
            let fresh = match self.assigned.get(&key) {
                None => true,
                Some((u, n)) => *u != uid || *n != node,
            };
            if fresh && let Some(n) = &node {
                bound.push((key.clone(), n.clone()));
            }
            seen.insert(key, (uid, node));
        }
        self.assigned = seen;
        for (key, node) in bound {
            let Some(h) = self.health.get(&node).cloned() else { continue };
            // Ours (see docs/fuzzing.md): the node's *current* Ready status
            // counts, not the one the last pass saved; newer, never staler.
            let Some(saved) = cluster.node(&node).and_then(|n| {
                n.conditions.iter().find(|c| c.kind == nodewarden_model::ConditionType::Ready).map(|c| c.status)
            }) else {
                continue;
            };
            if saved == ConditionStatus::True {
                continue;
            }
            self.mark_pod_not_ready(now, cluster, &key);
            if !self.cfg.enable_taint_manager
                && self.evictions.get(&node) == Some(&Eviction::Evicted)
                && !self.heartbeat_since_last_pass(cluster, &node)
            {
                let since = if saved == ConditionStatus::False { h.ready_transition } else { h.probe };
                if now > since + self.cfg.pod_eviction_timeout {
                    self.delete_pods(now, cluster, &node, Some(&key));
                }
            }
        }
    }

    /// Whether the node sent a heartbeat (new Ready heartbeat, Ready
    /// appearing, newer Lease) that the last monitor pass did not take in.
    fn heartbeat_since_last_pass(&self, cluster: &Cluster, name: &str) -> bool {
        let Some(h) = self.health.get(name) else { return false };
        let ready = cluster
            .node(name)
            .and_then(|n| n.conditions.iter().find(|c| c.kind == nodewarden_model::ConditionType::Ready));
        let status_beat = match (&h.saved_ready, ready) {
            (Some(saved), Some(now)) => saved.last_heartbeat != now.last_heartbeat,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let lease_beat = cluster.lease(name).is_some_and(|l| h.saved_lease.is_none_or(|s| s < l));
        status_beat || lease_beat
    }

    /// Whether a node drained from the legacy evictor is still to be
    /// evicted: not Ready, no heartbeat since the last pass, past the timeout.
    fn legacy_still_due(&self, now: Timestamp, cluster: &Cluster, name: &str) -> bool {
        let Some(h) = self.health.get(name) else { return false };
        let status = cluster
            .node(name)
            .and_then(|n| n.conditions.iter().find(|c| c.kind == nodewarden_model::ConditionType::Ready))
            .map_or(ConditionStatus::Unknown, |c| c.status);
        let since = if status == ConditionStatus::False { h.ready_transition } else { h.probe };
        status != ConditionStatus::True
            && !self.heartbeat_since_last_pass(cluster, name)
            && now > since + self.cfg.pod_eviction_timeout
    }

    /// Sets one pod's Ready condition to False when it is True (§H1); never
    /// on a terminating pod.
    fn mark_pod_not_ready(&mut self, now: Timestamp, cluster: &mut Cluster, key: &str) {
        let Some(p) = cluster.pod(key).filter(|p| !p.deleted && !p.terminating) else { return };
        if p.ready() != Some(true) {
            return;
        }
        let kind = ActionKind::MarkPodNotReady { pod: p.key.clone(), uid: p.uid.clone() };
        self.write(now, cluster, kind);
    }
}
