//! What the health monitor keeps between passes so that a pass costs
//! nothing for healthy nodes that nothing happened to.
//!
//! A node is *quiet* when a pass found it Ready, without the controller's
//! NoExecute taints, not queued and not marked for eviction, and with
//! nothing to decide. For such a node the next pass can only do two
//! things: take in a heartbeat (set the probe time to the pass's time), or
//! find it overdue. The first is done at ingest, when the heartbeat
//! arrives ([`Health::ingested`]); the second is found from
//! [`NodeTimers`]: quiet nodes are filed in buckets by the pass whose time
//! is their probe time, so the overdue ones are the whole buckets at the
//! front whose time plus the grace period has passed. Every other node
//! (*active*: new, not Ready, tainted, queued, overdue, or with a change
//! ingest does not take in itself) is visited by every pass, as before.
//!
//! The probe time is the time of the pass that takes a heartbeat in, and a
//! pass's time is only known when it runs (the first tick at or after its
//! grid point). A heartbeat taken in at ingest is therefore kept beside the
//! node's record as a [`PendingBeat`] for a given pass; the record read
//! before that pass runs is the old one, and after it the pending one with
//! the pass's time ([`Health::record`]). Nothing has to visit the node when
//! the pass runs.
//!
//! The per-zone counts a pass reports ([`ZoneCounts`]) are kept up to date
//! by ingest and by the pass's own Unknown writes, instead of being counted
//! node by node.

use std::collections::VecDeque;

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, Timestamp};

use crate::components::{HealthRecord, LeaseView, ReadyView};
use crate::resources::ZoneTally;

/// No slot: the end of a bucket's list.
const NIL: u32 = u32::MAX;

/// The bucket of parked nodes: those with nothing to decide and no deadline
/// (see [`NodeTimers::park`]). After every real pass's bucket.
const PARKED: u64 = u64::MAX;

/// How many recent passes' times are kept for filing a node whose probe
/// time is older than the pass that found it quiet.
const RECENT_PASSES: usize = 64;

/// What the controller remembers about a node's heartbeats (upstream
/// `nodeHealthData`), and the node's place in [`NodeTimers`].
#[derive(Component, Debug, Clone, Copy)]
pub struct Health {
    /// The record as of the last pass that took this node in; `None` until
    /// the first pass sees the node.
    rec: Option<HealthRecord>,
    /// A heartbeat taken in at ingest for a quiet node, which becomes the
    /// record at the pass it names.
    pending: Option<PendingBeat>,
    /// The node's slot in [`NodeTimers`].
    slot: u32,
    /// What a shadow's judgements need of the node's silences
    /// ([`Health::judge_silence`]).
    silence: Silence,
}

/// A node's silences as judged, for a shadow ([`crate::judgement::Judgement`]): the
/// probe time the engine gave the node at first sight, and the probe time
/// of the last silence judged, so each silence is judged once.
#[derive(Debug, Clone, Copy, Default)]
struct Silence {
    first_probe: Option<Timestamp>,
    judged: Option<Timestamp>,
}

/// A heartbeat a coming (or past) pass takes in: the record it makes, with
/// the pass's time as the probe time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingBeat {
    /// The pass (numbered from 1) that takes it in.
    pass: u64,
    /// The record after that pass, its `probe` still the old one.
    rec: HealthRecord,
    /// The Ready transition time becomes the pass's time too.
    transition_now: bool,
}

impl PendingBeat {
    fn at(&self, time: Timestamp) -> HealthRecord {
        HealthRecord {
            probe: time,
            ready_transition: if self.transition_now { time } else { self.rec.ready_transition },
            ..self.rec
        }
    }
}

/// What a pass makes of a node's record given its current views
/// (`tryUpdateNodeHealth`'s comparisons): the new record, with flags for
/// the fields that take the pass's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenIn {
    /// The record, with the old `probe` and `ready_transition`.
    pub rec: HealthRecord,
    /// `probe` becomes the pass's time.
    pub probe_now: bool,
    /// `ready_transition` becomes the pass's time.
    pub transition_now: bool,
}

