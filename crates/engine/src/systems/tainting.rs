//! NoExecute tainting, in two steps:
//! - after each monitor pass, [`taint_decisions`] acts on the nodes' Ready
//!   verdicts (`processTaintBaseEviction`): queue the node in its zone's
//!   rate-limited queue, swap not-ready/unreachable at once, or mark it
//!   reachable;
//! - the tainting pass (`doNoExecuteTaintingPass`), every 100 ms: each
//!   zone's queue is drained through its token bucket, and each node taken
//!   out gets the taint its Ready condition calls for, swapped atomically
//!   with the opposite one.

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, Span, Taint, Timestamp};

use crate::action::WriteSlot;
use crate::components::*;
use crate::judgement::{Judged, Judgements};
use crate::metric_names;
use crate::queue::Attempt;
use crate::resources::*;

use super::params::Emit;

/// What a NoExecute decision reads and changes on a judged node: its taints
/// and queue place, and the record an explanation cites of a swap.
type JudgedNodes<'w, 's> = Query<
    'w,
    's,
    (&'static NodeName, &'static mut NodeTaints, &'static mut NodeFlags, &'static InZone, &'static mut TaintRecord),
>;

/// How long a node without a Ready condition waits before it is looked at
/// again (upstream's 50 ms retry).
const NO_READY_RETRY: Span = Span::from_millis(50);

/// After the monitor pass: the NoExecute decision for each node the pass
/// judged, in name order (its actions issued under the node's key of the
/// Outbox's ordered section). An immediate swap is recorded in the node's
/// [`TaintRecord`] for explanations.
pub fn taint_decisions(
    now: Res<Now>,
    scratch: Res<PassScratch>,
    mode: Res<DisruptionMode>,
    emit: Emit,
    mut nodes: JudgedNodes,
    mut zones: Query<&mut Zone>,
    mut judgements: ResMut<Judgements>,
) {
    let Emit { mut outbox, mut inbox } = emit;
    let now = now.0;
    for v in &scratch.verdicts {
        outbox.order_by(v.order);
        let Ok((name, mut taints, mut flags, in_zone, mut record)) = nodes.get_mut(v.node) else { continue };
        let Ok(mut zone) = zones.get_mut(in_zone.zone) else { continue };
        let target = super::TaintTarget::new(&name.0, v.node, &mut taints, &mut flags);
        let swapped = taint_decision(&mut outbox, &mut inbox, target, &mut zone, v.current, mode.all_zones_down, now);
        if let Some(taint) = swapped {
            let facts = crate::explain::TaintingFacts {
                taint,
                queued_at: None,
                zone: zone.key.clone(),
                zone_rate: zone.queue.qps(),
                zone_state: zone.state,
            };
            judgements.note(now, &name.0, || Judged::Taint {
                taint: Taint { time_added: None, ..facts.taint.clone() },
                released: Some(facts.clone()),
            });
            record.0 = Some(facts);
        }
    }
}

/// `processTaintBaseEviction` for one node. Returns the taint swapped in at
/// once, if that is what happened. While every zone is down (`paused`) no
/// NoExecute taint is added, not even by a swap: upstream would swap a
/// taint someone added by hand; nodewarden adds nothing until the
/// disruption ends.
fn taint_decision(
    outbox: &mut Outbox,
    inbox: &mut TaintManagerInbox,
    target: super::TaintTarget<'_>,
    zone: &mut Zone,
    current: ConditionStatus,
    paused: bool,
    now: Timestamp,
) -> Option<Taint> {
    use WriteSlot::NoExecuteTaints;
    let Some((wanted, opposite)) = super::noexecute_taint_for(current) else {
        super::mark_reachable(outbox, inbox, target, zone, now);
        return None;
    };
    let (has_wanted, has_opposite) = (target.flags.carries(&wanted), target.flags.carries(&opposite));
    if has_opposite && !paused {
        // E2: swap at once, not through the rate-limited queue.
        tracing::info!(node = target.name, taint = %wanted.short(), "swapping NoExecute taint");
        super::write_taints(outbox, inbox, target, vec![wanted.clone()], vec![opposite], NoExecuteTaints, now);
        let mut added = wanted;
        added.time_added = Some(now);
        return Some(added);
    }
    // E3: a node processed earlier whose taint is gone (removed by hand) is
    // queued again. Upstream removes and re-adds every untainted node on
    // every pass, which also sends the ones still waiting to the back of the
    // queue; here they keep their place (first queued, first tainted).
    if !has_wanted && target.flags.queued && !zone.queue.is_queued(&target.entity) {
        zone.queue.remove(&target.entity);
        target.flags.queued = false;
    }
    if zone.queue.add(target.entity, now) {
        target.flags.queued = true;
        tracing::debug!(node = target.name, "queued for NoExecute tainting");
    }
    None
}

/// Drains every zone's queue at its rate.
pub fn tainting_pass(
    now: Res<Now>,
    zone_index: Res<ZoneIndex>,
    mut zones: Query<&mut Zone>,
    mut nodes: Query<(&NodeName, &ReadyView, &mut NodeTaints, &mut NodeFlags, &mut TaintRecord)>,
    emit: Emit,
    mode: Res<DisruptionMode>,
    mut judgements: ResMut<Judgements>,
) {
    let Emit { mut outbox, mut inbox } = emit;
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
            let Some(ready) = ready.status else { return Attempt::RetryAfter(NO_READY_RETRY) };
            let Some((wanted, opposite)) = super::noexecute_taint_for(ready) else {
                tracing::debug!(node = %name.0, "queued node is ready now; not tainting (token spent)");
                return Attempt::Done;
            };
            let taint = wanted.short();
            let target = super::TaintTarget { name: &name.0, entity: node, taints: &mut taints, flags: &mut flags };
            let added_taint = vec![wanted.clone()];
            let facts = || crate::explain::TaintingFacts {
                taint: Taint { time_added: Some(now), ..wanted.clone() },
                queued_at: Some(added),
                zone: key.clone(),
                zone_rate: rate,
                zone_state: state,
            };
            // Released, whether the taint is added now or found there.
            judgements.note(now, &name.0, || Judged::Taint { taint: wanted.clone(), released: Some(facts()) });
            if super::write_taints(&mut outbox, &mut inbox, target, added_taint, vec![opposite], WriteSlot::NoExecuteTaints, now) {
                tracing::info!(node = %name.0, zone = %label, %taint, queued_at = %added, zone_rate = rate, "NoExecute taint added");
                record.0 = Some(facts());
                metrics::counter!(metric_names::EVICTIONS_TOTAL, metric_names::ZONE => label.clone()).increment(1);
            }
            Attempt::Done
        });
    }
}
