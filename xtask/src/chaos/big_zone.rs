//! `cargo xtask chaos big-zone`: a zone outage at the size we claim,
//! 40k nodes and 1M pods, for three minutes, through the processes as
//! users deploy them (`cargo xtask wire-load --zone-outage`'s harness:
//! `nodewarden sim --serve` and `nodewarden run`, each its own process),
//! judged on what the incident must not do at that size: grow `run`'s
//! memory with the backlog, or let the zone's pod writes hold back its
//! node writes. The harness's own safety checks (no deletion early, of an
//! unlisted pod, of a pod that tolerates the taint for ever, or twice)
//! hold as everywhere.

use anyhow::Result;
use nodewarden_controller::write_order::DEFAULT_QPS;
use nodewarden_model::{ControllerConfig, KubeVersion};
use serde::Serialize;
use serde_json::Value;

/// The cluster: 40k nodes in three zones, 25 pods each.
const NODES: usize = 40_000;
const PODS_PER_NODE: usize = 25;
/// The first zone is down this long.
const OUTAGE_SECONDS: u64 = 180;
/// The outage starts this long after the server's launch: time to build
/// and serve 1M pods and for `run` to sync against them.
const CRASH_AT_SECONDS: u64 = 180;

/// What the outage may add to `run`'s memory, per node of the lost zone:
/// the zone's node writes built and waiting (a status and a NoSchedule
/// taint each, about 1.6 KiB apiece in the writer and the engine) and the
/// deletions as they come due; the zone's pods' marks wait as decisions,
/// 8 bytes each. docs/run.md sizes the margin at about 3 KiB a node of the
/// largest zone; the target leaves the allocator room on top.
const OUTAGE_BYTES_PER_ZONE_NODE: f64 = 8.0 * 1024.0;

/// Node writes first: from the first Unknown status on, a node costs node
/// lifecycle's client two requests (its status and its NoSchedule taint),
/// so at `--kube-api-qps` the zone's nodes go Unknown at `qps / 2` a
/// second, whatever the pods' marks waiting behind them. The target is
/// this share of that pace, counted from one grace period and a monitor
/// period after the outage, to the heal.
const NODE_PACE_SHARE: f64 = 0.75;

/// The first NoExecute taint must land within this long of the outage
/// (the grace period and a pass; the node writes ahead of it are its own).
const FIRST_TAINT_WITHIN_SECONDS: f64 = 90.0;

/// The trial's verdict: the figures it was judged on and what missed.
#[derive(Debug, Serialize)]
pub(super) struct Verdict {
    trial: &'static str,
    nodes: usize,
    pods: usize,
    outage_seconds: u64,
    zone_nodes: u64,
    run_rss_at_outage_bytes: u64,
    run_rss_max_in_outage_bytes: u64,
    outage_rss_target_bytes: u64,
    zone_unknown_nodes: u64,
    zone_unknown_target: u64,
    zone_first_taint_seconds: Option<f64>,
    deletions_before_heal: u64,
    deletions_due_before_heal: u64,
    pub(super) pass: bool,
    pub(super) failures: Vec<String>,
}

/// Runs the outage with `binary` and judges it.
pub(super) fn run(binary: &std::path::Path) -> Result<Verdict> {
    let args = [
        "--nodes".to_string(),
        NODES.to_string(),
        "--pods-per-node".into(),
        PODS_PER_NODE.to_string(),
        "--zone-outage".into(),
        "--outage".into(),
        OUTAGE_SECONDS.to_string(),
        "--crash-at".into(),
        CRASH_AT_SECONDS.to_string(),
        "--binary".into(),
        binary.display().to_string(),
    ];
    let (report, problems) = crate::wire_load::measure(args.to_vec())?;
    eprintln!("chaos: big-zone report: {}", serde_json::to_string(&report)?);
    Ok(judge(&report, problems))
}

