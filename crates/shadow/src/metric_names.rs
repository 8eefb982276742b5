//! The shadow's metrics, by name: where an operator watching a
//! `--dry-run` replica sees, without reading logs, whether nodewarden would
//! have done what kube-controller-manager did.
//!
//! The binary that serves `/metrics` configures the histogram's buckets
//! from [`DIFFERENCE_BUCKETS`], so the bounds in the summary's
//! distributions and on the dashboard are the same.

/// Counter {kind, verdict}, ours: decisions compared, one per verdict
/// (`agree`, `earlier`, `later`, `only-nodewarden`, `only-upstream`).
pub const DECISIONS_TOTAL: &str = "nodewarden_shadow_decisions_total";

/// Histogram {kind}, ours: for every decision both sides made, nodewarden's
/// time minus kube-controller-manager's, in seconds (negative: nodewarden
/// earlier).
pub const DIFFERENCE_SECONDS: &str = "nodewarden_shadow_difference_seconds";

/// Label on both metrics: the decision kind (`DecisionKind::as_str`).
pub const KIND: &str = "kind";

/// Label on [`DECISIONS_TOTAL`]: the verdict (`Verdict::as_str`).
pub const VERDICT: &str = "verdict";

/// Bucket bounds of [`DIFFERENCE_SECONDS`], in seconds, signed: fine near
/// zero, where agreeing decisions fall, coarse out to five minutes either
/// way. The summary's per-kind distributions use the same bounds.
pub const DIFFERENCE_BUCKETS: [f64; 15] =
    [-300.0, -60.0, -30.0, -10.0, -5.0, -2.0, -1.0, 0.0, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];
