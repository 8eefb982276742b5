//! kube-controller-manager's side of a comparison: its decisions, read
//! from the changes the API server shows.
//!
//! kube-controller-manager publishes no record of what it decided; what it
//! decided is what it changed. This module keeps, per node, only what
//! tells those changes apart: the Ready status, which of the four node
//! lifecycle taints the node carries, its zone, and whether this episode
//! (from the node leaving Ready until it is Ready again) has already shown
//! its pods marked not Ready or, in legacy mode, deleted. Of pods it keeps
//! only the keys of those seen terminating, until they are gone: a million
//! pods cost nothing while they run.
//!
//! The changes, once the first list is in:
//!
//! - Ready turned Unknown with reason `NodeStatusUnknown`: `unknown`, at
//!   the condition's `lastTransitionTime`.
//! - A lifecycle taint newly present: its kind, at its `timeAdded` (the
//!   observation's time when it has none).
//! - A pod seen not Ready on a node not Ready here: `pods-not-ready`, once
//!   per node and episode, at the observation's time.
//! - A pod seen terminating for the first time: on a node with a lifecycle
//!   NoExecute taint, the taint manager's `pod-deletion` of that pod; in
//!   legacy mode on a node not Ready, the node's `legacy-deletion`, once
//!   per episode; otherwise an ordinary deletion by a user or a workload,
//!   not compared. A pod removed outright, without being seen terminating
//!   first, counts the same when it was seen marked not Ready on a node
//!   not Ready; otherwise (a force deletion of a pod nobody marked) it is
//!   not attributed to anyone.
//!
//! Lease renewals (`renewTime`, kept to the microsecond) and stamped
//! changes (the Unknown, a taint with `timeAdded`) measure the watch's
//! latency. A node not Ready when first seen, or when the first
//! list is in, was in trouble before the shadow looked: its changes are
//! excused until it is Ready again.

use std::collections::{BTreeMap, HashMap, HashSet};

use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::condition::REASON_STATUS_UNKNOWN;
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, Span, Timestamp, ZoneKey};

use crate::kind::DecisionKind;
use crate::pace::ZonePace;

/// A decision kube-controller-manager made, as the shadow saw it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    /// The kind of decision.
    pub kind: DecisionKind,
    /// The node, or the pod for a pod deletion.
    pub object: Box<str>,
    /// The node (the pod's node for a pod deletion).
    pub node: Box<str>,
    /// kube-controller-manager's time: its stamp, or when it was seen.
    pub at: Timestamp,
    /// How much later than `at` the decision may have been: the API keeps
    /// `lastTransitionTime` and `timeAdded` to the second, so a stamp
    /// with no fraction stands for any instant of that second (up to when
    /// it was seen); zero for a time the shadow took itself.
    pub spread: Span,
}

/// kube-controller-manager's time from a `stamp` seen at `seen`: the stamp
/// and how much later the decision may have been ([`Change::spread`]).
pub(crate) fn stamped(stamp: Timestamp, seen: Timestamp) -> (Timestamp, Span) {
    const SECOND: i64 = 1_000_000_000;
    if stamp.as_nanos() % SECOND != 0 || seen <= stamp {
        return (stamp, Span::ZERO);
    }
    (stamp, (seen - stamp).min(Span::from_secs(1)))
}

/// How long before its node was seen not Ready a pod seen marked not
/// Ready still counts as that node's marks: kube-controller-manager marks
/// pods right after it writes the node Unknown, and the pod watch may
/// deliver the marks before the node watch delivers the Unknown.
const MARKS_AHEAD_OF_NODE: Span = Span::from_secs(10);

/// What one observation showed of kube-controller-manager.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Seen {
    /// A decision to compare.
    Decision(Change),
    /// A decision about a node already in trouble when first seen: left
    /// out by the restart rule, counted.
    Excused,
    /// A stamped change seen this long after its stamp.
    Latency(Span),
    /// The node is Ready again: its episode is over, and the next one is
    /// compared afresh.
    EpisodeEnded(Box<str>),
    /// A rate-limited NoExecute taint (no swap) in the zone of this index,
    /// at this time: a place in the zone's queue (`slots`).
    Slot(usize, Timestamp),
}

