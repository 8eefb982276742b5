//! Where a verdict goes once reached: counted per kind, said on the
//! metrics operators already scrape, logged as one line when the sides
//! disagree, and kept among the latest disagreements for the summary.
//!
//! Memory is fixed: counters and buckets per kind, and at most
//! [`DISAGREEMENTS_KEPT`] disagreements (the newest), however long the
//! shadow runs.

use std::collections::VecDeque;

use nodewarden_model::{Span, Timestamp};

use crate::kind::Side;
use crate::kind::{DecisionKind, Verdict};
use crate::metric_names::{DECISIONS_TOTAL, DIFFERENCE_BUCKETS, DIFFERENCE_SECONDS, KIND, VERDICT};
use crate::summary::{Counts, Disagreement, Distribution, KindSummary};

/// How many disagreements the summary keeps, the newest.
pub const DISAGREEMENTS_KEPT: usize = 1_000;

/// One decision judged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decided {
    /// The kind of decision.
    pub kind: DecisionKind,
    /// The node, or the pod for a pod deletion.
    pub object: Box<str>,
    /// The verdict.
    pub verdict: Verdict,
    /// Nodewarden's time, if it decided.
    pub nodewarden_at: Option<Timestamp>,
    /// kube-controller-manager's time, if it decided.
    pub upstream_at: Option<Timestamp>,
    /// Nodewarden's time minus the nearest instant kube-controller-manager's
    /// may stand for (its stamp, kept to the second, covers that second),
    /// when both decided.
    pub difference: Option<Span>,
    /// The facts behind nodewarden's side (or their absence), one line.
    pub reason: Box<str>,
}

impl Decided {
    /// Nodewarden's time minus kube-controller-manager's, when both
    /// decided.
    pub fn difference(&self) -> Option<Span> {
        self.difference
    }
}

/// One kind's verdicts and differences.
#[derive(Clone, Debug, Default)]
struct KindTally {
    counts: Counts,
    /// The largest |difference| of a matched pair.
    largest: Option<Span>,
    /// Per bucket of [`DIFFERENCE_BUCKETS`], and one above them all.
    buckets: [u64; DIFFERENCE_BUCKETS.len() + 1],
}

/// Every verdict reached so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    kinds: [KindTally; DecisionKind::ALL.len()],
    disagreements: VecDeque<Disagreement>,
}

/// The index of `kind` in [`DecisionKind::ALL`].
pub(crate) fn index_of(kind: DecisionKind) -> usize {
    DecisionKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

/// The bucket a difference of `seconds` falls in.
fn bucket_of(seconds: f64) -> usize {
    DIFFERENCE_BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(DIFFERENCE_BUCKETS.len())
}

fn opt_time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_string(), |t| t.to_string())
}

impl Tally {
    /// Counts `d`, says it on the metrics and, for a disagreement, in the
    /// log, and keeps it.
    pub fn record(&mut self, d: Decided) {
        let kind = d.kind.as_str();
        let verdict = d.verdict.as_str();
        metrics::counter!(DECISIONS_TOTAL, KIND => kind, VERDICT => verdict).increment(1);
        let tally = &mut self.kinds[index_of(d.kind)];
        tally.counts.add(d.verdict);
        let difference = d.difference();
        if let Some(diff) = difference {
            let seconds = diff.as_secs_f64();
            metrics::histogram!(DIFFERENCE_SECONDS, KIND => kind).record(seconds);
            tally.buckets[bucket_of(seconds)] += 1;
            let magnitude = if diff.is_negative() { -diff } else { diff };
            if tally.largest.is_none_or(|l| magnitude > l) {
                tally.largest = Some(magnitude);
            }
        }
        if !d.verdict.is_disagreement() {
            return;
        }
        let seconds = difference.map(Span::as_secs_f64);
        tracing::warn!(
            kind,
            object = &*d.object,
            verdict,
            nodewarden_at = %opt_time(d.nodewarden_at),
            upstream_at = %opt_time(d.upstream_at),
            difference_seconds = seconds,
            "shadow: nodewarden and kube-controller-manager disagree: {}",
            d.reason
        );
        if self.disagreements.len() == DISAGREEMENTS_KEPT {
            self.disagreements.pop_front();
        }
        self.disagreements.push_back(Disagreement {
            object: d.object.into(),
            kind: d.kind,
            verdict: d.verdict,
            nodewarden_at: d.nodewarden_at.map(|t| t.to_string()),
            upstream_at: d.upstream_at.map(|t| t.to_string()),
            difference_seconds: seconds,
            reason: d.reason.into(),
        });
    }

