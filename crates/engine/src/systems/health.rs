//! The health monitor's pass (`monitorNodeHealth` / `tryUpdateNodeHealth`).
//!
//! For each node the pass has to look at (new, not Ready, tainted or
//! queued, changed in a way ingest does not take in itself, or overdue;
//! see [`crate::monitor`]): refresh the probe time from newly observed
//! heartbeats (status or Lease), decide whether the node is overdue, and
//! note the few nodes that need more than that (first sight, an Unknown
//! write, a taint or eviction decision) for [`decide`], which registers
//! them, writes Unknown, marks pods NotReady and hands each one's Ready
//! verdict to the eviction mode's system (`tainting` or `legacy`); at the
//! pass's end [`file_worked`] files those nodes by the state that left
//! them in. A quiet node (Ready, clean, renewing) costs the pass nothing:
//! its renewals were taken in at ingest and its zone's counts are kept as
//! it changes.

use bevy_ecs::prelude::*;
use nodewarden_model::{
    ConditionStatus, ConditionType, NodeCondition, Timestamp,
    condition::{MESSAGE_NEVER_UPDATED, MESSAGE_STATUS_UNKNOWN, REASON_NEVER_UPDATED, REASON_STATUS_UNKNOWN},
};

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::monitor::{Health, NodeTimers, take_in};
use crate::resources::*;

use super::params::{Emit, MonitorPass, NodePods, ShadowFacts, Tick};

/// What pass 1 reads of a node: its Ready and Lease views and zone, what
/// it has to decide on (flags), and the health record it keeps.
type MonitoredNodes<'w, 's> = Query<
    'w,
    's,
    (
        &'static ReadyView,
        &'static LeaseView,
        &'static mut Health,
        &'static NodeFlags,
        &'static InZone,
        Has<ExcludedFromDisruption>,
    ),
>;

/// What pass 2 may change on a node it singled out: registration, the
/// Unknown write (conditions, Ready view, health record, zone counts) and
/// the taints of a clean slate; the observed version goes with the write.
type DecidedNodes<'w, 's> = Query<
    'w,
    's,
    (
        &'static NodeName,
        &'static NodeMeta,
        &'static mut ReadyView,
        &'static mut NodeConditions,
        &'static mut Health,
        &'static mut NodeTaints,
        &'static mut NodeFlags,
        &'static InZone,
        Has<ExcludedFromDisruption>,
        Option<&'static ObservedNode>,
    ),
>;

