//! Resources: configuration, virtual time, indexes, work lists between
//! systems, and the outbox of actions (its own module, [`outbox`], for the
//! rules it keeps).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;

/// The hasher of the engine's maps: foldhash, seeded at random for each map
/// (as std's SipHash is, so no map's order can decide anything), several
/// times faster on the short strings and lists the engine hashes. Its
/// per-map seed keeps crafted collisions (node names, pod keys) hard.
pub type Hasher = foldhash::fast::RandomState;

/// A `HashMap` with the engine's [`Hasher`].
pub type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;
use std::sync::Arc;

use bevy_ecs::prelude::*;
use hashbrown::HashTable;
use nodewarden_model::{CompactName, ConditionStatus, ControllerConfig, PodKey, Span, Timestamp, Toleration, ZoneKey};

use crate::observation::ObjectKind;

mod outbox;

pub use outbox::Outbox;

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
    /// Next critical-addon rescheduler pass (every
    /// `rescheduler-housekeeping-interval`, when it runs at all).
    pub next_rescheduler: Timestamp,
    /// Whether the rescheduler pass runs in the current tick.
    pub rescheduler_now: bool,
    /// Health-monitor passes run since the start.
    pub monitor_passes: u64,
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

/// Node entities by name. The names are kept inline ([`CompactName`]): a
/// Lease renewal's lookup then reads one entry, not the entry and the
/// name behind its pointer.
#[derive(Resource, Debug, Default)]
pub struct NodeIndex(pub HashMap<CompactName, Entity>);

/// Pod entities by key and by the node they are bound to (the node may not
/// exist yet).
///
/// A pod's strings are stored once however many places refer to them: the
/// key only in the pod ([`PodKeys`] finds pods by it without a copy), and
/// its [`Pod::node`] is the same allocation as the `by_node` key of the
/// node it is bound to (ingest shares it).
///
/// [`Pod::node`]: crate::components::Pod::node
#[derive(Resource, Debug, Default)]
pub struct PodIndex {
    /// By `namespace/name`.
    pub by_key: PodKeys,
    /// By `spec.nodeName`.
    pub by_node: HashMap<Arc<str>, Vec<Entity>>,
}

/// Pod entities by `namespace/name`, holding only the entities: the key of
/// an entity is read from its pod through `key_of` (at a million pods a
/// second copy of every key, and its hash map slot, would be tens of MiB).
/// The table's order is never iterated, so its hasher cannot decide
/// anything.
#[derive(Debug, Default)]
pub struct PodKeys {
    table: HashTable<Entity>,
    hasher: Hasher,
}

impl PodKeys {
    /// The pod named `key`.
    pub fn get<'a>(&self, key: &str, key_of: impl Fn(Entity) -> Option<&'a str>) -> Option<Entity> {
        self.table.find(self.hasher.hash_one(key), |&e| key_of(e) == Some(key)).copied()
    }

    /// Files `pod` under `key`, which must be its pod's key already and
    /// not be filed yet. Every filed pod must keep its key readable through
    /// `key_of` until it is removed (the table re-hashes from it as it grows).
    #[cfg(test)]
    pub fn insert<'a>(&mut self, key: &str, pod: Entity, key_of: impl Fn(Entity) -> Option<&'a str>) {
        let hasher = &self.hasher;
        self.table.insert_unique(hasher.hash_one(key), pod, |&e| hasher.hash_one(key_of(e).unwrap_or_default()));
    }

    /// The pod named `key`, or, when there is none, a place to file one
    /// under it found by the same probe ([`PodKeys::file`]).
    pub fn find_or_place<'a>(
        &mut self,
        key: &str,
        key_of: impl Fn(Entity) -> Option<&'a str>,
    ) -> Result<Entity, PodKeySlot<'_>> {
        let hasher = &self.hasher;
        match self.table.entry(
            hasher.hash_one(key),
            |&e| key_of(e) == Some(key),
            |&e| hasher.hash_one(key_of(e).unwrap_or_default()),
        ) {
            hashbrown::hash_table::Entry::Occupied(found) => Ok(*found.get()),
            hashbrown::hash_table::Entry::Vacant(place) => Err(PodKeySlot(place)),
        }
    }

    /// Makes room for `additional` more pods without re-hashing. `key_of`
    /// must read the keys of the pods filed already, as for
    /// [`PodKeys::insert`].
    pub fn reserve<'a>(&mut self, additional: usize, key_of: impl Fn(Entity) -> Option<&'a str>) {
        let hasher = &self.hasher;
        self.table.reserve(additional, |&e| hasher.hash_one(key_of(e).unwrap_or_default()));
    }

    /// Whether no pod is filed.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Takes the pod named `key` out; returns it.
    pub fn remove<'a>(&mut self, key: &str, key_of: impl Fn(Entity) -> Option<&'a str>) -> Option<Entity> {
        let entry = self.table.find_entry(self.hasher.hash_one(key), |&e| key_of(e) == Some(key)).ok()?;
        Some(entry.remove().0)
    }

    /// Pods filed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.table.len()
    }
}