/// The four lifecycle taints, one bit each.
const NO_SCHEDULE_NOT_READY: u8 = 1;
const NO_SCHEDULE_UNREACHABLE: u8 = 2;
const NO_EXECUTE_NOT_READY: u8 = 4;
const NO_EXECUTE_UNREACHABLE: u8 = 8;
const NO_EXECUTE: u8 = NO_EXECUTE_NOT_READY | NO_EXECUTE_UNREACHABLE;

fn bit_of(kind: DecisionKind) -> u8 {
    match kind {
        DecisionKind::NoScheduleNotReady => NO_SCHEDULE_NOT_READY,
        DecisionKind::NoScheduleUnreachable => NO_SCHEDULE_UNREACHABLE,
        DecisionKind::NoExecuteNotReady => NO_EXECUTE_NOT_READY,
        DecisionKind::NoExecuteUnreachable => NO_EXECUTE_UNREACHABLE,
        _ => 0,
    }
}

/// One node, as little of it as tells kube-controller-manager's changes
/// apart.
#[derive(Clone, Debug)]
struct NodeView {
    /// `metadata.resourceVersion`: an older snapshot is passed over.
    version: u64,
    /// Ready's status; `None` without a Ready condition.
    ready: Option<ConditionStatus>,
    /// Which lifecycle taints it carries.
    taints: u8,
    /// Index of its zone in [`Upstream::zones`].
    zone: usize,
    /// Not Ready when first seen (or first seen so by nodewarden): its
    /// decisions are excused until it is Ready again.
    pre_existing: bool,
    /// This episode has shown its pods marked not Ready.
    pods_not_ready: bool,
    /// This episode has shown a legacy deletion of its pods.
    legacy_deleted: bool,
    /// A pod seen marked not Ready while this node was Ready here: the
    /// first such sighting of a burst, in case the node's Unknown follows
    /// ([`MARKS_AHEAD_OF_NODE`]).
    marked_ahead: Option<Timestamp>,
}

impl NodeView {
    fn is_ready(&self) -> bool {
        self.ready == Some(ConditionStatus::True)
    }
}

/// kube-controller-manager's side, read from observations.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// Legacy mode (`enable-taint-manager: false`): terminating pods on
    /// not Ready nodes are legacy deletions.
    legacy: bool,
    /// The first list is in: changes are reported from now on.
    synced: bool,
    nodes: HashMap<Box<str>, NodeView>,
    /// Pods seen terminating and not yet gone.
    terminating: HashSet<Box<str>>,
    /// Pods seen marked not Ready on a node that is not Ready, by key, with
    /// their node: a pod removed outright (no graceful termination, as a
    /// force deletion or a server that finalizes at once) is attributed by
    /// its node if it is one of these. Bounded by the pods of nodes in
    /// trouble; a pod seen Ready again leaves.
    doomed: HashMap<Box<str>, Box<str>>,
    /// Every zone seen, with kube-controller-manager's tainting pace in it.
    zones: Vec<(ZoneKey, ZonePace)>,
}

impl Upstream {
    /// An empty view for a controller configured as `config`.
    pub fn new(config: &ControllerConfig) -> Upstream {
        Upstream {
            legacy: !config.enable_taint_manager,
            synced: false,
            nodes: HashMap::new(),
            terminating: HashSet::new(),
            doomed: HashMap::new(),
            zones: Vec::new(),
        }
    }

    /// The first list is in: what was seen so far is the baseline, and a
    /// node not Ready in it was in trouble before the comparison began
    /// (whatever it showed at its first sight).
    pub fn synced(&mut self) {
        self.synced = true;
        for view in self.nodes.values_mut() {
            view.pre_existing |= !view.is_ready();
        }
    }

