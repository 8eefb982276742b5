//! Pods newly bound to unhealthy nodes: the pod-assignment path
//! (`processPod`).

use bevy_ecs::prelude::*;
use nodewarden_model::ConditionStatus;

use crate::components::*;
use crate::monitor::Health;
use crate::resources::*;

use super::params::{Lookups, Tick};

/// `processPod`: a pod newly bound to a node the monitor has already seen
/// not Ready is marked NotReady at once (H3); in legacy mode a pod found on
/// a node whose pods were already evicted is deleted at once (J5).
pub fn pod_assignment(
    tick: Tick,
    mut assigned: ResMut<AssignedPods>,
    lookups: Lookups,
    nodes: Query<(&ReadyView, &Health, &NodeFlags, &LeaseView, &InZone)>,
    zones: Query<&Zone>,
    mut pods: Query<&mut Pod>,
    mut outbox: ResMut<Outbox>,
) {
    let Tick { now, settings } = tick;
    let Lookups { node_index, timers, .. } = lookups;
    if assigned.0.is_empty() {
        return;
    }
    let mut list = std::mem::take(&mut assigned.0);
    list.sort_unstable();
    list.dedup();
    // The node of the last pod, and whether it is one whose new pods need
    // a look: the list is in entity order, so a node's pods (added
    // together) mostly follow one another, sharing one name. Nothing here
    // changes a node, so the answer holds for the whole run.
    let mut last: Option<(std::sync::Arc<str>, Option<Entity>)> = None;
    for pod_entity in list.drain(..) {
        let Ok(pod) = pods.get(pod_entity) else { continue };
        // Borrowed: most pods stop at the node check below, and a first
        // list brings a million of them (a clone is two atomic operations).
        let Some(node_name) = &pod.node else { continue };
        let node = match &last {
            Some((name, node)) if std::sync::Arc::ptr_eq(name, node_name) => *node,
            _ => {
                // Not yet seen by a monitor pass, or no Ready condition:
                // ignored, as upstream does; the node's own handling covers
                // it later. Ready: nothing to do.
                let node = node_index.0.get(&**node_name).copied().filter(|&node| {
                    nodes.get(node).is_ok_and(|(ready, health, ..)| {
                        health.record(&timers).is_some() && ready.status.is_some_and(|s| s != ConditionStatus::True)
                    })
                });
                last = Some((node_name.clone(), node));
                node
            }
        };
        let Some(node) = node else { continue };
        let node_name = node_name.clone();
        let Ok((ready, health, flags, lease, in_zone)) = nodes.get(node) else { continue };
        let (Some(rec), Some(status)) = (health.record(&timers), ready.status) else { continue };
        super::marks::mark_pods_not_ready(&node_name, &[pod_entity], &mut pods, &mut outbox);
        // Beyond upstream: not on a node that has sent a heartbeat since the
        // last monitor pass (its health record is stale until the next one).
        if !settings.0.enable_taint_manager
            && flags.eviction == EvictionStatus::Evicted
            && !super::legacy::heartbeat_since_last_pass(&rec, ready, lease)
        {
            let since = super::legacy::countdown_start(status, &rec);
            if now.0 > since + settings.0.pod_eviction_timeout {
                let why = super::legacy::LegacyWhy {
                    facts: Some(node_facts(Some(rec), ready, lease, &settings.0)),
                    status,
                    since,
                    timeout: settings.0.pod_eviction_timeout,
                    zone_rate: zones.get(in_zone.zone).map_or(0.0, |z| z.queue.qps()),
                    queued_at: now.0,
                    mode: settings.0.pod_deletion_mode,
                    now: now.0,
                };
                super::legacy::delete_pods(&node_name, &[pod_entity], &mut pods, &mut outbox, &why);
            }
        }
    }
    assigned.0 = recycle(list);
}
