//! Resources: configuration, virtual time, indexes, work lists between
//! systems, and the outbox of actions.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, ControllerConfig, Span, Timestamp, ZoneKey};

use crate::action::{Action, ActionId, ActionKind, Event, EventType, ObjectRef};

/// The validated controller configuration.
#[derive(Resource, Debug, Clone)]
pub struct Settings(pub ControllerConfig);

/// The tick's virtual time. Systems read time only from here.
#[derive(Resource, Debug, Clone, Copy)]
pub struct Now(pub Timestamp);

/// Period of the NoExecute tainting (or legacy eviction) pass
/// (`scheduler.NodeEvictionPeriod`).
pub const TAINTING_PERIOD: Span = Span::from_millis(100);

/// When each periodic loop is next due. Loops run on a fixed grid from the
/// engine's start, so replay times are exact.
#[derive(Resource, Debug, Clone, Copy)]
pub struct LoopTimers {
    /// The engine's start.
    pub start: Timestamp,
    /// Next health-monitor pass.
    pub next_monitor: Timestamp,
    /// Next tainting/eviction pass.
    pub next_tainting: Timestamp,
    /// Whether the monitor runs in the current tick.
    pub monitor_now: bool,
    /// Whether the tainting pass runs in the current tick.
    pub tainting_now: bool,
}

impl LoopTimers {
    /// The first grid point of `period` (counted from `start`) at or after `t`.
    pub fn grid_at_or_after(start: Timestamp, period: Span, t: Timestamp) -> Timestamp {
        if t <= start {
            return start;
        }
        let p = period.as_nanos().max(1);
        let k = ((t - start).as_nanos() + p - 1) / p;
        start + Span::from_nanos(k.saturating_mul(p))
    }
}

/// Node entities by name.
#[derive(Resource, Debug, Default)]
pub struct NodeIndex(pub HashMap<String, Entity>);

/// Pod entities by key and by the node they are bound to (the node may not
/// exist yet).
#[derive(Resource, Debug, Default)]
pub struct PodIndex {
    /// By `namespace/name`.
    pub by_key: HashMap<String, Entity>,
    /// By `spec.nodeName`.
    pub by_node: HashMap<String, Vec<Entity>>,
}

impl PodIndex {
    /// Pods bound to `node`.
    pub fn on_node(&self, node: &str) -> &[Entity] {
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// Moves `pod` from one node's list to another's.
    pub fn rebind(&mut self, pod: Entity, from: Option<&str>, to: Option<&str>) {
        if from == to {
            return;
        }
        if let Some(old) = from
            && let Some(list) = self.by_node.get_mut(old)
        {
            list.retain(|e| *e != pod);
            if list.is_empty() {
                self.by_node.remove(old);
            }
        }
        if let Some(new) = to {
            self.by_node.entry(new.to_string()).or_default().push(pod);
        }
    }
}

/// Zone entities by key and by slot.
#[derive(Resource, Debug, Default)]
pub struct ZoneIndex {
    /// By key.
    pub by_key: HashMap<ZoneKey, Entity>,
    /// By slot (creation order).
    pub by_slot: Vec<Entity>,
}

/// Leases seen before their node, applied when the node appears.
#[derive(Resource, Debug, Default)]
pub struct OrphanLeases(pub HashMap<String, Option<Timestamp>>);

/// Per-zone counts gathered by the health pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZoneTally {
    /// Counted nodes.
    pub size: usize,
    /// Counted nodes whose current Ready is not True (missing included).
    pub not_ready: usize,
}

/// A node the health pass found work for (the cold path).
#[derive(Debug, Clone, Copy)]
pub struct NodeWork {
    /// The node.
    pub node: Entity,
    /// First sight by a monitor pass: register it.
    pub first_sight: bool,
    /// Ready as observed at the start of the pass (synthetic Unknown when
    /// missing).
    pub observed: ConditionStatus,
    /// Whether the node had a Ready condition at the start of the pass.
    pub had_ready: bool,
    /// The conditions must be written Unknown in this pass.
    pub go_unknown: bool,
}

/// Scratch space of one monitor pass.
#[derive(Resource, Debug, Default)]
pub struct PassScratch {
    /// Tallies by zone slot.
    pub tally: Vec<ZoneTally>,
    /// Nodes needing cold-path work, sorted by name before use.
    pub work: Vec<NodeWork>,
}

/// Nodes that changed since the event-driven node handlers last ran
/// (NoSchedule taints, label reconciliation).
#[derive(Resource, Debug, Default)]
pub struct ChangedNodes(pub Vec<Entity>);

/// Work for the taint manager: nodes whose taints may have changed, pods
/// added or changed.
#[derive(Resource, Debug, Default)]
pub struct TaintManagerInbox {
    /// Nodes to re-check.
    pub nodes: Vec<Entity>,
    /// Pods to evaluate.
    pub pods: Vec<Entity>,
    /// Nodes seen without NoExecute taints at some moment since the taint
    /// manager last ran, even if one came back within the tick: added
    /// without any, or left without any by one of the controller's own
    /// writes. Upstream's taint manager sees each write (and each add) as
    /// an event and cancels the node's pending deletions at that moment
    /// (I4).
    pub cleared: Vec<Entity>,
}

