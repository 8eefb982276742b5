//! Weighing one action against the mirror before it is sent: a taint
//! patch against the node as the API will hold it once this step's earlier
//! writes land, a deletion against the deadline its tolerations (or legacy
//! mode's timeout) give it, and any write against those already in flight.
//! Judging changes nothing, so the interlock may ask first.

use nodewarden_engine::{Action, ActionKind, ZoneReport};
use nodewarden_model::{ConditionStatus, Span, Taint, TaintEffect, Timestamp, keys};

use super::mirror::{NO_NODE, PodMirror, is_controller_noexecute};
use super::reservation::is_reservation;
use super::{Invariant, InvariantChecker, Violation};

impl InvariantChecker {
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
        let Some(before) = self.taints_ahead(node) else { return };
        let mut after = before.clone();
        apply_patch(&mut after, add, remove);
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

    /// The node's taints as the API will have them when a patch sent now
    /// lands: writes to one object land in order, so the NoExecute patches
    /// committed before it and not answered yet land first (in this step,
    /// or, behind latency or a client rate, steps ago). `None` for a node
    /// the checker does not know.
    pub(super) fn taints_ahead(&self, node: &str) -> Option<Vec<Taint>> {
        let mut taints = self.nodes.get(node)?.taints.clone();
        for (_, add, remove) in self.noexecute_in_flight.get(node).into_iter().flatten() {
            apply_patch(&mut taints, add, remove);
        }
        Some(taints)
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
}

/// `taints` after a patch that adds `add` and removes `remove` (an added
/// taint replaces one with its key and effect).
fn apply_patch(taints: &mut Vec<Taint>, add: &[Taint], remove: &[Taint]) {
    taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
    taints.extend(add.iter().cloned());
}

#[cfg(test)]
mod tests {
    use nodewarden_model::ControllerConfig;

    use super::*;
    use crate::fixtures::{delete, node, pod, t, taint_patch, unreachable, zone};
    use nodewarden_engine::{ActionId, Observation, Withdrawal, WriteOutcome};

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
    fn swaps_are_not_rate_limited_but_both_taints_are_caught() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        let not_ready = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        c.observe(t(0), &node("a", ConditionStatus::Unknown, vec![not_ready.clone()]));
        c.observe(t(0), &node("b", ConditionStatus::Unknown, vec![]));
        assert!(c.check_action(t(1), &taint_patch("b", vec![unreachable()], vec![]), &zone(0.1), false).is_empty());
        c.end_step(false);
        let swap = Action { id: ActionId(2), ..taint_patch("a", vec![unreachable()], vec![not_ready]) };
        assert!(c.check_action(t(2), &swap, &zone(0.1), false).is_empty());
        c.end_step(false);
        // While the swap is on its way, a later patch lands after it: adding
        // unreachable again brings nothing together.
        let again = Action { id: ActionId(3), ..taint_patch("a", vec![unreachable()], vec![]) };
        assert!(c.check_action(t(3), &again, &zone(0.1), false).is_empty(), "after the swap in flight");
        c.end_step(false);
        // The swap was refused (and the patch behind it withdrawn): the
        // node still carries not-ready, and a patch adding unreachable
        // alone would give it both.
        let refused = WriteOutcome::Failed("conflict".into());
        c.observe(t(4), &Observation::WriteFinished { id: swap.id, outcome: refused });
        let withdrawn = WriteOutcome::Withdrawn(Withdrawal::NotCurrent { view: "nodes" });
        c.observe(t(4), &Observation::WriteFinished { id: again.id, outcome: withdrawn });
        let both = Action { id: ActionId(4), ..taint_patch("a", vec![unreachable()], vec![]) };
        let v = c.check_action(t(5), &both, &zone(0.1), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::NeverBothNoExecuteTaints), "{v:?}");
    }

    /// Behind a client rate a node's first NoExecute taint can still be on
    /// its way when the engine swaps it: the swap is judged against the
    /// node as it will be when it lands (tainted, so no zone token is
    /// needed), not as last observed.
    #[test]
    fn a_swap_of_a_taint_still_in_flight_is_a_swap() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        let not_ready = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        c.observe(t(0), &node("a", ConditionStatus::Unknown, vec![]));
        let first = taint_patch("a", vec![unreachable()], vec![]);
        assert!(c.check_action(t(1), &first, &zone(0.1), false).is_empty());
        c.end_step(false);
        // The zone stopped tainting; the first taint has not landed.
        let swap = Action { id: ActionId(2), ..taint_patch("a", vec![not_ready.clone()], vec![unreachable()]) };
        assert!(c.check_action(t(6), &swap, &zone(0.0), false).is_empty(), "a swap needs no token");
        c.end_step(false);
        // Both refused: the node is as observed, untainted, and the same
        // patch is a first taint, which the paused zone forbids.
        let refused = WriteOutcome::Failed("conflict".into());
        c.observe(t(7), &Observation::WriteFinished { id: first.id, outcome: refused.clone() });
        c.observe(t(7), &Observation::WriteFinished { id: swap.id, outcome: refused });
        let again = Action { id: ActionId(3), ..taint_patch("a", vec![not_ready], vec![unreachable()]) };
        let v = c.check_action(t(8), &again, &zone(0.0), false);
        assert!(v.iter().any(|v| v.invariant == Invariant::ZoneRateRespected), "{v:?}");
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
}
