//! The health monitor pass (§B, §C), zone disruption (§G) and the legacy
//! eviction decision (§J2).

use std::collections::BTreeMap;

use nodewarden_cluster::Cluster;
use nodewarden_engine::NodeSnapshot;
use nodewarden_engine::{ActionKind, ZoneState};
use nodewarden_model::condition::{
    MESSAGE_NEVER_UPDATED, MESSAGE_STATUS_UNKNOWN, REASON_NEVER_UPDATED, REASON_STATUS_UNKNOWN,
};
use nodewarden_model::{ConditionStatus, ConditionType, NodeCondition, Timestamp, ZoneKey, keys};

use super::queue::RefQueue;
use super::{Eviction, Health, ReferenceModel, zone_of};

/// The conditions the monitor turns Unknown (never NetworkUnavailable).
const SILENCED: [ConditionType; 4] =
    [ConditionType::Ready, ConditionType::MemoryPressure, ConditionType::DiskPressure, ConditionType::PidPressure];

fn ready_of(node: &NodeSnapshot) -> Option<NodeCondition> {
    node.conditions.iter().find(|c| c.kind == ConditionType::Ready).cloned()
}

/// §B7: the four conditions after the kubelet went silent.
fn silenced(node: &NodeSnapshot, now: Timestamp) -> Vec<NodeCondition> {
    SILENCED
        .iter()
        .map(|kind| match node.conditions.iter().find(|c| &c.kind == kind) {
            Some(c) if c.status == ConditionStatus::Unknown => c.clone(),
            Some(c) => NodeCondition {
                status: ConditionStatus::Unknown,
                reason: REASON_STATUS_UNKNOWN.to_string(),
                message: MESSAGE_STATUS_UNKNOWN.to_string(),
                last_transition: now,
                ..c.clone()
            },
            None => NodeCondition {
                kind: kind.clone(),
                status: ConditionStatus::Unknown,
                reason: REASON_NEVER_UPDATED.to_string(),
                message: MESSAGE_NEVER_UPDATED.to_string(),
                last_heartbeat: node.created,
                last_transition: now,
            },
        })
        .collect()
}