/// The verdict on a wire-load report of the outage.
fn judge(report: &Value, problems: Vec<String>) -> Verdict {
    let n = |k: &str| report.get(k).and_then(Value::as_f64);
    let u = |k: &str| n(k).unwrap_or(0.0) as u64;
    let zone_nodes = u("zone_nodes");
    let at_outage = u("run_rss_at_outage_bytes");
    let in_outage = u("run_rss_max_in_outage_bytes");
    let rss_target = at_outage + (zone_nodes as f64 * OUTAGE_BYTES_PER_ZONE_NODE) as u64;
    // `run`'s defaults, which the harness runs it with.
    let cfg = ControllerConfig::of_kube_controller_manager(KubeVersion::OLDEST_SUPPORTED);
    let counted =
        OUTAGE_SECONDS as f64 - cfg.node_monitor_grace_period.as_secs_f64() - cfg.node_monitor_period.as_secs_f64();
    let unknown_target = ((DEFAULT_QPS / 2.0) * counted.max(0.0) * NODE_PACE_SHARE).min(zone_nodes as f64) as u64;
    let unknown = u("zone_unknown_nodes");
    let first_taint = n("zone_first_taint_seconds");
    let (before, due) = (u("deletions_before_heal"), u("deletions_due_before_heal"));

    let mut failures = problems;
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(in_outage > 0 && at_outage > 0, "run's memory was not sampled through the outage".into());
    check(
        in_outage <= rss_target,
        format!(
            "run grew from {} to {} MiB in the outage (target: at most {} MiB, {} KiB a zone node)",
            at_outage >> 20,
            in_outage >> 20,
            rss_target >> 20,
            OUTAGE_BYTES_PER_ZONE_NODE / 1024.0
        ),
    );
    check(
        unknown >= unknown_target,
        format!(
            "{unknown} of the zone's nodes went Unknown by the heal (node writes first: at least {unknown_target})"
        ),
    );
    check(
        first_taint.is_some_and(|t| t <= FIRST_TAINT_WITHIN_SECONDS),
        format!("the first NoExecute taint at {first_taint:?} s (target: within {FIRST_TAINT_WITHIN_SECONDS} s)"),
    );
    check(before >= due, format!("{before} of the {due} deletions due before the heal were made"));
    for k in ["deletions_early", "deletions_unlisted", "deletions_tolerated", "deletions_duplicated"] {
        check(u(k) == 0, format!("{k}: {}", u(k)));
    }
    check(
        u("healthy_nodes_marked_unknown") == 0,
        format!("{} healthy nodes marked Unknown", u("healthy_nodes_marked_unknown")),
    );
    Verdict {
        trial: "big-zone",
        nodes: NODES,
        pods: NODES * PODS_PER_NODE,
        outage_seconds: OUTAGE_SECONDS,
        zone_nodes,
        run_rss_at_outage_bytes: at_outage,
        run_rss_max_in_outage_bytes: in_outage,
        outage_rss_target_bytes: rss_target,
        zone_unknown_nodes: unknown,
        zone_unknown_target: unknown_target,
        zone_first_taint_seconds: first_taint,
        deletions_before_heal: before,
        deletions_due_before_heal: due,
        pass: failures.is_empty(),
        failures,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The figures of the 240 s outage measured on 2026-11-29 (docs/run.md),
    /// and the same with the node writes starved and the memory grown.
    #[test]
    fn judges_memory_and_the_node_writes_pace() {
        let good = json!({
            "zone_nodes": 13334, "run_rss_at_outage_bytes": 450u64 << 20, "run_rss_max_in_outage_bytes": 505u64 << 20,
            "zone_unknown_nodes": 1300, "zone_first_taint_seconds": 37.0,
            "deletions_before_heal": 292, "deletions_due_before_heal": 292,
            "deletions_early": 0, "deletions_unlisted": 0, "deletions_tolerated": 0, "deletions_duplicated": 0,
            "healthy_nodes_marked_unknown": 0,
        });
        let v = judge(&good, Vec::new());
        assert!(v.pass, "{:?}", v.failures);
        assert_eq!(v.zone_unknown_target, 937, "0.75 of 10 a second over 180 - 50 - 5 s");

        let mut bad = good.clone();
        bad["run_rss_max_in_outage_bytes"] = json!(900u64 << 20);
        bad["zone_unknown_nodes"] = json!(200);
        bad["deletions_early"] = json!(1);
        let v = judge(&bad, vec!["a problem the harness saw".into()]);
        assert!(!v.pass);
        assert_eq!(v.failures.len(), 4, "{:?}", v.failures);
    }
}