    /// Takes `obs`, seen at `now`, in; what it showed goes to `out`.
    pub fn observe(&mut self, now: Timestamp, obs: &Observation, out: &mut Vec<Seen>) {
        match obs {
            Observation::NodeUpserted(node) => self.node(now, node, out),
            Observation::NodeDeleted { name } => {
                self.nodes.remove(name.as_str());
            }
            Observation::PodUpserted(pod) => self.pod(now, pod, out),
            Observation::PodDeleted { key } => {
                if !self.terminating.remove(key.as_str())
                    && let Some(node) = self.doomed.remove(key.as_str())
                    && self.synced
                {
                    self.deleted(now, key.as_str(), &node, out);
                }
            }
            // A renewal's `renewTime` is kept to the microsecond: how late
            // the watch delivers it is the watch latency every sighting
            // here has (with the node's clock skew in it).
            Observation::LeaseUpserted { renew: Some(renew), .. } if self.synced => {
                out.push(Seen::Latency(now - *renew));
            }
            _ => {}
        }
    }

    /// True when decisions about `node` are excused: it was not Ready
    /// when first seen, and has not been Ready since.
    pub fn is_pre_existing(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|n| n.pre_existing)
    }

    /// Marks `node` as in trouble before the shadow (or nodewarden) looked,
    /// until it is Ready again. False when it already was, or is unknown.
    pub fn mark_pre_existing(&mut self, node: &str) -> bool {
        match self.nodes.get_mut(node) {
            Some(n) if !n.pre_existing => {
                n.pre_existing = true;
                true
            }
            _ => false,
        }
    }

    /// The zone index of a node with `labels`, adding the zone when new;
    /// `hint` is the node's zone so far (labels rarely change).
    fn zone_of(&mut self, labels: &BTreeMap<String, String>, hint: Option<usize>) -> usize {
        if let Some(i) = hint
            && self.zones.get(i).is_some_and(|(z, _)| z.is_of(labels))
        {
            return i;
        }
        if let Some(i) = self.zones.iter().position(|(z, _)| z.is_of(labels)) {
            return i;
        }
        self.zones.push((ZoneKey::from_labels(labels), ZonePace::default()));
        self.zones.len() - 1
    }

    fn node(&mut self, now: Timestamp, snap: &NodeSnapshot, out: &mut Vec<Seen>) {
        let ready = snap.conditions.iter().find(|c| c.kind == ConditionType::Ready);
        let status = ready.map(|c| c.status);
        let mut taints = 0u8;
        let mut stamps: [Option<Timestamp>; 4] = [None; 4];
        for t in &snap.taints {
            if let Some(kind) = DecisionKind::of_taint(&t.key, t.effect) {
                let bit = bit_of(kind);
                taints |= bit;
                stamps[bit.trailing_zeros() as usize] = t.time_added;
            }
        }
        let name: &str = &snap.name;
        let hint = self.nodes.get(name).map(|n| n.zone);
        if let Some(n) = self.nodes.get(name)
            && snap.version != 0
            && snap.version < n.version
        {
            return;
        }
        let zone = self.zone_of(&snap.labels, hint);
        let Some(view) = self.nodes.get_mut(name) else {
            // First sight: the baseline of this node. One not Ready was
            // in trouble before the shadow looked.
            let view = NodeView {
                version: snap.version,
                ready: status,
                taints,
                zone,
                pre_existing: status != Some(ConditionStatus::True),
                pods_not_ready: false,
                legacy_deleted: false,
                marked_ahead: None,
            };
            self.nodes.insert(name.into(), view);
            return;
        };
        let (was, had) = (view.ready, view.taints);
        view.version = snap.version;
        view.ready = status;
        view.taints = taints;
        view.zone = zone;
        if status == Some(ConditionStatus::True) {
            let episode = was != Some(ConditionStatus::True) || view.pre_existing;
            view.pre_existing = false;
            view.pods_not_ready = false;
            view.legacy_deleted = false;
            if episode {
                out.push(Seen::EpisodeEnded(name.into()));
            }
        }
        if !self.synced {
            return;
        }
        let excused = view.pre_existing;
        let report = |out: &mut Vec<Seen>, kind: DecisionKind, (at, spread): (Timestamp, Span)| {
            out.push(if excused {
                Seen::Excused
            } else {
                Seen::Decision(Change { kind, object: name.into(), node: name.into(), at, spread })
            });
        };
        let marked_ahead = view.marked_ahead.take();
        if was == Some(ConditionStatus::True) && status != Some(ConditionStatus::True) {
            // The node's pods were seen marked before the node itself.
            if let Some(t) = marked_ahead.filter(|&t| now - t <= MARKS_AHEAD_OF_NODE) {
                view.pods_not_ready = true;
                report(out, DecisionKind::PodsNotReady, (t, Span::ZERO));
            }
        }
        if let Some(c) = ready
            && c.status == ConditionStatus::Unknown
            && was != Some(ConditionStatus::Unknown)
            && c.reason == REASON_STATUS_UNKNOWN
        {
            let (at, spread) = stamped(c.last_transition, now);
            out.push(Seen::Latency(now - (at + spread)));
            report(out, DecisionKind::Unknown, (at, spread));
        }
        let added = taints & !had;
        for kind in DecisionKind::ALL {
            let bit = bit_of(kind);
            if bit == 0 || added & bit == 0 {
                continue;
            }
            let stamp = stamps[bit.trailing_zeros() as usize];
            let (at, spread) = stamp.map_or((now, Span::ZERO), |s| stamped(s, now));
            if stamp.is_some() {
                out.push(Seen::Latency(now - (at + spread)));
            }
            // A swap from the opposite NoExecute taint is not rate
            // limited: it says nothing of the zone's pace.
            if bit & NO_EXECUTE != 0 && had & NO_EXECUTE == 0 {
                self.zones[zone].1.add(at);
                if !excused {
                    out.push(Seen::Slot(zone, at));
                }
            }
            report(out, kind, (at, spread));
        }
    }

    fn pod(&mut self, now: Timestamp, pod: &PodSnapshot, out: &mut Vec<Seen>) {
        if !self.synced {
            // The baseline: pods already terminating are nobody's
            // decision that the shadow saw.
            if pod.terminating {
                self.terminating.insert(pod.key.as_str().into());
            }
            return;
        }
        let Some(node_name) = pod.node.as_deref() else { return };
        // Looked up before it is inserted: a terminating pod's every update
        // would otherwise allocate its key.
        let newly_terminating = pod.terminating
            && !self.terminating.contains(pod.key.as_str())
            && self.terminating.insert(pod.key.as_str().into());
        let Some(view) = self.nodes.get_mut(node_name) else { return };
        let doomed = pod.ready == Some(false) && !view.is_ready() && !pod.terminating;
        if doomed != self.doomed.contains_key(pod.key.as_str()) {
            if doomed {
                self.doomed.insert(pod.key.as_str().into(), node_name.into());
            } else {
                self.doomed.remove(pod.key.as_str());
            }
        }
        let node_keyed =
            |kind| Change { kind, object: node_name.into(), node: node_name.into(), at: now, spread: Span::ZERO };
        if pod.ready == Some(false) && view.is_ready() && !view.pre_existing {
            if view.marked_ahead.is_none_or(|t| now - t > MARKS_AHEAD_OF_NODE) {
                view.marked_ahead = Some(now);
            }
        } else if pod.ready == Some(false) && !view.is_ready() && !view.pods_not_ready {
            view.pods_not_ready = true;
            out.push(if view.pre_existing {
                Seen::Excused
            } else {
                Seen::Decision(node_keyed(DecisionKind::PodsNotReady))
            });
        }
        if newly_terminating {
            self.deleted(now, pod.key.as_str(), node_name, out);
        }
    }

    /// Pod `key` on `node` seen going at `now` (terminating, or removed
    /// outright): the taint manager's deletion on a node with a lifecycle
    /// NoExecute taint, legacy eviction's on a node not Ready in legacy
    /// mode, or nobody's.
    fn deleted(&mut self, now: Timestamp, key: &str, node_name: &str, out: &mut Vec<Seen>) {
        let legacy = self.legacy;
        let Some(view) = self.nodes.get_mut(node_name) else { return };
        let node_keyed =
            |kind| Change { kind, object: node_name.into(), node: node_name.into(), at: now, spread: Span::ZERO };
        if view.taints & NO_EXECUTE != 0 {
            out.push(if view.pre_existing {
                Seen::Excused
            } else {
                Seen::Decision(Change {
                    kind: DecisionKind::PodDeletion,
                    object: key.into(),
                    node: node_name.into(),
                    at: now,
                    spread: Span::ZERO,
                })
            });
        } else if legacy && !view.is_ready() && !view.legacy_deleted {
            view.legacy_deleted = true;
            out.push(if view.pre_existing {
                Seen::Excused
            } else {
                Seen::Decision(node_keyed(DecisionKind::LegacyDeletion))
            });
        }
    }

    /// The report name of the zone of this index.
    pub fn zone_name(&self, zone: usize) -> Option<String> {
        self.zones.get(zone).map(|(key, _)| crate::facts::zone_name(key))
    }

    /// The report name of `node`'s zone, if the node is known.
    pub fn zone_name_of_node(&self, node: &str) -> Option<String> {
        self.nodes.get(node).and_then(|n| self.zone_name(n.zone))
    }

    /// Every zone seen, with kube-controller-manager's pace in it.
    pub fn zones(&self) -> impl Iterator<Item = &(ZoneKey, ZonePace)> {
        self.zones.iter()
    }

    /// Nodes known.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Pods seen terminating and not yet gone, and pods of nodes in
    /// trouble seen marked not Ready.
    pub fn terminating(&self) -> usize {
        self.terminating.len() + self.doomed.len()
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::PodSnapshot;
    use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
    use nodewarden_model::{NodeCondition, Taint, TaintEffect};

    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 + s)
    }

    fn node(
        name: &str,
        status: ConditionStatus,
        reason: &str,
        since: i64,
        taints: &[(&str, TaintEffect)],
    ) -> Observation {
        let mut n = NodeSnapshot::new(name, t(-1000)).in_zone("z1");
        n.conditions = vec![NodeCondition::posted(ConditionType::Ready, status, reason, t(since), t(since))];
        n.taints = taints
            .iter()
            .map(|(k, e)| Taint { time_added: (*e == TaintEffect::NoExecute).then(|| t(since)), ..Taint::new(*k, *e) })
            .collect();
        Observation::NodeUpserted(n)
    }

    fn ready(name: &str) -> Observation {
        node(name, ConditionStatus::True, "KubeletReady", 0, &[])
    }

    fn unknown(name: &str, since: i64, taints: &[(&str, TaintEffect)]) -> Observation {
        node(name, ConditionStatus::Unknown, REASON_STATUS_UNKNOWN, since, taints)
    }

    fn pod(key: &str, node: &str, ready: bool, terminating: bool) -> Observation {
        let mut p = PodSnapshot::new(key, "uid", Some(node));
        p.ready = Some(ready);
        p.terminating = terminating;
        Observation::PodUpserted(p)
    }

    fn decisions(seen: &[Seen]) -> Vec<(DecisionKind, &str, Timestamp)> {
        seen.iter()
            .filter_map(|s| match s {
                Seen::Decision(c) => Some((c.kind, &*c.object, c.at)),
                _ => None,
            })
            .collect()
    }

    fn synced_with(config: &ControllerConfig, baseline: &[Observation]) -> Upstream {
        let mut u = Upstream::new(config);
        let mut out = Vec::new();
        for o in baseline {
            u.observe(t(0), o, &mut out);
        }
        u.synced();
        u
    }

    #[test]
    fn unknown_and_taints_are_reported_at_their_stamps_with_the_latency() {
        let mut u = synced_with(&ControllerConfig::default(), &[ready("n1")]);
        let mut out = Vec::new();
        u.observe(t(52), &unknown("n1", 50, &[(TAINT_UNREACHABLE, TaintEffect::NoSchedule)]), &mut out);
        assert_eq!(
            decisions(&out),
            [(DecisionKind::Unknown, "n1", t(50)), (DecisionKind::NoScheduleUnreachable, "n1", t(52))],
            "the NoSchedule taint has no stamp: seen at 52"
        );
        // A stamp kept to the second stands for any instant of it: the
        // latency is what is left after that second.
        assert!(out.contains(&Seen::Latency(Span::from_secs(1))), "{out:?}");
        assert_eq!(stamped(t(50), t(52)), (t(50), Span::from_secs(1)));
        assert_eq!(stamped(t(50), t(50) + Span::from_millis(300)), (t(50), Span::from_millis(300)));
        let fine = t(50) + Span::from_millis(250);
        assert_eq!(stamped(fine, t(52)), (fine, Span::ZERO), "a stamp with a fraction is exact");
        out.clear();
        let both = [(TAINT_UNREACHABLE, TaintEffect::NoSchedule), (TAINT_UNREACHABLE, TaintEffect::NoExecute)];
        u.observe(t(61), &unknown("n1", 60, &both), &mut out);
        assert_eq!(decisions(&out), [(DecisionKind::NoExecuteUnreachable, "n1", t(60))], "only what is new");
        assert_eq!(u.zones().next().unwrap().1.taints, 1);
    }

    #[test]
    fn pod_deletions_are_attributed_by_the_nodes_taints_and_mode() {
        let config = ControllerConfig::default();
        let mut u = synced_with(&config, &[ready("ok"), ready("tainted")]);
        let mut out = Vec::new();
        u.observe(t(60), &unknown("tainted", 60, &[(TAINT_UNREACHABLE, TaintEffect::NoExecute)]), &mut out);
        out.clear();
        u.observe(t(70), &pod("ns/a", "tainted", false, true), &mut out);
        u.observe(t(71), &pod("ns/a", "tainted", false, true), &mut out);
        u.observe(t(72), &pod("ns/b", "ok", true, true), &mut out);
        let got = decisions(&out);
        assert_eq!(
            got,
            [(DecisionKind::PodsNotReady, "tainted", t(70)), (DecisionKind::PodDeletion, "ns/a", t(70))],
            "once per pod; an ordinary deletion on a Ready node is nobody's decision"
        );
        assert_eq!(u.terminating(), 2);
        u.observe(t(80), &Observation::PodDeleted { key: "ns/a".into() }, &mut out);
        assert_eq!(u.terminating(), 1);

        let legacy = ControllerConfig { enable_taint_manager: false, ..config };
        let mut u = synced_with(&legacy, &[ready("n1")]);
        let mut out = Vec::new();
        u.observe(t(60), &unknown("n1", 60, &[]), &mut out);
        out.clear();
        for i in 0..3 {
            u.observe(t(400 + i), &pod(&format!("ns/p{i}"), "n1", true, true), &mut out);
        }
        assert_eq!(decisions(&out), [(DecisionKind::LegacyDeletion, "n1", t(400))], "once per node per episode");
        out.clear();
        u.observe(t(500), &ready("n1"), &mut out);
        assert_eq!(out, [Seen::EpisodeEnded("n1".into())]);
        u.observe(t(600), &unknown("n1", 600, &[]), &mut out);
        u.observe(t(900), &pod("ns/q", "n1", true, true), &mut out);
        assert_eq!(decisions(&out).last(), Some(&(DecisionKind::LegacyDeletion, "n1", t(900))), "a new episode");
    }

    #[test]
    fn a_lease_renewal_seen_late_measures_the_watch_latency() {
        let mut u = synced_with(&ControllerConfig::default(), &[ready("n1")]);
        let mut out = Vec::new();
        let renew = t(100) + Span::from_millis(250);
        u.observe(t(102), &Observation::LeaseUpserted { node: "n1".into(), renew: Some(renew) }, &mut out);
        assert_eq!(out, [Seen::Latency(Span::from_millis(1_750))]);
    }

    #[test]
    fn a_pod_removed_outright_counts_when_it_was_seen_marked_on_its_node_in_trouble() {
        let mut u = synced_with(&ControllerConfig::default(), &[ready("ok"), ready("tainted")]);
        let mut out = Vec::new();
        u.observe(t(60), &unknown("tainted", 60, &[(TAINT_UNREACHABLE, TaintEffect::NoExecute)]), &mut out);
        u.observe(t(61), &pod("ns/a", "tainted", false, false), &mut out);
        u.observe(t(62), &pod("ns/b", "ok", true, false), &mut out);
        assert_eq!(u.terminating(), 1, "one pod of a node in trouble, seen marked");
        out.clear();
        // Removed at once (no graceful termination): the marked one is the
        // taint manager's; the other, unmarked on a Ready node, nobody's.
        u.observe(t(70), &Observation::PodDeleted { key: "ns/a".into() }, &mut out);
        u.observe(t(71), &Observation::PodDeleted { key: "ns/b".into() }, &mut out);
        assert_eq!(decisions(&out), [(DecisionKind::PodDeletion, "ns/a", t(70))]);
        assert_eq!(u.terminating(), 0, "nothing kept of either");
        // A pod marked, then Ready again, is forgotten.
        u.observe(t(80), &pod("ns/c", "tainted", false, false), &mut out);
        u.observe(t(81), &pod("ns/c", "tainted", true, false), &mut out);
        assert_eq!(u.terminating(), 0);
    }

    #[test]
    fn the_baseline_reports_nothing_and_a_node_in_trouble_at_first_sight_is_excused() {
        let baseline = [
            ready("n1"),
            unknown("old", -500, &[(TAINT_NOT_READY, TaintEffect::NoSchedule)]),
            pod("ns/gone", "old", false, true),
        ];
        let mut u = Upstream::new(&ControllerConfig::default());
        let mut out = Vec::new();
        for o in &baseline {
            u.observe(t(0), o, &mut out);
        }
        assert!(out.is_empty(), "{out:?}");
        u.synced();
        assert!(u.is_pre_existing("old") && !u.is_pre_existing("n1"));
        u.observe(t(10), &unknown("old", -500, &[(TAINT_UNREACHABLE, TaintEffect::NoExecute)]), &mut out);
        u.observe(t(11), &pod("ns/gone", "old", false, true), &mut out);
        u.observe(t(12), &pod("ns/new", "old", false, true), &mut out);
        assert!(decisions(&out).is_empty(), "{out:?}");
        assert_eq!(out.iter().filter(|s| **s == Seen::Excused).count(), 3, "the taint, pods not ready, ns/new");
        u.observe(t(20), &ready("old"), &mut out);
        assert!(!u.is_pre_existing("old"), "Ready again: compared from now on");
    }

    #[test]
    fn an_older_snapshot_is_passed_over() {
        let mut u = synced_with(&ControllerConfig::default(), &[]);
        let mut out = Vec::new();
        let versioned = |o: Observation, v: u64| match o {
            Observation::NodeUpserted(mut n) => {
                n.version = v;
                Observation::NodeUpserted(n)
            }
            o => o,
        };
        u.observe(t(0), &versioned(ready("n1"), 5), &mut out);
        u.observe(t(1), &versioned(unknown("n1", 1, &[]), 7), &mut out);
        u.observe(t(2), &versioned(ready("n1"), 6), &mut out);
        assert!(!out.iter().any(|s| matches!(s, Seen::EpisodeEnded(_))), "{out:?}");
    }
}
