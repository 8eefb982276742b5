//! Safety invariants, checked from outside the engine.
//!
//! The checker sees only what crosses the engine's boundary: every
//! [`Observation`](nodewarden_engine::Observation) sent in and every [`Action`] sent out, in order, and the
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
//!
//! One module a concern: `mirror` is the compact record of nodes and
//! pods, `observe` takes observations into it, `judge` weighs an
//! action against it, `zones` follows each zone's rate limiter and
//! `reservation` holds the rescheduler's rules; this file is the public
//! face: the rules, a violation, the checker and its step bookkeeping.

mod judge;
mod mirror;
mod observe;
mod reservation;
mod zones;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The checker's hashed maps: looked up for every observation (a Lease
/// renewal per node every 10 s), never iterated in an order that matters.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use nodewarden_engine::{Action, ActionId, ActionKind, ObjectRef, WriteSlot, ZoneReport};
use nodewarden_model::{CompactName, ControllerConfig, Taint, Timestamp, Toleration, ZoneKey};

use mirror::{NodeMirror, Pods, Shared};
use zones::ZoneBucket;

/// A taint patch in flight: its action, what it adds, what it removes.
type TaintPatch = (ActionId, Vec<Taint>, Vec<Taint>);

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
    /// NoExecute taint patches committed and not yet answered, by node, in
    /// the order issued: they land before any later patch to the node,
    /// whenever their answers come (behind a client rate, steps later).
    /// Taken out by their `WriteFinished`.
    noexecute_in_flight: HashMap<String, Vec<TaintPatch>>,
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
            noexecute_in_flight: HashMap::default(),
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
            ActionKind::PatchNodeTaints { node, add, remove, slot } => {
                // Against the patches ahead of this one, not itself.
                self.commit_zone_taint(now, node, add, zones);
                if *slot == WriteSlot::NoExecuteTaints {
                    let patch = (action.id, add.clone(), remove.clone());
                    self.noexecute_in_flight.entry(node.clone()).or_default().push(patch);
                }
                self.commit_reservation(node, add, remove);
            }
            ActionKind::UpdateNodeConditions { node, conditions, .. } => self.own_condition_write(node, conditions),
            _ => {}
        }
    }

    /// Ends a step: the writes issued in it are no longer in flight (the
    /// driver has applied them and reported their outcome), and the
    /// master-disruption flag is remembered.
    pub fn end_step(&mut self, all_zones_down: bool) {
        self.step_writes.clear();
        self.all_down_before = all_zones_down;
        self.step_violations.clear();
        self.check_idle_reservation();
    }
}
