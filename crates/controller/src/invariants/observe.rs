//! Taking in what the engine is sent: each observation updates the
//! mirror, and the checker follows what the controller's own health record
//! may hold (which heartbeats a monitor pass has taken in, a node object
//! created again, a restart), because a deadline is judged from the
//! earliest time the controller could rightly count from.

use std::collections::hash_map::Entry;

use nodewarden_engine::{ActionId, NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::scheduling::is_critical_addon;
use nodewarden_model::taint::Decision;
use nodewarden_model::{CompactName, ConditionType, NodeCondition, Taint, Timestamp, Toleration, ZoneKey};

use super::mirror::{NO_NODE, NodeMirror, PodMirror};
use super::reservation::is_reservation;
use super::{HashMap, InvariantChecker};

/// Whether a snapshot at `version` is older than the `held` one (both
/// known): such a late event would take the mirror back in time. (An equal
/// one is the same object again: taking it in changes nothing here.)
fn is_older(version: u64, held: u64) -> bool {
    version != 0 && held != 0 && version < held
}

impl InvariantChecker {
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
            Observation::NodeUpserted(n) => self.upsert_node(now, n),
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
                        n.beat(now, self.passes, true);
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
            Observation::WriteFinished { id, .. } => self.answered(*id),
            // The rescheduler's rules read budgets; node lifecycle's do not.
            Observation::BudgetUpserted(_) | Observation::BudgetDeleted { .. } => {}
        }
    }

    /// The write `id` was answered (done, refused or withdrawn): a
    /// NoExecute taint patch among them is no longer in flight; what it
    /// did shows in the node as observed.
    fn answered(&mut self, id: ActionId) {
        // Few are in flight at once (a zone's limiter paces them), and the
        // answered one is usually the oldest of its node's.
        let mut emptied = None;
        for (node, patches) in &mut self.noexecute_in_flight {
            if let Some(i) = patches.iter().position(|(p, _, _)| *p == id) {
                patches.remove(i);
                if patches.is_empty() {
                    emptied = Some(node.clone());
                }
                break;
            }
        }
        if let Some(node) = emptied {
            self.noexecute_in_flight.remove(&node);
        }
    }

    /// A node snapshot: its mirror found or made, its heartbeat and Ready
    /// fields taken in, its reservation noted, and its pods sampled again
    /// when its taints changed.
    fn upsert_node(&mut self, now: Timestamp, n: &NodeSnapshot) {
        if self.nodes.get(n.name.as_str()).is_some_and(|m| is_older(n.version, m.version)) {
            return;
        }
        let ready = n.conditions.iter().find(|c| c.kind == ConditionType::Ready);
        let passes = self.passes;
        let (entry, known) = node_entry(&mut self.nodes, now, n, ready, passes);
        // No pass has made the controller's record of this node
        // yet, and the snapshot it will make it from has no Ready
        // condition: upstream's `tryUpdateNodeHealth` then counts
        // from the creation, whatever Ready the node showed before
        // (found by the fuzzer: added Ready, condition removed
        // before the first pass, deleted in legacy mode at
        // creation + pod-eviction-timeout).
        if ready.is_none() && entry.ready_heartbeat.is_some() {
            entry.ready_removed(passes);
        }
        if ready.is_none() && entry.unrecorded_at == passes {
            entry.lower_beats_to(n.created);
            entry.last_transition = entry.last_transition.min(n.created);
        }
        if let Some(c) = ready
            && entry.own_ready != Some((c.last_heartbeat, c.last_transition))
        {
            if entry.ready_heartbeat != Some(c.last_heartbeat) {
                entry.beat(now, passes, false);
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

    /// The controller's health monitor ran a pass: every heartbeat seen so
    /// far is in its records now.
    pub fn monitor_passed(&mut self) {
        self.passes += 1;
    }

    /// The controller's own condition write is no heartbeat: the mirror
    /// takes its Ready fields now, so their echo does not count as one
    /// (the controller does not refresh its probe time on its own write).
    pub(super) fn own_condition_write(&mut self, node: &str, conditions: &[nodewarden_model::NodeCondition]) {
        let Some(mirror) = self.nodes.get_mut(node) else { return };
        if let Some(ready) = conditions.iter().find(|c| c.kind == ConditionType::Ready) {
            mirror.ready = Some(ready.status);
            mirror.ready_heartbeat = Some(ready.last_heartbeat);
            mirror.ready_transition = Some(ready.last_transition);
            mirror.own_ready = Some((ready.last_heartbeat, ready.last_transition));
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
        // The old life's answers never come; what it sent shows in the
        // nodes as they are observed.
        self.noexecute_in_flight.clear();
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

/// The mirror of snapshot `n`'s node, made if new, and whether it was
/// known. A node deleted and created again under its name is a new
/// object. The controller may go by either: it keeps its health record
/// when both happen between two monitor passes (upstream's pass sees no
/// deletion), and counts a node it has no record of and that never posted
/// status from its creation. The checker allows the earlier. The record
/// kept is the one the last monitor pass left: a heartbeat the old object
/// posted since is not in it.
fn node_entry<'a>(
    nodes: &'a mut HashMap<CompactName, NodeMirror>,
    now: Timestamp,
    n: &NodeSnapshot,
    ready: Option<&NodeCondition>,
    passes: u64,
) -> (&'a mut NodeMirror, bool) {
    // One lookup: a status post every few minutes per node.
    match nodes.entry(CompactName::from(n.name.as_str())) {
        Entry::Occupied(o) => {
            let m = o.into_mut();
            if m.created != n.created {
                let basis = if ready.is_some() { now } else { n.created.min(now).min(m.taken_beat(passes)) };
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

#[cfg(test)]
mod tests {
    use nodewarden_engine::{Action, ActionId, ActionKind};
    use nodewarden_model::{ConditionStatus, ControllerConfig, Span};

    use super::*;
    use crate::fixtures::{delete, node, pod, t, zone};

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

    /// Found by `engine_steps`: a node's status heartbeat (Ready=Unknown
    /// posted at 100 s) is seen, and its Ready condition removed before a
    /// monitor pass. The pass sees no Ready condition and the removal is no
    /// heartbeat (upstream B10), so the controller's probe stays at 0 s
    /// and upstream's legacy decision may delete from 0 s + timeout; the
    /// checker counted from 100 s. A Lease renewal seen before the removal
    /// is taken in by the next pass whatever the conditions, and counts.
    #[test]
    fn a_ready_heartbeat_removed_before_a_pass_took_it_in_is_no_probe() {
        let config = ControllerConfig {
            enable_taint_manager: false,
            pod_eviction_timeout: Span::from_secs(90),
            ..ControllerConfig::default()
        };
        let run = |lease_renewed: bool| {
            let mut c = InvariantChecker::new(&config);
            let Observation::NodeUpserted(mut n) = node("n", ConditionStatus::True, vec![]) else { unreachable!() };
            c.observe(t(0), &Observation::NodeUpserted(n.clone()));
            c.observe(t(0), &pod("ns/web", "n", None, false));
            c.monitor_passed();
            n.conditions[0].status = ConditionStatus::Unknown;
            n.conditions[0].last_heartbeat = t(100);
            c.observe(t(100), &Observation::NodeUpserted(n.clone()));
            if lease_renewed {
                c.observe(t(100), &Observation::LeaseUpserted { node: "n".into(), renew: Some(t(100)) });
            }
            n.conditions.clear();
            c.observe(t(100), &Observation::NodeUpserted(n));
            c.monitor_passed();
            c.check_action(t(105), &delete("ns/web"), &zone(0.1), false)
        };
        assert!(run(false).is_empty(), "{:?}", run(false));
        // The pass took the renewal in at 100 s or later: not before 190 s.
        assert_eq!(run(true).len(), 1);
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
}