impl TakenIn {
    /// The record with the pass's time filled in.
    pub fn at(&self, now: Timestamp) -> HealthRecord {
        HealthRecord {
            probe: if self.probe_now { now } else { self.rec.probe },
            ready_transition: if self.transition_now { now } else { self.rec.ready_transition },
            ..self.rec
        }
    }
}

/// Takes a node's current Ready condition and Lease into its record, as a
/// monitor pass does: a new Ready heartbeat, a Ready condition that
/// appeared or disappeared, or a newer Lease.
pub fn take_in(mut rec: HealthRecord, ready: &ReadyView, lease: &LeaseView) -> TakenIn {
    let (mut probe_now, mut transition_now) = (false, false);
    match (rec.saved_ready, ready.status.is_some()) {
        (None, true) => {
            // Ready appeared (or a restarted controller meets an old node).
            probe_now = true;
            transition_now = true;
            rec.saved_ready = Some((ready.heartbeat, ready.transition));
            rec.saved_lease = None;
        }
        (Some(_), false) => {
            // Ready disappeared: upstream overwrites its saved status, so
            // the probe time stays and the startup grace applies (B10).
            rec.saved_ready = None;
        }
        (Some((hb, tr)), true) if hb != ready.heartbeat => {
            transition_now = tr != ready.transition;
            probe_now = true;
            rec.saved_ready = Some((ready.heartbeat, ready.transition));
        }
        _ => {}
    }
    // A Lease renewal counts when it is newer than the saved one, or when
    // none was saved (B3b).
    if lease.present
        && match rec.saved_lease {
            None => true,
            Some(saved) => matches!((saved, lease.renew), (Some(s), Some(o)) if s < o),
        }
    {
        rec.saved_lease = Some(lease.renew);
        probe_now = true;
    }
    TakenIn { rec, probe_now, transition_now }
}

impl Health {
    /// A node not seen by any pass yet, in `slot` of [`NodeTimers`].
    pub fn new(slot: u32) -> Health {
        Health { rec: None, pending: None, slot, silence: Silence::default() }
    }

    /// Whether a monitor pass has seen the node (registered it).
    pub fn seen(&self) -> bool {
        self.rec.is_some()
    }

    /// Notes the probe time a node got at first sight (the engine's own
    /// start of its grace, not a heartbeat).
    pub fn first_sight_probe(&mut self, probe: Timestamp) {
        self.silence.first_probe = Some(probe);
    }

    /// A silence past grace found with `probe` as the last heartbeat seen:
    /// `None` when this silence was judged already, else whether the probe
    /// time is the engine's first sight of the node rather than a
    /// heartbeat it saw.
    pub fn judge_silence(&mut self, probe: Timestamp) -> Option<bool> {
        if self.silence.judged == Some(probe) {
            return None;
        }
        self.silence.judged = Some(probe);
        Some(self.silence.first_probe == Some(probe))
    }

    /// The node's slot in [`NodeTimers`].
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The record as of the last pass that has run: a pending heartbeat
    /// counts once its pass has run.
    pub fn record(&self, timers: &NodeTimers) -> Option<HealthRecord> {
        match self.pending {
            Some(p) if p.pass <= timers.passes => timers.time_of(p.pass).map(|t| p.at(t)).or(self.rec),
            _ => self.rec,
        }
    }

    /// Folds a pending heartbeat whose pass has run into the record, and
    /// drops one whose pass has not (the node is about to be visited by
    /// that pass, which takes the heartbeat in from the views itself).
    /// Returns the record as of the last pass.
    pub fn settle(&mut self, timers: &NodeTimers) -> Option<HealthRecord> {
        self.rec = self.record(timers);
        self.pending = None;
        self.rec
    }

    /// Replaces the record (the pass's own update, or a write of ours).
    pub fn set(&mut self, rec: HealthRecord) {
        self.rec = Some(rec);
        self.pending = None;
    }

