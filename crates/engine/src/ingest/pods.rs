//! Pods into the World: runs of upserts taken in with what they touch
//! taken out of the World once ([`PodRun`]), and deletions. Apart from the
//! rest of ingest because a whole-cluster list is a million pods: this is
//! the path whose cost per pod matters, and its batching is its own
//! concern.

use std::sync::Arc;

use bevy_ecs::prelude::*;
use tracing::debug;

use crate::action::{EventType, ObjectRef};
use crate::components::*;
use crate::metric_names;
use crate::observation::{ObjectKind, Observation, PodSnapshot};
use crate::reschedule::SchedFacts;
use crate::resources::*;

use super::is_stale;

/// Ingest of pod upserts, a million at a whole-cluster (re)list: a run of
/// them in a row is taken in with the pod index, the toleration lists and
/// the work lists they touch taken out of the World once for the run,
/// instead of a lookup (and, for the index, a remove and re-insert) of each
/// for every pod. Each pod is still taken in on its own, in order, exactly
/// as it would be alone.
///
/// The run is read in place in the engine's buffer of pending
/// observations: a snapshot is large, and moving each one out of the
/// buffer (and through an iterator's peek) cost more than reading it. What
/// the engine keeps of a snapshot (its key and uid, its toleration list
/// when new) is taken out of it, and the rest freed at once.
pub struct PodRun {
    index: PodIndex,
    sets: TolerationSets,
    inbox: Vec<Entity>,
    assigned: Vec<Entity>,
    /// The node name the last pod was bound to, shared: pods come node by
    /// node in a list, so most find their node's name here without a lookup.
    last_node: Option<Arc<str>>,
}

/// How far [`PodRun`] counts a node's pods ahead to size its pod list.
const COUNT_AHEAD: usize = 1024;

impl PodRun {
    /// Takes what pod ingest touches out of `world` (put back by
    /// [`PodRun::finish`]).
    pub fn start(world: &mut World) -> PodRun {
        PodRun {
            index: std::mem::take(&mut *world.resource_mut::<PodIndex>()),
            sets: std::mem::take(&mut *world.resource_mut::<TolerationSets>()),
            inbox: std::mem::take(&mut world.resource_mut::<TaintManagerInbox>().pods),
            assigned: std::mem::take(&mut world.resource_mut::<AssignedPods>().0),
            last_node: None,
        }
    }

    /// Whether `obs` is a pod upsert.
    pub fn takes(obs: &Observation) -> bool {
        matches!(obs, Observation::PodUpserted(_))
    }

    /// Applies the pod upserts at the start of `run`, stopping before the
    /// first other observation, and returns how many it applied. What it
    /// keeps of each is taken out of the snapshot, which is left emptied in
    /// `run`.
    pub fn apply(world: &mut World, run: &mut [Observation]) -> usize {
        let mut pods = PodRun::start(world);
        if pods.index.by_key.is_empty() {
            // A first list (startup, or a restart): size the index for it
            // at once rather than re-hashing it a score of times as it
            // grows; the same for the lists by node, one for each node
            // known (the pods' nodes, as a rule).
            pods.index.by_key.reserve(run.len(), |e| world.get::<Pod>(e).map(|p| &*p.key));
            if pods.index.by_node.is_empty() {
                pods.index.by_node.reserve(world.resource::<NodeIndex>().0.len());
            }
        }
        // The rescheduler's own facts, kept only while it runs.
        let resched = world.resource::<SchedFacts>().enabled;
        let mut taken = 0;
        while taken < run.len() {
            let (this, after) = run.split_at_mut(taken + 1);
            let Observation::PodUpserted(snap) = &mut this[taken] else { break };
            if resched {
                world.resource_mut::<SchedFacts>().observe_pod(snap);
            }
            pods.upsert(world, snap, after);
            taken += 1;
        }
        pods.finish(world);
        taken
    }

    /// Puts back what [`PodRun::start`] took out.
    pub fn finish(self, world: &mut World) {
        *world.resource_mut::<PodIndex>() = self.index;
        *world.resource_mut::<TolerationSets>() = self.sets;
        world.resource_mut::<TaintManagerInbox>().pods = self.inbox;
        world.resource_mut::<AssignedPods>().0 = self.assigned;
    }