/// Pass 1: heartbeats, overdue decisions and zone tallies, for the nodes
/// that need a look: the active ones and the quiet ones that fall overdue
/// now ([`NodeTimers`](crate::monitor::NodeTimers)). A quiet node's
/// heartbeats were taken in when they were ingested, and its zone's counts
/// are kept as it changes ([`ZoneCounts`](crate::monitor::ZoneCounts)), so
/// a pass does nothing for it.
pub fn update_node_health(
    tick: Tick,
    pass: MonitorPass,
    zones: Res<ZoneIndex>,
    mut nodes: MonitoredNodes,
    created: Query<&NodeMeta>,
    zone_queues: Query<&Zone>,
    mut shadow: ShadowFacts,
) {
    let Tick { now, settings } = tick;
    let MonitorPass { mut scratch, counts, mut timers } = pass;
    let now = now.0;
    let cfg = &settings.0;
    let scratch = &mut *scratch;
    let taint_mode = cfg.enable_taint_manager;
    begin_tally(scratch, &counts.0, zones.by_slot.len());

    timers.begin_pass(now);
    // Quiet nodes are Ready: they have a Ready condition.
    timers.activate_overdue(now, grace_for(cfg, true));
    let active = timers.take_active();
    for &slot in &active {
        let Some(entity) = timers.active_entity(slot) else { continue };
        let Ok((ready, lease, mut health, flags, in_zone, excluded)) = nodes.get_mut(entity) else { continue };
        let (first_sight, rec) =
            refresh_record(&mut health, &timers, ready, lease, now, || created.get(entity).map_or(now, |m| m.created));

        // Strictly after (B6).
        let grace = grace_for(cfg, ready.status.is_some());
        let overdue = now > rec.probe + grace;
        let go_unknown = overdue && ready.status != Some(ConditionStatus::Unknown);
        if overdue {
            shadow.judge_silence(entity, &mut health, rec.probe, grace, ready.status, now);
        }
        let current = if overdue { Some(ConditionStatus::Unknown) } else { ready.status };

        // The counts go by the Ready status; this pass's verdict differs from
        // it only for a Ready node it finds overdue (and writes Unknown).
        if !excluded
            && go_unknown
            && ready.status == Some(ConditionStatus::True)
            && let Some(t) = scratch.tally.get_mut(in_zone.slot as usize)
        {
            t.not_ready += 1;
        }

        let observed = ready.status.unwrap_or(ConditionStatus::Unknown);
        let needs_work = first_sight
            || go_unknown
            || has_decision(current, flags, taint_mode, || {
                zone_queues.get(in_zone.zone).is_ok_and(|z| !z.queue.is_queued(&entity))
            });
        if needs_work {
            scratch.work.push(NodeWork {
                node: entity,
                first_sight,
                observed,
                had_ready: ready.status.is_some(),
                go_unknown,
            });
            // Filed or kept once its work is done ([`file_worked`]).
            continue;
        }
        // Parked: Unknown, and in taint mode with its taint or its place in
        // the queue (it has nothing to decide).
        let parked = taint_mode && ready.status == Some(ConditionStatus::Unknown);
        let filing = Filing::of(current == Some(ConditionStatus::True) && flags.is_clean(), parked, overdue);
        file_or_keep(&mut timers, slot, filing, rec.probe);
    }
    timers.recycle_active(active);
}

/// Where a visited node with nothing (more) to decide goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Filing {
    /// Ready and clean: filed under its probe time; until ingest sees a
    /// change or it falls overdue, passes leave it alone.
    Quiet,
    /// Unknown in taint mode, its taint or queue place held, and silent
    /// past its grace by this engine's count: until something changes it,
    /// every pass would find the same, since such a node has no deadline
    /// left to miss, and the tainting pass only ever gives it its taint,
    /// which keeps it so.
    Parked,
    /// Unknown as another writer left it (kube-controller-manager beside a
    /// shadow, or the engine's predecessor) before this engine's own grace
    /// ran out: filed under its probe time like a quiet node, so the pass
    /// at which the grace runs out visits it once and judges the silence
    /// (a shadow compares that instant), then parks it. Nothing is decided
    /// at that visit that the node's state had not already settled.
    ParkedWhenOverdue,
    /// Anything else: stays on the active list.
    Active,
}

impl Filing {
    fn of(quiet: bool, parked: bool, overdue: bool) -> Filing {
        match (quiet, parked, overdue) {
            (true, ..) => Filing::Quiet,
            (false, true, true) => Filing::Parked,
            (false, true, false) => Filing::ParkedWhenOverdue,
            (false, false, _) => Filing::Active,
        }
    }
}

/// Files a visited node as `filing` says; one that cannot be filed (its
/// probe time is no recent pass's) stays active.
fn file_or_keep(timers: &mut NodeTimers, slot: u32, filing: Filing, probe: Timestamp) {
    let filed = match filing {
        Filing::Quiet | Filing::ParkedWhenOverdue => timers.file_at(slot, probe),
        Filing::Parked => timers.park(slot),
        Filing::Active => false,
    };
    if !filed {
        timers.keep_active(slot);
    }
}

/// What the pass's last step reads of a node it handed work to.
type WorkedNodes<'w, 's> = Query<'w, 's, (&'static ReadyView, &'static Health, &'static NodeFlags, &'static InZone)>;