/// Where a pod not filed yet goes in [`PodKeys`] (from
/// [`PodKeys::find_or_place`]).
pub struct PodKeySlot<'t>(hashbrown::hash_table::VacantEntry<'t, Entity>);

impl PodKeySlot<'_> {
    /// Files `pod` here: its pod's key must be the one it was found for.
    pub fn file(self, pod: Entity) {
        self.0.insert(pod);
    }
}

impl PodIndex {
    /// Pods bound to `node`.
    pub fn on_node(&self, node: &str) -> &[Entity] {
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// Moves `pod` from one node's list to another's. When `to` has no list
    /// yet, its list is made with room for `coming()` more pods besides
    /// this one (rounded up to a power of two): the pods a (re)list brings
    /// come node by node, so ingest can count a node's pods ahead and spare
    /// its list the reallocations of growing one pod at a time (a million
    /// of them at a first list). The rounding keeps a list that grows
    /// later (a node's pods in two runs) no larger than one grown pod by
    /// pod.
    pub fn rebind(&mut self, pod: Entity, from: Option<&str>, to: Option<&Arc<str>>, coming: impl FnOnce() -> usize) {
        if from == to.map(|n| &**n) {
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
            match self.by_node.get_mut(&**new) {
                Some(list) => list.push(pod),
                None => {
                    let mut list = Vec::with_capacity((1 + coming()).next_power_of_two());
                    list.push(pod);
                    self.by_node.insert(new.clone(), list);
                }
            }
        }
    }
}

/// Interned toleration lists. Most pods carry one of a few lists (the
/// admission defaults, a DaemonSet's), so each pod holds a shared
/// reference to its list instead of its own copy. Lists no pod holds any
/// more are dropped when the table has doubled since the last sweep, so
/// the table stays within twice the lists in use.
///
/// Interning is on the path of every pod upsert (a million at a
/// whole-cluster list), so it looks first among the few lists interned
/// last, which is where a list's equal almost always is (pods come in runs
/// of a node's DaemonSet pods and a workload's replicas, and most carry the
/// same two or three lists); comparing with those is cheaper than hashing
/// a list's strings. The table is only probed on a miss, with the list
/// hashed once for the probe and the insert. Lists are compared exactly
/// ([`same_tolerations`]), the cheap fields before the strings, so two
/// different lists are never shared.
#[derive(Resource, Debug, Default)]
pub struct TolerationSets {
    sets: HashTable<Arc<[Toleration]>>,
    hasher: Hasher,
    sweep_at: usize,
    /// The lists interned last, the most recent first (at most
    /// [`TolerationSets::RECENT`]); each is also in `sets`.
    recent: Vec<Arc<[Toleration]>>,
}

/// Whether two toleration lists are equal (as `==` on them is), comparing
/// the integer fields and the strings' lengths of every entry before any
/// string's bytes: two lists interning tells apart usually differ there
/// (a DaemonSet's tolerations against the admission defaults: the same
/// keys, other `tolerationSeconds`), and equal ones have to be read whole
/// anyway.
pub fn same_tolerations(a: &[Toleration], b: &[Toleration]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            // Every field named, so a new field cannot be forgotten here.
            let Toleration { key, operator, value, effect, seconds } = x;
            *operator == y.operator
                && *effect == y.effect
                && *seconds == y.seconds
                && key.len() == y.key.len()
                && value.len() == y.value.len()
        })
        // Lengths are equal by now: an empty string (the usual value) is
        // equal without a call to compare bytes.
        && a.iter().zip(b).all(|(x, y)| (x.key.is_empty() || x.key == y.key) && (x.value.is_empty() || x.value == y.value))
}

