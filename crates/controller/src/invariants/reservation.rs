//! The critical-addon rescheduler's rules: nodewarden's own
//! `CriticalAddonsOnly` taint on one node at most and never left behind
//! once no addon waits, no protected pod evicted for an addon, nothing
//! rescheduled while every zone is down. The checker tracks which nodes
//! carry the taint and which addons wait for it.

use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, CRITICAL_ADDONS_ONLY_VALUE};
use nodewarden_model::{Taint, TaintEffect, Timestamp};

use super::mirror::PodMirror;
use super::{Invariant, InvariantChecker, Violation};

/// nodewarden's own `CriticalAddonsOnly` taint (its value says so).
pub(super) fn is_reservation(t: &Taint) -> bool {
    t.key == CRITICAL_ADDONS_ONLY_TAINT && t.effect == TaintEffect::NoSchedule && t.value == CRITICAL_ADDONS_ONLY_VALUE
}

impl InvariantChecker {
    /// A `CriticalAddonsOnly` taint of nodewarden's added to `node`.
    pub(super) fn judge_reservation(
        &self,
        now: Timestamp,
        node: &str,
        added: &Taint,
        all_down: bool,
        out: &mut Vec<Violation>,
    ) {
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
    pub(super) fn judge_addon_eviction(&self, now: Timestamp, key: &str, all_down: bool, out: &mut Vec<Violation>) {
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

    /// Takes a sent taint patch's changes to nodewarden's own
    /// `CriticalAddonsOnly` taint: a removal is on its way (the node is
    /// releasing), an addition makes the node the one prepared.
    pub(super) fn commit_reservation(&mut self, node: &str, add: &[Taint], remove: &[Taint]) {
        // Removals match by key and effect, whatever the value.
        if remove.iter().any(|t| t.is(CRITICAL_ADDONS_ONLY_TAINT, TaintEffect::NoSchedule)) {
            self.reserved.remove(node);
            self.releasing.insert(node.to_string());
        }
        if add.iter().any(is_reservation) {
            self.releasing.remove(node);
            self.reserved.insert(node.to_string());
        }
    }

    /// At the end of a step: reports, once an episode, a reservation kept
    /// more than two housekeeping intervals while no critical addon waits
    /// ([`Invariant::NoReservationLeftBehind`]).
    pub(super) fn check_idle_reservation(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::Observation;
    use nodewarden_model::{ConditionStatus, ControllerConfig};

    use super::*;
    use crate::fixtures::{evict_for_addon, node, reservation, reservation_patch, scheduled_pod, t, zone};

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
