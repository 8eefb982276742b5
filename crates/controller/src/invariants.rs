//! Safety invariants, checked from outside the engine.
//!
//! The checker sees only what crosses the engine's boundary: every
//! [`Observation`] sent in and every [`Action`] sent out, in order, and the
//! zone reports. It keeps its own small mirror of the cluster and never
//! looks inside the engine, so it can judge any implementation and costs
//! O(changes) per step: replay, the fuzzer, the property tests and the load
//! test all run it.
//!
//! Driving it: call [`InvariantChecker::observe`] for every observation the
//! engine is sent (initial state, cluster changes, the echo of each applied
//! action), [`InvariantChecker::check_action`] for every action *before* it
//! is applied, and [`InvariantChecker::end_step`] after each tick's actions
//! are applied.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;

/// The checker's hashed maps: looked up for every observation (a Lease
/// renewal per node every 10 s), never iterated in an order that matters.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::collections::hash_map::Entry;

use nodewarden_engine::{Action, ActionKind, ObjectRef, Observation, PodSnapshot, WriteSlot, ZoneReport};
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, CRITICAL_ADDONS_ONLY_VALUE, is_critical_addon};
use nodewarden_model::taint::Decision;
use nodewarden_model::{
    CompactName, ConditionStatus, ConditionType, ControllerConfig, Span, Taint, TaintEffect, Timestamp, Toleration,
    ZoneKey, keys,
};

/// One rule the controller must never break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// A controller write never leaves a node with both the `not-ready` and
    /// the `unreachable` NoExecute taint.
    NeverBothNoExecuteTaints,
    /// No NoExecute taint is added while every zone is fully disrupted (a
    /// whole tick spent in master disruption mode).
    NoTaintWhileAllZonesDown,
    /// A zone's new NoExecute taints are at least one interval of its rate
    /// apart (token bucket, burst 1), and none at rate 0.
    ZoneRateRespected,
    /// No pod is deleted before the deadline its tolerations give it, and
    /// never when every matching toleration tolerates forever; in legacy
    /// mode, never before its node was not Ready for `pod-eviction-timeout`.
    NoEvictionBeforeDeadline,
    /// Legacy eviction never deletes a DaemonSet pod.
    NoDaemonSetPodDeletedInLegacyMode,
    /// The same write is not issued twice while the first is in flight.
    NoDuplicateInFlightWrite,
    /// The critical-addon rescheduler never evicts another critical addon,
    /// a DaemonSet pod, a mirror pod or a terminating pod.
    NoProtectedPodEvictedForAddon,
    /// At most one node carries nodewarden's `CriticalAddonsOnly` taint
    /// (the node being prepared): it is never added to a second one.
    AtMostOneNodePrepared,
    /// No eviction for an addon and no new `CriticalAddonsOnly` taint
    /// while every zone is fully disrupted (a whole tick spent in master
    /// disruption mode, as for NoExecute taints).
    NoReschedulingWhileAllZonesDown,
    /// nodewarden's `CriticalAddonsOnly` taint does not stay on any node
    /// for more than two housekeeping intervals while no critical addon
    /// waits to be scheduled. Found at the end of a step, not on an action:
    /// reported, nothing to hold back.
    NoReservationLeftBehind,
}

impl Invariant {
    /// Every invariant, in report order.
    pub const ALL: [Invariant; 10] = [
        Invariant::NeverBothNoExecuteTaints,
        Invariant::NoTaintWhileAllZonesDown,
        Invariant::ZoneRateRespected,
        Invariant::NoEvictionBeforeDeadline,
        Invariant::NoDaemonSetPodDeletedInLegacyMode,
        Invariant::NoDuplicateInFlightWrite,
        Invariant::NoProtectedPodEvictedForAddon,
        Invariant::AtMostOneNodePrepared,
        Invariant::NoReschedulingWhileAllZonesDown,
        Invariant::NoReservationLeftBehind,
    ];

    /// A stable snake_case name, for reports and scripts.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::NeverBothNoExecuteTaints => "never_both_noexecute_taints",
            Invariant::NoTaintWhileAllZonesDown => "no_taint_while_all_zones_down",
            Invariant::ZoneRateRespected => "zone_rate_respected",
            Invariant::NoEvictionBeforeDeadline => "no_eviction_before_toleration_ends",
            Invariant::NoDaemonSetPodDeletedInLegacyMode => "no_daemonset_pod_deleted_in_legacy_mode",
            Invariant::NoDuplicateInFlightWrite => "no_duplicate_in_flight_write",
            Invariant::NoProtectedPodEvictedForAddon => "no_protected_pod_evicted_for_addon",
            Invariant::AtMostOneNodePrepared => "at_most_one_node_prepared",
            Invariant::NoReschedulingWhileAllZonesDown => "no_rescheduling_while_all_zones_down",
            Invariant::NoReservationLeftBehind => "no_reservation_left_behind",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken invariant, with what broke it.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Which rule.
    pub invariant: Invariant,
    /// When.
    pub at: Timestamp,
    /// What happened, for a person.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.invariant, self.at, self.detail)
    }
}

/// What the checker remembers of a node.
#[derive(Clone, Debug, Default)]
struct NodeMirror {
    zone: ZoneKey,
    taints: Vec<Taint>,
    ready: Option<ConditionStatus>,
    ready_heartbeat: Option<Timestamp>,
    ready_transition: Option<Timestamp>,
    lease: Option<Timestamp>,
    /// When the checker last saw a new heartbeat (status or Lease): never
    /// later than the controller's own probe time once a monitor pass has
    /// taken it in.
    last_beat: Timestamp,
    /// The monitor pass count ([`InvariantChecker::monitor_passed`]) when
    /// `last_beat` was raised: a pass since then has taken it in.
    beat_pass: u64,
    /// The newest heartbeat a monitor pass is known to have taken in,
    /// while `last_beat` is one none has yet (see [`NodeMirror::taken_beat`]).
    taken: Timestamp,
    /// When the checker last saw Ready's transition time change.
    last_transition: Timestamp,
    /// The monitor pass count when the controller last had no health
    /// record of this node (first sight, or a restart): until a pass runs
    /// after it, the record the controller will make is still open, and a
    /// snapshot without a Ready condition makes it count from creation.
    unrecorded_at: u64,
    /// Since when the node has carried NoExecute taints without a break.
    tainted_since: Option<Timestamp>,
    /// `metadata.creationTimestamp`: a different one is a new object under
    /// the same name, whose heartbeats the old one's say nothing about.
    created: Timestamp,
    /// The newest version observed; an older snapshot is passed over, as
    /// the engine passes it over.
    version: u64,
    /// The Ready heartbeat and transition times the controller's own
    /// condition write carried: seeing them is no heartbeat, even after a
    /// snapshot from before the write landed showed the older ones again.
    own_ready: Option<(Timestamp, Timestamp)>,
}

impl NodeMirror {
    /// A heartbeat seen at `now`, while the monitor has run `passes` times.
    fn beat(&mut self, now: Timestamp, passes: u64) {
        if self.beat_pass < passes {
            self.taken = self.last_beat;
        }
        self.last_beat = now;
        self.beat_pass = passes;
    }

    /// The newest heartbeat the controller's monitor has taken in: its
    /// probe time is no earlier. A heartbeat seen since the last pass is
    /// not, and may never be (the node object replaced by one without
    /// status before the next pass leaves the controller's record as it
    /// was).
    fn taken_beat(&self, passes: u64) -> Timestamp {
        if self.beat_pass < passes { self.last_beat } else { self.taken.min(self.last_beat) }
    }

    /// Sets both heartbeat times to at most `at`.
    fn lower_beats_to(&mut self, at: Timestamp) {
        self.last_beat = self.last_beat.min(at);
        self.taken = self.taken.min(at);
    }
}