impl TolerationSets {
    /// Lists below this many are never swept: sweeping would cost more
    /// than it frees.
    const MIN_SWEEP: usize = 64;

    /// How many of the lists interned last are compared with before the
    /// table is probed.
    const RECENT: usize = 4;

    /// The shared copy of `tolerations`.
    pub fn intern(&mut self, tolerations: Vec<Toleration>) -> Arc<[Toleration]> {
        if let Some(at) = self.recent.iter().position(|set| same_tolerations(set, &tolerations)) {
            // Most recent first: the next pod most likely has this list too.
            if at > 0 {
                self.recent[..=at].rotate_right(1);
            }
            return self.recent[0].clone();
        }
        let set = self.intern_new(tolerations);
        self.recent.truncate(Self::RECENT - 1);
        self.recent.insert(0, set.clone());
        set
    }

    fn intern_new(&mut self, tolerations: Vec<Toleration>) -> Arc<[Toleration]> {
        let hash = self.hasher.hash_one(tolerations.as_slice());
        if let Some(set) = self.sets.find(hash, |set| same_tolerations(set, &tolerations)) {
            return set.clone();
        }
        if self.sets.len() >= self.sweep_at.max(Self::MIN_SWEEP) {
            // Only the table holds these: no pod carries the list now.
            self.recent.clear();
            self.sets.retain(|set| Arc::strong_count(set) > 1);
            self.sweep_at = self.sets.len() * 2;
        }
        let set: Arc<[Toleration]> = tolerations.into();
        let hasher = &self.hasher;
        self.sets.insert_unique(hash, set.clone(), |set| hasher.hash_one(&**set));
        set
    }

    /// Distinct lists held (some possibly no longer used by any pod).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sets.len()
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

/// The last versions of nodes and pods deleted in the last few minutes, so
/// that a late event about one (a watch event older than the answer that
/// told of its deletion) does not bring it back. Kept only for versioned
/// objects; an object created again under the name has a newer version and
/// is taken in. Leases and budgets are not kept: a late one does no harm.
#[derive(Resource, Debug, Default)]
pub struct Tombstones {
    nodes: HashMap<Box<str>, u64>,
    pods: HashMap<Box<str>, u64>,
    /// Burial order, for letting them go: (when, the kind, the key).
    order: std::collections::VecDeque<(Timestamp, ObjectKind, Box<str>)>,
}

impl Tombstones {
    /// How long a deleted object's version is kept: far longer than any
    /// watch event is late.
    pub const KEPT: Span = Span::from_secs(300);

    /// The object of `kind` named `key` was deleted at `now`, last seen at
    /// `version` (nothing is kept of a Lease or a budget).
    pub fn bury(&mut self, now: Timestamp, kind: ObjectKind, key: &str, version: u64) {
        if version == 0 {
            return;
        }
        while let Some((at, kind, _)) = self.order.front()
            && *at + Self::KEPT <= now
        {
            let kind = *kind;
            if let Some((_, _, old)) = self.order.pop_front()
                && let Some(map) = self.kept_mut(kind)
            {
                map.remove(&old);
            }
        }
        let Some(map) = self.kept_mut(kind) else { return };
        map.insert(key.into(), version);
        self.order.push_back((now, kind, key.into()));
    }

