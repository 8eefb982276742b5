//! Each zone's NoExecute rate limiter as the checker follows it: upstream's
//! token bucket (burst 1), taken from by a node's first controller taint
//! and swapped when the zone's rate changes, so a taint that comes sooner
//! than the zone's rate allows is caught.

use nodewarden_engine::ZoneReport;
use nodewarden_model::{Span, Taint, Timestamp, ZoneKey};

use super::InvariantChecker;
use super::mirror::is_controller_noexecute;

impl InvariantChecker {
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

    pub(super) fn zone_rate(&self, zone: &ZoneKey, zones: &[ZoneReport]) -> f64 {
        zones.iter().find(|z| &z.key == zone).map_or(self.config.node_eviction_rate, |z| z.rate)
    }

    /// Takes a sent taint patch from the zone's bucket: only a node getting
    /// its first controller taint goes through the zone's rate limiter (a
    /// swap does not, E2). Whether it is a swap is read off the node as the
    /// patch will find it, the patches ahead of it on their way included,
    /// as [`InvariantChecker::judge`] reads it: behind a client rate a
    /// node's first taint can wait unsent when the engine swaps it, and a
    /// swap counted as a first taint here would take a token upstream
    /// never takes and call the zone's next, timely first taint early.
    /// Called before the patch itself joins those in flight.
    pub(super) fn commit_zone_taint(&mut self, now: Timestamp, node: &str, add: &[Taint], zones: &[ZoneReport]) {
        if !add.iter().any(is_controller_noexecute) {
            return;
        }
        let Some(before) = self.taints_ahead(node) else { return };
        if before.iter().any(is_controller_noexecute) {
            return;
        }
        let Some(mirror) = self.nodes.get(node) else { return };
        let zone = mirror.zone.clone();
        let rate = self.zone_rate(&zone, zones);
        self.zone_taints.insert(zone, ZoneBucket { rate, ready_at: now + token_interval(rate) });
    }
}

/// Upstream's per-zone limiter as the checker follows it (F1, F2).
#[derive(Clone, Copy, Debug)]
pub(super) struct ZoneBucket {
    /// The zone's rate when the bucket was last taken from or swapped.
    pub(super) rate: f64,
    /// When the next token is due (meaningless at rate 0).
    pub(super) ready_at: Timestamp,
}

/// Time between two tokens at `rate` (burst 1).
fn token_interval(rate: f64) -> Span {
    Span::from_secs_f64(1.0 / rate).unwrap_or(Span::ZERO)
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::{Action, ActionId};
    use nodewarden_model::{ConditionStatus, ControllerConfig};

    use super::*;
    use crate::fixtures::{node, not_ready, t, taint_patch, unreachable, zone};
    use crate::invariants::Invariant;

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

    /// Behind a client rate a node's first NoExecute taint can still wait
    /// unsent when the engine swaps it (E2: a swap takes no token). The
    /// swap must not be counted as the zone's latest first taint: the next
    /// node is due one interval after the first taint, not after the swap
    /// (found by `engine_steps` at 0.5 requests a second).
    #[test]
    fn a_swap_of_a_first_taint_still_on_its_way_takes_no_token() {
        let mut c = InvariantChecker::new(&ControllerConfig::default());
        for n in ["a", "b"] {
            c.observe(t(0), &node(n, ConditionStatus::Unknown, vec![]));
        }
        let first = taint_patch("a", vec![unreachable()], vec![]);
        assert!(c.check_action(t(0), &first, &zone(0.1), false).is_empty());
        c.end_step(false);
        let b = Action { id: ActionId(3), ..taint_patch("b", vec![unreachable()], vec![]) };
        let v = c.judge(t(5), &b, &zone(0.1), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
        // `first` is not answered yet; the node turned NotReady.
        let swap = Action { id: ActionId(2), ..taint_patch("a", vec![not_ready()], vec![unreachable()]) };
        assert!(c.check_action(t(8), &swap, &zone(0.1), false).is_empty());
        c.end_step(false);
        let v = c.check_action(t(12), &b, &zone(0.1), false);
        assert!(v.is_empty(), "the zone's token came at 10 s, the swap took none: {v:?}");
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
        // (Judged only: the interlock holds it back, so it is never on its
        // way, and b's taint at 530 s is still a first one.)
        c.zones_ticked(t(455), &zone(0.05));
        let v = c.judge(t(470), &patch("b"), &zone(0.05), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
        // The 0.05/s bucket has its token again: spent on a full 0.01/s one.
        c.zones_ticked(t(530), &zone(0.01));
        assert!(c.check_action(t(530), &patch("b"), &zone(0.01), false).is_empty());
        c.end_step(false);
        let v = c.check_action(t(600), &patch("c"), &zone(0.01), false);
        assert_eq!(v.first().map(|v| v.invariant), Some(Invariant::ZoneRateRespected), "{v:?}");
    }
}