/// Whether a snapshot at `version` is older than the `held` one (both
/// known): such a late event would take the mirror back in time. (An equal
/// one is the same object again: taking it in changes nothing here.)
fn is_older(version: u64, held: u64) -> bool {
    version != 0 && held != 0 && version < held
}

/// A `not-ready` or `unreachable` NoExecute taint: the ones the controller
/// puts on and the zone's rate limits.
fn is_controller_noexecute(t: &Taint) -> bool {
    t.effect == TaintEffect::NoExecute && (t.key == keys::TAINT_NOT_READY || t.key == keys::TAINT_UNREACHABLE)
}

impl NodeMirror {
    fn noexecute(&self) -> impl Iterator<Item = &Taint> {
        self.taints.iter().filter(|t| t.effect == TaintEffect::NoExecute)
    }
}

/// What the checker remembers of a pod, and of the verdicts its
/// tolerations got during the current tainted episode of its node. Packed
/// (56 bytes): a million pods make the checker's mirror about as large as
/// the engine's otherwise.
#[derive(Clone, Debug)]
struct PodMirror {
    /// The pod's key; empty in a free slot.
    key: Box<str>,
    /// The countdown start: when the pod was first seen on its node during
    /// the node's current tainted episode (meaningful with [`PodMirror::SINCE`]).
    since: Timestamp,
    /// Smallest `tolerationSeconds` that decided the pod during the episode
    /// (meaningful with [`PodMirror::MIN_SECONDS`]).
    min_seconds: i64,
    /// Its node's id in [`InvariantChecker::node_names`], or [`NO_NODE`].
    node: u32,
    /// Its place in its node's list of pods.
    at: u32,
    /// Its toleration list's id in [`InvariantChecker::toleration_lists`].
    tolerations: u32,
    flags: u8,
    /// The newest version observed.
    version: u64,
}

/// A pod bound to no node.
const NO_NODE: u32 = u32::MAX;

impl PodMirror {
    const DAEMONSET: u8 = 1;
    /// Some taint was untolerated at some point of the episode.
    const UNTOLERATED: u8 = 1 << 1;
    /// Has a deletion timestamp.
    const TERMINATING: u8 = 1 << 2;
    /// A critical addon or a mirror pod: never evicted for an addon.
    const PROTECTED: u8 = 1 << 3;
    const SINCE: u8 = 1 << 4;
    const MIN_SECONDS: u8 = 1 << 5;

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    fn since(&self) -> Option<Timestamp> {
        self.has(Self::SINCE).then_some(self.since)
    }

    fn min_seconds(&self) -> Option<i64> {
        self.has(Self::MIN_SECONDS).then_some(self.min_seconds)
    }

    /// Forgets the episode's history (a new node, or the taints gone).
    fn reset_episode(&mut self) {
        self.flags &= !(Self::SINCE | Self::MIN_SECONDS | Self::UNTOLERATED);
    }
}

/// Records the verdict a pod's tolerations get now, if its node is
/// tainted; resets its history when the node is not.
fn sample(now: Timestamp, pod: &mut PodMirror, node: Option<&NodeMirror>, tolerations: &[Toleration]) {
    let Some(node) = node.filter(|n| n.tainted_since.is_some()) else {
        if node.is_some() {
            // Taints gone (I4): the countdown is over.
            pod.reset_episode();
        }
        return;
    };
    if !pod.has(PodMirror::SINCE) {
        pod.since = now;
        pod.set(PodMirror::SINCE, true);
    }
    let taints: Vec<Taint> = node.noexecute().cloned().collect();
    match nodewarden_model::taint::decide(&taints, tolerations) {
        Decision::Untolerated(_) => pod.set(PodMirror::UNTOLERATED, true),
        Decision::Expires { seconds, .. } => {
            pod.min_seconds = pod.min_seconds().map_or(seconds, |m| m.min(seconds));
            pod.set(PodMirror::MIN_SECONDS, true);
        }
        Decision::Forever | Decision::NoTaints => {}
    }
}