    /// The version the object of `kind` named `key` had when it was
    /// deleted, if that was lately.
    pub fn version(&self, kind: ObjectKind, key: &str) -> Option<u64> {
        let map = match kind {
            ObjectKind::Node => &self.nodes,
            ObjectKind::Pod => &self.pods,
            ObjectKind::Lease | ObjectKind::Budget => return None,
        };
        if map.is_empty() {
            return None;
        }
        map.get(key).copied()
    }

    /// Where the versions of `kind` are kept, if they are.
    fn kept_mut(&mut self, kind: ObjectKind) -> Option<&mut HashMap<Box<str>, u64>> {
        match kind {
            ObjectKind::Node => Some(&mut self.nodes),
            ObjectKind::Pod => Some(&mut self.pods),
            ObjectKind::Lease | ObjectKind::Budget => None,
        }
    }
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

/// A node's Ready verdict from the monitor pass, for the eviction mode's
/// system to act on (NoExecute tainting, or legacy eviction).
#[derive(Debug, Clone, Copy)]
pub struct NodeVerdict {
    /// The node.
    pub node: Entity,
    /// Its place in the pass's name order: the key its actions are issued
    /// under in the Outbox's ordered section.
    pub order: u32,
    /// Ready now, after this pass's Unknown write if there was one.
    pub current: ConditionStatus,
    /// Ready as observed at the start of the pass (synthetic Unknown when
    /// missing): legacy eviction decides on this one (J2).
    pub observed: ConditionStatus,
}

/// Scratch space of one monitor pass.
#[derive(Resource, Debug, Default)]
pub struct PassScratch {
    /// Tallies by zone slot.
    pub tally: Vec<ZoneTally>,
    /// Nodes needing cold-path work, sorted by name before use; neither
    /// filed nor kept active until their work is done
    /// (`health::file_worked`).
    pub work: Vec<NodeWork>,
    /// Verdicts of the nodes with a Ready condition among `work`, in name
    /// order.
    pub verdicts: Vec<NodeVerdict>,
}

/// A drained work list, ready to be put back for the next tick. Work lists
/// keep their buffer between ticks so a busy tick does not allocate, but
/// not one sized for a whole-cluster ingest: that would hold a slot per pod
/// for the life of the engine.
pub fn recycle<T>(mut list: Vec<T>) -> Vec<T> {
    /// The largest buffer kept.
    const KEEP: usize = 4096;
    list.clear();
    if list.capacity() > KEEP { Vec::new() } else { list }
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
    /// Nodes of `cleared` whose deletion was observed before the taint
    /// manager ran, by name: their pods' pending deletions are still
    /// called off (I4 came first; I5 only keeps the ones left then).
    pub cleared_gone: Vec<String>,
}

/// A pod deletion the API server refused.
#[derive(Debug, Clone)]
pub struct RefusedDeletion {
    /// The pod entity.
    pub pod: Entity,
    /// Its `namespace/name`.
    pub key: PodKey,
    /// Why it was refused, as the adapter reported it.
    pub reason: String,
    /// Refusals of this pod's deletion so far, this one included.
    pub failures: u32,
}

/// Refused pod deletions ingest has recorded and the deleting system (the
/// taint manager, or legacy eviction) has not yet answered. The engine runs
/// that system right after the observation that reported the refusal, so
/// this holds at most one observation's worth.
#[derive(Resource, Debug, Default)]
pub struct RefusedDeletions(pub Vec<RefusedDeletion>);

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

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::TaintEffect;