    /// Ingest of a heartbeat (or any change of the Ready condition, the
    /// Lease or the taints) of a node. A quiet node that stays quiet takes
    /// the heartbeat in for the coming pass and is filed under it; any
    /// other change makes the node active, so the next pass visits it.
    /// Active nodes are left to the next pass.
    pub fn ingested(&mut self, ready: &ReadyView, lease: &LeaseView, clean: bool, timers: &mut NodeTimers) {
        if !timers.is_quiet(self.slot) {
            return;
        }
        let base = self.settle(timers);
        let coming = timers.passes + 1;
        let filed = match base {
            Some(base) if ready.status == Some(ConditionStatus::True) && clean => {
                let taken = take_in(base, ready, lease);
                if taken.probe_now {
                    self.pending =
                        Some(PendingBeat { pass: coming, rec: taken.rec, transition_now: taken.transition_now });
                    timers.file(self.slot, coming, None)
                } else if taken.rec == base && !taken.transition_now {
                    // Nothing new (or a heartbeat taken back): filed under
                    // its own probe time again.
                    timers.file_at(self.slot, base.probe)
                } else {
                    false
                }
            }
            _ => false,
        };
        if !filed {
            self.pending = None;
            timers.activate(self.slot);
        }
    }
}

/// Where a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not in use.
    Free,
    /// On the active list: every pass visits it.
    Active,
    /// Quiet, in the bucket of this pass.
    Quiet(u64),
}

#[derive(Debug, Clone, Copy)]
struct Link {
    entity: Entity,
    place: Place,
    prev: u32,
    next: u32,
}

/// Quiet nodes whose probe time is one pass's time.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    pass: u64,
    /// The pass's time, once it has run.
    time: Option<Timestamp>,
    head: u32,
    tail: u32,
}

/// The monitor's timers: which nodes the next pass visits (the active
/// list), and the quiet nodes filed by probe time, oldest first, each
/// bucket a doubly linked list over node slots so that a renewal moves a
/// node in constant time.
#[derive(Resource, Debug, Default)]
pub struct NodeTimers {
    links: Vec<Link>,
    /// Slots free for reuse.
    free: Vec<u32>,
    /// Slots released since the active list was last rebuilt: they may
    /// still be on it, so they are reused only after the next pass.
    released: Vec<u32>,
    /// Slots every pass visits. May hold released slots (skipped).
    active: Vec<u32>,
    /// The buffer of the list the last pass visited, for the next one.
    spare: Vec<u32>,
    /// Buckets by pass, oldest first. Few (about one per pass of the grace
    /// period) and searched from the newest end, where renewals go.
    buckets: Vec<Bucket>,
    /// Buckets a pass found overdue and emptied, until the pass ends: their
    /// nodes' pending heartbeats still name them.
    emptied: Vec<(u64, Timestamp)>,
    /// The most recent passes and their times.
    recent: VecDeque<(u64, Timestamp)>,
    /// Passes started so far.
    passes: u64,
}

impl NodeTimers {
    /// The slot the next [`NodeTimers::add`] gives.
    pub fn next_slot(&self) -> u32 {
        self.free.last().copied().unwrap_or(self.links.len() as u32)
    }

