//! The shadow's findings as one value: the JSON of `GET /shadow`, and what
//! `nodewarden shadow report` reads back and renders.
//!
//! Field names are snake_case; kinds and verdicts are spelled as their
//! labels (`noexecute-unreachable`, `only-upstream`), the same as the
//! metric labels. Instants are strings in the model's display form (RFC
//! 3339 UTC for Unix times, which `nodewarden run` uses); differences are
//! signed seconds, nodewarden's time minus kube-controller-manager's.

use serde::{Deserialize, Serialize};

use crate::kind::{DecisionKind, Verdict};

/// Everything the shadow found since it began watching.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// When watching began.
    pub since: String,
    /// When this summary was made.
    pub now: String,
    /// From `since` to `now`, in seconds: how long the comparison ran.
    pub watched_seconds: f64,
    /// How long one side waits for the other before its decision is
    /// judged one-sided.
    pub window_seconds: f64,
    /// The tolerance now: `node-monitor-period` plus the watch latency.
    /// Two times at most this far apart agree.
    pub tolerance_seconds: f64,
    /// The watch latency now: the largest delay of the last two minutes
    /// between a Lease renewal (or a stamped change) and its sighting.
    pub watch_latency_seconds: f64,
    /// Whether the first list has been taken in (before it, nothing is
    /// compared).
    pub synced: bool,
    /// Decisions judged, all verdicts together.
    pub decisions: u64,
    /// The count of each verdict.
    #[serde(flatten)]
    pub counts: Counts,
    /// Nodewarden's decisions waiting for kube-controller-manager's.
    pub pending_nodewarden: u64,
    /// kube-controller-manager's decisions waiting for nodewarden's.
    pub pending_upstream: u64,
    /// Decisions and changes left out by the restart rule (about nodes
    /// already in trouble when watching began, or first seen so), counted
    /// so their absence from the comparison is visible.
    pub excused: u64,
    /// Per kind of decision, every kind listed, in [`DecisionKind::ALL`]
    /// order.
    pub kinds: Vec<KindSummary>,
    /// Per zone: nodewarden's state and rate beside what
    /// kube-controller-manager's taints show. Sorted by zone.
    pub zones: Vec<ZoneSummary>,
    /// The latest disagreements (at most 1,000), newest last.
    pub disagreements: Vec<Disagreement>,
}

impl Summary {
    /// True when no decision judged so far disagrees (also when none was
    /// judged yet): what `nodewarden shadow report` exits with.
    pub fn all_agree(&self) -> bool {
        self.counts.disagreements() == 0
    }
}

/// How many decisions got each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Both sides, within the tolerance.
    pub agree: u64,
    /// Both sides, nodewarden earlier.
    pub earlier: u64,
    /// Both sides, nodewarden later.
    pub later: u64,
    /// Nodewarden alone within the window.
    pub only_nodewarden: u64,
    /// kube-controller-manager alone within the window.
    pub only_upstream: u64,
}

impl Counts {
    /// The count of `verdict`.
    pub fn of(&self, verdict: Verdict) -> u64 {
        match verdict {
            Verdict::Agree => self.agree,
            Verdict::Earlier => self.earlier,
            Verdict::Later => self.later,
            Verdict::OnlyNodewarden => self.only_nodewarden,
            Verdict::OnlyUpstream => self.only_upstream,
        }
    }

    /// Adds one to the count of `verdict`.
    pub fn add(&mut self, verdict: Verdict) {
        let slot = match verdict {
            Verdict::Agree => &mut self.agree,
            Verdict::Earlier => &mut self.earlier,
            Verdict::Later => &mut self.later,
            Verdict::OnlyNodewarden => &mut self.only_nodewarden,
            Verdict::OnlyUpstream => &mut self.only_upstream,
        };
        *slot += 1;
    }

    /// All verdicts together.
    pub fn total(&self) -> u64 {
        Verdict::ALL.iter().map(|v| self.of(*v)).sum()
    }

    /// Every verdict but agree.
    pub fn disagreements(&self) -> u64 {
        self.total() - self.agree
    }

    /// Decisions only one side made.
    pub fn one_sided(&self) -> u64 {
        self.only_nodewarden + self.only_upstream
    }
}

/// One kind of decision's verdicts and time differences.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindSummary {
    /// The kind.
    pub kind: DecisionKind,
    /// Decisions of this kind judged.
    pub decisions: u64,
    /// The count of each verdict.
    #[serde(flatten)]
    pub counts: Counts,
    /// Nodewarden's decisions of this kind waiting for
    /// kube-controller-manager's.
    pub pending_nodewarden: u64,
    /// kube-controller-manager's decisions of this kind waiting for
    /// nodewarden's.
    pub pending_upstream: u64,
    /// The largest |difference| of the pairs matched, in seconds; `None`
    /// before any pair.
    pub largest_difference_seconds: Option<f64>,
    /// How the differences of the pairs matched are spread.
    pub differences: Distribution,
}

/// Counts of signed differences between bucket bounds, as the histogram
/// `nodewarden_shadow_difference_seconds` buckets them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Upper bounds in seconds, ascending
    /// ([`DIFFERENCE_BUCKETS`](crate::DIFFERENCE_BUCKETS)).
    pub bounds: Vec<f64>,
    /// One more than the bounds: `counts[i]` differences were at most
    /// `bounds[i]` and above `bounds[i - 1]`; the last counts those above
    /// every bound. Not cumulative.
    pub counts: Vec<u64>,
}

/// One zone, from both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZoneSummary {
    /// `region/zone`, or `(unlabelled)` for nodes without zone labels.
    pub zone: String,
    /// Nodewarden's state for the zone (`Normal`, `PartialDisruption`, ...),
    /// if nodewarden knows the zone and has given it one.
    pub nodewarden_state: Option<String>,
    /// Nodewarden's rate for the zone, nodes per second.
    pub nodewarden_rate: Option<f64>,
    /// NoExecute taints kube-controller-manager added in the zone since
    /// watching began (swaps from the opposite taint not counted).
    pub upstream_taints: u64,
    /// kube-controller-manager's pace in the zone, nodes per second, from
    /// the median interval of its latest taints; `None` with fewer than
    /// two.
    pub upstream_pace_per_second: Option<f64>,
    /// Inferred, not published: the state whose configured rate is
    /// closest to that pace.
    pub upstream_state_inferred: Option<String>,
}

/// One decision the two sides did not agree on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// The node, or `namespace/name` for a pod deletion.
    pub object: String,
    /// The kind of decision.
    pub kind: DecisionKind,
    /// Earlier, later, only-nodewarden or only-upstream.
    pub verdict: Verdict,
    /// When nodewarden decided; `None` for only-upstream.
    pub nodewarden_at: Option<String>,
    /// When kube-controller-manager decided; `None` for only-nodewarden.
    pub upstream_at: Option<String>,
    /// Nodewarden's time minus kube-controller-manager's, in seconds;
    /// `None` for the one-sided verdicts.
    pub difference_seconds: Option<f64>,
    /// The facts behind nodewarden's side, in one line (for only-upstream,
    /// that it reached no such decision).
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let mut c = Counts::default();
        for v in [Verdict::Agree, Verdict::Agree, Verdict::Later, Verdict::OnlyUpstream] {
            c.add(v);
        }
        assert_eq!((c.total(), c.disagreements(), c.one_sided()), (4, 2, 1));
        assert_eq!(c.of(Verdict::Agree), 2);
    }
}