/// The pass's last step: each node it handed work to (first sight, an
/// Unknown write, a taint or eviction decision) is filed as pass 1 files a
/// node without work, by the state that work left it in. A node
/// registered Ready and clean is quiet at once, a node written Unknown and
/// queued is parked at once, instead of the next pass visiting it only to
/// find the same (after a first list that next pass visited every node;
/// after a zone went down or healed, every node of the zone). Runs after
/// `handle_disruption`, so a change of disruption mode in this pass is
/// seen.
pub fn file_worked(tick: Tick, pass: MonitorPass, nodes: WorkedNodes, zone_queues: Query<&Zone>) {
    let MonitorPass { mut scratch, mut timers, .. } = pass;
    let taint_mode = tick.settings.0.enable_taint_manager;
    for w in scratch.work.drain(..) {
        let entity = w.node;
        // Pass 1 visited it through a query that reads all of these.
        let Ok((ready, health, flags, in_zone)) = nodes.get(entity) else { continue };
        let slot = health.slot();
        let Some(rec) = health.record(&timers) else {
            timers.keep_active(slot);
            continue;
        };
        let quiet = ready.status == Some(ConditionStatus::True) && flags.is_clean();
        let parked = taint_mode
            && ready.status == Some(ConditionStatus::Unknown)
            && !has_decision(ready.status, flags, taint_mode, || {
                zone_queues.get(in_zone.zone).is_ok_and(|z| !z.queue.is_queued(&entity))
            });
        let overdue = tick.now.0 > rec.probe + grace_for(&tick.settings.0, ready.status.is_some());
        file_or_keep(&mut timers, slot, Filing::of(quiet, parked, overdue), rec.probe);
    }
}

/// Starts the pass's scratch: no work yet, and each zone's tally from the
/// counts kept as nodes change (a zone new since has an empty one).
fn begin_tally(scratch: &mut PassScratch, counts: &[ZoneTally], zones: usize) {
    scratch.work.clear();
    scratch.tally.clear();
    scratch.tally.extend_from_slice(counts);
    scratch.tally.resize(zones, ZoneTally::default());
}

/// Takes a visited node's newly observed heartbeats into its health record
/// and keeps the result; returns whether this is the node's first sight
/// and the record it now holds. `created` (the creation time) is asked only
/// for a node without a record yet and without a Ready condition.
fn refresh_record(
    health: &mut Health,
    timers: &NodeTimers,
    ready: &ReadyView,
    lease: &LeaseView,
    now: Timestamp,
    created: impl FnOnce() -> Timestamp,
) -> (bool, HealthRecord) {
    let first_sight = !health.seen();
    let before = health.settle(timers);
    let base = before.unwrap_or_else(|| {
        // First sight: a node with a Ready condition gets a full grace
        // period from now (B2); one without counts from its creation (B5).
        let start = if ready.status.is_some() { now } else { created() };
        HealthRecord {
            probe: start,
            ready_transition: start,
            saved_ready: ready.status.map(|_| (ready.heartbeat, ready.transition)),
            saved_lease: None,
        }
    });
    let rec = take_in(base, ready, lease).at(now);
    if first_sight || Some(rec) != before {
        health.set(rec);
    }
    if first_sight && rec.probe == now {
        health.first_sight_probe(now);
    }
    (first_sight, rec)
}

/// Whether the node's `current` Ready status leaves its eviction mode
/// something to decide this pass. `missing_from_queue` (asked only when it
/// matters) says whether the node is absent from its zone's queue.
fn has_decision(
    current: Option<ConditionStatus>,
    flags: &NodeFlags,
    taint_mode: bool,
    missing_from_queue: impl FnOnce() -> bool,
) -> bool {
    match current {
        None => false,
        Some(ConditionStatus::True) => !flags.is_clean(),
        // Legacy decisions depend on time (J2): every pass.
        Some(_) if !taint_mode => true,
        // Taint mode: a node that carries its taint, or waits in its
        // zone's queue for it, has nothing to decide; only a swap, a
        // node not queued yet, or one whose taint went missing after
        // it was processed (E3) has.
        Some(status) => {
            let (has_wanted, has_opposite) = if status == ConditionStatus::False {
                (flags.not_ready_taint, flags.unreachable_taint)
            } else {
                (flags.unreachable_taint, flags.not_ready_taint)
            };
            has_opposite || !flags.queued || (!has_wanted && missing_from_queue())
        }
    }
}

