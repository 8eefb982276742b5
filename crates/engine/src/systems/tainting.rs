//! The NoExecute tainting pass (`doNoExecuteTaintingPass`), every 100 ms:
//! each zone's queue is drained through its token bucket, and each node
//! taken out gets the taint its Ready condition calls for, swapped
//! atomically with the opposite one.

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, Span};

use crate::action::WriteSlot;
use crate::components::*;
use crate::queue::Attempt;
use crate::resources::*;

/// How long a node without a Ready condition waits before it is looked at
/// again (upstream's 50 ms retry).
const NO_READY_RETRY: Span = Span::from_millis(50);

/// Drains every zone's queue at its rate.
pub fn tainting_pass(
    now: Res<Now>,
    zone_index: Res<ZoneIndex>,
    mut zones: Query<&mut Zone>,
    mut nodes: Query<(&NodeName, &ReadyView, &mut NodeTaints, &mut NodeFlags, &mut TaintRecord)>,
    mut outbox: ResMut<Outbox>,
    mut inbox: ResMut<TaintManagerInbox>,
    mode: Res<DisruptionMode>,
) {
    let now = now.0;
    if mode.all_zones_down {
        // Master disruption mode pauses every queue, including those of
        // zones with no state (made only of excluded nodes), whose limiters
        // the mode never set to 0 (found by the fuzzer).
        return;
    }
    for &z in &zone_index.by_slot {
        let Ok(mut zone) = zones.get_mut(z) else { continue };
        if zone.queue.is_empty() {
            continue;
        }
        let zone = &mut *zone;
        let label = zone.key.to_string();
        let rate = zone.queue.qps();
        let (key, state) = (zone.key.clone(), zone.state);
        zone.queue.try_drain(now, |&node, added| {
            let Ok((name, ready, mut taints, mut flags, mut record)) = nodes.get_mut(node) else {
                return Attempt::Done;
            };
            let (wanted, opposite) = match ready.status {
                None => return Attempt::RetryAfter(NO_READY_RETRY),
                Some(ConditionStatus::True) => {
                    tracing::debug!(node = %name.0, "queued node is ready now; not tainting (token spent)");
                    return Attempt::Done;
                }
                Some(ConditionStatus::False) => (super::not_ready_taint(), super::unreachable_taint()),
                Some(ConditionStatus::Unknown) => (super::unreachable_taint(), super::not_ready_taint()),
            };
            let taint = wanted.short();
            let target = super::TaintTarget { name: &name.0, entity: node, taints: &mut taints, flags: &mut flags };
            let added_taint = vec![wanted.clone()];
            if super::write_taints(&mut outbox, &mut inbox, target, added_taint, vec![opposite], WriteSlot::NoExecuteTaints, now) {
                tracing::info!(node = %name.0, zone = %label, %taint, queued_at = %added, zone_rate = rate, "NoExecute taint added");
                let mut taint = wanted;
                taint.time_added = Some(now);
                record.0 = Some(crate::explain::TaintingFacts {
                    taint,
                    queued_at: Some(added),
                    zone: key.clone(),
                    zone_rate: rate,
                    zone_state: state,
                });
                metrics::counter!("node_collector_evictions_total", "zone" => label.clone()).increment(1);
            }
            Attempt::Done
        });
    }
}
