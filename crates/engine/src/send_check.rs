//! Is a write still true? Asked by whoever sends the engine's writes, just
//! before each goes out ([`crate::engine::Engine::still_true`]).
//!
//! A write is decided at one instant and sent at a later one: it may wait
//! behind a client rate limit, behind an earlier write to the same object,
//! or through an outage. By then the facts it rested on may have changed:
//! the node's Lease was renewed, the NoExecute taint came off, the pod
//! was re-created. Upstream's controllers write synchronously from the
//! pass that decided, so their decisions cannot age in a queue; ours can,
//! and this is where an aged one is caught and withdrawn rather than sent.
//!
//! The check reads the engine's current view (observations taken in, and
//! node lifecycle's own writes already on their way) and never changes it.
//! It answers one question per kind of write: would the engine still make
//! this change now? It is conservative in one direction only: when the
//! answer is unclear for a deletion, the deletion is withdrawn (the engine
//! decides again at its next pass, from what it then observes).

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, ConditionType, TaintEffect, keys};

use crate::action::{ActionKind, WriteSlot};
use crate::components::*;
use crate::ingest::pod_named;
use crate::monitor::{Health, NodeTimers};
use crate::resources::*;
use crate::systems::legacy::heartbeat_since_last_pass;
use crate::systems::marks::mark_stands;
use crate::systems::node_handlers::{condition_taint, managed_key};
use crate::systems::noexecute_taint_for;
use crate::withdrawal::Changed;

/// `Ok` when `kind` is still what the engine would write, against
/// everything it has taken in by now; otherwise the fact that changed
/// (which prints as a phrase fit for a log line). No check reads the clock: each asks what was observed
/// since the decision (a heartbeat, a taint gone, a pod re-created), since
/// what the decision found out about time (a node overdue, a toleration
/// run out) stays found out as time goes on.
pub fn still_true(world: &World, kind: &ActionKind) -> Result<(), Changed> {
    match kind {
        ActionKind::UpdateNodeConditions { node, conditions, .. } => {
            let goes_unknown =
                conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::Unknown);
            if goes_unknown { node_still_silent(world, node) } else { Ok(()) }
        }
        ActionKind::PatchNodeTaints { node, add, remove, slot } => taints_still_wanted(world, node, add, remove, *slot),
        ActionKind::PatchNodeLabels { .. } | ActionKind::RecordEvent(_) => Ok(()),
        // The rescheduler's eviction rests on the pod still running on the
        // node being prepared; whether the room is still needed is the
        // rescheduler's next pass to judge (it releases the node then).
        ActionKind::EvictForAddon { pod, uid, why, .. } => running_on(world, pod, uid, &why.node).map(|_| ()),
        ActionKind::MarkPodNotReady { pod, uid } => {
            // The rule that decided and built it. Beyond upstream, which
            // marks as it decided: once the pod is terminating (our own
            // deletion, sent ahead of a mark still waiting, landed) it
            // has left its Services' ready endpoints; the mark would
            // spend a request on nothing.
            let (_, p) = pod_with_uid(world, pod, uid)?;
            let node = p.node.as_deref().unwrap_or_default();
            let ready = node_entity(world, node).and_then(|e| world.get::<ReadyView>(e)).and_then(|r| r.status);
            mark_stands(p, ready)
        }
        ActionKind::AddPodDisruptionTarget { pod, uid } | ActionKind::SetPodNodeLost { pod, uid, .. } => {
            let (e, p) = pod_with_uid(world, pod, uid)?;
            if !p.progress.deletion_requested && matches!(kind, ActionKind::AddPodDisruptionTarget { .. }) {
                return Err(Changed::DeletionCalledOff);
            }
            deletion_still_due(world, e, p)
        }
        ActionKind::ClearPodDisruptionTarget { pod, uid } => {
            let (e, p) = pod_with_uid(world, pod, uid)?;
            let scheduled = world.get::<PendingDeletion>(e).is_some_and(|d| !d.is_empty());
            if p.progress.deletion_requested || scheduled {
                return Err(Changed::DeletionStandsAgain);
            }
            if p.terminating {
                return Err(Changed::PodTerminating);
            }
            Ok(())
        }
        ActionKind::DeletePod { pod, uid, why, .. } => {
            let (e, p) = running_on(world, pod, uid, &why.node)?;
            deletion_still_due(world, e, p)
        }
    }
}

fn node_entity(world: &World, name: &str) -> Option<Entity> {
    world.resource::<NodeIndex>().0.get(name).copied()
}

fn pod_with_uid<'w>(world: &'w World, key: &str, uid: &str) -> Result<(Entity, &'w Pod), Changed> {
    let entity = pod_named(world, key).ok_or(Changed::PodGone)?;
    let pod = world.get::<Pod>(entity).ok_or(Changed::PodGone)?;
    if &*pod.uid != uid {
        return Err(Changed::PodRecreated { uid: pod.uid.to_string() });
    }
    Ok((entity, pod))
}

