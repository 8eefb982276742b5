//! The checker's compact record of the cluster: what it remembers of each
//! node and pod, and the slab and shared tables that keep a million pods
//! about as small as the engine's own state. Storage only: how an
//! observation changes it is `observe`'s business, what it allows is
//! `judge`'s.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use nodewarden_model::{ConditionStatus, Taint, TaintEffect, Timestamp, ZoneKey, keys};

/// What the checker remembers of a node.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeMirror {
    pub(super) zone: ZoneKey,
    pub(super) taints: Vec<Taint>,
    pub(super) ready: Option<ConditionStatus>,
    pub(super) ready_heartbeat: Option<Timestamp>,
    pub(super) ready_transition: Option<Timestamp>,
    pub(super) lease: Option<Timestamp>,
    /// When the checker last saw a new heartbeat (status or Lease): never
    /// later than the controller's own probe time once a monitor pass has
    /// taken it in.
    pub(super) last_beat: Timestamp,
    /// The monitor pass count
    /// ([`InvariantChecker::monitor_passed`](super::InvariantChecker::monitor_passed))
    /// when `last_beat` was raised: a pass since then has taken it in.
    pub(super) beat_pass: u64,
    /// The newest heartbeat a monitor pass is known to have taken in,
    /// while `last_beat` is one none has yet (see [`NodeMirror::taken_beat`]).
    pub(super) taken: Timestamp,
    /// A Lease renewal is among the heartbeats seen since the last pass
    /// (meaningful while `beat_pass` is the current count): the next pass
    /// takes it in whatever became of the node's Ready condition.
    pub(super) lease_beat: bool,
    /// When the checker last saw Ready's transition time change.
    pub(super) last_transition: Timestamp,
    /// The monitor pass count when the controller last had no health
    /// record of this node (first sight, or a restart): until a pass runs
    /// after it, the record the controller will make is still open, and a
    /// snapshot without a Ready condition makes it count from creation.
    pub(super) unrecorded_at: u64,
    /// Since when the node has carried NoExecute taints without a break.
    pub(super) tainted_since: Option<Timestamp>,
    /// `metadata.creationTimestamp`: a different one is a new object under
    /// the same name, whose heartbeats the old one's say nothing about.
    pub(super) created: Timestamp,
    /// The newest version observed; an older snapshot is passed over, as
    /// the engine passes it over.
    pub(super) version: u64,
    /// The Ready heartbeat and transition times the controller's own
    /// condition write carried: seeing them is no heartbeat, even after a
    /// snapshot from before the write landed showed the older ones again.
    pub(super) own_ready: Option<(Timestamp, Timestamp)>,
}

impl NodeMirror {
    /// A heartbeat seen at `now` (a Lease renewal or a Ready heartbeat),
    /// while the monitor has run `passes` times.
    pub(super) fn beat(&mut self, now: Timestamp, passes: u64, lease: bool) {
        if self.beat_pass < passes {
            self.taken = self.last_beat;
            self.lease_beat = false;
        }
        self.last_beat = now;
        self.beat_pass = passes;
        self.lease_beat |= lease;
    }

    /// The node's Ready condition is gone. A Ready heartbeat no pass has
    /// taken in goes with it: the next pass sees no Ready condition, and
    /// the removal itself is no heartbeat (upstream B10), so the
    /// controller's probe stays the one its last pass left. A Lease
    /// renewal not taken in yet still moves the probe at the next pass,
    /// to a time later than every heartbeat seen before it.
    pub(super) fn ready_removed(&mut self, passes: u64) {
        if self.beat_pass == passes && !self.lease_beat {
            self.last_beat = self.taken.min(self.last_beat);
        }
    }

    /// The newest heartbeat the controller's monitor has taken in: its
    /// probe time is no earlier. A heartbeat seen since the last pass is
    /// not, and may never be (the node object replaced by one without
    /// status before the next pass leaves the controller's record as it
    /// was).
    pub(super) fn taken_beat(&self, passes: u64) -> Timestamp {
        if self.beat_pass < passes { self.last_beat } else { self.taken.min(self.last_beat) }
    }

    /// Sets both heartbeat times to at most `at`.
    pub(super) fn lower_beats_to(&mut self, at: Timestamp) {
        self.last_beat = self.last_beat.min(at);
        self.taken = self.taken.min(at);
    }
}

impl NodeMirror {
    pub(super) fn noexecute(&self) -> impl Iterator<Item = &Taint> {
        self.taints.iter().filter(|t| t.effect == TaintEffect::NoExecute)
    }
}

/// A `not-ready` or `unreachable` NoExecute taint: the ones the controller
/// puts on and the zone's rate limits.
pub(super) fn is_controller_noexecute(t: &Taint) -> bool {
    t.effect == TaintEffect::NoExecute && (t.key == keys::TAINT_NOT_READY || t.key == keys::TAINT_UNREACHABLE)
}

/// What the checker remembers of a pod, and of the verdicts its
/// tolerations got during the current tainted episode of its node. Packed
/// (56 bytes): a million pods make the checker's mirror about as large as
/// the engine's otherwise.
#[derive(Clone, Debug)]
pub(super) struct PodMirror {
    /// The pod's key; empty in a free slot.
    key: Box<str>,
    /// The countdown start: when the pod was first seen on its node during
    /// the node's current tainted episode (meaningful with [`PodMirror::SINCE`]).
    pub(super) since: Timestamp,
    /// Smallest `tolerationSeconds` that decided the pod during the episode
    /// (meaningful with [`PodMirror::MIN_SECONDS`]).
    pub(super) min_seconds: i64,
    /// Its node's id in
    /// [`InvariantChecker::node_names`](super::InvariantChecker::node_names),
    /// or [`NO_NODE`].
    pub(super) node: u32,
    /// Its place in its node's list of pods.
    pub(super) at: u32,
    /// Its toleration list's id in
    /// [`InvariantChecker::toleration_lists`](super::InvariantChecker::toleration_lists).
    pub(super) tolerations: u32,
    flags: u8,
    /// The newest version observed.
    pub(super) version: u64,
}

