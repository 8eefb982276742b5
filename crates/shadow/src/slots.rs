//! A zone's NoExecute taints compared by their place in the zone's queue.
//!
//! Both controllers release a zone's nodes through a token bucket at the
//! zone's rate: one node every ten seconds by default. Which node takes
//! which token depends on the order they were queued in, and each side
//! queues a node at the pass where it finds it not Ready: a heartbeat seen
//! a pass apart, or two nodes found in the same pass (ordered by name),
//! swaps two nodes' places. Compared node by node, such a swap reads as
//! one node tainted ten seconds early and another ten seconds late, though
//! both controllers released the same nodes at the same pace.
//!
//! So a NoExecute taint is compared slot by slot: the node was the r-th
//! released in its zone on one side; its time is compared with the other
//! side's r-th release, when that side has made it (the earlier of the
//! node's two places decides which). Which nodes were tainted is still
//! compared node by node (a node tainted by one side only is one-sided);
//! when and at what pace, slot by slot. Places are counted among the
//! zone's releases of the last window; swaps from the opposite taint, not
//! rate limited, take no place.

use std::collections::{HashMap, VecDeque};

use nodewarden_model::{Span, Timestamp};

use crate::kind::Side;

/// Each side's releases in one zone, in time order, and the zone's rate
/// at nodewarden's latest release.
#[derive(Clone, Debug, Default)]
struct ZoneSlots {
    nodewarden: VecDeque<Timestamp>,
    upstream: VecDeque<Timestamp>,
    rate: f64,
}

impl ZoneSlots {
    fn side_mut(&mut self, side: Side) -> &mut VecDeque<Timestamp> {
        match side {
            Side::Nodewarden => &mut self.nodewarden,
            Side::Upstream => &mut self.upstream,
        }
    }
}

/// Every zone's releases, both sides, over the last window.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slots {
    zones: HashMap<String, ZoneSlots>,
}

/// The two sides' times for the same place in a zone's queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SamePlace {
    /// The node's place (from 1) on nodewarden's side and on
    /// kube-controller-manager's.
    pub places: (usize, usize),
    /// Nodewarden's time minus kube-controller-manager's for the earlier of
    /// the two places.
    pub difference: Span,
    /// One token of the zone's bucket at nodewarden's rate (`None` when
    /// paused or unknown): each side's bucket fills on its own phase, from
    /// when its zone's limiter was last set (a state change, seen at each
    /// side's own pass), so the same place may be this much apart on two
    /// controllers that agree on everything else.
    pub token: Option<Span>,
}

impl Slots {
    /// A release in `zone` at `at` on `side`; nodewarden's come with the
    /// zone's rate then (nodes a second).
    pub fn record(&mut self, zone: &str, side: Side, at: Timestamp, rate: Option<f64>) {
        if !self.zones.contains_key(zone) {
            self.zones.insert(zone.to_string(), ZoneSlots::default());
        }
        let Some(z) = self.zones.get_mut(zone) else { return };
        if let Some(rate) = rate {
            z.rate = rate;
        }
        let times = z.side_mut(side);
        let at_or_after = times.partition_point(|t| *t <= at);
        times.insert(at_or_after, at);
    }

    /// Forgets releases older than `window` before `now`, and zones left
    /// without any.
    pub fn prune(&mut self, now: Timestamp, window: Span) {
        let oldest = now + -window;
        self.zones.retain(|_, z| {
            for times in [&mut z.nodewarden, &mut z.upstream] {
                while times.front().is_some_and(|t| *t < oldest) {
                    times.pop_front();
                }
            }
            !(z.nodewarden.is_empty() && z.upstream.is_empty())
        });
    }

    /// The node released in `zone` at `nodewarden` by nodewarden and at
    /// `upstream` by kube-controller-manager, compared at the same place:
    /// `None` when either release is not recorded.
    pub fn same_place(&self, zone: &str, nodewarden: Timestamp, upstream: Timestamp) -> Option<SamePlace> {
        let z = self.zones.get(zone)?;
        let place = |times: &VecDeque<Timestamp>, at: Timestamp| times.partition_point(|t| *t <= at);
        let (nw, up) = (place(&z.nodewarden, nodewarden), place(&z.upstream, upstream));
        if nw == 0 || up == 0 {
            return None;
        }
        let difference = if up <= nw { z.nodewarden[up - 1] - upstream } else { nodewarden - z.upstream[nw - 1] };
        let token = (z.rate > 0.0 && z.rate.is_finite()).then(|| Span::from_nanos((1e9 / z.rate) as i64));
        Some(SamePlace { places: (nw, up), difference, token })
    }

    /// Releases held, both sides.
    pub fn len(&self) -> usize {
        self.zones.values().map(|z| z.nodewarden.len() + z.upstream.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 + secs)
    }

    #[test]
    fn two_nodes_swapped_in_the_queue_compare_at_the_same_places() {
        let mut s = Slots::default();
        // kube-controller-manager released a then b; nodewarden b then a,
        // at the same pace, 1 s later.
        s.record("z", Side::Upstream, t(100), None);
        s.record("z", Side::Upstream, t(110), None);
        s.record("z", Side::Nodewarden, t(101), Some(0.1));
        s.record("z", Side::Nodewarden, t(111), Some(0.1));
        // a: nodewarden's second (111), kube-controller-manager's first (100).
        let a = s.same_place("z", t(111), t(100)).expect("both recorded");
        assert_eq!(a.places, (2, 1));
        assert_eq!(a.difference, Span::from_secs(1), "nodewarden's first release against its first");
        // b: nodewarden's first (101), kube-controller-manager's second (110).
        let b = s.same_place("z", t(101), t(110)).expect("both recorded");
        assert_eq!(b.places, (1, 2));
        assert_eq!(b.difference, Span::from_secs(1));
        assert!(s.same_place("other", t(101), t(110)).is_none());
    }

    #[test]
    fn a_slower_pace_shows_at_the_same_places() {
        let mut s = Slots::default();
        for i in 0..4 {
            s.record("z", Side::Upstream, t(100 + 10 * i), None);
            s.record("z", Side::Nodewarden, t(100 + 20 * i), Some(0.1));
        }
        let fourth = s.same_place("z", t(160), t(130)).expect("both recorded");
        assert_eq!((fourth.places, fourth.difference), ((4, 4), Span::from_secs(30)));
        assert_eq!(fourth.token, Some(Span::from_secs(10)), "one token at 0.1/s");
    }

    #[test]
    fn old_releases_are_forgotten() {
        let mut s = Slots::default();
        s.record("z", Side::Upstream, t(0), None);
        s.record("z", Side::Nodewarden, t(700), Some(0.1));
        s.prune(t(700), Span::from_secs(600));
        assert_eq!(s.len(), 1);
        s.prune(t(1400), Span::from_secs(600));
        assert_eq!(s.len(), 0);
        assert!(s.zones.is_empty());
    }
}