/// `ComputeZoneState` (§G2), the ratio compared in `f32` as upstream does.
pub fn zone_state(size: usize, not_ready: usize, threshold: f64) -> ZoneState {
    if not_ready == size && size > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && (not_ready as f32 / size as f32) >= threshold as f32 {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

impl ReferenceModel {
    /// §B1–B10 for one node: the health record after this pass's
    /// observations (status heartbeat, then Lease).
    fn observe_health(&mut self, now: Timestamp, node: &NodeSnapshot, lease: Option<Timestamp>) -> Health {
        let ready = ready_of(node);
        let mut h = match (self.health.get(&node.name), &ready) {
            // First sight (B2, B5).
            (None, Some(_)) => {
                Health { probe: now, ready_transition: now, saved_ready: ready.clone(), saved_lease: None }
            }
            (None, None) => {
                Health { probe: node.created, ready_transition: node.created, saved_ready: None, saved_lease: None }
            }
            // Ready gone: the saved status is overwritten, the probe stays (B10).
            (Some(h), None) => Health { saved_ready: None, ..h.clone() },
            // Ready appeared: a fresh record.
            (Some(h), Some(_)) if h.saved_ready.is_none() => {
                Health { probe: now, ready_transition: now, saved_ready: ready.clone(), saved_lease: h.saved_lease }
            }
            (Some(h), Some(cur)) => {
                let saved = h.saved_ready.as_ref().map(|c| (c.last_heartbeat, c.last_transition));
                match saved {
                    Some((hb, tr)) if hb != cur.last_heartbeat => Health {
                        probe: now,
                        ready_transition: if tr != cur.last_transition { now } else { h.ready_transition },
                        saved_ready: ready.clone(),
                        // Our choice: the saved Lease is kept (B9).
                        saved_lease: h.saved_lease,
                    },
                    _ => h.clone(),
                }
            }
        };
        if let Some(renew) = lease
            && h.saved_lease.is_none_or(|saved| saved < renew)
        {
            h.saved_lease = Some(renew);
            h.probe = now;
        }
        h
    }

    /// One `monitorNodeHealth` pass.
    pub(super) fn monitor_pass(&mut self, now: Timestamp, cluster: &mut Cluster) {
        let names: Vec<String> = cluster.nodes().map(|n| n.name.clone()).collect();
        // C1/C2: zones without state get Initial and (once) a full queue.
        for name in &names {
            let Some(n) = cluster.node(name) else { continue };
            let zone = zone_of(&n.labels);
            self.zone_states.entry(zone.clone()).or_insert(ZoneState::Initial);
            let rate = self.cfg.node_eviction_rate;
            self.queues.entry(zone).or_insert_with(|| RefQueue::new(rate));
        }
        // C3: newly seen nodes start from a clean slate.
        let added: Vec<String> = names.iter().filter(|n| !self.health.contains_key(*n)).cloned().collect();
        for name in &added {
            if self.cfg.enable_taint_manager {
                self.mark_reachable(now, cluster, name);
            } else {
                self.cancel_eviction(cluster, name);
            }
        }
        let mut tally: BTreeMap<ZoneKey, (usize, usize)> = BTreeMap::new();
        for name in &names {
            let Some(node) = cluster.node(name).cloned() else { continue };
            let first = added.contains(name);
            let observed = ready_of(&node);
            let mut h = self.observe_health(now, &node, cluster.lease(name));
            let grace = if observed.is_some() {
                self.cfg.node_monitor_grace_period
            } else {
                self.cfg.node_startup_grace_period
            };
            let mut current = observed.clone();
            if now > h.probe + grace {
                let updated = silenced(&node, now);
                let new_ready = updated[0].clone();
                if Some(&new_ready) != observed.as_ref() {
                    self.write(
                        now,
                        cluster,
                        ActionKind::UpdateNodeConditions { node: name.clone(), conditions: updated, version: 0 },
                    );
                    h.ready_transition = now;
                    h.saved_ready = Some(new_ready.clone());
                    current = Some(new_ready);
                }
            }
            self.health.insert(name.clone(), h.clone());
            if !node.labels.contains_key(keys::LABEL_EXCLUDE_DISRUPTION) {
                let t = tally.entry(zone_of(&node.labels)).or_default();
                t.0 += 1;
                if current.as_ref().map(|c| c.status) != Some(ConditionStatus::True) {
                    t.1 += 1;
                }
            }
            let Some(current) = current else { continue };
            let observed_status = observed.as_ref().map_or(ConditionStatus::Unknown, |c| c.status);
            if self.cfg.enable_taint_manager {
                self.taint_decision(now, cluster, name, current.status);
            } else {
                self.legacy_decision(now, cluster, name, observed_status, &h);
            }
            let own_write = observed_status == ConditionStatus::True && current.status != ConditionStatus::True;
            // Ours: a node already Unknown at first sight has its pods marked.
            let unknown_at_start = first && observed.is_some() && observed_status == ConditionStatus::Unknown;
            if own_write || unknown_at_start {
                let pods: Vec<String> = cluster
                    .pods()
                    .filter(|p| !p.deleted && p.node.as_deref() == Some(name.as_str()))
                    .map(|p| p.key.clone())
                    .collect();
                for p in pods {
                    self.mark_pod_not_ready(now, cluster, &p);
                }
            }
        }
        self.handle_disruption(now, cluster, &names, &tally);
    }

    /// `handleDisruption` (§G4–G9), with our choices: every zone without
    /// counted nodes loses its state first; no counted node at all changes
    /// nothing.
    fn handle_disruption(
        &mut self,
        now: Timestamp,
        cluster: &mut Cluster,
        names: &[String],
        tally: &BTreeMap<ZoneKey, (usize, usize)>,
    ) {
        self.zone_states.retain(|z, _| tally.contains_key(z));
        if tally.is_empty() {
            return;
        }
        let new: BTreeMap<ZoneKey, ZoneState> = tally
            .iter()
            .map(|(z, &(size, nr))| (z.clone(), zone_state(size, nr, self.cfg.unhealthy_zone_threshold)))
            .collect();
        let all_are = new.values().all(|s| *s == ZoneState::FullDisruption);
        let all_were = self.zone_states.values().all(|s| *s == ZoneState::FullDisruption);
        if all_are && all_were {
            return;
        }
        if all_are {
            self.all_down = true;
            for name in names {
                if self.cfg.enable_taint_manager {
                    self.mark_reachable(now, cluster, name);
                } else {
                    self.cancel_eviction(cluster, name);
                }
            }
            for zone in new.keys() {
                if let Some(q) = self.queues.get_mut(zone) {
                    q.bucket.swap(0.0, now);
                }
                self.zone_states.insert(zone.clone(), ZoneState::FullDisruption);
            }
            return;
        }
        self.all_down = false;
        if all_were {
            for h in self.health.values_mut() {
                h.probe = now;
                h.ready_transition = now;
            }
        }
        for (zone, state) in &new {
            if !all_were && self.zone_states.get(zone) == Some(state) {
                continue;
            }
            let size = tally[zone].0;
            let rate = match state {
                ZoneState::PartialDisruption if size > self.cfg.large_cluster_size_threshold as usize => {
                    self.cfg.secondary_node_eviction_rate
                }
                ZoneState::PartialDisruption => 0.0,
                _ => self.cfg.node_eviction_rate,
            };
            if let Some(q) = self.queues.get_mut(zone) {
                q.bucket.swap(rate, now);
            }
            self.zone_states.insert(zone.clone(), *state);
        }
    }

    /// `processNoTaintBaseEviction` (§J2) on the observed Ready status.
    fn legacy_decision(
        &mut self,
        now: Timestamp,
        cluster: &mut Cluster,
        name: &str,
        observed: ConditionStatus,
        h: &Health,
    ) {
        let since = match observed {
            ConditionStatus::True => {
                self.cancel_eviction(cluster, name);
                return;
            }
            ConditionStatus::False => h.ready_transition,
            ConditionStatus::Unknown => h.probe,
        };
        if now <= since + self.cfg.pod_eviction_timeout {
            return;
        }
        if self.evictions.get(name) == Some(&Eviction::Evicted) {
            self.delete_pods(now, cluster, name, None);
            return;
        }
        self.evictions.insert(name.to_string(), Eviction::ToBeEvicted);
        if let Some(zone) = cluster.node(name).map(|n| zone_of(&n.labels))
            && let Some(q) = self.queues.get_mut(&zone)
        {
            q.add(name.to_string(), now);
        }
    }

    /// `cancelPodEviction`.
    pub(super) fn cancel_eviction(&mut self, cluster: &Cluster, name: &str) {
        self.evictions.remove(name);
        if let Some(zone) = cluster.node(name).map(|n| zone_of(&n.labels))
            && let Some(q) = self.queues.get_mut(&zone)
        {
            q.remove(&name.to_string());
        }
    }
}
