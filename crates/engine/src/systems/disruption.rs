//! Zone states and rates (`handleDisruption`, `ComputeZoneState`,
//! `setLimiterInZone`), once per monitor pass, after every node was looked at.

use bevy_ecs::prelude::*;
use nodewarden_model::{ControllerConfig, Timestamp, ZoneState};

use crate::components::*;
use crate::metric_names;
use crate::monitor::Health;
use crate::resources::*;

use super::params::{Emit, MonitorPass, Tick};

/// Every node, as a zone decision may touch it: its health record (a fresh
/// grace period when master disruption mode ends) and its NoExecute taints
/// and queue place (taken away when it begins).
type ZoneMembers<'w, 's> = Query<
    'w,
    's,
    (Entity, &'static NodeName, &'static mut Health, &'static mut NodeTaints, &'static mut NodeFlags, &'static InZone),
>;

/// `ComputeZoneState`: no ready node (and at least one) is FullDisruption;
/// more than 2 not ready and a not-ready share at or above the threshold is
/// PartialDisruption. Compared in `f32`, as upstream does.
pub fn compute_zone_state(size: usize, not_ready: usize, threshold: f64) -> ZoneState {
    let ready = size - not_ready;
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && (not_ready as f32) / (size as f32) >= threshold as f32 {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// The rate a zone in `state` with `size` counted nodes is tainted at
/// (`ReducedQPSFunc`, `HealthyQPSFunc`).
pub fn zone_rate(cfg: &ControllerConfig, state: ZoneState, size: usize) -> f64 {
    match state {
        ZoneState::PartialDisruption => {
            if size > cfg.large_cluster_size_threshold as usize {
                cfg.secondary_node_eviction_rate
            } else {
                0.0
            }
        }
        ZoneState::Normal | ZoneState::FullDisruption | ZoneState::Initial => cfg.node_eviction_rate,
    }
}

/// `handleDisruption`.
pub fn handle_disruption(
    tick: Tick,
    mut pass: MonitorPass,
    zone_index: Res<ZoneIndex>,
    mut mode: ResMut<DisruptionMode>,
    mut zones: Query<&mut Zone>,
    mut nodes: ZoneMembers,
    mut emit: Emit,
) {
    decide_zones(&tick, &mut pass, &zone_index, &mut mode, &mut zones, &mut nodes, &mut emit);
    for zone in &zones {
        record_zone_state(&zone.key.to_string(), zone.state, zone.queue.qps());
    }
}

/// The zones' new states and rates, and master disruption mode entered or
/// left; the pass's tallies say how many nodes each zone counts and how
/// many of them are not Ready.
fn decide_zones(
    tick: &Tick,
    pass: &mut MonitorPass,
    zone_index: &ZoneIndex,
    mode: &mut DisruptionMode,
    zones: &mut Query<&mut Zone>,
    nodes: &mut ZoneMembers,
    emit: &mut Emit,
) {
    let (now, cfg) = (tick.now.0, &tick.settings.0);
    let MonitorPass { scratch, timers, .. } = pass;
    let Emit { outbox, inbox } = emit;
    // New states of zones with counted nodes; zones without any lose theirs (G9).
    let mut new_states: Vec<(Entity, ZoneState, usize)> = vec![];
    let mut all_are_full = true;
    let mut all_were_full = true;
    for (slot, &z) in zone_index.by_slot.iter().enumerate() {
        let Ok(mut zone) = zones.get_mut(z) else { continue };
        let tally = scratch.tally.get(slot).copied().unwrap_or_default();
        zone.size = tally.size;
        zone.not_ready = tally.not_ready;
        record_zone_metrics(&zone.key.to_string(), tally);
        if tally.size == 0 {
            if zone.state.take().is_some() {
                tracing::info!(zone = %zone.key, "zone has no counted nodes left; state dropped");
            }
            continue;
        }
        let state = compute_zone_state(tally.size, tally.not_ready, cfg.unhealthy_zone_threshold);
        if state != ZoneState::FullDisruption {
            all_are_full = false;
        }
        let old = *zone.state.get_or_insert(ZoneState::Initial);
        if old != ZoneState::FullDisruption {
            all_were_full = false;
        }
        new_states.push((z, state, tally.size));
    }
    if new_states.is_empty() {
        // No counted node anywhere: nothing to decide.
        return;
    }

    if all_are_full && all_were_full {
        // Still in master disruption mode: nothing changes.
        return;
    }
    if all_are_full {
        tracing::warn!(
            "every zone is fully disrupted: the controller most likely lost its network, not the nodes; \
             entering master disruption mode (no tainting, NoExecute taints removed)"
        );
        mode.all_zones_down = true;
        // Every node is marked reachable: the parked ones have work again.
        timers.activate_parked();
        enter_master_disruption(cfg, now, zones, nodes, outbox, inbox);
        for (z, _, _) in &new_states {
            if let Ok(mut zone) = zones.get_mut(*z) {
                zone.queue.swap_rate(0.0, now);
                zone.state = Some(ZoneState::FullDisruption);
            }
        }
        return;
    }
    if all_were_full {
        tracing::warn!(
            "some zone has ready nodes again: leaving master disruption mode; every node gets a fresh grace period"
        );
        mode.all_zones_down = false;
        for (_, _, mut health, ..) in nodes.iter_mut() {
            if let Some(rec) = health.settle(timers) {
                health.set(HealthRecord { probe: now, ready_transition: now, ..rec });
            }
        }
        // Every quiet node's probe time is now this pass's.
        timers.activate_parked();
        timers.refile_all_now();
        for (z, state, size) in &new_states {
            set_zone(zones, *z, *state, *size, cfg, now);
        }
        return;
    }
    mode.all_zones_down = false;
    for (z, state, size) in &new_states {
        let Ok(zone) = zones.get(*z) else { continue };
        if zone.state == Some(*state) {
            continue;
        }
        tracing::info!(zone = %zone.key, from = zone.state.map_or("none", ZoneState::as_str), to = state.as_str(), "zone state changed");
        set_zone(zones, *z, *state, *size, cfg, now);
    }
}

fn set_zone(
    zones: &mut Query<&mut Zone>,
    z: Entity,
    state: ZoneState,
    size: usize,
    cfg: &ControllerConfig,
    now: Timestamp,
) {
    if let Ok(mut zone) = zones.get_mut(z) {
        zone.queue.swap_rate(zone_rate(cfg, state, size), now);
        zone.state = Some(state);
    }
}

/// Every node is marked reachable (taint mode) or has its eviction
/// cancelled (legacy), so a control-plane outage cancels pending evictions
/// instead of causing them (G6).
fn enter_master_disruption(
    cfg: &ControllerConfig,
    now: Timestamp,
    zones: &mut Query<&mut Zone>,
    nodes: &mut ZoneMembers,
    outbox: &mut Outbox,
    inbox: &mut TaintManagerInbox,
) {
    let mut all: Vec<_> = nodes.iter_mut().collect();
    all.sort_by(|a, b| a.1.0.cmp(&b.1.0));
    for (entity, name, _, mut taints, mut flags, in_zone) in all {
        let Ok(mut zone) = zones.get_mut(in_zone.zone) else { continue };
        if cfg.enable_taint_manager {
            let target = super::TaintTarget { name: &name.0, entity, taints: &mut taints, flags: &mut flags };
            super::mark_reachable(outbox, inbox, target, &mut zone, now);
        } else {
            super::cancel_pod_eviction(entity, &mut flags, &mut zone);
        }
    }
}

/// Each zone's state (1 on the current one's series) and the rate of its
/// queue after the pass: what an operator (and `cargo xtask wire`) reads
/// to see a zone slow down or stop.
fn record_zone_state(zone: &str, state: Option<ZoneState>, rate: f64) {
    for s in [ZoneState::Initial, ZoneState::Normal, ZoneState::PartialDisruption, ZoneState::FullDisruption] {
        let labels = [(metric_names::ZONE, zone.to_string()), (metric_names::STATE, s.as_str().to_string())];
        metrics::gauge!(metric_names::ZONE_STATE, &labels).set(if state == Some(s) { 1.0 } else { 0.0 });
    }
    metrics::gauge!(metric_names::ZONE_RATE, metric_names::ZONE => zone.to_string()).set(rate);
}

fn record_zone_metrics(zone: &str, tally: ZoneTally) {
    let labels = [(metric_names::ZONE, zone.to_string())];
    metrics::gauge!(metric_names::ZONE_SIZE, &labels).set(tally.size as f64);
    let health =
        if tally.size == 0 { 100.0 } else { 100.0 * (tally.size - tally.not_ready) as f64 / tally.size as f64 };
    metrics::gauge!(metric_names::ZONE_HEALTH, &labels).set(health);
    metrics::gauge!(metric_names::UNHEALTHY_NODES_IN_ZONE, &labels).set(tally.not_ready as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_state_thresholds() {
        use ZoneState::*;
        assert_eq!(compute_zone_state(3, 3, 0.55), FullDisruption);
        assert_eq!(compute_zone_state(2, 2, 0.55), FullDisruption);
        assert_eq!(compute_zone_state(3, 2, 0.55), Normal, "2 not ready is never partial");
        assert_eq!(compute_zone_state(20, 11, 0.55), PartialDisruption, "11/20 = 0.55 is inclusive");
        assert_eq!(compute_zone_state(20, 10, 0.55), Normal);
        assert_eq!(compute_zone_state(10, 6, 0.55), PartialDisruption);
        assert_eq!(compute_zone_state(10, 0, 0.55), Normal);
    }

    #[test]
    fn rates_by_state_and_size() {
        let cfg = ControllerConfig::default();
        assert_eq!(zone_rate(&cfg, ZoneState::Normal, 10), 0.1);
        assert_eq!(zone_rate(&cfg, ZoneState::FullDisruption, 10), 0.1);
        assert_eq!(zone_rate(&cfg, ZoneState::PartialDisruption, 50), 0.0, "50 is not larger than the threshold");
        assert_eq!(zone_rate(&cfg, ZoneState::PartialDisruption, 51), 0.01);
    }
}
