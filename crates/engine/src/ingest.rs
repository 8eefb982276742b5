//! Observations into the World.
//!
//! Ingest is the only place that creates and despawns entities and keeps
//! the indexes in step. It records what changed on the work lists the
//! event-driven systems drain (node handlers, taint manager, pod
//! assignment), so those systems cost nothing when nothing changed.
//!
//! It records facts and decides nothing: a refused pod deletion is noted on
//! the pod and in [`RefusedDeletions`] for the system that issued it, which
//! the engine runs before the next observation.
//!
//! Pods, the bulk of a list, are taken in by [`pods`]; nodes, Leases and
//! write outcomes here.

use bevy_ecs::prelude::*;
use nodewarden_model::{CompactName, TaintEffect, ZoneKey, keys};
use tracing::{debug, warn};

use crate::action::{ActionId, ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::metric_names;
use crate::monitor::{Health, NodeTimers, ZoneCounts};
use crate::observation::{NodeSnapshot, ObjectKind, Observation, WriteOutcome};
use crate::queue::RateLimitedTimedQueue;
use crate::reschedule::SchedFacts;
use crate::resources::*;
use crate::withdrawal::Withdrawal;

mod pods;

pub use pods::PodRun;
use pods::delete_pod;
pub(crate) use pods::pod_named;

/// Applies one observation.
pub fn apply(world: &mut World, obs: Observation) {
    // The rescheduler's own facts, kept only while it runs.
    if world.resource::<SchedFacts>().enabled {
        world.resource_mut::<SchedFacts>().observe(&obs);
    }
    match obs {
        Observation::NodeUpserted(n) => upsert_node(world, n),
        Observation::NodeDeleted { name } => delete_node(world, &name),
        Observation::PodUpserted(p) => {
            PodRun::apply(world, &mut [Observation::PodUpserted(p)]);
        }
        Observation::PodDeleted { key } => delete_pod(world, &key),
        // The engine hands runs of Leases to its `LeaseIngest`; one alone
        // goes the same way.
        Observation::LeaseUpserted { .. } | Observation::LeaseDeleted { .. } => {
            LeaseIngest::new(world).apply(world, &mut [obs]);
        }
        Observation::WriteFinished { id, outcome } => finish_write(world, id, outcome),
        // Read only by the critical-addon rescheduler (kept above).
        Observation::BudgetUpserted(_) | Observation::BudgetDeleted { .. } => {}
    }
}

fn noexecute(taints: &[nodewarden_model::Taint]) -> impl Iterator<Item = &nodewarden_model::Taint> {
    taints.iter().filter(|t| t.effect == TaintEffect::NoExecute)
}

/// The zone entity for `key`, created on first sight with a full bucket at
/// `node-eviction-rate` (`addPodEvictorForNewZone`).
pub fn zone_for(world: &mut World, key: ZoneKey) -> InZone {
    if let Some(&zone) = world.resource::<ZoneIndex>().by_key.get(&key) {
        let slot = world.get::<Zone>(zone).map_or(0, |z| z.slot);
        return InZone { zone, slot };
    }
    let now = world.resource::<Now>().0;
    let rate = world.resource::<Settings>().0.node_eviction_rate;
    let slot = world.resource::<ZoneIndex>().by_slot.len() as u32;
    let zone = world
        .spawn(Zone {
            key: key.clone(),
            slot,
            state: None,
            size: 0,
            not_ready: 0,
            queue: RateLimitedTimedQueue::new(rate, now),
        })
        .id();
    let mut index = world.resource_mut::<ZoneIndex>();
    index.by_key.insert(key, zone);
    index.by_slot.push(zone);
    InZone { zone, slot }
}

/// The zone of a node with `labels` ([`zone_for`] its key). A cluster has
/// a handful of zones, so they are compared in place, and a key is built
/// (two strings) only for a zone not seen yet or among many.
fn zone_of_labels(world: &mut World, labels: &std::collections::BTreeMap<String, String>) -> InZone {
    /// Up to this many zones are compared one by one.
    const SCANNED: usize = 8;
    let (region, zone) = ZoneKey::parts_of(labels);
    let index = world.resource::<ZoneIndex>();
    if index.by_slot.len() <= SCANNED {
        for &e in &index.by_slot {
            if let Some(z) = world.get::<Zone>(e)
                && z.key.region == region
                && z.key.zone == zone
            {
                return InZone { zone: e, slot: z.slot };
            }
        }
    }
    zone_for(world, ZoneKey::new(region, zone))
}

/// Whether a snapshot at `version` brings nothing new: both versions
/// known and `version` no newer than the `held` one. An older one is a late
/// event that would take the object back in time; an equal one is the same
/// object again (the watch's echo of a write whose answer came first), and
/// taking it in again would undo the bookkeeping of a write issued since.
/// A finished write forgets the held version of its object
/// (`forget_version`), so the object's state that comes with the answer is
/// taken in even at the held version (a node's, never at an older one).
pub(crate) fn is_stale(version: u64, held: u64) -> bool {
    version != 0 && held != 0 && version <= held
}

/// What ingest derives from a node snapshot before storing it, for the
/// refresh of a known node and the spawn of a new one alike.
struct NodeDerived {
    in_zone: InZone,
    excluded: bool,
    ready: ReadyView,
    observed: ObservedNode,
}

fn upsert_node(world: &mut World, mut snap: NodeSnapshot) {
    let existing = world.resource::<NodeIndex>().0.get(snap.name.as_str()).copied();
    let (held, retake) = match existing {
        Some(e) => world.get::<ObservedNode>(e).map_or((None, false), |o| (Some(o.version), o.retake)),
        None => (world.resource::<Tombstones>().version(ObjectKind::Node, &snap.name), false),
    };
    if let Some(held) = held
        && is_stale(snap.version, held)
        && !(retake && snap.version == held)
    {
        debug!(node = %snap.name, version = snap.version, held, "node snapshot older than the one held; passed over");
        metrics::counter!(metric_names::STALE_OBSERVATIONS_TOTAL, "kind" => "node").increment(1);
        return;
    }
    let derived = NodeDerived {
        in_zone: zone_of_labels(world, &snap.labels),
        excluded: snap.labels.contains_key(keys::LABEL_EXCLUDE_DISRUPTION),
        ready: ReadyView::of(&snap.conditions),
        observed: ObservedNode {
            version: snap.version,
            noexecute: noexecute(&snap.taints).cloned().collect(),
            retake: false,
        },
    };
    // From here on `snap.taints` is node lifecycle's view: what was
    // observed, with our own patches still on their way applied.
    world.resource::<Outbox>().with_taints_in_flight(&snap.name, &mut snap.taints);
    let entity = match existing {
        Some(e) => {
            refresh_node(world, e, snap, derived);
            e
        }
        None => spawn_node(world, snap, derived),
    };
    world.resource_mut::<ChangedNodes>().0.push(entity);
}

/// Takes a newer snapshot of a known node in: its components, its zone
/// and zone counts, and a word to the taint manager when its NoExecute
/// taints changed.
fn refresh_node(world: &mut World, e: Entity, snap: NodeSnapshot, derived: NodeDerived) {
    let NodeDerived { in_zone, excluded, ready, observed } = derived;
    let old_share = share(world, e);
    let mut node = world.entity_mut(e);
    let old_zone = node.get::<InZone>().map(|z| z.zone);
    // The taint manager looks again when the observed NoExecute
    // taints change, or node lifecycle's own view of them does (a
    // refused removal of ours, undone by the object's state).
    let (observed_changed, cleared) = match node.get::<ObservedNode>() {
        Some(o) => (o.noexecute != observed.noexecute, !o.noexecute.is_empty() && observed.noexecute.is_empty()),
        None => (true, false),
    };
    let taints_changed =
        observed_changed || node.get::<NodeTaints>().is_none_or(|t| !noexecute(&t.0).eq(noexecute(&snap.taints)));
    if let Some(mut v) = node.get_mut::<ReadyView>()
        && *v != ready
    {
        *v = ready;
    }
    if let Some(mut f) = node.get_mut::<NodeFlags>() {
        f.refresh_taints(&snap.taints);
    }
    node.insert((
        NodeMeta {
            created: snap.created,
            labels: ReconciledLabels::of(&snap.labels),
            unschedulable: snap.unschedulable,
        },
        NodeConditions(snap.conditions),
        NodeTaints(snap.taints),
        observed,
        in_zone,
    ));
    if excluded {
        node.insert(ExcludedFromDisruption);
    } else {
        node.remove::<ExcludedFromDisruption>();
    }
    let new_share = share(world, e);
    if let Some(old) = old_zone
        && old != in_zone.zone
    {
        move_out_of_zone(world, e, old);
    }
    if old_share != new_share {
        recount(world, old_share, new_share);
    }
    views_ingested(world, e);
    if taints_changed {
        let mut inbox = world.resource_mut::<TaintManagerInbox>();
        inbox.nodes.push(e);
        if cleared {
            // Observed without NoExecute taints: pending deletions
            // are called off (I4), whatever taints come back
            // before the taint manager next runs.
            inbox.cleared.push(e);
        }
    }
}

/// Moves a node's place in the zone counts from what it was counted as
/// before a refresh to what it counts as now.
fn recount(world: &mut World, old_share: Option<NodeShare>, new_share: Option<NodeShare>) {
    let mut counts = world.resource_mut::<ZoneCounts>();
    if let Some((slot, excluded, status)) = old_share {
        counts.count(slot, excluded, status, false);
    }
    if let Some((slot, excluded, status)) = new_share {
        counts.count(slot, excluded, status, true);
    }
}

/// Spawns a node seen for the first time, with its timer slot, zone count,
/// index entry and a word to the taint manager.
fn spawn_node(world: &mut World, snap: NodeSnapshot, derived: NodeDerived) -> Entity {
    let NodeDerived { in_zone, excluded, ready, observed } = derived;
    let untainted = observed.noexecute.is_empty();
    let mut flags = NodeFlags::default();
    flags.refresh_taints(&snap.taints);
    let lease = world
        .resource_mut::<OrphanLeases>()
        .0
        .remove(&snap.name)
        .map_or(LeaseView::default(), |renew| LeaseView { present: true, renew });
    // Spawned with every component at once (a spawn and an insert
    // would move it between archetypes); its timer slot is the one
    // `NodeTimers::add` gives it right after.
    let slot = world.resource::<NodeTimers>().next_slot();
    world.resource_mut::<ZoneCounts>().count(in_zone.slot, excluded, ready.status, true);
    let compact = CompactName::from(snap.name.as_str());
    let mut node = world.spawn((
        NodeName(snap.name),
        NodeMeta {
            created: snap.created,
            labels: ReconciledLabels::of(&snap.labels),
            unschedulable: snap.unschedulable,
        },
        ready,
        NodeConditions(snap.conditions),
        lease,
        Health::new(slot),
        NodeTaints(snap.taints),
        flags,
        in_zone,
        SeenNoExecute::default(),
        observed,
        TaintRecord::default(),
    ));
    if excluded {
        node.insert(ExcludedFromDisruption);
    }
    let e = node.id();
    let added = world.resource_mut::<NodeTimers>().add(e);
    debug_assert_eq!(added, slot);
    world.resource_mut::<NodeIndex>().0.insert(compact, e);
    let mut inbox = world.resource_mut::<TaintManagerInbox>();
    inbox.nodes.push(e);
    if untainted {
        // A node added without NoExecute taints cancels the pending
        // deletions of pods bound to its name (upstream handles the
        // add as a node update with no taints).
        inbox.cleared.push(e);
    }
    e
}

/// A node changed zone: it leaves the old zone's queue, as upstream would
/// have it removed there by `markNodeAsReachable` under the old key.
fn move_out_of_zone(world: &mut World, node: Entity, old_zone: Entity) {
    if let Some(mut zone) = world.get_mut::<Zone>(old_zone) {
        zone.queue.remove(&node);
    }
    if let Some(mut flags) = world.get_mut::<NodeFlags>(node) {
        flags.queued = false;
        if flags.eviction == EvictionStatus::ToBeEvicted {
            flags.eviction = EvictionStatus::Unmarked;
        }
    }
}

fn delete_node(world: &mut World, name: &str) {
    let Some(e) = world.resource_mut::<NodeIndex>().0.remove(name) else {
        debug!(node = name, "deletion of a node never seen; ignored");
        return;
    };
    if let Some(version) = world.get::<ObservedNode>(e).map(|o| o.version) {
        let now = world.resource::<Now>().0;
        world.resource_mut::<Tombstones>().bury(now, ObjectKind::Node, name, version);
    }
    if let Some(in_zone) = world.get::<InZone>(e).copied() {
        move_out_of_zone(world, e, in_zone.zone);
    }
    // Seen without NoExecute taints since the taint manager last ran: the
    // pending deletions of its pods are called off all the same (I4), by
    // name now that the node is gone. Found by `engine_steps` under watch
    // delay: the taints' removal and the node's deletion arrived together,
    // and the deletion fired at its old deadline.
    {
        let mut inbox = world.resource_mut::<TaintManagerInbox>();
        let before = inbox.cleared.len();
        inbox.cleared.retain(|&c| c != e);
        if inbox.cleared.len() != before {
            inbox.cleared_gone.push(name.to_string());
        }
    }
    let health = world.get::<Health>(e).copied();
    let registered = health.is_some_and(|h| h.seen());
    if let Some((slot, excluded, status)) = share(world, e) {
        world.resource_mut::<ZoneCounts>().count(slot, excluded, status, false);
    }
    if let Some(h) = health {
        world.resource_mut::<NodeTimers>().remove(h.slot());
    }
    // The Lease is an object of its own: it outlives the node until its
    // own deletion is observed (the watch may deliver the Lease's events
    // before the node's). Kept for a node created again under the name, as
    // upstream's lease lister would still show it.
    if let Some(lease) = world.get::<LeaseView>(e).copied()
        && lease.present
    {
        world.resource_mut::<OrphanLeases>().0.insert(name.to_string(), lease.renew);
    }
    world.despawn(e);
    if registered {
        world.resource_mut::<Outbox>().event(
            ObjectRef::Node(name.to_string()),
            EventType::Normal,
            "RemovingNode",
            format!("Node {name} event: Removing Node {name} from Controller"),
        );
    }
    // Upstream keeps pending taint-based deletions of the node's pods (I5):
    // the taint manager forgets the node's taints but cancels nothing more.
}

/// What Lease observations touch, fetched once for a run of them.
type LeaseParams = (
    Res<'static, NodeIndex>,
    ResMut<'static, OrphanLeases>,
    ResMut<'static, NodeTimers>,
    Query<'static, 'static, (&'static mut LeaseView, &'static mut Health, &'static ReadyView, &'static NodeFlags)>,
);

/// Ingest of Lease observations, the bulk of a large cluster's traffic (a
/// renewal per node every 10 s): a run of them in a row is taken in with
/// one fetch of the resources and components they touch, instead of a
/// lookup of each by type for every renewal.
///
/// At 100k nodes every renewal meets memory that is not in cache: the
/// node index's bucket, the entity's location, its Lease and health
/// columns, its monitor timer. Taken one renewal after the other, each
/// waits for the previous one's misses. So a run is taken in groups of
/// [`LEASE_GROUP`]: every node of the group is looked up, then the memory
/// each will touch is read once (loads that do not depend on each other,
/// which the processor has in flight together), then the renewals are
/// applied in order, as before. Lookups never see a change made by a
/// renewal of the same group: applying a renewal changes no index.
pub struct LeaseIngest(bevy_ecs::system::SystemState<LeaseParams>);

/// How many renewals are looked up ahead of being applied
/// ([`LeaseIngest`]).
const LEASE_GROUP: usize = 32;

impl LeaseIngest {
    /// The ingest state for `world`.
    pub fn new(world: &mut World) -> LeaseIngest {
        LeaseIngest(bevy_ecs::system::SystemState::new(world))
    }

    /// Whether `obs` is a Lease observation.
    pub fn takes(obs: &Observation) -> bool {
        matches!(obs, Observation::LeaseUpserted { .. } | Observation::LeaseDeleted { .. })
    }

    /// Applies the Lease observations at the start of `run`, stopping
    /// before the first other one, and returns how many it applied (read in
    /// place, as [`PodRun::apply`] reads pods; each one's node name is taken
    /// out of it or freed).
    pub fn apply(&mut self, world: &mut World, run: &mut [Observation]) -> usize {
        let Ok((index, mut orphans, mut timers, mut nodes)) = self.0.get_mut(world) else { return 1 };
        let taken = run.iter().take_while(|o| LeaseIngest::takes(o)).count();
        for group in run[..taken].chunks_mut(LEASE_GROUP) {
            // Look every node up, then read what applying will touch.
            let mut found = [None; LEASE_GROUP];
            for (obs, e) in group.iter().zip(found.iter_mut()) {
                if let Observation::LeaseUpserted { node, .. } | Observation::LeaseDeleted { node } = obs {
                    *e = index.0.get(node.as_str()).copied();
                }
            }
            let mut touched = 0u64;
            for e in found.iter().take(group.len()).flatten() {
                if let Ok((lease, health, ready, flags)) = nodes.get(*e) {
                    touched ^= u64::from(lease.present)
                        ^ u64::from(health.slot())
                        ^ u64::from(ready.status.is_some())
                        ^ u64::from(flags.is_clean())
                        ^ u64::from(timers.is_quiet(health.slot()));
                }
            }
            std::hint::black_box(touched);
            for (obs, e) in group.iter_mut().zip(found) {
                let (node, renew) = match obs {
                    Observation::LeaseUpserted { node, renew } => (node, Some(*renew)),
                    Observation::LeaseDeleted { node } => (node, None),
                    // Only Lease observations are in the run (`takes`).
                    _ => continue,
                };
                let Some(e) = e else {
                    let node = std::mem::take(node);
                    match renew {
                        Some(r) => orphans.0.insert(node, r),
                        None => orphans.0.remove(&node),
                    };
                    continue;
                };
                // The name is freed here, as before, not with the buffer.
                drop(std::mem::take(node));
                let view = renew.map_or(LeaseView::default(), |renew| LeaseView { present: true, renew });
                if let Ok((mut lease, mut health, ready, flags)) = nodes.get_mut(e)
                    && *lease != view
                {
                    *lease = view;
                    if timers.is_quiet(health.slot()) {
                        health.ingested(ready, &view, flags.is_clean(), &mut timers);
                    }
                }
            }
        }
        taken
    }
}

/// Where a node is counted: its zone slot, whether it is excluded from
/// disruption, and its Ready status.
type NodeShare = (u32, bool, Option<nodewarden_model::ConditionStatus>);

/// What a node contributes to its zone's counts ([`ZoneCounts`]): its zone
/// slot, whether it is excluded, its Ready status.
fn share(world: &World, e: Entity) -> Option<NodeShare> {
    let node = world.entity(e);
    let in_zone = node.get::<InZone>()?;
    let ready = node.get::<ReadyView>()?;
    Some((in_zone.slot, node.contains::<ExcludedFromDisruption>(), ready.status))
}

/// A node's Ready condition, Lease or taints were just ingested: a quiet
/// node takes a heartbeat in for the coming pass, or becomes active
/// ([`Health::ingested`]).
fn views_ingested(world: &mut World, e: Entity) {
    let node = world.entity(e);
    let (Some(&health), Some(ready), Some(lease), Some(flags)) =
        (node.get::<Health>(), node.get::<ReadyView>(), node.get::<LeaseView>(), node.get::<NodeFlags>())
    else {
        return;
    };
    let (ready, lease, clean) = (*ready, *lease, flags.is_clean());
    let mut timers = world.resource_mut::<NodeTimers>();
    if !timers.is_quiet(health.slot()) {
        return;
    }
    let mut updated = health;
    updated.ingested(&ready, &lease, clean, &mut timers);
    if let Some(mut h) = world.get_mut::<Health>(e) {
        *h = updated;
    }
}

/// A write of ours finished: the object may not be what our bookkeeping
/// says (refused), or the watch may already have shown the version the
/// write made while the write was still on the books, so the object's next
/// snapshot (which comes with the answer) is taken in whatever its
/// version; a node's, at the held version or a newer one. A node snapshot
/// older than the one held is a late watch event (an answer carries the
/// object's newer state ahead of the watch, a refusal carries none) and
/// would take the node back in time: found by `engine_steps` under watch
/// delay, a taint whose removal had been observed came back with it, and
/// the taint manager deleted a pod for it (I2 on a taint no longer there).
fn forget_version(world: &mut World, kind: &ActionKind) {
    let Some((object, _)) = kind.slot() else { return };
    match object {
        ObjectRef::Node(name) => {
            if let Some(&e) = world.resource::<NodeIndex>().0.get(name.as_str())
                && let Some(mut observed) = world.get_mut::<ObservedNode>(e)
            {
                observed.retake = true;
            }
        }
        ObjectRef::Pod(key) => {
            if let Some(e) = pod_named(world, &key)
                && let Some(mut pod) = world.get_mut::<Pod>(e)
            {
                pod.version = 0;
            }
        }
    }
}

/// A pod deletion the API server accepted: counted here, once a pod, as
/// upstream counts a deletion after its call returns (an attempt that was
/// refused, or held back, counts nothing).
fn deletion_accepted(world: &World, why: &crate::explain::Explanation) {
    let now = world.resource::<Now>().0;
    if world.resource::<Settings>().0.enable_taint_manager {
        metrics::counter!(metric_names::TAINT_EVICTION_POD_DELETIONS_TOTAL).increment(1);
        metrics::histogram!(metric_names::TAINT_EVICTION_POD_DELETION_DURATION_SECONDS)
            .record((now - why.due_at).as_secs_f64());
        metrics::histogram!(metric_names::TAINT_TO_DELETION_SECONDS).record((now - why.scheduled_at).as_secs_f64());
    } else {
        metrics::counter!(metric_names::LEGACY_POD_DELETIONS_TOTAL).increment(1);
    }
}

/// A write withdrawn before it was sent (no longer true): nothing was
/// refused, so nothing is retried on its old basis and no failure is
/// counted. What the deciding system applied to its own view when it
/// issued the write is undone where the write says how (a pod's marks, its
/// Ready bit); a node's next observed state (the sender reads it) is taken
/// in whatever its version. Only the pod the write was for is touched (a
/// pod re-created under its name is another).
fn withdrawn(world: &mut World, kind: ActionKind, reason: &Withdrawal) {
    debug!(?kind, %reason, "write withdrawn before it was sent");
    let pod_for = |world: &World, key: &str, uid: &str| {
        pod_named(world, key).filter(|&e| world.get::<Pod>(e).is_some_and(|p| &*p.uid == uid))
    };
    match &kind {
        ActionKind::DeletePod { pod, uid, .. } | ActionKind::EvictForAddon { pod, uid, .. } => {
            let Some(e) = pod_for(world, pod, uid) else { return };
            if let Some(mut p) = world.get_mut::<Pod>(e) {
                p.progress.deletion_requested = false;
            }
            // Still due by the taint manager's own reckoning (the sender
            // held it back for a reason of its own: a watch down, the
            // interlock's mirror): due again, after a monitor period, so a
            // reason that persists costs one try a period, not a loop.
            if world.resource::<Settings>().0.enable_taint_manager {
                let later = world.resource::<Settings>().0.node_monitor_period;
                rearm_taint_deletion(world, e, later);
            }
            take_back_disruption_target(world, e);
        }
        ActionKind::ClearPodDisruptionTarget { pod, uid } => {
            // The condition stays on the pod: a deletion stands again.
            let Some(e) = pod_for(world, pod, uid) else { return };
            if let Some(mut p) = world.get_mut::<Pod>(e) {
                p.progress.disruption_target_landed = true;
            }
        }
        ActionKind::AddPodDisruptionTarget { pod, uid } | ActionKind::SetPodNodeLost { pod, uid, .. } => {
            let Some(e) = pod_for(world, pod, uid) else { return };
            if let Some(mut p) = world.get_mut::<Pod>(e) {
                if matches!(kind, ActionKind::AddPodDisruptionTarget { .. }) {
                    p.progress.disruption_target = false;
                } else {
                    p.progress.node_lost = false;
                }
            }
        }
        ActionKind::MarkPodNotReady { pod, uid } => {
            // `mark_pods_not_ready` took the pod for not ready when it
            // issued this; the pod is as it was (Ready), or the next
            // observation says otherwise.
            let Some(e) = pod_for(world, pod, uid) else { return };
            if let Some(mut p) = world.get_mut::<Pod>(e)
                && p.ready == Some(false)
            {
                p.ready = Some(true);
            }
        }
        ActionKind::UpdateNodeConditions { node, .. }
        | ActionKind::PatchNodeTaints { node, .. }
        | ActionKind::PatchNodeLabels { node, .. } => {
            if let Some(&e) = world.resource::<NodeIndex>().0.get(node.as_str()) {
                world.resource_mut::<ChangedNodes>().0.push(e);
            }
        }
        ActionKind::RecordEvent(_) => {}
    }
}

/// [`Pod::take_back_disruption_target`] for pod `e`, from the world.
fn take_back_disruption_target(world: &mut World, e: Entity) {
    let scheduled = world.get::<PendingDeletion>(e).is_some_and(|d| !d.is_empty());
    let clear = world.get_mut::<Pod>(e).and_then(|mut p| p.take_back_disruption_target(scheduled));
    if let Some(clear) = clear {
        world.resource_mut::<Outbox>().write(clear);
    }
}

/// A taint-based deletion of pod `e` whose deadline was consumed (it fired,
/// and its write did not go through) while its basis stands: due again
/// `after` from now.
fn rearm_taint_deletion(world: &mut World, e: Entity, after: nodewarden_model::Span) {
    let still_based = world.get::<PendingDeletion>(e).is_some_and(|d| d.get().is_none() && d.basis().is_some());
    if !still_based {
        return;
    }
    let now = world.resource::<Now>().0;
    let at = now + after;
    let seq = world.resource_mut::<DeletionTimers>().push(at, e);
    if let Some(mut pending) = world.get_mut::<PendingDeletion>(e) {
        pending.set(Some(Deadline { created: now, fire_at: at, seq }));
    }
}

fn finish_write(world: &mut World, id: ActionId, outcome: WriteOutcome) {
    let Some(kind) = world.resource_mut::<Outbox>().finish(id) else {
        debug!(?id, "outcome for an unknown or already finished write");
        return;
    };
    if matches!(kind, ActionKind::EvictForAddon { .. }) {
        world.resource_mut::<SchedFacts>().write_finished(&kind, &outcome);
    }
    // The object's state comes with the answer: taken in whatever its
    // version (the watch may have shown that version already, before our
    // write was off the books). Not after an accepted deletion: the object
    // is gone, and its last version is what keeps a late event about it
    // from bringing it back (`Tombstones`).
    let deleted = matches!(kind, ActionKind::DeletePod { .. } | ActionKind::EvictForAddon { .. })
        && outcome == WriteOutcome::Done;
    if !deleted {
        forget_version(world, &kind);
    }
    let reason = match outcome {
        WriteOutcome::Done => {
            match &kind {
                ActionKind::DeletePod { why, .. } => deletion_accepted(world, why),
                ActionKind::AddPodDisruptionTarget { pod, uid } => {
                    if let Some(e) = pod_named(world, pod) {
                        if let Some(mut p) = world.get_mut::<Pod>(e).filter(|p| &*p.uid == uid) {
                            p.progress.disruption_target_landed = true;
                        }
                        // Its deletion may have been called off while it
                        // was on its way.
                        take_back_disruption_target(world, e);
                    }
                }
                _ => {}
            }
            return;
        }
        WriteOutcome::Withdrawn(reason) => return withdrawn(world, kind, &reason),
        WriteOutcome::Failed(reason) => reason,
    };
    metrics::counter!(metric_names::WRITE_FAILURES_TOTAL).increment(1);
    if let Some((object, slot)) = kind.slot()
        && !matches!(kind, ActionKind::DeletePod { .. })
    {
        warn!(%object, ?slot, %reason, "write refused; converging on the object's next observed state");
    }
    match kind {
        ActionKind::DeletePod { pod, .. } => {
            // Only the facts: no deletion is under way any more, and the pod
            // has one more refusal. What to do about it (retry when, and the
            // FailedEviction Event) is the deleting system's call; the
            // engine hands it this refusal before the next observation.
            let Some(e) = pod_named(world, &pod) else { return };
            let Some(mut refused) = world.get_mut::<Pod>(e) else { return };
            let progress = &mut refused.progress;
            progress.deletion_requested = false;
            progress.failed_deletions += 1;
            let failures = progress.failed_deletions;
            world.resource_mut::<RefusedDeletions>().0.push(RefusedDeletion { pod: e, key: pod, reason, failures });
        }
        ActionKind::EvictForAddon { pod, .. } => {
            // No eviction under way any more; the rescheduler counted the
            // refusal and decides at its next pass.
            let Some(e) = pod_named(world, &pod) else { return };
            if let Some(mut refused) = world.get_mut::<Pod>(e) {
                refused.progress.deletion_requested = false;
            }
            // A taint-based deletion that came due while the eviction was
            // under way was passed over; it is due again now.
            rearm_taint_deletion(world, e, nodewarden_model::Span::ZERO);
        }
        ActionKind::UpdateNodeConditions { node, .. }
        | ActionKind::PatchNodeTaints { node, .. }
        | ActionKind::PatchNodeLabels { node, .. } => {
            if let Some(&e) = world.resource::<NodeIndex>().0.get(node.as_str()) {
                world.resource_mut::<ChangedNodes>().0.push(e);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_model::{
        ConditionStatus, ControllerConfig, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator, keys,
    };

    use crate::Engine;
    use crate::action::ActionKind;
    use crate::observation::{NodeSnapshot, Observation, PodSnapshot, WriteOutcome};

    /// Found by `engine_steps` under watch delay: a write of ours to a node
    /// finished (here refused, carrying no state) after the answer to
    /// another had shown the node at a newer version than the watch had
    /// delivered; the watch's late, older snapshot still carried a
    /// NoExecute taint whose removal had been observed, the engine took it
    /// in, and the taint manager deleted a pod that did not tolerate it.
    /// After a finished write the node's next snapshot is taken in at the
    /// held version (the one the answer comes with), never at an older one.
    #[test]
    fn a_finished_write_lets_the_held_node_version_in_again_never_an_older_one() {
        let t = Timestamp::from_secs;
        let run = |late_version: u64, outcome: &WriteOutcome| {
            let mut engine = Engine::new(ControllerConfig::default(), t(0)).unwrap();
            let node = NodeSnapshot::new("a", t(-3600)).in_zone("z").with_ready(ConditionStatus::False, t(0));
            engine.observe(Observation::NodeUpserted(NodeSnapshot { version: 5, ..node.clone() }));
            let forever = Toleration {
                key: keys::TAINT_NOT_READY.into(),
                operator: TolerationOperator::Exists,
                effect: None,
                value: String::new(),
                seconds: None,
            };
            engine
                .observe(Observation::PodUpserted(PodSnapshot::new("ns/p", "u", Some("a")).tolerating(vec![forever])));
            let writes: Vec<_> = engine.tick(t(0)).into_iter().filter(|a| a.kind.slot().is_some()).collect();
            assert!(!writes.is_empty(), "the NotReady node is tainted");
            for w in writes {
                engine.observe(Observation::WriteFinished { id: w.id, outcome: outcome.clone() });
            }
            let foreign = Taint::new("example.com/x", TaintEffect::NoExecute);
            let late = NodeSnapshot { version: late_version, ..node.with_taints(vec![foreign]) };
            engine.observe(Observation::NodeUpserted(late));
            (1..=30).flat_map(|s| engine.tick(t(s))).any(|a| matches!(a.kind, ActionKind::DeletePod { .. }))
        };
        for outcome in [WriteOutcome::Done, WriteOutcome::Failed("conflict".into())] {
            assert!(!run(4, &outcome), "{outcome:?}: an older snapshot is passed over");
            assert!(run(5, &outcome), "{outcome:?}: the held version is taken in again");
        }
    }
}