/// A warm standby's pass ends after pass 1: the health records are kept,
/// the work pass 1 found is not done (it decides, writes, queues), and the
/// nodes it was for stay active, so the next pass finds it again.
pub fn forget_work(pass: MonitorPass, health: Query<&Health>) {
    let MonitorPass { mut scratch, mut timers, .. } = pass;
    for w in scratch.work.drain(..) {
        if let Ok(h) = health.get(w.node) {
            timers.keep_active(h.slot());
        }
    }
}

/// The conditions after the controller gives up on a silent kubelet (B7):
/// Ready and the pressure conditions become Unknown (NetworkUnavailable is
/// left alone). Existing ones keep their heartbeat; missing ones are added
/// with the creation time as heartbeat.
pub fn unknown_conditions(conditions: &[NodeCondition], created: Timestamp, now: Timestamp) -> Vec<NodeCondition> {
    let mut out = conditions.to_vec();
    for kind in ConditionType::SILENCED {
        match out.iter_mut().find(|c| c.kind == kind) {
            Some(c) => {
                if c.status != ConditionStatus::Unknown {
                    c.status = ConditionStatus::Unknown;
                    c.reason = REASON_STATUS_UNKNOWN.to_string();
                    c.message = MESSAGE_STATUS_UNKNOWN.to_string();
                    c.last_transition = now;
                }
            }
            None => out.push(NodeCondition {
                kind,
                status: ConditionStatus::Unknown,
                reason: REASON_NEVER_UPDATED.to_string(),
                message: MESSAGE_NEVER_UPDATED.to_string(),
                last_heartbeat: created,
                last_transition: now,
            }),
        }
    }
    out
}

/// Pass 2: for the nodes pass 1 singled out, in name order: register new
/// nodes, write Unknown conditions and mark pods NotReady, then hand each
/// node's *current* Ready condition to the eviction mode's system
/// ([`PassScratch::verdicts`]): `tainting::taint_decisions` or
/// `legacy::eviction_decisions`, chained right after. Deciding on the
/// current condition means a node that just went Unknown is queued in the
/// same pass (upstream PR #120816).
///
/// Opens the Outbox's node-ordered section, tagged with each node's place
/// in name order; [`restore_node_order`] closes it once the mode's system
/// has acted, so each node's actions stay together as before the split.
pub fn decide(
    tick: Tick,
    pass: MonitorPass,
    emit: Emit,
    mut changed: ResMut<ChangedNodes>,
    node_pods: NodePods,
    mut nodes: DecidedNodes,
    mut zones: Query<&mut Zone>,
) {
    let Tick { now, settings } = tick;
    let MonitorPass { mut scratch, mut counts, timers } = pass;
    let Emit { mut outbox, mut inbox } = emit;
    let NodePods { index: pod_index, mut pods } = node_pods;
    let now = now.0;
    let cfg = &settings.0;
    let scratch = &mut *scratch;
    let mut work = std::mem::take(&mut scratch.work);
    // By name, borrowed (a first pass sorts every node: a copy of each
    // name was as costly as the sort).
    work.sort_by_cached_key(|w| nodes.get(w.node).map_or("", |n| n.0.0.as_str()));
    scratch.verdicts.clear();
    outbox.begin_ordered();

    for (order, w) in work.iter().enumerate() {
        let order = order as u32;
        outbox.order_by(order);
        let Ok((name, meta, mut ready, mut conditions, mut health, mut taints, mut flags, in_zone, excluded, observed)) =
            nodes.get_mut(w.node)
        else {
            continue;
        };
        let Ok(mut zone) = zones.get_mut(in_zone.zone) else { continue };
        let name = name.0.as_str();

        if w.first_sight {
            outbox.event(
                ObjectRef::Node(name.to_string()),
                EventType::Normal,
                "RegisteredNode",
                format!("Node {name} event: Registered Node {name} in Controller"),
            );
            // C3: start from a clean slate; still-warranted taints come back
            // through the rate-limited path of the mode's decision. Part of
            // registration, so it comes before this pass's Unknown write.
            if cfg.enable_taint_manager {
                super::mark_reachable(
                    &mut outbox,
                    &mut inbox,
                    super::TaintTarget::new(name, w.node, &mut taints, &mut flags),
                    &mut zone,
                    now,
                );
            } else {
                super::cancel_pod_eviction(w.node, &mut flags, &mut zone);
            }
        }

        if w.go_unknown {
            let write = write_unknown(&mut conditions, &mut ready, &mut health, &timers, meta.created, now);
            counts.count(in_zone.slot, excluded, write.was, false);
            counts.count(in_zone.slot, excluded, ready.status, true);
            outbox.write(ActionKind::UpdateNodeConditions {
                node: name.to_string(),
                conditions: write.conditions,
                // No precondition while a write of ours has finished
                // and the node's state since is not taken in yet.
                version: observed.map_or(0, |o| if o.retake { 0 } else { o.version }),
            });
            changed.0.push(w.node);
            tracing::info!(node = name, probe = %write.record.map_or(now, |r| r.probe), grace = %grace_for(cfg, w.had_ready), "node stopped posting status; conditions set to Unknown");
        }

        let Some(current) = ready.status else { continue };
        mark_pods_if_not_ready(w, current, name, &pod_index, &mut pods, &mut outbox);

        scratch.verdicts.push(NodeVerdict { node: w.node, order, current, observed: w.observed });
    }
    // Kept for `file_worked`, which files these nodes and empties it.
    scratch.work = work;
}

