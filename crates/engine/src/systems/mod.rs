//! One system per upstream concern, plus the few helpers they share.
//!
//! Systems write through the [`Outbox`] and apply their own writes to the
//! World at once (as upstream keeps the object an update returned), so a
//! later system in the same tick sees them, and the adapter's echo of the
//! write later changes nothing. The taint manager is kept apart from that:
//! it acts on NoExecute taints once they are observed on the node
//! ([`crate::components::ObservedNode`]), as upstream's acts on what its
//! informer delivers, so a toleration counts from the taint's observation,
//! never from the write that is still on its way.

pub mod disruption;
pub mod health;
pub mod legacy;
pub mod marks;
pub mod node_handlers;
mod params;
pub mod pods;
pub mod rescheduler;
pub mod taint_manager;
pub mod tainting;

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, Taint, TaintEffect, Timestamp, keys};

use crate::action::{ActionKind, WriteSlot};
use crate::components::{NodeFlags, NodeTaints, Zone};
use crate::resources::{Outbox, TaintManagerInbox};

/// The `not-ready:NoExecute` taint (`NotReadyTaintTemplate`).
pub fn not_ready_taint() -> Taint {
    Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute)
}

/// The `unreachable:NoExecute` taint (`UnreachableTaintTemplate`).
pub fn unreachable_taint() -> Taint {
    Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute)
}

/// The NoExecute taint a node's Ready condition calls for, with the
/// opposite one it replaces in the same patch: not-ready for False,
/// unreachable for Unknown, none for True (`processTaintBaseEviction`,
/// `doNoExecuteTaintingPass`). The tainting systems decide with it and the
/// send-time check asks it again, so the two cannot disagree. A node with
/// no Ready condition is not asked: upstream retries it later and taints
/// nothing.
pub fn noexecute_taint_for(ready: ConditionStatus) -> Option<(Taint, Taint)> {
    match ready {
        ConditionStatus::True => None,
        ConditionStatus::False => Some((not_ready_taint(), unreachable_taint())),
        ConditionStatus::Unknown => Some((unreachable_taint(), not_ready_taint())),
    }
}

/// Everything a taint write needs to touch on one node.
pub struct TaintTarget<'a> {
    /// Node name.
    pub name: &'a str,
    /// Node entity (for the taint manager's inbox).
    pub entity: Entity,
    /// Its taints.
    pub taints: &'a mut NodeTaints,
    /// Its flags.
    pub flags: &'a mut NodeFlags,
}

impl<'a> TaintTarget<'a> {
    /// Bundles one node's taint state.
    pub fn new(name: &'a str, entity: Entity, taints: &'a mut NodeTaints, flags: &'a mut NodeFlags) -> Self {
        TaintTarget { name, entity, taints, flags }
    }
}

/// Adds `add` (stamped `time_added = now`) and removes `remove` (by key and
/// effect) in one patch, applying it to node lifecycle's bookkeeping
/// ([`NodeTaints`]). Taints already present with the same key, effect and
/// value are not re-added; absent ones are not removed. Returns whether
/// anything was written.
///
/// The taint manager hears of an added taint when it is observed on the
/// node. A write that takes the node's last NoExecute taint off is the one
/// it hears of at once: the taints are on their way out, so the pending
/// deletions are called off now and nothing new is scheduled on them
/// (safe: the one cost of a refused removal is a countdown started again).
pub fn write_taints(
    outbox: &mut Outbox,
    inbox: &mut TaintManagerInbox,
    target: TaintTarget<'_>,
    add: Vec<Taint>,
    remove: Vec<Taint>,
    slot: WriteSlot,
    now: Timestamp,
) -> bool {
    let current = &mut target.taints.0;
    let add: Vec<Taint> = add
        .into_iter()
        .filter(|a| !current.iter().any(|c| c.same_as(a) && c.value == a.value))
        .map(|mut a| {
            a.time_added = Some(now);
            a
        })
        .collect();
    let remove: Vec<Taint> = remove.into_iter().filter(|r| current.iter().any(|c| c.same_as(r))).collect();
    if add.is_empty() && remove.is_empty() {
        return false;
    }
    let had_noexecute = current.iter().any(|t| t.effect == TaintEffect::NoExecute);
    current.retain(|c| !remove.iter().chain(add.iter()).any(|r| r.same_as(c)));
    current.extend(add.iter().cloned());
    if had_noexecute && !current.iter().any(|t| t.effect == TaintEffect::NoExecute) {
        inbox.cleared.push(target.entity);
    }
    target.flags.refresh_taints(current);
    if remove.iter().any(|t| t.effect == TaintEffect::NoExecute) {
        inbox.nodes.push(target.entity);
    }
    // Not written when the same change is already on its way (a snapshot
    // from before it landed made it look missing): nothing new was sent.
    outbox.write(ActionKind::PatchNodeTaints { node: target.name.to_string(), add, remove, slot })
}

/// Upstream `markNodeAsReachable`: removes both controller NoExecute taints
/// (whoever added them) and takes the node out of its zone's queue set.
pub fn mark_reachable(
    outbox: &mut Outbox,
    inbox: &mut TaintManagerInbox,
    target: TaintTarget<'_>,
    zone: &mut Zone,
    now: Timestamp,
) {
    if target.flags.queued {
        zone.queue.remove(&target.entity);
        target.flags.queued = false;
    }
    if target.flags.not_ready_taint || target.flags.unreachable_taint {
        write_taints(
            outbox,
            inbox,
            target,
            vec![],
            vec![unreachable_taint(), not_ready_taint()],
            WriteSlot::NoExecuteTaints,
            now,
        );
    }
}

/// Upstream `cancelPodEviction` (legacy mode): the node leaves its zone's
/// eviction queue and its eviction status is reset.
pub fn cancel_pod_eviction(entity: Entity, flags: &mut NodeFlags, zone: &mut Zone) -> bool {
    flags.eviction = crate::components::EvictionStatus::Unmarked;
    if flags.queued {
        flags.queued = false;
        return zone.queue.remove(&entity);
    }
    false
}