    #[test]
    fn equal_toleration_lists_share_one_copy_and_unused_ones_are_swept() {
        use nodewarden_model::TolerationOperator;
        let tol = |key: &str| Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
            seconds: Some(300),
        };
        let mut sets = TolerationSets::default();
        let a = sets.intern(vec![tol("a"), tol("b")]);
        let b = sets.intern(vec![tol("a"), tol("b")]);
        assert!(Arc::ptr_eq(&a, &b), "one copy for equal lists");
        let reversed = sets.intern(vec![tol("b"), tol("a")]);
        assert!(!Arc::ptr_eq(&a, &reversed), "order matters for matching, so it is part of the list");
        drop(reversed);
        // Lists nobody holds any more go in the next sweep; held ones stay.
        let mut held = Vec::new();
        for i in 0..200 {
            let set = sets.intern(vec![tol(&format!("k{i}"))]);
            if i % 2 == 0 {
                held.push(set);
            }
        }
        assert!(sets.len() < 2 * (held.len() + 1) + TolerationSets::MIN_SWEEP, "{} lists kept", sets.len());
        assert!(Arc::ptr_eq(&a, &sets.intern(vec![tol("a"), tol("b")])), "a held list survives sweeps");
    }

    #[test]
    fn toleration_lists_are_the_same_exactly_when_equal() {
        use nodewarden_model::TolerationOperator;
        // Lists of one or two entries, each entry varied in one field at a
        // time (keys and values of equal and unequal lengths): the cheap
        // comparison must agree with `==` on every pair.
        let base = Toleration {
            key: "node.kubernetes.io/not-ready".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
            seconds: Some(300),
        };
        let variants = vec![
            base.clone(),
            Toleration { key: "node.kubernetes.io/unreachable".into(), ..base.clone() },
            Toleration { key: "node.kubernetes.io/not-readx".into(), ..base.clone() },
            Toleration { key: String::new(), ..base.clone() },
            Toleration { operator: TolerationOperator::Equal, ..base.clone() },
            Toleration { value: "a".into(), ..base.clone() },
            Toleration { value: "b".into(), ..base.clone() },
            Toleration { effect: None, ..base.clone() },
            Toleration { effect: Some(TaintEffect::NoSchedule), ..base.clone() },
            Toleration { seconds: None, ..base.clone() },
            Toleration { seconds: Some(0), ..base.clone() },
        ];
        let mut lists: Vec<Vec<Toleration>> = vec![vec![]];
        for a in &variants {
            lists.push(vec![a.clone()]);
            for b in &variants {
                lists.push(vec![a.clone(), b.clone()]);
            }
        }
        for a in &lists {
            for b in &lists {
                assert_eq!(same_tolerations(a, b), a == b, "{a:?} against {b:?}");
            }
        }
        // Interning them all (recent lists, table, sweeps) shares a copy
        // exactly between equal lists.
        let mut sets = TolerationSets::default();
        let first: Vec<Arc<[Toleration]>> = lists.iter().map(|l| sets.intern(l.clone())).collect();
        for (l, got) in lists.iter().zip(&first) {
            assert_eq!(**got, **l);
            let again = sets.intern(l.clone());
            assert!(Arc::ptr_eq(&again, got), "an equal list gets the copy interned first");
        }
    }

    #[test]
    fn pod_keys_find_pods_by_the_key_the_pod_holds() {
        let mut world = World::new();
        let pods: Vec<(Entity, String)> =
            (0..1000).map(|i| (world.spawn_empty().id(), format!("ns/pod-{i}"))).collect();
        let names: HashMap<Entity, &str> = pods.iter().map(|(e, k)| (*e, k.as_str())).collect();
        let key_of = |e: Entity| names.get(&e).copied();
        let mut keys = PodKeys::default();
        // Enough pods that the table grows (re-hashing through `key_of`).
        for (e, k) in &pods {
            keys.insert(k, *e, key_of);
        }
        assert_eq!(keys.len(), 1000);
        assert!(pods.iter().all(|(e, k)| keys.get(k, key_of) == Some(*e)));
        assert_eq!(keys.get("ns/absent", key_of), None);
        for (e, k) in pods.iter().step_by(2) {
            assert_eq!(keys.remove(k, key_of), Some(*e));
            assert_eq!(keys.remove(k, key_of), None, "removed once");
        }
        assert_eq!(keys.len(), 500);
        assert!(pods.iter().enumerate().all(|(i, (e, k))| keys.get(k, key_of) == (i % 2 == 1).then_some(*e)));
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
