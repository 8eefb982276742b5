//! The outbox: the actions a tick issues, in order, the writes still in
//! flight, and the writes decided but not yet built. Apart from the other
//! resources because it carries rules of its own that every system relies
//! on: an identical write is not issued again while one is on its way,
//! Events are never deduplicated, a node-ordered section leaves sorted by
//! node so a node's actions stay together whichever system issued them,
//! and a pod's not-ready mark is built only when a sender has room for it.
//!
//! Why marks wait as wanted rather than as writes: a zone outage decides
//! one for every pod of the zone in one pass (333,336 at 40k nodes and
//! 1M pods), and the client sends 20 requests a second, the node writes
//! first. Held as built writes they were the bulk of a backlog of
//! hundreds of megabytes; held as the pod's entity (8 bytes) and a flag
//! on the pod, they cost nothing, and a mark that stopped being true
//! before its turn (the node came back, the pod went) is never built.

use std::collections::VecDeque;

use bevy_ecs::prelude::*;

use crate::action::{Action, ActionId, ActionKind, Event, EventType, ObjectRef};

use super::HashMap;

/// Actions waiting to be sent and writes in flight.
#[derive(Resource, Debug, Default)]
pub struct Outbox {
    next_id: u64,
    /// Ready to send at the end of the tick.
    pub ready: Vec<Action>,
    in_flight: HashMap<ActionId, ActionKind>,
    by_object: HashMap<ObjectRef, Vec<ActionId>>,
    /// The open node-ordered section, if any (see [`Outbox::begin_ordered`]).
    ordered: Option<OrderedSection>,
    /// Pods whose not-ready mark is decided and not yet built, in the
    /// order decided (see [`Outbox::want_mark`]).
    wanted_marks: VecDeque<Entity>,
}