    /// A slot for a new node, on the active list.
    pub fn add(&mut self, entity: Entity) -> u32 {
        let link = Link { entity, place: Place::Active, prev: NIL, next: NIL };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.links[slot as usize] = link;
                slot
            }
            None => {
                self.links.push(link);
                (self.links.len() - 1) as u32
            }
        };
        self.active.push(slot);
        slot
    }

    /// Gives up a deleted node's slot.
    pub fn remove(&mut self, slot: u32) {
        self.unlink(slot);
        if let Some(link) = self.links.get_mut(slot as usize) {
            link.place = Place::Free;
            self.released.push(slot);
        }
    }

    /// Whether the node in `slot` is quiet (filed under a probe time).
    pub fn is_quiet(&self, slot: u32) -> bool {
        self.links.get(slot as usize).is_some_and(|l| matches!(l.place, Place::Quiet(_)))
    }

    /// Puts a quiet node back on the active list.
    pub fn activate(&mut self, slot: u32) {
        if self.is_quiet(slot) {
            self.unlink(slot);
            self.links[slot as usize].place = Place::Active;
            self.active.push(slot);
        }
    }

    /// Parks a visited node: one the pass found with nothing to decide and
    /// for which time alone changes nothing (an Unknown node, in taint mode,
    /// that carries its taint or waits in its zone's queue for it). It stays
    /// out of the passes until ingest sees a change to it, or
    /// [`NodeTimers::activate_parked`] is called for a change that reaches
    /// every node (master disruption mode entered or left).
    pub fn park(&mut self, slot: u32) -> bool {
        self.file(slot, PARKED, None)
    }

    /// Puts every parked node back on the active list.
    pub fn activate_parked(&mut self) {
        let Some(&last) = self.buckets.last().filter(|b| b.pass == PARKED) else { return };
        let mut slot = last.head;
        while slot != NIL {
            let next = self.links[slot as usize].next;
            self.activate(slot);
            slot = next;
        }
    }

    /// Starts pass number `passes + 1` at `now`; returns its number.
    pub fn begin_pass(&mut self, now: Timestamp) -> u64 {
        self.passes += 1;
        self.emptied.clear();
        self.recent.push_back((self.passes, now));
        if self.recent.len() > RECENT_PASSES {
            self.recent.pop_front();
        }
        let pass = self.passes;
        if let Some(b) = self.buckets.iter_mut().rev().find(|b| b.pass == pass) {
            b.time = Some(now);
        }
        self.passes
    }

    /// Moves the quiet nodes whose probe time plus `grace` is before `now`
    /// to the active list: this pass finds them overdue.
    pub fn activate_overdue(&mut self, now: Timestamp, grace: nodewarden_model::Span) {
        while let Some(&front) = self.buckets.first() {
            let Some(time) = front.time.filter(|&t| now > t + grace) else { break };
            self.buckets.remove(0);
            self.emptied.push((front.pass, time));
            let mut slot = front.head;
            while slot != NIL {
                let link = &mut self.links[slot as usize];
                let next = link.next;
                *link = Link { place: Place::Active, prev: NIL, next: NIL, ..*link };
                self.active.push(slot);
                slot = next;
            }
        }
    }

    /// Takes the active list for a pass to visit; each visited node is
    /// either kept active ([`NodeTimers::keep_active`]) or filed.
    pub fn take_active(&mut self) -> Vec<u32> {
        let list = std::mem::replace(&mut self.active, std::mem::take(&mut self.spare));
        // Released slots can be on the list taken; they are skipped there,
        // and never on the list rebuilt from it.
        self.free.append(&mut self.released);
        list
    }

    /// Gives back the buffer of a list from [`NodeTimers::take_active`].
    pub fn recycle_active(&mut self, mut list: Vec<u32>) {
        list.clear();
        self.spare = list;
    }

    /// The node in an active slot, or `None` if the slot was released.
    pub fn active_entity(&self, slot: u32) -> Option<Entity> {
        self.links.get(slot as usize).filter(|l| l.place == Place::Active).map(|l| l.entity)
    }

    /// Keeps a visited node on the active list for the next pass.
    pub fn keep_active(&mut self, slot: u32) {
        self.active.push(slot);
    }

    /// Files a visited node as quiet under its probe time, if that is the
    /// time of a recent pass; returns whether it was filed (if not, it
    /// stays active).
    pub fn file_at(&mut self, slot: u32, probe: Timestamp) -> bool {
        let bucket = self.buckets.iter().rev().find(|b| b.time == Some(probe)).map(|b| (b.pass, b.time));
        let found = bucket.or_else(|| self.recent.iter().rev().find(|r| r.1 == probe).map(|r| (r.0, Some(r.1))));
        match found {
            Some((pass, time)) => self.file(slot, pass, time),
            None => false,
        }
    }

    /// Files a node under pass `pass` (whose time is `time` if it has
    /// run); returns whether it was filed.
    fn file(&mut self, slot: u32, pass: u64, time: Option<Timestamp>) -> bool {
        if self.links.get(slot as usize).is_none_or(|l| l.place == Place::Free) {
            return false;
        }
        self.unlink(slot);
        let at = match self.bucket(pass) {
            Ok(at) => at,
            Err(at) => {
                self.buckets.insert(at, Bucket { pass, time, head: NIL, tail: NIL });
                at
            }
        };
        let bucket = &mut self.buckets[at];
        let tail = bucket.tail;
        if tail == NIL {
            bucket.head = slot;
        } else {
            self.links[tail as usize].next = slot;
        }
        bucket.tail = slot;
        let link = &mut self.links[slot as usize];
        link.place = Place::Quiet(pass);
        link.prev = tail;
        link.next = NIL;
        true
    }

    /// Takes a quiet node out of its bucket (dropping the bucket once
    /// empty); nothing for other nodes.
    fn unlink(&mut self, slot: u32) {
        let Some(&Link { place: Place::Quiet(pass), prev, next, .. }) = self.links.get(slot as usize) else { return };
        if prev != NIL {
            self.links[prev as usize].next = next;
        }
        if next != NIL {
            self.links[next as usize].prev = prev;
        }
        if let Ok(at) = self.bucket(pass) {
            let b = &mut self.buckets[at];
            if b.head == slot {
                b.head = next;
            }
            if b.tail == slot {
                b.tail = prev;
            }
            if b.head == NIL {
                self.buckets.remove(at);
            }
        }
        let link = &mut self.links[slot as usize];
        link.prev = NIL;
        link.next = NIL;
        link.place = Place::Active;
    }

    /// Files every quiet node under the current pass (whose time every
    /// node's probe time has just been set to).
    pub fn refile_all_now(&mut self) {
        let quiet: Vec<u32> = self
            .buckets
            .iter()
            .flat_map(|b| {
                let mut slots = vec![];
                let mut slot = b.head;
                while slot != NIL {
                    slots.push(slot);
                    slot = self.links[slot as usize].next;
                }
                slots
            })
            .collect();
        let pass = self.passes;
        let time = self.recent.back().map(|r| r.1);
        for slot in quiet {
            self.file(slot, pass, time);
        }
    }

    /// Where the bucket of `pass` is (`Ok`), or would go (`Err`). Searched
    /// from the newest end: renewals file nodes under the coming pass and
    /// take them from one of the last few.
    fn bucket(&self, pass: u64) -> Result<usize, usize> {
        for (at, b) in self.buckets.iter().enumerate().rev() {
            if b.pass == pass {
                return Ok(at);
            }
            if b.pass < pass {
                return Err(at + 1);
            }
        }
        Err(0)
    }

    /// The time of a pass that has run and that some node's pending
    /// heartbeat names.
    fn time_of(&self, pass: u64) -> Option<Timestamp> {
        self.bucket(pass)
            .ok()
            .and_then(|at| self.buckets[at].time)
            .or_else(|| self.emptied.iter().find(|e| e.0 == pass).map(|e| e.1))
            .or_else(|| self.recent.iter().rev().find(|r| r.0 == pass).map(|r| r.1))
    }

    /// Whether the node in `slot` is parked (for tests).
    #[cfg(test)]
    pub fn is_parked(&self, slot: u32) -> bool {
        self.links.get(slot as usize).is_some_and(|l| l.place == Place::Quiet(PARKED))
    }

    /// Quiet nodes (for tests).
    #[cfg(test)]
    fn quiet(&self) -> usize {
        self.links.iter().filter(|l| matches!(l.place, Place::Quiet(_))).count()
    }
}