    /// Every verdict, all kinds together.
    pub fn counts(&self) -> Counts {
        let mut all = Counts::default();
        for k in &self.kinds {
            all.agree += k.counts.agree;
            all.earlier += k.counts.earlier;
            all.later += k.counts.later;
            all.only_nodewarden += k.counts.only_nodewarden;
            all.only_upstream += k.counts.only_upstream;
        }
        all
    }

    /// Per kind, in [`DecisionKind::ALL`] order.
    pub fn kinds(&self, waiting: impl Fn(DecisionKind, Side) -> u64) -> Vec<KindSummary> {
        DecisionKind::ALL
            .iter()
            .zip(&self.kinds)
            .map(|(kind, t)| KindSummary {
                kind: *kind,
                decisions: t.counts.total(),
                counts: t.counts,
                pending_nodewarden: waiting(*kind, Side::Nodewarden),
                pending_upstream: waiting(*kind, Side::Upstream),
                largest_difference_seconds: t.largest.map(Span::as_secs_f64),
                differences: Distribution { bounds: DIFFERENCE_BUCKETS.to_vec(), counts: t.buckets.to_vec() },
            })
            .collect()
    }

    /// The kept disagreements, newest last.
    pub fn disagreements(&self) -> Vec<Disagreement> {
        self.disagreements.iter().cloned().collect()
    }

    /// How many disagreements are kept.
    pub fn kept(&self) -> usize {
        self.disagreements.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decided(verdict: Verdict, difference: Option<i64>, object: &str) -> Decided {
        let up = Timestamp::from_secs(1_000);
        Decided {
            kind: DecisionKind::NoExecuteUnreachable,
            object: object.into(),
            verdict,
            nodewarden_at: difference.map(|d| up + Span::from_secs(d)),
            upstream_at: Some(up),
            difference: difference.map(Span::from_secs),
            reason: "r".into(),
        }
    }

    #[test]
    fn differences_fall_in_the_metric_buckets_and_the_largest_is_kept() {
        let mut t = Tally::default();
        t.record(decided(Verdict::Agree, Some(0), "a"));
        t.record(decided(Verdict::Earlier, Some(-40), "b"));
        t.record(decided(Verdict::Later, Some(400), "c"));
        let k = &t.kinds(|_, _| 0)[index_of(DecisionKind::NoExecuteUnreachable)];
        assert_eq!(k.decisions, 3);
        assert_eq!(k.largest_difference_seconds, Some(400.0));
        assert_eq!(k.differences.counts.len(), k.differences.bounds.len() + 1);
        assert_eq!(k.differences.counts[bucket_of(0.0)], 1);
        assert_eq!(k.differences.bounds[bucket_of(-40.0)], -30.0, "(-60, -30]");
        assert_eq!(k.differences.counts[bucket_of(-40.0)], 1);
        assert_eq!(k.differences.counts[DIFFERENCE_BUCKETS.len()], 1, "above every bound");
        assert_eq!(t.kept(), 2, "the agreement is not kept");
    }

    #[test]
    fn the_newest_disagreements_are_kept_and_no_more() {
        let mut t = Tally::default();
        for i in 0..DISAGREEMENTS_KEPT + 5 {
            t.record(decided(Verdict::OnlyUpstream, None, &format!("n{i}")));
        }
        let kept = t.disagreements();
        assert_eq!(kept.len(), DISAGREEMENTS_KEPT);
        assert_eq!(kept[0].object, "n5");
        assert_eq!(kept.last().unwrap().object, format!("n{}", DISAGREEMENTS_KEPT + 4));
        assert_eq!(t.counts().only_upstream, DISAGREEMENTS_KEPT as u64 + 5);
    }
}