/// What [`write_unknown`] changed: the Ready status before, the conditions
/// written, and the health record kept (none before one was set).
struct UnknownWrite {
    was: Option<ConditionStatus>,
    conditions: Vec<NodeCondition>,
    record: Option<HealthRecord>,
}

/// The Unknown write on the node's own view (B7): its conditions, its Ready
/// view, and its health record, whose Ready transition is now.
fn write_unknown(
    conditions: &mut NodeConditions,
    ready: &mut ReadyView,
    health: &mut Health,
    timers: &NodeTimers,
    created: Timestamp,
    now: Timestamp,
) -> UnknownWrite {
    let updated = unknown_conditions(&conditions.0, created, now);
    let was = ready.status;
    *ready = ReadyView::of(&updated);
    conditions.0 = updated.clone();
    let rec = health.settle(timers).map(|rec| HealthRecord {
        ready_transition: now,
        saved_ready: Some((ready.heartbeat, ready.transition)),
        ..rec
    });
    if let Some(rec) = rec {
        health.set(rec);
    }
    UnknownWrite { was, conditions: updated, record: rec }
}

/// MarkPodsNotReady: on the controller's own True -> not-True write (H2),
/// and, beyond upstream, on first sight of a node that is already Unknown
/// (a restart must not lose this step).
fn mark_pods_if_not_ready(
    w: &NodeWork,
    current: ConditionStatus,
    name: &str,
    pod_index: &PodIndex,
    pods: &mut Query<&mut Pod>,
    outbox: &mut Outbox,
) {
    let own_transition = w.observed == ConditionStatus::True && current != ConditionStatus::True;
    let unknown_at_first_sight = w.first_sight && w.had_ready && w.observed == ConditionStatus::Unknown;
    if own_transition {
        outbox.event(
            ObjectRef::Node(name.to_string()),
            EventType::Normal,
            "NodeNotReady",
            format!("Node {name} status is now: NodeNotReady"),
        );
    }
    if own_transition || unknown_at_first_sight {
        super::marks::mark_pods_not_ready(name, pod_index.on_node(name), pods, outbox);
    }
}

