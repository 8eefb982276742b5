//! How late the watch shows kube-controller-manager's changes: the part of
//! the tolerance that is not the controllers' own.
//!
//! Nodewarden's time is when its engine reached a decision; the upstream
//! time is kube-controller-manager's stamp where the object carries one
//! (the Ready condition's transition, a taint's `timeAdded`) and the
//! instant the shadow saw the change otherwise. A slow watch moves the
//! second kind by its delay, so the tolerance grows by the delay the
//! stamped changes show: the largest of the latest samples, so one slow
//! moment widens it for a while and then lets it go.

use nodewarden_model::Span;

/// How many of the latest samples the latency is the largest of.
pub(crate) const SAMPLES: usize = 32;

/// The latest watch latency samples.
#[derive(Clone, Debug, Default)]
pub(crate) struct WatchLatency {
    samples: [Span; SAMPLES],
    len: usize,
    next: usize,
}

impl WatchLatency {
    /// Adds a sample: when the change was seen minus its stamp, clamped at
    /// zero (a stamp ahead of the shadow's clock is skew, not latency).
    pub fn add(&mut self, sample: Span) {
        self.samples[self.next] = if sample.is_negative() { Span::ZERO } else { sample };
        self.next = (self.next + 1) % SAMPLES;
        self.len = (self.len + 1).min(SAMPLES);
    }

    /// The largest of the latest samples; zero before any.
    pub fn current(&self) -> Span {
        self.samples[..self.len].iter().copied().max().unwrap_or(Span::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_of_the_latest_samples_counts_and_old_ones_go() {
        let mut w = WatchLatency::default();
        assert_eq!(w.current(), Span::ZERO);
        w.add(Span::from_secs(-3));
        assert_eq!(w.current(), Span::ZERO, "clamped at zero");
        w.add(Span::from_secs(4));
        assert_eq!(w.current(), Span::from_secs(4));
        // 30 more fill the 32, and the 33rd replaces the first (the 0):
        // the slow one is still among the latest.
        for _ in 0..SAMPLES - 1 {
            w.add(Span::from_millis(200));
        }
        assert_eq!(w.current(), Span::from_secs(4), "still among the latest 32");
        w.add(Span::from_millis(200));
        assert_eq!(w.current(), Span::from_millis(200), "the slow sample is no longer among the latest");
    }
}