/// A pod bound to no node.
pub(super) const NO_NODE: u32 = u32::MAX;

impl PodMirror {
    pub(super) const DAEMONSET: u8 = 1;
    /// Some taint was untolerated at some point of the episode.
    pub(super) const UNTOLERATED: u8 = 1 << 1;
    /// Has a deletion timestamp.
    pub(super) const TERMINATING: u8 = 1 << 2;
    /// A critical addon or a mirror pod: never evicted for an addon.
    pub(super) const PROTECTED: u8 = 1 << 3;
    pub(super) const SINCE: u8 = 1 << 4;
    pub(super) const MIN_SECONDS: u8 = 1 << 5;

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub(super) fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    pub(super) fn since(&self) -> Option<Timestamp> {
        self.has(Self::SINCE).then_some(self.since)
    }

    pub(super) fn min_seconds(&self) -> Option<i64> {
        self.has(Self::MIN_SECONDS).then_some(self.min_seconds)
    }

    /// Forgets the episode's history (a new node, or the taints gone).
    pub(super) fn reset_episode(&mut self) {
        self.flags &= !(Self::SINCE | Self::MIN_SECONDS | Self::UNTOLERATED);
    }
}

/// The pods, in a slab: a record per pod and a table of slot numbers keyed
/// by the record's own key (4 bytes a bucket), rather than a map holding
/// each key and record in its buckets.
#[derive(Debug, Default)]
pub(super) struct Pods {
    pub(super) slots: Vec<PodMirror>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl Pods {
    pub(super) fn find(&self, key: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.index.find(hash, |&i| &*self.slots[i as usize].key == key).copied()
    }

    pub(super) fn get(&self, key: &str) -> Option<&PodMirror> {
        self.find(key).map(|i| &self.slots[i as usize])
    }

    /// A new pod, on no node yet.
    pub(super) fn insert(&mut self, key: &str, tolerations: u32) -> u32 {
        let record = PodMirror {
            key: key.into(),
            since: Timestamp::default(),
            min_seconds: 0,
            node: NO_NODE,
            at: 0,
            tolerations,
            flags: 0,
            version: 0,
        };
        let id = place(&mut self.slots, &mut self.free, record);
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.index.insert_unique(hasher.hash_one(key), id, |&i| hasher.hash_one(&*slots[i as usize].key));
        id
    }

    /// Takes `id` out of the index and frees its slot; the caller has
    /// unbound it and released its toleration list.
    pub(super) fn remove(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        let hash = self.hasher.hash_one(&*slot.key);
        if let Ok(entry) = self.index.find_entry(hash, |&i| i == id) {
            entry.remove();
        }
        slot.key = Box::default();
        self.free.push(id);
    }
}

/// Puts `item` in a free slot of `slots` (one `free` names), or a new one
/// at the end, and returns its id.
fn place<T>(slots: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(id) => {
            slots[id as usize] = item;
            id
        }
        None => {
            slots.push(item);
            u32::try_from(slots.len() - 1).expect("fewer than 2^32 slots")
        }
    }
}

/// Values many pods share (node names, toleration lists), kept once and
/// named by a `u32` id, with the number of pods that refer to each (freed
/// when none does) and `E` beside each (a node's list of pods).
#[derive(Debug)]
pub(super) struct Shared<T: ?Sized, E> {
    pub(super) entries: Vec<SharedEntry<T, E>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

#[derive(Debug)]
pub(super) struct SharedEntry<T: ?Sized, E> {
    value: Box<T>,
    refs: u32,
    pub(super) extra: E,
}

impl<T: ?Sized, E> Default for Shared<T, E> {
    fn default() -> Self {
        Shared {
            entries: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl<T: ?Sized + Eq + Hash, E: Default> Shared<T, E>
where
    Box<T>: Default + for<'a> From<&'a T>,
{
    pub(super) fn find(&self, value: &T) -> Option<u32> {
        let hash = self.hasher.hash_one(value);
        self.index.find(hash, |&i| *self.entries[i as usize].value == *value).copied()
    }

    /// The id of `value`, counted as referred to once more.
    pub(super) fn acquire(&mut self, value: &T) -> u32 {
        if let Some(id) = self.find(value) {
            self.entries[id as usize].refs += 1;
            return id;
        }
        let entry = SharedEntry { value: Box::from(value), refs: 1, extra: E::default() };
        let id = place(&mut self.entries, &mut self.free, entry);
        let hash = self.hasher.hash_one(value);
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.index.insert_unique(hash, id, |&i| hasher.hash_one(&*entries[i as usize].value));
        id
    }

    /// One reference to `id` fewer; freed when none is left.
    pub(super) fn release(&mut self, id: u32) {
        let entry = &mut self.entries[id as usize];
        entry.refs -= 1;
        if entry.refs > 0 {
            return;
        }
        let hash = self.hasher.hash_one(&*entry.value);
        if let Ok(found) = self.index.find_entry(hash, |&i| i == id) {
            found.remove();
        }
        entry.value = Box::default();
        entry.extra = E::default();
        self.free.push(id);
    }

    pub(super) fn get(&self, id: u32) -> &T {
        &self.entries[id as usize].value
    }
}