/// Closes the node-ordered section [`decide`] opened, once the eviction
/// mode's system has acted on the verdicts.
pub fn restore_node_order(mut outbox: ResMut<Outbox>) {
    outbox.end_ordered();
}

#[cfg(test)]
mod tests {
    use nodewarden_model::{ControllerConfig, NodeCondition, Span, Timestamp};

    use crate::Engine;
    use crate::action::ActionKind;
    use crate::components::NodeName;
    use crate::monitor::{Health, NodeTimers};
    use crate::observation::{NodeSnapshot, Observation};

    const PERIOD: Span = Span::from_secs(5);

    /// Four Ready nodes of one zone, seen by a first pass at the epoch.
    fn four_nodes() -> Engine {
        let mut engine = Engine::new(ControllerConfig::default(), Timestamp::EPOCH).unwrap();
        for name in ["a", "b", "c", "d"] {
            let mut node = NodeSnapshot::new(name, Timestamp::EPOCH - Span::from_secs(60));
            node.conditions = NodeCondition::healthy_kubelet(Timestamp::EPOCH, Timestamp::EPOCH);
            engine.observe(Observation::NodeUpserted(node));
            engine.observe(Observation::LeaseUpserted { node: name.into(), renew: Some(Timestamp::EPOCH) });
        }
        engine
    }

    /// Where each node is in the monitor's timers: quiet, parked or active.
    fn places(engine: &mut Engine) -> Vec<(String, &'static str)> {
        let world = engine.world_mut();
        let mut q = world.query::<(&NodeName, &Health)>();
        let mut out: Vec<(String, &'static str)> = q
            .iter(world)
            .map(|(name, h)| {
                let timers = world.resource::<NodeTimers>();
                let place = if timers.is_parked(h.slot()) {
                    "parked"
                } else if timers.is_quiet(h.slot()) {
                    "quiet"
                } else {
                    "active"
                };
                (name.0.clone(), place)
            })
            .collect();
        out.sort();
        out
    }

    fn all(place: &'static str) -> Vec<(String, &'static str)> {
        ["a", "b", "c", "d"].iter().map(|n| (n.to_string(), place)).collect()
    }

    #[test]
    fn a_node_registered_ready_is_quiet_after_the_pass_that_registered_it() {
        let mut engine = four_nodes();
        let registered = engine.tick(Timestamp::EPOCH);
        assert_eq!(registered.len(), 4, "one RegisteredNode Event a node: {registered:?}");
        assert_eq!(places(&mut engine), all("quiet"), "the next pass has nothing to visit");
    }

    #[test]
    fn a_node_written_unknown_and_queued_is_parked_by_the_same_pass() {
        let mut engine = four_nodes();
        let _ = engine.tick(Timestamp::EPOCH);
        let mut now = Timestamp::EPOCH;
        let unknown_at = loop {
            now += PERIOD;
            for name in ["b", "c", "d"] {
                engine.observe(Observation::LeaseUpserted { node: name.into(), renew: Some(now) });
            }
            let actions = engine.tick(now);
            if actions.iter().any(|a| matches!(&a.kind, ActionKind::UpdateNodeConditions { node, .. } if node == "a")) {
                break now;
            }
            assert!(now < Timestamp::EPOCH + Span::from_secs(60), "node a was never written Unknown");
        };
        assert_eq!(unknown_at, Timestamp::EPOCH + Span::from_secs(45), "grace (40 s) after its last heartbeat");
        let mut expected = all("quiet");
        expected[0].1 = "parked";
        assert_eq!(places(&mut engine), expected);
    }

    #[test]
    fn a_warm_standby_leaves_the_work_it_found_for_the_next_pass() {
        let mut engine = four_nodes();
        engine.stand_by();
        let _ = engine.tick(Timestamp::EPOCH);
        assert_eq!(places(&mut engine), all("active"), "registration is work a standby does not do");
        let later = Timestamp::EPOCH + PERIOD;
        engine.take_over(later);
        let _ = engine.tick(later);
        assert_eq!(places(&mut engine), all("quiet"), "the first pass as leader visits every node");
    }
}
