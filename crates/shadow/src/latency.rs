//! How late the watch shows the cluster: the part of the tolerance that is
//! not the controllers' own.
//!
//! The shadow sees a heartbeat, or a change kube-controller-manager made,
//! only when its watch delivers it; kube-controller-manager sees its own
//! at once. A heartbeat seen late moves the shadow's probe time, and every
//! deadline after it, by up to a monitor period plus that delay. The
//! samples are the delays between a time the object carries (a Lease's
//! `renewTime`, kept to the microsecond; an Unknown's transition or a
//! taint's `timeAdded`, kept to the second) and its sighting. What counts
//! is the delay when the heartbeat a decision rests on was seen, up to a
//! grace period before the decision: so the latency is the largest sample
//! of the last [`SPAN_KEPT`], kept as one maximum per [`BUCKET`] of time,
//! and a slow moment widens the tolerance for two minutes, then lets go.

use nodewarden_model::{Span, Timestamp};

/// Each bucket keeps the largest sample seen in this much time.
pub(crate) const BUCKET: Span = Span::from_secs(10);

/// How far back the latency looks: longer than any grace period in use
/// (the default is 50 s) plus a monitor period.
pub(crate) const SPAN_KEPT: Span = Span::from_secs(120);

/// Buckets kept.
const BUCKETS: i64 = SPAN_KEPT.as_nanos() / BUCKET.as_nanos();

/// The largest watch delays of the last [`SPAN_KEPT`], per [`BUCKET`].
#[derive(Clone, Debug, Default)]
pub(crate) struct WatchLatency {
    /// (bucket number, its largest sample), oldest first.
    buckets: std::collections::VecDeque<(i64, Span)>,
}

impl WatchLatency {
    /// A delay seen at `now`; a negative one (a clock ahead of ours)
    /// counts as none.
    pub fn add(&mut self, now: Timestamp, sample: Span) {
        let sample = if sample.is_negative() { Span::ZERO } else { sample };
        let bucket = now.as_nanos().div_euclid(BUCKET.as_nanos());
        match self.buckets.back_mut() {
            Some((b, max)) if *b == bucket => *max = (*max).max(sample),
            Some((b, _)) if *b > bucket => {}
            _ => self.buckets.push_back((bucket, sample)),
        }
        while self.buckets.front().is_some_and(|(b, _)| *b <= bucket - BUCKETS) {
            self.buckets.pop_front();
        }
    }

    /// The largest delay of the last [`SPAN_KEPT`] before `now`; zero
    /// without a sample.
    pub fn current(&self, now: Timestamp) -> Span {
        let bucket = now.as_nanos().div_euclid(BUCKET.as_nanos());
        self.buckets.iter().filter(|(b, _)| *b > bucket - BUCKETS).map(|(_, s)| *s).max().unwrap_or(Span::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 + secs)
    }

    #[test]
    fn the_largest_delay_of_the_last_two_minutes_counts_then_goes() {
        let mut w = WatchLatency::default();
        assert_eq!(w.current(at(0)), Span::ZERO);
        w.add(at(0), Span::from_secs(-3));
        assert_eq!(w.current(at(0)), Span::ZERO, "clamped at zero");
        w.add(at(1), Span::from_secs(4));
        for s in 2..100 {
            w.add(at(s), Span::from_millis(200));
        }
        assert_eq!(w.current(at(100)), Span::from_secs(4), "a slow moment 99 s ago still counts");
        assert_eq!(w.current(at(125)), Span::from_millis(200), "two minutes on, it no longer does");
        assert!(w.buckets.len() as i64 <= BUCKETS, "bounded: {}", w.buckets.len());
        assert_eq!(w.current(at(400)), Span::ZERO, "nothing recent");
    }
}