/// Per-zone counts (by zone slot) of the nodes counted for disruption and
/// of those among them whose Ready condition is not True, kept up to date
/// as nodes come, go and change, so a pass does not count them.
#[derive(Resource, Debug, Default)]
pub struct ZoneCounts(pub Vec<ZoneTally>);

impl ZoneCounts {
    /// Counts a node in (`add`) or out of its zone, given what decides its
    /// share: its zone slot, whether it is excluded from disruption, and
    /// its Ready status.
    pub fn count(&mut self, slot: u32, excluded: bool, status: Option<ConditionStatus>, add: bool) {
        if excluded {
            return;
        }
        let slot = slot as usize;
        if self.0.len() <= slot {
            self.0.resize(slot + 1, ZoneTally::default());
        }
        let t = &mut self.0[slot];
        let not_ready = usize::from(status != Some(ConditionStatus::True));
        if add {
            t.size += 1;
            t.not_ready += not_ready;
        } else {
            t.size -= 1;
            t.not_ready -= not_ready;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::Span;

    fn entity(i: u32) -> Entity {
        Entity::from_raw_u32(i).expect("valid index")
    }

    /// Slots the pass would visit: the active list, without released slots.
    fn visited(timers: &mut NodeTimers) -> Vec<u32> {
        let list = timers.take_active();
        let out: Vec<u32> = list.iter().copied().filter(|&s| timers.active_entity(s).is_some()).collect();
        for &s in &out {
            timers.keep_active(s);
        }
        out
    }

    #[test]
    fn overdue_buckets_come_back_oldest_first_and_renewals_move_nodes() {
        let mut timers = NodeTimers::default();
        let slots: Vec<u32> = (0..4).map(|i| timers.add(entity(i))).collect();
        let pass = timers.begin_pass(Timestamp::from_secs(0));
        assert_eq!(pass, 1);
        let _ = timers.take_active();
        for &s in &slots {
            assert!(timers.file_at(s, Timestamp::from_secs(0)));
        }
        assert_eq!(timers.quiet(), 4);
        // Node 1 renews before pass 2; node 2 renews before pass 3.
        timers.file(slots[1], 2, None);
        timers.begin_pass(Timestamp::from_secs(5));
        timers.file(slots[2], 3, None);
        timers.begin_pass(Timestamp::from_secs(10));
        // Grace 7 s: at 10 s only the bucket of 0 s is overdue.
        timers.activate_overdue(Timestamp::from_secs(10), Span::from_secs(7));
        assert_eq!(visited(&mut timers), vec![slots[0], slots[3]]);
        // At 12 s (still pass 3's bookkeeping) nothing more: 5 + 7 is not before 12.
        timers.activate_overdue(Timestamp::from_secs(12), Span::from_secs(7));
        assert_eq!(visited(&mut timers), vec![slots[0], slots[3]]);
        timers.activate_overdue(Timestamp::from_secs(13), Span::from_secs(7));
        assert_eq!(visited(&mut timers), vec![slots[0], slots[3], slots[1]]);
        assert_eq!(timers.quiet(), 1);
    }

    #[test]
    fn released_slots_are_skipped_and_reused_only_after_a_pass() {
        let mut timers = NodeTimers::default();
        let a = timers.add(entity(0));
        timers.remove(a);
        let b = timers.add(entity(1));
        assert_ne!(a, b, "a released slot may still be on the active list");
        assert_eq!(visited(&mut timers), vec![b]);
        let c = timers.add(entity(2));
        assert_eq!(c, a, "reused once the list was rebuilt");
    }

    #[test]
    fn a_quiet_node_removed_leaves_its_bucket() {
        let mut timers = NodeTimers::default();
        let a = timers.add(entity(0));
        let b = timers.add(entity(1));
        timers.begin_pass(Timestamp::from_secs(0));
        let _ = timers.take_active();
        assert!(timers.file_at(a, Timestamp::from_secs(0)) && timers.file_at(b, Timestamp::from_secs(0)));
        timers.remove(a);
        timers.begin_pass(Timestamp::from_secs(100));
        timers.activate_overdue(Timestamp::from_secs(100), Span::from_secs(1));
        assert_eq!(visited(&mut timers), vec![b]);
    }

    #[test]
    fn a_probe_time_of_no_recent_pass_is_not_filed() {
        let mut timers = NodeTimers::default();
        let a = timers.add(entity(0));
        timers.begin_pass(Timestamp::from_secs(0));
        let _ = timers.take_active();
        assert!(!timers.file_at(a, Timestamp::from_secs(3)));
    }
}
