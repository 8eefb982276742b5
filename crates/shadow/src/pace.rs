//! kube-controller-manager's tainting pace per zone, inferred from the
//! NoExecute taints it is seen adding.
//!
//! kube-controller-manager publishes no zone state and no rate, but its
//! zone queue releases nodes at the zone's rate, so the interval between
//! its NoExecute taints in one zone shows the rate it applied. The median
//! of the last few intervals is robust to a lone straggler; the configured
//! rate it is closest to (on a log scale: 0.05/s is as far from 0.1/s as
//! 0.2/s) names the state kube-controller-manager was most likely in. It
//! is an inference, and reports label it so.

use std::collections::VecDeque;

use nodewarden_model::{ControllerConfig, Timestamp, ZoneState};

/// How many of a zone's latest taint times the pace is read from.
pub(crate) const RECENT_TAINTS: usize = 8;

/// One zone's NoExecute taints, as kube-controller-manager added them.
#[derive(Clone, Debug, Default)]
pub(crate) struct ZonePace {
    /// Taints counted since the shadow began (swaps from the opposite
    /// NoExecute taint excluded: they are not rate limited).
    pub taints: u64,
    /// The times of the latest [`RECENT_TAINTS`] of them, oldest first.
    recent: VecDeque<Timestamp>,
}

impl ZonePace {
    /// Counts a taint added at `at`.
    pub fn add(&mut self, at: Timestamp) {
        self.taints += 1;
        if self.recent.len() == RECENT_TAINTS {
            self.recent.pop_front();
        }
        self.recent.push_back(at);
    }

    /// Nodes per second: one over the median interval between the recent
    /// taints (in time order). `None` with fewer than two taints, or when
    /// the median interval is zero (too fast to tell from stamps of whole
    /// seconds).
    pub fn per_second(&self) -> Option<f64> {
        let mut times: Vec<Timestamp> = self.recent.iter().copied().collect();
        times.sort();
        let mut gaps: Vec<i64> = times.windows(2).map(|w| (w[1] - w[0]).as_nanos()).collect();
        if gaps.is_empty() {
            return None;
        }
        gaps.sort_unstable();
        let n = gaps.len();
        let median = if n % 2 == 1 { gaps[n / 2] as f64 } else { (gaps[n / 2 - 1] as f64 + gaps[n / 2] as f64) / 2.0 };
        (median > 0.0).then(|| 1e9 / median)
    }
}

/// The state whose configured rate is closest to `pace` (nodes per
/// second), on a log scale: [`ZoneState::Normal`] for
/// `node-eviction-rate`, [`ZoneState::PartialDisruption`] for
/// `secondary-node-eviction-rate`. `None` when neither rate is positive.
pub(crate) fn inferred_state(pace: f64, config: &ControllerConfig) -> Option<ZoneState> {
    let distance = |rate: f64| (rate > 0.0 && pace > 0.0).then(|| (pace.ln() - rate.ln()).abs());
    match (distance(config.node_eviction_rate), distance(config.secondary_node_eviction_rate)) {
        (Some(normal), Some(partial)) if partial < normal => Some(ZoneState::PartialDisruption),
        (Some(_), _) => Some(ZoneState::Normal),
        (None, Some(_)) => Some(ZoneState::PartialDisruption),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_model::Span;

    use super::*;

    #[test]
    fn the_pace_is_the_median_interval_of_the_last_taints() {
        let mut z = ZonePace::default();
        assert_eq!(z.per_second(), None);
        let start = Timestamp::from_secs(1_000);
        // Ten seconds apart, with one straggler a minute late.
        for (i, extra) in [0, 0, 0, 60, 60, 60].iter().enumerate() {
            z.add(start + Span::from_secs(10 * i as i64 + extra));
        }
        assert_eq!(z.taints, 6);
        assert_eq!(z.per_second(), Some(0.1));
        for i in 0..20 {
            z.add(start + Span::from_secs(1_000 + 100 * i));
        }
        assert_eq!(z.recent.len(), RECENT_TAINTS, "only the latest are kept");
        assert_eq!(z.per_second(), Some(0.01));
    }

    #[test]
    fn the_state_is_the_closest_configured_rate_on_a_log_scale() {
        let config = ControllerConfig::default(); // 0.1/s and 0.01/s
        assert_eq!(inferred_state(0.1, &config), Some(ZoneState::Normal));
        assert_eq!(inferred_state(0.05, &config), Some(ZoneState::Normal));
        assert_eq!(inferred_state(0.02, &config), Some(ZoneState::PartialDisruption));
        assert_eq!(inferred_state(0.011, &config), Some(ZoneState::PartialDisruption));
        let no_secondary = ControllerConfig { secondary_node_eviction_rate: 0.0, ..config };
        assert_eq!(inferred_state(0.001, &no_secondary), Some(ZoneState::Normal));
    }
}