/// The pods, in a slab: a record per pod and a table of slot numbers keyed
/// by the record's own key (4 bytes a bucket), rather than a map holding
/// each key and record in its buckets.
#[derive(Debug, Default)]
struct Pods {
    slots: Vec<PodMirror>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl Pods {
    fn find(&self, key: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        self.index.find(hash, |&i| &*self.slots[i as usize].key == key).copied()
    }

    fn get(&self, key: &str) -> Option<&PodMirror> {
        self.find(key).map(|i| &self.slots[i as usize])
    }

    /// A new pod, on no node yet.
    fn insert(&mut self, key: &str, tolerations: u32) -> u32 {
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
    fn remove(&mut self, id: u32) {
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
struct Shared<T: ?Sized, E> {
    entries: Vec<SharedEntry<T, E>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

#[derive(Debug)]
struct SharedEntry<T: ?Sized, E> {
    value: Box<T>,
    refs: u32,
    extra: E,
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
    fn find(&self, value: &T) -> Option<u32> {
        let hash = self.hasher.hash_one(value);
        self.index.find(hash, |&i| *self.entries[i as usize].value == *value).copied()
    }

    /// The id of `value`, counted as referred to once more.
    fn acquire(&mut self, value: &T) -> u32 {
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
    fn release(&mut self, id: u32) {
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

    fn get(&self, id: u32) -> &T {
        &self.entries[id as usize].value
    }
}

/// Checks the [`Invariant`]s over a run. See the module docs for how to
/// drive it.
#[derive(Debug)]
pub struct InvariantChecker {
    config: ControllerConfig,
    /// By name, kept inline ([`CompactName`]): looked up at every renewal.
    nodes: HashMap<CompactName, NodeMirror>,
    /// By pod key.
    pods: Pods,
    /// Node names pods are bound to, shared by the pods, each with the
    /// slots of the pods bound to it.
    node_names: Shared<str, Vec<u32>>,
    /// Toleration lists, shared by the pods that carry the same one.
    toleration_lists: Shared<[Toleration], ()>,
    /// Per zone, upstream's token bucket (F1, F2) as the checker follows
    /// it: the rate last reported and when the next token is due. A zone
    /// without one has a full bucket.
    zone_taints: HashMap<ZoneKey, ZoneBucket>,
    /// Writes issued in the current step (the driver applies writes before
    /// the next tick, so "in flight" is "issued in this step").
    /// Keyed by object and slot, so the check costs O(1) per write even
    /// when one tick issues hundreds of thousands.
    step_writes: HashMap<(ObjectRef, WriteSlot), Vec<ActionKind>>,
    /// Every zone was down at the end of the previous step.
    all_down_before: bool,
    violations: BTreeMap<Invariant, usize>,
    /// Nodes carrying nodewarden's `CriticalAddonsOnly` taint, as observed
    /// or as the controller's committed patches left them.
    reserved: BTreeSet<String>,
    /// Nodes the controller has sent the removal of its
    /// `CriticalAddonsOnly` taint to, until a snapshot shows it gone: what
    /// an answer or watch event of before the removal still shows does not
    /// count against the next node prepared (the removal is decided and on
    /// its way; two objects' writes land in no set order).
    releasing: BTreeSet<String>,
    /// Critical addons waiting to be scheduled (unbound, not terminating,
    /// marked Unschedulable).
    waiting_addons: BTreeSet<String>,
    /// Since when some node has carried the reservation while no addon
    /// waits, and whether that episode was reported.
    idle_reservation: Option<(Timestamp, bool)>,
    /// The latest time the checker was told of.
    now: Timestamp,
    /// How many health-monitor passes the controller has run, as the
    /// control loop reports them.
    passes: u64,
    /// What the last [`InvariantChecker::end_step`] found.
    step_violations: Vec<Violation>,
}

/// nodewarden's own `CriticalAddonsOnly` taint (its value says so).
fn is_reservation(t: &Taint) -> bool {
    t.key == CRITICAL_ADDONS_ONLY_TAINT && t.effect == TaintEffect::NoSchedule && t.value == CRITICAL_ADDONS_ONLY_VALUE
}

impl InvariantChecker {
    /// A checker for a controller running with `config`.
    pub fn new(config: &ControllerConfig) -> InvariantChecker {
        InvariantChecker {
            config: config.clone(),
            nodes: HashMap::default(),
            pods: Pods::default(),
            node_names: Shared::default(),
            toleration_lists: Shared::default(),
            zone_taints: HashMap::default(),
            step_writes: HashMap::default(),
            all_down_before: false,
            violations: BTreeMap::new(),
            reserved: BTreeSet::new(),
            releasing: BTreeSet::new(),
            waiting_addons: BTreeSet::new(),
            idle_reservation: None,
            now: Timestamp::MIN,
            passes: 0,
            step_violations: Vec::new(),
        }
    }

    /// How many times each invariant was broken so far (absent = never).
    pub fn broken(&self) -> &BTreeMap<Invariant, usize> {
        &self.violations
    }

    /// Every invariant with whether it held so far, in report order.
    pub fn verdicts(&self) -> Vec<(Invariant, bool)> {
        Invariant::ALL.iter().map(|&i| (i, !self.violations.contains_key(&i))).collect()
    }

    /// Takes in observations the engine is sent, in order:
    /// [`InvariantChecker::observe`] for each, faster for a batch of many.
    pub fn observe_batch(&mut self, now: Timestamp, batch: &[Observation]) {
        // Lease renewals are most of a large cluster's observations, and
        // each looks its node up in a map too large for the cache: read
        // every renewal's node first (lookups that do not wait on each
        // other, so their misses overlap), then take them in, in order.
        let mut touched = 0u64;
        for obs in batch {
            if let Observation::LeaseUpserted { node, .. } = obs
                && let Some(n) = self.nodes.get(node.as_str())
            {
                touched ^= u64::from(n.lease.is_some());
            }
        }
        std::hint::black_box(touched);
        for obs in batch {
            self.observe(now, obs);
        }
    }

    /// Takes in an observation the engine is sent.
    pub fn observe(&mut self, now: Timestamp, obs: &Observation) {
        self.now = self.now.max(now);
        match obs {
            Observation::NodeUpserted(n) => {
                if self.nodes.get(n.name.as_str()).is_some_and(|m| is_older(n.version, m.version)) {
                    return;
                }
                let ready = n.conditions.iter().find(|c| c.kind == ConditionType::Ready);
                // A node deleted and created again under its name is a new
                // object. The controller may go by either: it keeps its
                // health record when both happen between two monitor
                // passes (upstream's pass sees no deletion), and counts a
                // node it has no record of and that never posted status
                // from its creation. The checker allows the earlier. The
                // record kept is the one the last monitor pass left: a
                // heartbeat the old object posted since is not in it.
                // One lookup: a status post every few minutes per node.
                let passes = self.passes;
                let (entry, known) = match self.nodes.entry(CompactName::from(n.name.as_str())) {
                    Entry::Occupied(o) => {
                        let m = o.into_mut();
                        if m.created != n.created {
                            let basis =
                                if ready.is_some() { now } else { n.created.min(now).min(m.taken_beat(passes)) };
                            m.lower_beats_to(basis);
                            m.last_transition = m.last_transition.min(basis);
                            m.created = n.created;
                        }
                        (m, true)
                    }
                    Entry::Vacant(v) => {
                        let first = if ready.is_some() { now } else { n.created.min(now) };
                        let m = v.insert(NodeMirror {
                            // A node that never posted status counts from its
                            // creation, as the controller's startup grace does.
                            last_beat: first,
                            taken: first,
                            beat_pass: passes,
                            unrecorded_at: passes,
                            last_transition: first,
                            ready_heartbeat: ready.map(|c| c.last_heartbeat),
                            ready_transition: ready.map(|c| c.last_transition),
                            created: n.created,
                            ..NodeMirror::default()
                        });
                        (m, false)
                    }
                };
                // No pass has made the controller's record of this node
                // yet, and the snapshot it will make it from has no Ready
                // condition: upstream's `tryUpdateNodeHealth` then counts
                // from the creation, whatever Ready the node showed before
                // (found by the fuzzer: added Ready, condition removed
                // before the first pass, deleted in legacy mode at
                // creation + pod-eviction-timeout).
                if ready.is_none() && entry.unrecorded_at == passes {
                    entry.lower_beats_to(n.created);
                    entry.last_transition = entry.last_transition.min(n.created);
                }
                if let Some(c) = ready
                    && entry.own_ready != Some((c.last_heartbeat, c.last_transition))
                {
                    if entry.ready_heartbeat != Some(c.last_heartbeat) {
                        entry.beat(now, passes);
                    }
                    if entry.ready_transition != Some(c.last_transition) {
                        entry.last_transition = now;
                    }
                }
                entry.version = n.version;
                entry.ready = ready.map(|c| c.status);
                entry.ready_heartbeat = ready.map(|c| c.last_heartbeat);
                entry.ready_transition = ready.map(|c| c.last_transition);
                if !entry.zone.is_of(&n.labels) {
                    entry.zone = ZoneKey::from_labels(&n.labels);
                }
                if n.taints.iter().any(is_reservation) {
                    if !self.releasing.contains(&n.name) {
                        self.reserved.insert(n.name.clone());
                    }
                } else if !self.reserved.is_empty() || !self.releasing.is_empty() {
                    self.reserved.remove(&n.name);
                    self.releasing.remove(&n.name);
                }
                // Pods are sampled again only when the taints change (a
                // status post every few minutes per node would otherwise
                // cost a pass over the node's pods).
                if entry.taints != n.taints || !known {
                    entry.taints = n.taints.clone();
                    let name = n.name.clone();
                    self.node_taints_changed(now, &name);
                }
            }
            Observation::NodeDeleted { name } => {
                // Pending deletions survive a node's deletion (upstream I5):
                // its pods keep their histories.
                self.nodes.remove(name.as_str());
                self.reserved.remove(name);
                self.releasing.remove(name);
            }
            Observation::LeaseUpserted { node, renew } => {
                if let Some(n) = self.nodes.get_mut(node.as_str()) {
                    if renew.is_some() && (n.lease.is_none() || *renew > n.lease) {
                        n.beat(now, self.passes);
                    }
                    n.lease = *renew;
                }
            }
            Observation::LeaseDeleted { node } => {
                if let Some(n) = self.nodes.get_mut(node.as_str()) {
                    n.lease = None;
                }
            }
            Observation::PodUpserted(p) => self.upsert_pod(now, p),
            Observation::PodDeleted { key } => {
                self.waiting_addons.remove(key.as_str());
                if let Some(id) = self.pods.find(key.as_str()) {
                    self.unbind(id);
                    self.toleration_lists.release(self.pods.slots[id as usize].tolerations);
                    self.pods.remove(id);
                }
            }
            // The rescheduler's rules read budgets; node lifecycle's do not.
            Observation::WriteFinished { .. } | Observation::BudgetUpserted(_) | Observation::BudgetDeleted { .. } => {}
        }
    }

    fn upsert_pod(&mut self, now: Timestamp, p: &PodSnapshot) {
        if self.pods.get(p.key.as_str()).is_some_and(|m| is_older(p.version, m.version)) {
            return;
        }
        let tolerations = self.toleration_lists.acquire(&p.tolerations);
        let id = match self.pods.find(p.key.as_str()) {
            Some(id) => {
                let old = std::mem::replace(&mut self.pods.slots[id as usize].tolerations, tolerations);
                self.toleration_lists.release(old);
                id
            }
            None => self.pods.insert(p.key.as_str(), tolerations),
        };
        let old_node = self.pods.slots[id as usize].node;
        let same_node = match &p.node {
            None => old_node == NO_NODE,
            Some(n) => old_node != NO_NODE && self.node_names.get(old_node) == n.as_str(),
        };
        if !same_node {
            self.unbind(id);
            if let Some(n) = &p.node {
                let node = self.node_names.acquire(n);
                let list = &mut self.node_names.entries[node as usize].extra;
                let pod = &mut self.pods.slots[id as usize];
                pod.node = node;
                pod.at = u32::try_from(list.len()).expect("fewer than 2^32 pods");
                list.push(id);
            }
            self.pods.slots[id as usize].reset_episode();
        }
        let namespace = p.key.split_once('/').map_or("", |(ns, _)| ns);
        let critical = p
            .scheduling
            .as_ref()
            .is_some_and(|s| is_critical_addon(namespace, s.critical_annotation, s.priority_class.as_deref()));
        let entry = &mut self.pods.slots[id as usize];
        entry.version = p.version;
        entry.set(PodMirror::DAEMONSET, p.daemonset);
        entry.set(PodMirror::TERMINATING, p.terminating);
        entry.set(PodMirror::PROTECTED, critical || p.scheduling.as_ref().is_some_and(|s| s.mirror));
        let waiting = critical
            && p.node.is_none()
            && !p.terminating
            && p.scheduling.as_ref().is_some_and(|s| s.unschedulable_since.is_some());
        if waiting {
            self.waiting_addons.insert(p.key.to_string());
        } else {
            self.waiting_addons.remove(p.key.as_str());
        }
        self.sample_pod(now, id);
    }

    /// Takes pod `id` off its node's list, if it is on one.
    fn unbind(&mut self, id: u32) {
        let node = std::mem::replace(&mut self.pods.slots[id as usize].node, NO_NODE);
        if node == NO_NODE {
            return;
        }
        let at = self.pods.slots[id as usize].at;
        let list = &mut self.node_names.entries[node as usize].extra;
        list.swap_remove(at as usize);
        if let Some(&moved) = list.get(at as usize) {
            self.pods.slots[moved as usize].at = at;
        }
        self.node_names.release(node);
    }

    /// A node's taints may have changed: start or end its tainted episode
    /// and sample the verdicts of its pods.
    fn node_taints_changed(&mut self, now: Timestamp, name: &str) {
        let Some(node) = self.nodes.get_mut(name) else { return };
        let tainted = node.noexecute().next().is_some();
        match (tainted, node.tainted_since) {
            (true, None) => node.tainted_since = Some(now),
            (false, Some(_)) => node.tainted_since = None,
            _ => {}
        }
        let node = self.nodes.get(name);
        let Some(id) = self.node_names.find(name) else { return };
        for &pod in &self.node_names.entries[id as usize].extra {
            let pod = &mut self.pods.slots[pod as usize];
            sample(now, pod, node, self.toleration_lists.get(pod.tolerations));
        }
    }

    /// Records the verdict a pod's tolerations get now, if its node is
    /// tainted; resets its history when the node is not.
    fn sample_pod(&mut self, now: Timestamp, id: u32) {
        let pod = &mut self.pods.slots[id as usize];
        let node = (pod.node != NO_NODE).then(|| self.node_names.get(pod.node)).and_then(|n| self.nodes.get(n));
        sample(now, pod, node, self.toleration_lists.get(pod.tolerations));
    }

    /// Checks one action before it is applied, counts what it breaks and
    /// takes it as sent: [`InvariantChecker::judge`], then
    /// [`InvariantChecker::count`], then [`InvariantChecker::commit`].
    /// `zones` are the engine's zone reports after the tick that issued it;
    /// `all_zones_down` is the engine's master-disruption flag after that
    /// tick.
    pub fn check_action(
        &mut self,
        now: Timestamp,
        action: &Action,
        zones: &[ZoneReport],
        all_zones_down: bool,
    ) -> Vec<Violation> {
        let out = self.judge(now, action, zones, all_zones_down);
        self.count(&out);
        self.commit(now, action, zones);
        out
    }

    /// What `action` would break if it were sent now. Changes nothing, so a
    /// safety interlock can ask before deciding whether to send it.
    pub fn judge(&self, now: Timestamp, action: &Action, zones: &[ZoneReport], all_zones_down: bool) -> Vec<Violation> {
        let mut out = Vec::new();
        let kind = &action.kind;
        if let Some(slot) = kind.slot()
            && self.step_writes.get(&slot).is_some_and(|issued| issued.contains(kind))
        {
            out.push(Violation {
                invariant: Invariant::NoDuplicateInFlightWrite,
                at: now,
                detail: format!("{kind:?} issued twice in one step"),
            });
        }
        match kind {
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                self.judge_taint_patch(now, node, add, remove, zones, all_zones_down, &mut out);
                if let Some(added) = add.iter().find(|t| is_reservation(t)) {
                    self.judge_reservation(now, node, added, all_zones_down, &mut out);
                }
            }
            ActionKind::DeletePod { pod, .. } => self.judge_deletion(now, pod, &mut out),
            ActionKind::EvictForAddon { pod, .. } => self.judge_addon_eviction(now, pod, all_zones_down, &mut out),
            _ => {}
        }
        out
    }

    /// A `CriticalAddonsOnly` taint of nodewarden's added to `node`.
    fn judge_reservation(&self, now: Timestamp, node: &str, added: &Taint, all_down: bool, out: &mut Vec<Violation>) {
        if let Some(other) = self.reserved.iter().find(|n| n.as_str() != node) {
            out.push(Violation {
                invariant: Invariant::AtMostOneNodePrepared,
                at: now,
                detail: format!("{} added to node {node} while node {other} carries it", added.short()),
            });
        }
        if self.all_down_before && all_down {
            out.push(Violation {
                invariant: Invariant::NoReschedulingWhileAllZonesDown,
                at: now,
                detail: format!("{} added to node {node} while every zone is fully disrupted", added.short()),
            });
        }
    }

    /// An eviction for a critical addon.
    fn judge_addon_eviction(&self, now: Timestamp, key: &str, all_down: bool, out: &mut Vec<Violation>) {
        if self.all_down_before && all_down {
            out.push(Violation {
                invariant: Invariant::NoReschedulingWhileAllZonesDown,
                at: now,
                detail: format!("pod {key} evicted for a critical addon while every zone is fully disrupted"),
            });
        }
        let Some(pod) = self.pods.get(key) else { return };
        let what = if pod.has(PodMirror::PROTECTED) {
            Some("a critical addon or mirror pod")
        } else if pod.has(PodMirror::DAEMONSET) {
            Some("a DaemonSet pod")
        } else if pod.has(PodMirror::TERMINATING) {
            Some("a terminating pod")
        } else {
            None
        };
        if let Some(what) = what {
            out.push(Violation {
                invariant: Invariant::NoProtectedPodEvictedForAddon,
                at: now,
                detail: format!("pod {key}, {what}, evicted for a critical addon"),
            });
        }
    }

    /// The violations the last [`InvariantChecker::end_step`] found: rules
    /// judged over time rather than on one action
    /// ([`Invariant::NoReservationLeftBehind`]). Already counted in
    /// [`InvariantChecker::broken`]; a driver that fails a run on a broken
    /// invariant reads them here.
    pub fn step_violations(&self) -> &[Violation] {
        &self.step_violations
    }

    /// Adds `violations` to the tally [`InvariantChecker::broken`] reports
    /// (whether or not the action that broke them was sent).
    pub fn count(&mut self, violations: &[Violation]) {
        for v in violations {
            *self.violations.entry(v.invariant).or_default() += 1;
        }
    }

    /// Takes `action` as sent: it is in flight until
    /// [`InvariantChecker::end_step`], a new NoExecute taint is the zone's
    /// latest, and the controller's own condition write is remembered. An
    /// action a safety interlock held back is not committed.
    pub fn commit(&mut self, now: Timestamp, action: &Action, zones: &[ZoneReport]) {
        let kind = &action.kind;
        self.now = self.now.max(now);
        if let Some(slot) = kind.slot() {
            self.step_writes.entry(slot).or_default().push(kind.clone());
        }
        match kind {
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                // Removals match by key and effect, whatever the value.
                if remove.iter().any(|t| t.is(CRITICAL_ADDONS_ONLY_TAINT, TaintEffect::NoSchedule)) {
                    self.reserved.remove(node);
                    self.releasing.insert(node.clone());
                }
                if add.iter().any(is_reservation) {
                    self.releasing.remove(node);
                    self.reserved.insert(node.clone());
                }
                // Only a node getting its first controller taint goes
                // through the zone's rate limiter (a swap does not).
                let Some(mirror) = self.nodes.get(node.as_str()) else { return };
                if !add.iter().any(is_controller_noexecute) || mirror.taints.iter().any(is_controller_noexecute) {
                    return;
                }
                let zone = mirror.zone.clone();
                let rate = self.zone_rate(&zone, zones);
                self.zone_taints.insert(zone, ZoneBucket { rate, ready_at: now + token_interval(rate) });
            }
            ActionKind::UpdateNodeConditions { node, conditions, .. } => self.own_condition_write(node, conditions),
            _ => {}
        }
    }

    /// The controller's health monitor ran a pass: every heartbeat seen so
    /// far is in its records now.
    pub fn monitor_passed(&mut self) {
        self.passes += 1;
    }

    /// The zones as a tick left them: a zone whose rate changed had its
    /// limiter swapped at `now` (upstream `SwapLimiter`, F2): a full bucket
    /// at the new rate when the old one had a token to spend, else one
    /// drained by a token; rate 0 grants nothing. The control loop calls
    /// it after every tick, so every swap is seen at its time.
    pub fn zones_ticked(&mut self, now: Timestamp, zones: &[ZoneReport]) {
        for z in zones {
            let Some(bucket) = self.zone_taints.get_mut(&z.key) else { continue };
            if (bucket.rate as f32) == (z.rate as f32) || (bucket.rate <= 0.0 && z.rate <= 0.0) {
                continue;
            }
            let old_had_token = bucket.rate > 0.0 && now >= bucket.ready_at;
            let ready_at = if z.rate <= 0.0 || old_had_token { now } else { now + token_interval(z.rate) };
            *bucket = ZoneBucket { rate: z.rate, ready_at };
        }
    }

    fn zone_rate(&self, zone: &ZoneKey, zones: &[ZoneReport]) -> f64 {
        zones.iter().find(|z| &z.key == zone).map_or(self.config.node_eviction_rate, |z| z.rate)
    }

    /// The controller's own condition write is no heartbeat: the mirror
    /// takes its Ready fields now, so their echo does not count as one
    /// (the controller does not refresh its probe time on its own write).
    fn own_condition_write(&mut self, node: &str, conditions: &[nodewarden_model::NodeCondition]) {
        let Some(mirror) = self.nodes.get_mut(node) else { return };
        if let Some(ready) = conditions.iter().find(|c| c.kind == ConditionType::Ready) {
            mirror.ready = Some(ready.status);
            mirror.ready_heartbeat = Some(ready.last_heartbeat);
            mirror.ready_transition = Some(ready.last_transition);
            mirror.own_ready = Some((ready.last_heartbeat, ready.last_transition));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn judge_taint_patch(
        &self,
        now: Timestamp,
        node: &str,
        add: &[Taint],
        remove: &[Taint],
        zones: &[ZoneReport],
        all_zones_down: bool,
        out: &mut Vec<Violation>,
    ) {
        let both = |taints: &[Taint]| {
            taints.iter().any(|t| t.is(keys::TAINT_NOT_READY, TaintEffect::NoExecute))
                && taints.iter().any(|t| t.is(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute))
        };
        let violate = |out: &mut Vec<Violation>, invariant, detail| out.push(Violation { invariant, at: now, detail });
        let Some(mirror) = self.nodes.get(node) else { return };
        // The node as the API will have it when this patch lands: writes to
        // one object land in order, so the taint patches sent before it in
        // this step land first, whether or not their answers are back yet.
        let patch = |taints: &mut Vec<Taint>, add: &[Taint], remove: &[Taint]| {
            taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
            taints.extend(add.iter().cloned());
        };
        let mut before: Vec<Taint> = mirror.taints.clone();
        let sent = self.step_writes.get(&(ObjectRef::Node(node.to_string()), WriteSlot::NoExecuteTaints));
        for w in sent.into_iter().flatten() {
            if let ActionKind::PatchNodeTaints { add, remove, .. } = w {
                patch(&mut before, add, remove);
            }
        }
        let mut after = before.clone();
        patch(&mut after, add, remove);
        // Only a write that brings the two together counts: a node someone
        // else gave both taints is not the controller's doing.
        if both(&after) && !both(&before) {
            violate(out, Invariant::NeverBothNoExecuteTaints, format!("node {node} would carry both"));
        }
        let Some(added) = add.iter().find(|t| is_controller_noexecute(t)) else { return };
        if self.all_down_before && all_zones_down {
            violate(
                out,
                Invariant::NoTaintWhileAllZonesDown,
                format!("{} added to node {node} while every zone is fully disrupted", added.short()),
            );
        }
        // A swap replaces the opposite taint at once; only a node getting its
        // first controller taint goes through the zone's rate limiter.
        if before.iter().any(is_controller_noexecute) {
            return;
        }
        let zone = &mirror.zone;
        let rate = self.zone_rate(zone, zones);
        if rate <= 0.0 {
            violate(
                out,
                Invariant::ZoneRateRespected,
                format!("{} added to node {node} in zone {zone:?} whose rate is 0", added.short()),
            );
        } else if let Some(bucket) = self.zone_taints.get(zone)
            // A rate the checker was not told of (no `zones_ticked` since
            // the swap) leaves the bucket unknown: judged full.
            && (bucket.rate as f32) == (rate as f32)
            && now < bucket.ready_at
        {
            violate(
                out,
                Invariant::ZoneRateRespected,
                format!(
                    "node {node} tainted {} before zone {zone:?} has a token again (rate {rate}/s, next token at {})",
                    bucket.ready_at - now,
                    bucket.ready_at
                ),
            );
        }
    }

    fn judge_deletion(&self, now: Timestamp, key: &str, out: &mut Vec<Violation>) {
        let violate = |out: &mut Vec<Violation>, invariant, detail| out.push(Violation { invariant, at: now, detail });
        let Some(pod) = self.pods.get(key) else { return };
        if !self.config.enable_taint_manager {
            if pod.has(PodMirror::DAEMONSET) {
                violate(out, Invariant::NoDaemonSetPodDeletedInLegacyMode, format!("DaemonSet pod {key} deleted"));
            }
            let node_name = (pod.node != NO_NODE).then(|| self.node_names.get(pod.node));
            let node = node_name.and_then(|n| self.nodes.get(n));
            // A node without a Ready condition is Unknown to the legacy
            // decision (upstream's `tryUpdateNodeHealth` makes one up,
            // heartbeat at creation), and counts from the probe time
            // without waiting for the startup grace.
            let allowed_from = node.and_then(|n| match n.ready {
                Some(ConditionStatus::True) => None,
                Some(ConditionStatus::False) => Some(n.last_transition + self.config.pod_eviction_timeout),
                Some(ConditionStatus::Unknown) | None => Some(n.last_beat + self.config.pod_eviction_timeout),
            });
            match allowed_from {
                Some(from) if now > from => {}
                _ => violate(
                    out,
                    Invariant::NoEvictionBeforeDeadline,
                    format!(
                        "pod {key} deleted in legacy mode but its node {node_name:?} was not unready for pod-eviction-timeout (allowed after {allowed_from:?})",
                    ),
                ),
            }
            return;
        }
        if pod.has(PodMirror::UNTOLERATED) {
            return;
        }
        match (pod.since(), pod.min_seconds()) {
            (Some(since), Some(s)) if now >= since + Span::from_secs(s.max(0)) => {}
            (since, seconds) => violate(
                out,
                Invariant::NoEvictionBeforeDeadline,
                format!(
                    "pod {key} deleted before its tolerations allow (tainted since {since:?}, smallest tolerationSeconds {seconds:?}, tolerations {:?})",
                    self.toleration_lists.get(pod.tolerations)
                ),
            ),
        }
    }

    /// Ends a step: the writes issued in it are no longer in flight (the
    /// driver has applied them and reported their outcome), and the
    /// master-disruption flag is remembered.
    pub fn end_step(&mut self, all_zones_down: bool) {
        self.step_writes.clear();
        self.all_down_before = all_zones_down;
        self.step_violations.clear();
        if self.reserved.is_empty() || !self.waiting_addons.is_empty() {
            self.idle_reservation = None;
            return;
        }
        let now = self.now;
        let (since, reported) = self.idle_reservation.get_or_insert((now, false));
        let bound = self.config.rescheduler_housekeeping_interval.saturating_mul(2);
        if !*reported && now - *since > bound {
            *reported = true;
            let v = Violation {
                invariant: Invariant::NoReservationLeftBehind,
                at: now,
                detail: format!(
                    "nodewarden's CriticalAddonsOnly taint still on {:?} {} after no critical addon waits any more (allowed: {bound})",
                    self.reserved,
                    now - *since
                ),
            };
            *self.violations.entry(v.invariant).or_default() += 1;
            self.step_violations.push(v);
        }
    }

    /// A fresh controller took over (a restart): its rate limiters start
    /// full, as upstream's do, so the zone rate is judged from its first
    /// taint on, and nothing it issues is in flight yet. Everything the
    /// checker knows of the cluster stays, but one thing: a node without a
    /// Ready condition is, to a controller that has just started, a node
    /// that never posted status, counted from its creation (upstream's
    /// `tryUpdateNodeHealth`), whatever heartbeats the checker saw before
    /// someone removed the condition. The checker may allow what the
    /// controller may do, never less.
    pub fn controller_restarted(&mut self) {
        self.zone_taints.clear();
        self.step_writes.clear();
        let passes = self.passes;
        for n in self.nodes.values_mut() {
            n.unrecorded_at = passes;
            if n.ready.is_none() {
                n.lower_beats_to(n.created);
                n.last_transition = n.last_transition.min(n.created);
            }
        }
    }
}

/// Upstream's per-zone limiter as the checker follows it (F1, F2).
#[derive(Clone, Copy, Debug)]
struct ZoneBucket {
    /// The zone's rate when the bucket was last taken from or swapped.
    rate: f64,
    /// When the next token is due (meaningless at rate 0).
    ready_at: Timestamp,
}

/// Time between two tokens at `rate` (burst 1).
fn token_interval(rate: f64) -> Span {
    Span::from_secs_f64(1.0 / rate).unwrap_or(Span::ZERO)
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::{ActionId, ZoneState};
    use nodewarden_model::NodeCondition;

    use super::*;
    use crate::fixtures::{
        delete, evict_for_addon, node, pod, reservation, reservation_patch, scheduled_pod, t, taint_patch, unreachable,
    };

    fn zone(rate: f64) -> Vec<ZoneReport> {
        vec![ZoneReport {
            key: ZoneKey::new("", "z"),
            state: Some(ZoneState::Normal),
            rate,
            size: 3,
            not_ready: 1,
            queued: 0,
        }]
    }

    #[test]
    fn deletion_before_the_toleration_ends_is_caught() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        c.observe(t(0), &node("n", ConditionStatus::Unknown, vec![]));
        c.observe(t(0), &pod("ns/p", "n", Some(300), false));
        c.observe(t(10), &node("n", ConditionStatus::Unknown, vec![unreachable()]));
        assert_eq!(c.check_action(t(309), &delete("ns/p"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        assert!(c.check_action(t(310), &delete("ns/p"), &zone(0.1), false).is_empty());
        assert_eq!(c.broken().get(&Invariant::NoEvictionBeforeDeadline), Some(&1));
    }

    #[test]
    fn forever_tolerations_forbid_deletion_and_untolerated_allows_it() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        c.observe(t(0), &node("n", ConditionStatus::Unknown, vec![unreachable()]));
        c.observe(t(0), &pod("ns/forever", "n", None, false));
        assert_eq!(c.check_action(t(9999), &delete("ns/forever"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        let other = Taint::new("example.com/x", TaintEffect::NoExecute);
        c.observe(t(1), &node("n", ConditionStatus::Unknown, vec![unreachable(), other]));
        assert!(c.check_action(t(1), &delete("ns/forever"), &zone(0.1), false).is_empty());
    }

    #[test]
    fn removing_the_taint_restarts_the_countdown() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        c.observe(t(0), &node("n", ConditionStatus::Unknown, vec![unreachable()]));
        c.observe(t(0), &pod("ns/p", "n", Some(100), false));
        c.observe(t(50), &node("n", ConditionStatus::True, vec![]));
        c.observe(t(60), &node("n", ConditionStatus::Unknown, vec![unreachable()]));
        assert_eq!(c.check_action(t(100), &delete("ns/p"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        assert!(c.check_action(t(160), &delete("ns/p"), &zone(0.1), false).is_empty());
    }

    #[test]
    fn zone_rate_and_master_mode() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        for n in ["a", "b", "c"] {
            c.observe(t(0), &node(n, ConditionStatus::Unknown, vec![]));
        }
        assert!(c.check_action(t(45), &taint_patch("a", vec![unreachable()], vec![]), &zone(0.1), false).is_empty());
        c.observe(t(45), &node("a", ConditionStatus::Unknown, vec![unreachable()]));
        c.end_step(false);
        let v = c.check_action(t(50), &taint_patch("b", vec![unreachable()], vec![]), &zone(0.1), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
        c.end_step(false);
        assert!(c.check_action(t(60), &taint_patch("c", vec![unreachable()], vec![]), &zone(0.1), false).is_empty());
        c.end_step(true);
        let v = c.check_action(t(70), &taint_patch("b", vec![unreachable()], vec![]), &zone(0.1), true);
        assert!(v.iter().any(|v| v.invariant == Invariant::NoTaintWhileAllZonesDown), "{v:?}");
    }

    /// Upstream's `SwapLimiter` (F2): a zone going back to a rate it
    /// tainted at 90 s ago gets a full bucket when the rate it leaves had a
    /// token, and waits a full interval when it had none.
    #[test]
    fn a_rate_swap_refills_the_zone_bucket_as_upstream_does() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        for n in ["a", "b", "c"] {
            c.observe(t(0), &node(n, ConditionStatus::Unknown, vec![]));
        }
        let patch = |n| taint_patch(n, vec![unreachable()], vec![]);
        c.zones_ticked(t(440), &zone(0.01));
        assert!(c.check_action(t(440), &patch("a"), &zone(0.01), false).is_empty());
        c.end_step(false);
        // Old bucket empty: the new one is drained, next token at 475 s.
        c.zones_ticked(t(455), &zone(0.05));
        let v = c.check_action(t(470), &patch("b"), &zone(0.05), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
        c.end_step(false);
        // The 0.05/s bucket has its token again: spent on a full 0.01/s one.
        c.zones_ticked(t(530), &zone(0.01));
        assert!(c.check_action(t(530), &patch("b"), &zone(0.01), false).is_empty());
        c.end_step(false);
        let v = c.check_action(t(600), &patch("c"), &zone(0.01), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
    }

    #[test]
    fn swaps_are_not_rate_limited_but_both_taints_are_caught() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        let not_ready = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        c.observe(t(0), &node("a", ConditionStatus::Unknown, vec![not_ready.clone()]));
        c.observe(t(0), &node("b", ConditionStatus::Unknown, vec![]));
        assert!(c.check_action(t(1), &taint_patch("b", vec![unreachable()], vec![]), &zone(0.1), false).is_empty());
        c.end_step(false);
        let swap = taint_patch("a", vec![unreachable()], vec![not_ready]);
        assert!(c.check_action(t(2), &swap, &zone(0.1), false).is_empty());
        c.end_step(false);
        let both = taint_patch("a", vec![unreachable()], vec![]);
        let v = c.check_action(t(3), &both, &zone(0.1), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::NeverBothNoExecuteTaints), "{v:?}");
    }

    #[test]
    fn legacy_mode_spares_daemonsets_and_waits_for_the_timeout() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut c = InvariantChecker::new(&config);
        c.observe(t(0), &node("n", ConditionStatus::Unknown, vec![]));
        c.observe(t(0), &pod("ns/ds", "n", None, true));
        c.observe(t(0), &pod("ns/web", "n", None, false));
        let v = c.check_action(t(400), &delete("ns/ds"), &zone(0.1), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::NoDaemonSetPodDeletedInLegacyMode), "{v:?}");
        c.end_step(false);
        assert_eq!(c.check_action(t(300), &delete("ns/web"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        assert!(c.check_action(t(301), &delete("ns/web"), &zone(0.1), false).is_empty());
    }

    /// Found by `rescheduler_steps`: a node object created again without
    /// status is, to upstream's legacy decision, Unknown from the probe
    /// on, startup grace or not; the checker allowed no deletion at all
    /// until the controller wrote Unknown, and held back upstream's.
    #[test]
    fn legacy_mode_counts_a_node_without_ready_as_unknown() {
        let config = ControllerConfig {
            enable_taint_manager: false,
            pod_eviction_timeout: Span::from_secs(20),
            ..ControllerConfig::default()
        };
        let mut c = InvariantChecker::new(&config);
        let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::Unknown, vec![]) else { unreachable!() };
        n.created = t(100);
        n.conditions.clear();
        c.observe(t(100), &Observation::NodeUpserted(n));
        c.observe(t(100), &pod("ns/web", "n", None, false));
        assert_eq!(c.check_action(t(120), &delete("ns/web"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        assert!(c.check_action(t(121), &delete("ns/web"), &zone(0.1), false).is_empty());
    }

    /// Found by `rescheduler_steps`: a node posts a heartbeat and is
    /// replaced by an object without status before the next monitor pass.
    /// The controller keeps the record its last pass left (probe at 0 s),
    /// so it may delete from 0 s + timeout; the checker counted from the
    /// new object's creation, since the heartbeat it saw at 400 s was later.
    /// Once a pass has taken that heartbeat in, it does count.
    #[test]
    fn a_heartbeat_no_pass_took_in_is_not_the_controllers_probe() {
        let config = ControllerConfig {
            enable_taint_manager: false,
            pod_eviction_timeout: Span::from_secs(90),
            ..ControllerConfig::default()
        };
        let run = |pass_after_the_heartbeat: bool| {
            let mut c = InvariantChecker::new(&config);
            let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::True, vec![]) else { unreachable!() };
            c.observe(t(0), &Observation::NodeUpserted(n.clone()));
            c.observe(t(0), &pod("ns/web", "n", None, false));
            c.monitor_passed();
            n.conditions[0].last_heartbeat = t(400);
            c.observe(t(400), &Observation::NodeUpserted(n.clone()));
            if pass_after_the_heartbeat {
                c.monitor_passed();
            }
            n.created = t(380);
            n.conditions.clear();
            c.observe(t(400), &Observation::NodeUpserted(n));
            c.check_action(t(405), &delete("ns/web"), &zone(0.1), false)
        };
        assert!(run(false).is_empty(), "{:?}", run(false));
        // Counted from the new object's creation: 380 s + 90 s.
        assert_eq!(run(true).len(), 1);
    }

    #[test]
    fn both_taints_set_by_someone_else_are_not_the_controllers_doing() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        let not_ready = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        c.observe(t(0), &node("a", ConditionStatus::Unknown, vec![not_ready, unreachable()]));
        let noschedule = Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoSchedule);
        let v = c.check_action(t(1), &taint_patch("a", vec![noschedule], vec![]), &zone(0.1), false);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn the_controllers_own_unknown_write_is_no_heartbeat() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut c = InvariantChecker::new(&config);
        // A node that never posted status, created long ago.
        let mut never = match node("n", ConditionStatus::Unknown, vec![]) {
            Observation::NodeUpserted(n) => n,
            _ => unreachable!(),
        };
        never.conditions.clear();
        c.observe(t(0), &Observation::NodeUpserted(never.clone()));
        c.observe(t(0), &pod("ns/web", "n", None, false));
        let written = vec![NodeCondition {
            kind: ConditionType::Ready,
            status: ConditionStatus::Unknown,
            reason: "NodeStatusNeverUpdated".into(),
            message: String::new(),
            last_heartbeat: t(-3600),
            last_transition: t(0),
        }];
        let write = Action {
            id: ActionId(3),
            kind: ActionKind::UpdateNodeConditions { node: "n".into(), conditions: written.clone(), version: 0 },
        };
        assert!(c.check_action(t(0), &write, &zone(0.1), false).is_empty());
        never.conditions = written;
        c.observe(t(0), &Observation::NodeUpserted(never));
        c.end_step(false);
        // Counted from creation (-3600 s), the 300 s timeout is long past.
        assert!(c.check_action(t(5), &delete("ns/web"), &zone(0.1), false).is_empty());
    }

    #[test]
    fn after_a_restart_a_node_without_ready_counts_from_its_creation() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut c = InvariantChecker::new(&config);
        let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::Unknown, vec![]) else { unreachable!() };
        // Created an hour ago; a heartbeat seen at 200 s and taken in by
        // a pass, then someone removes the Ready condition.
        c.observe(t(200), &Observation::NodeUpserted(n.clone()));
        c.observe(t(200), &pod("ns/web", "n", None, false));
        c.monitor_passed();
        n.conditions.clear();
        c.observe(t(210), &Observation::NodeUpserted(n));
        let written = [NodeCondition {
            kind: ConditionType::Ready,
            status: ConditionStatus::Unknown,
            reason: "NodeStatusNeverUpdated".into(),
            message: String::new(),
            last_heartbeat: t(-3600),
            last_transition: t(215),
        }];
        c.own_condition_write("n", &written);
        // The same controller goes by the heartbeat it saw.
        assert_eq!(c.check_action(t(215), &delete("ns/web"), &zone(0.1), false).len(), 1);
        c.end_step(false);
        // A restarted one cannot tell the node from one that never posted
        // status, and counts from its creation, as upstream does.
        let mut r = InvariantChecker::new(&config);
        let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::Unknown, vec![]) else { unreachable!() };
        r.observe(t(200), &Observation::NodeUpserted(n.clone()));
        r.observe(t(200), &pod("ns/web", "n", None, false));
        n.conditions.clear();
        r.observe(t(210), &Observation::NodeUpserted(n));
        r.controller_restarted();
        r.own_condition_write("n", &written);
        assert!(r.check_action(t(215), &delete("ns/web"), &zone(0.1), false).is_empty());
    }

    /// Found by `engine_steps`: a node first seen Ready loses the
    /// condition before any monitor pass has looked at it. The
    /// controller's first pass makes its record from the snapshot without
    /// Ready, so it counts from the creation; the checker counted from the
    /// first sight and held back upstream's legacy deletion.
    #[test]
    fn a_node_that_loses_ready_before_its_first_pass_counts_from_its_creation() {
        let config = ControllerConfig {
            enable_taint_manager: false,
            pod_eviction_timeout: Span::from_secs(90),
            ..ControllerConfig::default()
        };
        let run = |pass_before_the_removal: bool| {
            let mut c = InvariantChecker::new(&config);
            let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::True, vec![]) else { unreachable!() };
            n.created = t(-1);
            c.observe(t(0), &Observation::NodeUpserted(n.clone()));
            c.observe(t(0), &pod("ns/web", "n", None, false));
            if pass_before_the_removal {
                c.monitor_passed();
            }
            n.conditions.clear();
            c.observe(t(0), &Observation::NodeUpserted(n));
            c.monitor_passed();
            c.check_action(t(90), &delete("ns/web"), &zone(0.1), false).len()
        };
        assert_eq!(run(false), 0, "counted from the creation at -1 s");
        assert_eq!(run(true), 1, "the pass took in Ready at 0 s: not before 90 s");
    }

    #[test]
    fn a_node_created_again_under_its_name_may_count_from_its_creation() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut c = InvariantChecker::new(&config);
        let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::Unknown, vec![]) else { unreachable!() };
        n.created = t(100);
        // The first object posts Ready=Unknown at 200 s: its heartbeat is
        // seen then.
        c.observe(t(200), &Observation::NodeUpserted(n.clone()));
        c.observe(t(200), &pod("ns/web", "n", None, false));
        // A different object under the same name, created long ago and
        // without status: counted from its own creation, not from the old
        // object's heartbeat.
        let mut again = n.clone();
        again.created = t(-3600);
        again.conditions.clear();
        c.observe(t(200), &Observation::NodeUpserted(again));
        c.own_condition_write(
            "n",
            &[NodeCondition {
                kind: ConditionType::Ready,
                status: ConditionStatus::Unknown,
                reason: "NodeStatusNeverUpdated".into(),
                message: String::new(),
                last_heartbeat: t(-3600),
                last_transition: t(205),
            }],
        );
        assert!(c.check_action(t(205), &delete("ns/web"), &zone(0.1), false).is_empty());
        // The same object seen again changes nothing: still counted from
        // the first heartbeat seen.
        c.end_step(false);
        let mut same = InvariantChecker::new(&config);
        same.observe(t(200), &Observation::NodeUpserted(n.clone()));
        same.observe(t(200), &pod("ns/web", "n", None, false));
        same.observe(t(201), &Observation::NodeUpserted(n));
        assert_eq!(same.check_action(t(205), &delete("ns/web"), &zone(0.1), false).len(), 1);
    }

    #[test]
    fn duplicate_writes_in_one_step_are_caught() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        c.observe(t(0), &node("n", ConditionStatus::Unknown, vec![]));
        let a = taint_patch("n", vec![], vec![unreachable()]);
        assert!(c.check_action(t(1), &a, &zone(0.1), false).is_empty());
        let v = c.check_action(t(1), &a, &zone(0.1), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::NoDuplicateInFlightWrite), "{v:?}");
        c.end_step(false);
        assert!(c.check_action(t(2), &a, &zone(0.1), false).is_empty());
        assert_eq!(c.verdicts().iter().filter(|(_, ok)| !ok).count(), 1);
    }

    fn rescheduling() -> ControllerConfig {
        ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() }
    }

    #[test]
    fn protected_pods_are_never_evicted_for_an_addon() {
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("n", ConditionStatus::True, vec![]));
        let mut terminating = scheduled_pod("default/leaving", Some("n"), false, false);
        terminating.terminating = true;
        let mut ds = scheduled_pod("default/ds", Some("n"), false, false);
        ds.daemonset = true;
        for p in [
            scheduled_pod("kube-system/metrics", Some("n"), true, false),
            scheduled_pod("default/static", Some("n"), false, true),
            ds,
            terminating,
            scheduled_pod("default/web", Some("n"), false, false),
        ] {
            c.observe(t(0), &Observation::PodUpserted(p));
        }
        for key in ["kube-system/metrics", "default/static", "default/ds", "default/leaving"] {
            let v = c.check_action(t(1), &evict_for_addon(key), &zone(0.1), false);
            assert_eq!(
                v.iter().map(|v| v.invariant).collect::<Vec<_>>(),
                [Invariant::NoProtectedPodEvictedForAddon],
                "{key}"
            );
        }
        assert!(c.check_action(t(1), &evict_for_addon("default/web"), &zone(0.1), false).is_empty());
    }

    #[test]
    fn at_most_one_node_carries_the_reservation() {
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("a", ConditionStatus::True, vec![reservation()]));
        c.observe(t(0), &node("b", ConditionStatus::True, vec![]));
        let v = c.check_action(t(1), &reservation_patch("b", true), &zone(0.1), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::AtMostOneNodePrepared), "{v:?}");
        c.end_step(false);
        // Released first, in the same step: then b may be prepared.
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("a", ConditionStatus::True, vec![reservation()]));
        c.observe(t(0), &node("b", ConditionStatus::True, vec![]));
        assert!(c.check_action(t(1), &reservation_patch("a", false), &zone(0.1), false).is_empty());
        assert!(c.check_action(t(1), &reservation_patch("b", true), &zone(0.1), false).is_empty());
        // Someone else's CriticalAddonsOnly taint is not nodewarden's.
        let mut c = InvariantChecker::new(&rescheduling());
        let foreign = Taint { value: "true".into(), ..reservation() };
        c.observe(t(0), &node("a", ConditionStatus::True, vec![foreign]));
        c.observe(t(0), &node("b", ConditionStatus::True, vec![]));
        assert!(c.check_action(t(1), &reservation_patch("b", true), &zone(0.1), false).is_empty());
    }

    #[test]
    fn nothing_is_rescheduled_while_every_zone_is_down() {
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("n", ConditionStatus::True, vec![]));
        c.observe(t(0), &Observation::PodUpserted(scheduled_pod("default/web", Some("n"), false, false)));
        assert!(
            c.check_action(t(1), &evict_for_addon("default/web"), &zone(0.1), true).is_empty(),
            "not yet a whole step"
        );
        c.end_step(true);
        let v = c.check_action(t(2), &evict_for_addon("default/web"), &zone(0.1), true);
        assert!(v.iter().any(|v| v.invariant == Invariant::NoReschedulingWhileAllZonesDown), "{v:?}");
        let v = c.check_action(t(2), &reservation_patch("n", true), &zone(0.1), true);
        assert!(v.iter().any(|v| v.invariant == Invariant::NoReschedulingWhileAllZonesDown), "{v:?}");
        assert!(c.check_action(t(2), &reservation_patch("n", false), &zone(0.1), true).is_empty(), "a release is fine");
    }

    #[test]
    fn a_reservation_left_behind_when_no_addon_waits_is_reported() {
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("n", ConditionStatus::True, vec![reservation()]));
        c.observe(t(0), &Observation::PodUpserted(scheduled_pod("kube-system/dns", None, true, false)));
        // While the addon waits, the reservation is legitimate.
        for s in 0..=60 {
            c.observe(t(s), &Observation::LeaseUpserted { node: "n".into(), renew: Some(t(s)) });
            c.end_step(false);
            assert!(c.step_violations().is_empty());
        }
        // Bound at 60 s; the taint stays: 2 × 10 s later it is reported, once.
        c.observe(t(60), &Observation::PodUpserted(scheduled_pod("kube-system/dns", Some("n"), true, false)));
        let mut found = Vec::new();
        for s in 60..=120 {
            c.observe(t(s), &Observation::LeaseUpserted { node: "n".into(), renew: Some(t(s)) });
            c.end_step(false);
            found.extend(c.step_violations().iter().map(|v| (v.at, v.invariant)));
        }
        assert_eq!(found, vec![(t(81), Invariant::NoReservationLeftBehind)]);
        assert_eq!(c.broken().get(&Invariant::NoReservationLeftBehind), Some(&1));
        // Released in time: nothing.
        let mut c = InvariantChecker::new(&rescheduling());
        c.observe(t(0), &node("n", ConditionStatus::True, vec![reservation()]));
        c.end_step(false);
        c.commit(t(10), &reservation_patch("n", false), &zone(0.1));
        c.end_step(false);
        c.observe(t(100), &Observation::LeaseUpserted { node: "n".into(), renew: Some(t(100)) });
        c.end_step(false);
        assert!(c.broken().is_empty());
    }
}