/// Actions issued since [`Outbox::begin_ordered`], with their keys.
#[derive(Debug)]
struct OrderedSection {
    /// Index in `ready` of the section's first action.
    start: usize,
    /// The key actions are issued under now.
    key: u32,
    /// The key of each action of the section, in issue order.
    keys: Vec<u32>,
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
        if ids.iter().any(|id| self.in_flight.get(id).is_some_and(|k| k.same_change(&kind))) {
            return false;
        }
        let id = ActionId(self.next_id);
        ids.push(id);
        self.in_flight.insert(id, kind.clone());
        self.next_id += 1;
        self.ready.push(Action { id, kind });
        self.note_key();
        true
    }

    /// Applies the taint patches to node `name` that are on their way to
    /// `taints` (a snapshot of the node from before they landed): node
    /// lifecycle's view of a node is what it observed plus what it has
    /// sent, so a snapshot that predates our own patch does not make it
    /// decide (and spend a token on) that patch again.
    pub fn with_taints_in_flight(&self, name: &str, taints: &mut Vec<nodewarden_model::Taint>) {
        if self.in_flight.is_empty() {
            return;
        }
        let Some(ids) = self.by_object.get(&ObjectRef::Node(name.to_string())) else { return };
        for id in ids {
            if let Some(ActionKind::PatchNodeTaints { add, remove, .. }) = self.in_flight.get(id) {
                taints.retain(|t| !remove.iter().any(|r| r.same_as(t)));
                // An added taint the snapshot already shows (this patch
                // landed) stays as the API has it (its `timeAdded` as the
                // API keeps it: the taint manager compares them).
                for a in add {
                    if !taints.iter().any(|t| t.same_as(a) && t.value == a.value) {
                        taints.retain(|t| !t.same_as(a));
                        taints.push(a.clone());
                    }
                }
            }
        }
    }

    /// Queues an Event.
    pub fn event(&mut self, object: ObjectRef, kind: EventType, reason: &'static str, message: String) {
        self.push(ActionKind::RecordEvent(Event { object, kind, reason, message }));
    }

    fn push(&mut self, kind: ActionKind) {
        let id = ActionId(self.next_id);
        self.next_id += 1;
        self.ready.push(Action { id, kind });
        self.note_key();
    }

    fn note_key(&mut self) {
        if let Some(section) = &mut self.ordered {
            section.keys.push(section.key);
        }
    }

    /// Opens a section whose actions leave sorted by the key they were
    /// issued under ([`Outbox::order_by`]), ties in issue order, and
    /// numbered in that order. The monitor pass decides node by node, but
    /// in several systems (health, then tainting or legacy eviction): each
    /// system tags its actions with the node's place in name order, so the
    /// tick's output is what one system visiting each node in turn would
    /// have issued.
    pub fn begin_ordered(&mut self) {
        debug_assert!(self.ordered.is_none(), "ordered sections do not nest");
        self.ordered = Some(OrderedSection { start: self.ready.len(), key: 0, keys: Vec::new() });
    }

    /// The key the next actions of the open section are issued under.
    pub fn order_by(&mut self, key: u32) {
        if let Some(section) = &mut self.ordered {
            section.key = key;
        }
    }

    /// Closes the open section: sorts its actions by key (stable) and
    /// renumbers them in their new order, so ids still rise through the
    /// tick's output. Writes in flight follow their new ids.
    pub fn end_ordered(&mut self) {
        let Some(section) = self.ordered.take() else { return };
        debug_assert_eq!(section.keys.len(), self.ready.len() - section.start);
        if section.keys.is_sorted() {
            // Issued in order already (the usual case): nothing moves.
            return;
        }
        // Every action takes the next id when issued, so the section's ids
        // are one contiguous run starting at its first action's.
        let first = self.ready[section.start].id.0;
        let mut tagged: Vec<(u32, Action)> = section.keys.into_iter().zip(self.ready.drain(section.start..)).collect();
        tagged.sort_by_key(|(key, _)| *key);
        let mut renumbered = HashMap::default();
        for (i, (_, mut action)) in tagged.into_iter().enumerate() {
            let id = ActionId(first + i as u64);
            if action.id != id {
                renumbered.insert(action.id, id);
                action.id = id;
            }
            self.ready.push(action);
        }
        // Take every moved write out before putting any back: the old and
        // new ids are the same set, shuffled.
        let moved: Vec<(ActionId, ActionKind)> =
            renumbered.keys().filter_map(|old| self.in_flight.remove_entry(old)).collect();
        let mut objects = Vec::new();
        for (old, kind) in moved {
            if let Some((object, _)) = kind.slot() {
                objects.push(object);
            }
            self.in_flight.insert(renumbered[&old], kind);
        }
        objects.sort();
        objects.dedup();
        for object in objects {
            if let Some(ids) = self.by_object.get_mut(&object) {
                for id in ids.iter_mut() {
                    if let Some(&new) = renumbered.get(id) {
                        *id = new;
                    }
                }
            }
        }
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

    /// Records that pod `pod` is to be marked not ready. The caller set
    /// the pod's `mark_wanted` flag, and enters each pod once while it is
    /// set; the mark is built by [`build_marks`] when a sender pulls, or
    /// at once by the system that is about to write the pod's status for
    /// another reason (its deletion's).
    ///
    /// [`build_marks`]: crate::systems::marks::build_marks
    pub fn want_mark(&mut self, pod: Entity) {
        self.wanted_marks.push_back(pod);
    }

    /// The pod whose mark was wanted first, taken out. The pod may have
    /// gone or changed since: the builder asks.
    pub fn next_wanted_mark(&mut self) -> Option<Entity> {
        let next = self.wanted_marks.pop_front();
        if self.wanted_marks.is_empty() && self.wanted_marks.capacity() > 1024 {
            // A zone's worth of entries, all built: give the memory back.
            self.wanted_marks = VecDeque::new();
        }
        next
    }

    /// Marks decided and not yet built (some may no longer be wanted:
    /// they are passed over when their turn comes).
    pub fn marks_wanted(&self) -> usize {
        self.wanted_marks.len()
    }

    /// Bytes the wanted marks hold: what a decided mark costs while it
    /// waits for its turn.
    pub fn wanted_marks_bytes(&self) -> usize {
        self.wanted_marks.capacity() * std::mem::size_of::<Entity>()
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
    fn an_ordered_section_leaves_sorted_by_key_and_renumbered() {
        let mut out = Outbox::default();
        out.event(ObjectRef::Node("before".into()), EventType::Normal, "R", "m".into());
        out.begin_ordered();
        // Node 0's first system, node 1's first system, then node 0's
        // second system.
        out.order_by(0);
        assert!(out.write(patch("a")));
        out.order_by(1);
        out.event(ObjectRef::Node("b".into()), EventType::Normal, "R", "b".into());
        assert!(out.write(patch("b")));
        out.order_by(0);
        out.event(ObjectRef::Node("a".into()), EventType::Normal, "R", "a".into());
        out.end_ordered();
        out.event(ObjectRef::Node("after".into()), EventType::Normal, "R", "m".into());
        let got: Vec<(u64, String)> = out
            .ready
            .iter()
            .map(|a| {
                let what = match &a.kind {
                    ActionKind::RecordEvent(e) => format!("event {}", e.object),
                    ActionKind::PatchNodeTaints { node, .. } => format!("patch {node}"),
                    other => format!("{other:?}"),
                };
                (a.id.0, what)
            })
            .collect();
        let want = ["event before", "patch a", "event a", "event b", "patch b", "event after"];
        assert_eq!(got, want.iter().enumerate().map(|(i, w)| (i as u64, w.to_string())).collect::<Vec<_>>());
        // The writes in flight answer to their new ids.
        assert!(!out.write(patch("a")) && !out.write(patch("b")), "still in flight under their new ids");
        assert_eq!(out.finish(ActionId(1)), Some(patch("a")));
        assert_eq!(out.finish(ActionId(4)), Some(patch("b")));
        assert_eq!(out.in_flight(), 0);
        assert!(out.write(patch("a")), "finished: may be issued again");
    }

    #[test]
    fn events_are_never_deduplicated_nor_tracked() {
        let mut out = Outbox::default();
        out.event(ObjectRef::Node("a".into()), EventType::Normal, "R", "m".into());
        out.event(ObjectRef::Node("a".into()), EventType::Normal, "R", "m".into());
        assert_eq!(out.ready.len(), 2);
        assert_eq!(out.in_flight(), 0);
    }
}
