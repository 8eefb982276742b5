//! Every metric the engine records, by name, in one place: what it measures,
//! its labels, and whether the name is upstream's (kept exactly, so existing
//! dashboards and alerts work) or nodewarden's own (`nodewarden_` prefix).
//! docs/semantics.md lists the same names for operators.
//!
//! (Named `metric_names`, not `metrics`, so it never shadows the `metrics`
//! crate whose macros record them.)

/// Label on the per-zone metrics: the zone key as `region/zone` (empty for
/// nodes without zone labels).
pub const ZONE: &str = "zone";

/// Gauge {zone}, upstream: percent of the zone's counted nodes that are
/// Ready (100 for a zone with none), at the last monitor pass.
pub const ZONE_HEALTH: &str = "node_collector_zone_health";

/// Gauge {zone}, upstream: nodes counted in the zone at the last monitor
/// pass (nodes excluded from disruption are not).
pub const ZONE_SIZE: &str = "node_collector_zone_size";

/// Gauge {zone}, upstream: counted nodes of the zone whose Ready was not
/// True at the last monitor pass.
pub const UNHEALTHY_NODES_IN_ZONE: &str = "node_collector_unhealthy_nodes_in_zone";

/// Gauge {zone, state}, ours: 1 on the series of the zone's state after
/// the last monitor pass (`Initial`, `Normal`, `PartialDisruption`,
/// `FullDisruption`), 0 on the others; all 0 for a zone with no state.
pub const ZONE_STATE: &str = "nodewarden_zone_state";

/// Label on [`ZONE_STATE`]: the state.
pub const STATE: &str = "state";

/// Gauge {zone}, ours: nodes per second the zone's queue (tainting, or
/// eviction in legacy mode) releases after the last monitor pass; 0 while
/// paused.
pub const ZONE_RATE: &str = "nodewarden_zone_rate";

/// Counter {zone}, upstream: NoExecute taints added by the tainting pass,
/// or, in legacy mode, nodes whose pods the eviction pass deleted.
pub const EVICTIONS_TOTAL: &str = "node_collector_evictions_total";

/// Histogram, upstream: seconds one whole health-monitor pass took.
/// Recorded only when the driver lends a clock (`Engine::measure_with`).
pub const UPDATE_ALL_NODES_HEALTH_DURATION_SECONDS: &str = "node_collector_update_all_nodes_health_duration_seconds";

/// Counter, upstream: pods the taint manager deleted.
///
/// Counted when the API server accepts the deletion, once a pod, as
/// upstream counts it after its delete call returns: an attempt that was
/// refused and retried counts once, when it succeeds.
pub const TAINT_EVICTION_POD_DELETIONS_TOTAL: &str = "taint_eviction_controller_pod_deletions_total";

/// Histogram, upstream: seconds from a taint-based deletion's deadline to
/// its issue, on the engine's clock (upstream's own is broken).
pub const TAINT_EVICTION_POD_DELETION_DURATION_SECONDS: &str =
    "taint_eviction_controller_pod_deletion_duration_seconds";

/// Histogram, ours: seconds from the taint manager first acting on a pod's
/// taint (the deletion being scheduled) to the pod's deletion.
pub const TAINT_TO_DELETION_SECONDS: &str = "nodewarden_taint_to_deletion_seconds";

/// Counter {kind}, ours: node or pod snapshots passed over because the
/// engine already held a newer version of the object (a late watch event,
/// or the echo of a write whose answer came first). Not an error: how often
/// the API's answers and watch events cross.
pub const STALE_OBSERVATIONS_TOTAL: &str = "nodewarden_stale_observations_total";

/// Counter, ours: pods deleted by legacy eviction (deletions the API
/// server accepted, once each).
pub const LEGACY_POD_DELETIONS_TOTAL: &str = "nodewarden_legacy_pod_deletions_total";

/// Counter, ours: writes the API server refused (any kind: node status,
/// taints, labels, pod status, deletions).
pub const WRITE_FAILURES_TOTAL: &str = "nodewarden_write_failures_total";

/// Label on [`RESCHEDULER_OUTCOMES_TOTAL`]: what a rescheduler decision
/// came to.
pub const OUTCOME: &str = "outcome";

/// Counter, ours: pods the critical-addon rescheduler evicted (each
/// eviction issued, retries of a refused one included).
pub const RESCHEDULER_EVICTIONS_TOTAL: &str = "nodewarden_rescheduler_evictions_total";

/// Counter {outcome}, ours: the critical-addon rescheduler's decisions:
/// `prepared` (a node chosen), `not_reserved` (the addon does not tolerate
/// the reservation taint), `no_fit` (an addon fits nowhere; once per
/// addon), `adopted` (a reservation left by a previous run kept), and the
/// ways a reservation ends: `scheduled` (its addon bound there),
/// `landed_elsewhere`, `addon_gone`, `node_unsuitable`, `timed_out`,
/// `evictions_refused`, `released` (a reservation nothing waits for).
pub const RESCHEDULER_OUTCOMES_TOTAL: &str = "nodewarden_rescheduler_outcomes_total";

/// Gauge, ours: critical addons that need help (Unschedulable for at
/// least the grace period and not bound), at the last housekeeping pass.
pub const RESCHEDULER_PENDING_ADDONS: &str = "nodewarden_rescheduler_pending_addons";