/// The pod a deletion or eviction was decided for: the same object
/// (uid), still bound to the node the decision was about, and not
/// terminating already.
fn running_on<'w>(world: &'w World, key: &str, uid: &str, node: &str) -> Result<(Entity, &'w Pod), Changed> {
    let (e, p) = pod_with_uid(world, key, uid)?;
    if p.node.as_deref() != Some(node) {
        return Err(Changed::PodNotOnNode { node: node.to_owned() });
    }
    if p.terminating {
        return Err(Changed::PodAlreadyTerminating);
    }
    Ok((e, p))
}

/// A node about to be written Unknown: not heard from since the pass that
/// decided it. That pass found it silent for longer than its grace
/// ([`grace_for`](crate::components::grace_for)); time only moves forward, so
/// it stays overdue until a heartbeat is taken in, and one taken in since
/// (a Lease renewal, a status post) withdraws the write, even before the
/// next pass. The grace is not asked again here: the node's view already
/// holds the write (a Ready condition, Unknown, where a never-posted node
/// or one whose Ready condition was removed had none), so asking it would
/// pick the monitor grace where the startup grace decided.
fn node_still_silent(world: &World, name: &str) -> Result<(), Changed> {
    let e = node_entity(world, name).ok_or_else(|| Changed::NodeGone { node: name.to_owned() })?;
    let (Some(health), Some(ready), Some(lease)) =
        (world.get::<Health>(e), world.get::<ReadyView>(e), world.get::<LeaseView>(e))
    else {
        return Ok(());
    };
    let Some(rec) = health.record(world.resource::<NodeTimers>()) else { return Ok(()) };
    if heartbeat_since_last_pass(&rec, ready, lease) {
        return Err(Changed::HeardFromSinceDecision { node: name.to_owned() });
    }
    Ok(())
}

/// A taint patch: each NoExecute taint added is the one the node's Ready
/// condition calls for (a removal always stands: it evicts nothing); each
/// NoSchedule taint of a condition added is called for, each removed is
/// not. The node's view includes node lifecycle's own
/// writes on their way (its Unknown status before its taint).
fn taints_still_wanted(
    world: &World,
    name: &str,
    add: &[nodewarden_model::Taint],
    remove: &[nodewarden_model::Taint],
    slot: WriteSlot,
) -> Result<(), Changed> {
    if slot == WriteSlot::CriticalAddonsTaint {
        return Ok(());
    }
    let e = node_entity(world, name).ok_or_else(|| Changed::NodeGone { node: name.to_owned() })?;
    let wanted = |t: &nodewarden_model::Taint| -> Option<bool> {
        match t.effect {
            TaintEffect::NoExecute => {
                // Asked of the deciding rule itself. A view without a
                // Ready condition (a snapshot from before node
                // lifecycle's own Unknown status landed, as under watch
                // latency) says nothing against the decision: no verdict.
                let ready = world.get::<ReadyView>(e)?.status?;
                let calls_for = noexecute_taint_for(ready);
                matches!(t.key.as_str(), keys::TAINT_NOT_READY | keys::TAINT_UNREACHABLE)
                    .then(|| calls_for.is_some_and(|(wanted, _)| wanted.key == t.key))
            }
            TaintEffect::NoSchedule if managed_key(&t.key) => {
                if t.key == keys::TAINT_UNSCHEDULABLE {
                    return Some(world.get::<NodeMeta>(e)?.unschedulable);
                }
                let conditions = world.get::<NodeConditions>(e)?;
                Some(conditions.0.iter().any(|c| condition_taint(&c.kind, c.status) == Some(t.key.as_str())))
            }
            _ => None,
        }
    };
    if let Some(t) = add.iter().find(|t| wanted(t) == Some(false)) {
        return Err(Changed::TaintNoLongerCalledFor { node: name.to_owned(), taint: t.clone() });
    }
    // Taking a NoExecute taint off evicts nothing, and node lifecycle does
    // it on purpose where the conditions still call for it: at start-up and
    // on entering master disruption mode every node is marked reachable,
    // and the taint comes back through the zone's rate limiter (C3, G6).
    if let Some(t) = remove.iter().filter(|t| t.effect != TaintEffect::NoExecute).find(|t| wanted(t) == Some(true)) {
        return Err(Changed::TaintCalledForAgain { node: name.to_owned(), taint: t.clone() });
    }
    Ok(())
}