    /// Takes in `snap`; `after` is what follows it in the run (read only
    /// to size a new pod list by node).
    fn upsert(&mut self, world: &mut World, snap: &mut PodSnapshot, after: &[Observation]) {
        let place = self.index.by_key.find_or_place(&snap.key, |e| world.get::<Pod>(e).map(|p| &*p.key));
        match place {
            Ok(e) => {
                let Some(old) = world.get::<Pod>(e) else { return };
                if is_stale(snap.version, old.version) {
                    debug!(pod = %snap.key, version = snap.version, held = old.version, "pod snapshot older than the one held; passed over");
                    metrics::counter!(metric_names::STALE_OBSERVATIONS_TOTAL, "kind" => "pod").increment(1);
                    discard(snap);
                    return;
                }
                // A new uid is a new pod under the same name (its deletion and
                // re-creation merged into one update): bound and evaluated
                // afresh, like any new pod (found by the fuzzer).
                let new_pod = *old.uid != *snap.uid;
                let node_changed = old.node.as_deref() != snap.node.as_deref() || new_pod;
                let old_tolerations = old.tolerations.clone();
                let old_node = old.node.clone();
                let old_progress = old.progress.clone();
                if new_pod {
                    // A new pod under the same name: forget what we did to the old one.
                    world.entity_mut(e).insert(PendingDeletion::default());
                }
                let bound = node_changed && snap.node.is_some();
                let mut pod = self.pod_from(snap);
                // Lists are interned, so the old list and the new one are
                // most often the same copy or two different lists; compared
                // whole only when neither tells.
                let tolerations_changed = !Arc::ptr_eq(&old_tolerations, &pod.tolerations)
                    && !same_tolerations(&old_tolerations, &pod.tolerations);
                if !new_pod {
                    // The same pod: what we did to it still stands.
                    let node_lost = pod.progress.node_lost;
                    pod.progress = old_progress;
                    pod.progress.node_lost |= node_lost;
                }
                self.index.rebind(e, old_node.as_deref(), pod.node.as_ref(), || pods_ahead_on(&snap.node, after));
                discard(snap);
                world.entity_mut(e).insert(pod);
                if node_changed || tolerations_changed {
                    self.inbox.push(e);
                }
                if bound {
                    self.assigned.push(e);
                }
            }
            Err(place) => {
                if let Some(held) = world.resource::<Tombstones>().version(ObjectKind::Pod, &snap.key)
                    && is_stale(snap.version, held)
                {
                    debug!(pod = %snap.key, version = snap.version, held, "snapshot of a pod deleted since; passed over");
                    metrics::counter!(metric_names::STALE_OBSERVATIONS_TOTAL, "kind" => "pod").increment(1);
                    discard(snap);
                    return;
                }
                // One probe found the pod absent and its place in the index.
                let pod = pod_component(&mut self.last_node, &self.index.by_node, &mut self.sets, snap);
                let node = pod.node.clone();
                let e = world.spawn((pod, PendingDeletion::default())).id();
                place.file(e);
                self.index.rebind(e, None, node.as_ref(), || pods_ahead_on(&snap.node, after));
                discard(snap);
                self.inbox.push(e);
                if node.is_some() {
                    self.assigned.push(e);
                }
            }
        }
    }

    /// The pod component of a snapshot, its strings and tolerations shared
    /// with the indexes and the other pods that have the same. Takes the
    /// key, the uid and the tolerations out of `snap`.
    fn pod_from(&mut self, snap: &mut PodSnapshot) -> Pod {
        pod_component(&mut self.last_node, &self.index.by_node, &mut self.sets, snap)
    }
}