/// Pods newly bound to a node (upstream `processPod`).
#[derive(Resource, Debug, Default)]
pub struct AssignedPods(pub Vec<Entity>);

/// Taint-manager deletion deadlines, earliest first. Entries are checked
/// against the pod's [`PendingDeletion`](crate::components::PendingDeletion)
/// when they come due, so cancelling is O(1).
#[derive(Resource, Debug, Default)]
pub struct DeletionTimers {
    /// (deadline, sequence, pod).
    pub heap: BinaryHeap<Reverse<(Timestamp, u64, Entity)>>,
    /// Next sequence number.
    pub next_seq: u64,
}

impl DeletionTimers {
    /// Registers a deadline; returns its sequence number.
    pub fn push(&mut self, at: Timestamp, pod: Entity) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((at, seq, pod)));
        seq
    }

    /// The earliest registered deadline (possibly stale).
    pub fn next_due(&self) -> Option<Timestamp> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }
}

/// Whether the controller is in "master disruption mode" (every zone fully
/// disrupted); derived each pass from the zone states, kept for reporting.
#[derive(Resource, Debug, Default, Clone, Copy)]
pub struct DisruptionMode {
    /// Every zone was FullDisruption at the last pass.
    pub all_zones_down: bool,
}

/// Actions waiting to be sent and writes in flight.
#[derive(Resource, Debug, Default)]
pub struct Outbox {
    next_id: u64,
    /// Ready to send at the end of the tick.
    pub ready: Vec<Action>,
    in_flight: HashMap<ActionId, ActionKind>,
    by_object: HashMap<ObjectRef, Vec<ActionId>>,
}

impl Outbox {
    /// Queues a write unless an identical one is in flight. Returns whether
    /// it was queued.
    pub fn write(&mut self, kind: ActionKind) -> bool {
        let Some((object, _)) = kind.slot() else {
            self.push(kind);
            return true;
        };
        let ids = self.by_object.entry(object).or_default();
        if ids.iter().any(|id| self.in_flight.get(id) == Some(&kind)) {
            return false;
        }
        let id = ActionId(self.next_id);
        ids.push(id);
        self.in_flight.insert(id, kind.clone());
        self.next_id += 1;
        self.ready.push(Action { id, kind });
        true
    }

    /// Queues an Event.
    pub fn event(&mut self, object: ObjectRef, kind: EventType, reason: &'static str, message: String) {
        self.push(ActionKind::RecordEvent(Event { object, kind, reason, message }));
    }

    fn push(&mut self, kind: ActionKind) {
        let id = ActionId(self.next_id);
        self.next_id += 1;
        self.ready.push(Action { id, kind });
    }

    /// Forgets a finished write; returns what it was.
    pub fn finish(&mut self, id: ActionId) -> Option<ActionKind> {
        let kind = self.in_flight.remove(&id)?;
        if let Some((object, _)) = kind.slot()
            && let Some(ids) = self.by_object.get_mut(&object)
        {
            ids.retain(|x| *x != id);
            if ids.is_empty() {
                self.by_object.remove(&object);
            }
        }
        Some(kind)
    }

    /// Writes issued and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::WriteSlot;
    use nodewarden_model::{Taint, TaintEffect};

    fn patch(node: &str) -> ActionKind {
        ActionKind::PatchNodeTaints {
            node: node.into(),
            add: vec![Taint::new("k", TaintEffect::NoExecute)],
            remove: vec![],
            slot: WriteSlot::NoExecuteTaints,
        }
    }

    #[test]
    fn an_identical_write_is_not_reissued_while_in_flight() {
        let mut out = Outbox::default();
        assert!(out.write(patch("a")));
        assert!(!out.write(patch("a")), "same write while the first is in flight");
        assert!(out.write(patch("b")), "another object is independent");
        assert_eq!(out.in_flight(), 2);
        let first = out.ready[0].id;
        assert_eq!(out.finish(first), Some(patch("a")));
        assert_eq!(out.finish(first), None, "finishing twice is harmless");
        assert!(out.write(patch("a")), "after it finished it may be issued again");
    }

    #[test]
    fn events_are_never_deduplicated_nor_tracked() {
        let mut out = Outbox::default();
        out.event(ObjectRef::Node("a".into()), EventType::Normal, "R", "m".into());
        out.event(ObjectRef::Node("a".into()), EventType::Normal, "R", "m".into());
        assert_eq!(out.ready.len(), 2);
        assert_eq!(out.in_flight(), 0);
    }

    #[test]
    fn grid_points() {
        let start = Timestamp::EPOCH;
        let p = Span::from_millis(100);
        assert_eq!(LoopTimers::grid_at_or_after(start, p, start - Span::from_secs(1)), start);
        assert_eq!(LoopTimers::grid_at_or_after(start, p, start + Span::from_millis(100)), start + p);
        assert_eq!(
            LoopTimers::grid_at_or_after(start, p, start + Span::from_millis(101)),
            start + Span::from_millis(200)
        );
    }
}