/// A pod's deletion (or the status write that goes with it) is still due.
/// Taint-based: the taint manager still holds the basis it decided on
/// (it lets go of it when the node's NoExecute taints go or the pod comes
/// to tolerate them), and the node is still observed carrying a NoExecute
/// taint the pod does not tolerate for good. Legacy: the node is still
/// marked for eviction and not Ready. Master disruption mode unmarks every
/// node (G6, J3), but it calls off the evictions still queued, not the
/// deletions already decided: upstream sends those from the pass (or pod
/// handler) that decided them, before `handleDisruption` runs, so in that
/// mode an unmarked node says nothing against the decision.
fn deletion_still_due(world: &World, pod_entity: Entity, pod: &Pod) -> Result<(), Changed> {
    let node = pod.node.as_deref().unwrap_or_default();
    let node_entity = node_entity(world, node);
    if world.resource::<Settings>().0.enable_taint_manager {
        let basis = world.get::<PendingDeletion>(pod_entity).and_then(PendingDeletion::basis);
        if basis.is_none() {
            return Err(Changed::TaintManagerCalledOff);
        }
        // A pending deletion outlives its node's deletion (I5): with the
        // node gone, the basis decides.
        let Some(e) = node_entity else { return Ok(()) };
        let observed = world.get::<ObservedNode>(e).map(|o| o.noexecute.as_slice()).unwrap_or_default();
        use nodewarden_model::taint::Decision;
        return match nodewarden_model::taint::decide(observed, &pod.tolerations) {
            Decision::NoTaints => Err(Changed::NoNoExecuteTaint { node: node.to_owned() }),
            Decision::Forever => Err(Changed::ToleratedNow { node: node.to_owned() }),
            Decision::Untolerated(_) | Decision::Expires { .. } => Ok(()),
        };
    }
    let e = node_entity.ok_or_else(|| Changed::NodeGone { node: node.to_owned() })?;
    let flags = world.get::<NodeFlags>(e).copied().unwrap_or_default();
    if flags.eviction == EvictionStatus::Unmarked && !world.resource::<DisruptionMode>().all_zones_down {
        return Err(Changed::NoLongerMarked { node: node.to_owned() });
    }
    let (Some(ready), Some(lease), Some(health)) =
        (world.get::<ReadyView>(e), world.get::<LeaseView>(e), world.get::<Health>(e))
    else {
        return Ok(());
    };
    if ready.status == Some(ConditionStatus::True) {
        return Err(Changed::NodeReadyAgain { node: node.to_owned() });
    }
    // As the eviction pass defers a queued node that shows signs of life.
    if health.record(world.resource::<NodeTimers>()).is_some_and(|rec| heartbeat_since_last_pass(&rec, ready, lease)) {
        return Err(Changed::HeardFromSinceLastPass { node: node.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use nodewarden_model::{ConditionStatus, ControllerConfig, Timestamp, keys};

    use crate::action::ActionKind;
    use crate::engine::Engine;
    use crate::observation::{NodeSnapshot, Observation, PodSnapshot, WriteOutcome};

    fn node(name: &str, zone: &str) -> NodeSnapshot {
        let mut n =
            NodeSnapshot::new(name, Timestamp::from_secs(-3600)).with_ready(ConditionStatus::True, Timestamp::EPOCH);
        n.labels.insert(keys::LABEL_TOPOLOGY_ZONE.into(), zone.into());
        n
    }

    /// Legacy mode: node `a` is evicted (its pods' deletion pass ran);
    /// `b` and `c`, the rest of the cluster, go silent together later, so
    /// the pass that writes them Unknown enters master disruption mode. A
    /// pod found on `a` just before that pass is deleted at once (J5), and
    /// upstream sends that deletion (and its `NodeLost` reason) before
    /// `handleDisruption` unmarks every node: the unmarking does not take
    /// the decision back.
    #[test]
    fn a_legacy_deletion_decided_in_the_pass_that_enters_master_disruption_stands() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut engine = Engine::new(config, Timestamp::EPOCH).unwrap();
        for (name, zone) in [("a", "z0"), ("b", "z0"), ("c", "z1")] {
            engine.observe(Observation::NodeUpserted(node(name, zone)));
            engine.observe(Observation::LeaseUpserted { node: name.into(), renew: Some(Timestamp::EPOCH) });
        }
        let decided_at = Timestamp::from_secs(355);
        let mut decided = Vec::new();
        for ms in (0..=355_000).step_by(100) {
            let now = Timestamp::from_millis(ms);
            // b and c renew their Leases until 310 s: Unknown at 355 s.
            if ms <= 310_000 && ms % 10_000 == 0 {
                for name in ["b", "c"] {
                    engine.observe(Observation::LeaseUpserted { node: name.into(), renew: Some(now) });
                }
            }
            if now == decided_at {
                assert!(!engine.all_zones_down(), "not yet in master disruption mode");
                engine.observe(Observation::PodUpserted(PodSnapshot::new("default/p", "uid-p", Some("a"))));
            }
            for action in engine.tick(now) {
                if action.kind.slot().is_some() {
                    engine.observe(Observation::WriteFinished { id: action.id, outcome: WriteOutcome::Done });
                }
                if now == decided_at {
                    decided.push(action);
                }
            }
        }
        assert!(engine.all_zones_down(), "the 355 s pass entered master disruption mode");
        let lost = decided.iter().find(|a| matches!(a.kind, ActionKind::SetPodNodeLost { .. }));
        let deletion = decided.iter().find(|a| matches!(a.kind, ActionKind::DeletePod { .. }));
        let (Some(lost), Some(deletion)) = (lost, deletion) else { panic!("J5 on evicted node a: {decided:?}") };
        assert_eq!(engine.still_true(decided_at, &lost.kind), Ok(()));
        assert_eq!(engine.still_true(decided_at, &deletion.kind), Ok(()));
    }
}