/// [`PodRun::pod_from`], on the parts of the run it reads (so that the pod
/// index's keys can be borrowed meanwhile).
fn pod_component(
    last_node: &mut Option<Arc<str>>,
    by_node: &crate::resources::HashMap<Arc<str>, Vec<Entity>>,
    sets: &mut TolerationSets,
    snap: &mut PodSnapshot,
) -> Pod {
    let node = snap.node.as_deref().map(|n| shared_node_name(last_node, by_node, n));
    Pod {
        key: std::mem::take(&mut snap.key).into_boxed_str(),
        uid: std::mem::take(&mut snap.uid).into_boxed_str(),
        version: snap.version,
        node,
        daemonset: snap.daemonset,
        ready: snap.ready,
        terminating: snap.terminating,
        tolerations: sets.intern(std::mem::take(&mut snap.tolerations)),
        progress: PodProgress { node_lost: snap.node_lost, ..PodProgress::default() },
    }
}

/// How many of the observations at the start of `after` are upserts of
/// pods bound to `node` (up to [`COUNT_AHEAD`]): the pods about to join a
/// node's new list.
fn pods_ahead_on(node: &Option<String>, after: &[Observation]) -> usize {
    let Some(node) = node else { return 0 };
    after
        .iter()
        .take(COUNT_AHEAD)
        .take_while(|obs| matches!(obs, Observation::PodUpserted(p) if p.node.as_ref() == Some(node)))
        .count()
}

/// Frees what is left of a snapshot taken in, while it is still in the
/// cache (the buffer it sits in is cleared after the whole ingest).
fn discard(snap: &mut PodSnapshot) {
    snap.node = None;
    snap.scheduling = None;
}

/// The shared copy of a node name pods are bound to: the pod index's own
/// key when some pod is bound there already, else a new one (which becomes
/// the key when [`PodIndex::rebind`] files a pod under it); with the last one found kept in `last`: pods come node by node in a list,
/// so most find their node's name there without a lookup.
fn shared_node_name(
    last: &mut Option<Arc<str>>,
    by_node: &crate::resources::HashMap<Arc<str>, Vec<Entity>>,
    node: &str,
) -> Arc<str> {
    match last {
        Some(name) if **name == *node => name.clone(),
        _ => {
            let shared = by_node.get_key_value(node).map_or_else(|| Arc::from(node), |(name, _)| name.clone());
            *last = Some(shared.clone());
            shared
        }
    }
}

/// The entity of the pod `key`, through the pod index.
pub(crate) fn pod_named(world: &World, key: &str) -> Option<Entity> {
    world.resource::<PodIndex>().by_key.get(key, |e| world.get::<Pod>(e).map(|p| &*p.key))
}

/// A pod is gone: out of the index (its name buried for stale echoes), its
/// pending deletion announced as cancelled, its entity despawned.
pub(super) fn delete_pod(world: &mut World, key: &str) {
    let removed = world.resource_scope(|world: &mut World, mut index: Mut<PodIndex>| {
        index.by_key.remove(key, |e| world.get::<Pod>(e).map(|p| &*p.key))
    });
    let Some(e) = removed else { return };
    if let Some(version) = world.get::<Pod>(e).map(|p| p.version) {
        let now = world.resource::<Now>().0;
        world.resource_mut::<Tombstones>().bury(now, ObjectKind::Pod, key, version);
    }
    let node = world.get::<Pod>(e).and_then(|p| p.node.clone());
    world.resource_mut::<PodIndex>().rebind(e, node.as_deref(), None, || 0);
    if world.resource::<crate::judgement::Judgements>().on
        && let Some(pending) = world.get::<PendingDeletion>(e)
        && let (Some(deadline), Some(basis)) = (pending.get(), pending.basis())
    {
        // Gone before its deadline: the deletion a shadow compares with
        // whoever deleted it.
        let judged = basis.judged(key);
        let node = node.as_deref().unwrap_or_default();
        world.resource_mut::<crate::judgement::Judgements>().note(deadline.fire_at, node, || judged);
    }
    if world.get::<PendingDeletion>(e).is_some_and(|p| p.get().is_some()) {
        // The pod left by itself: its scheduled deletion is cancelled (I5).
        world.resource_mut::<Outbox>().event(
            ObjectRef::Pod(key.to_string()),
            EventType::Normal,
            "TaintManagerEviction",
            format!("Cancelling deletion of Pod {key}"),
        );
    }
    world.despawn(e);
}
