//! The JSON report: every figure the measurement took, under the keys
//! docs/run.md ("Measured") explains, with notes that say how each was
//! taken. Kept apart from the timeline so that what a key means can be
//! read, and kept stable, in one place.

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use super::api::PAGE;
use super::nodes::Detection;
use super::options::{Incident, Options};
use super::probes::{LeaseLag, Listed};
use super::usage::Usage;
use super::zone::ZoneFigures;
use super::{
    CENSUS_AFTER_CRASH, CpuAt, IDLE_WINDOW, LEASE_WINDOW, STALE_LEASE, max, percentile, round3, secs, secs_fine,
};

/// The report and what went wrong on the way (the report is still
/// printed; the task then fails).
pub(super) struct Measured {
    pub(super) report: Value,
    pub(super) problems: Vec<String>,
}

/// The leader's death.
#[derive(Clone, Copy, Debug)]
pub(super) struct Killed {
    pub(super) at: i64,
    pub(super) leader: Usage,
    pub(super) standby: Usage,
}

/// The new holder of the Lease.
#[derive(Clone, Debug)]
pub(super) struct Taken {
    /// When the harness saw it.
    pub(super) seen: i64,
    /// Its acquireTime (microseconds), when given.
    pub(super) acquired: Option<i64>,
}

/// Everything the timeline measured, as it measured it (Unix nanoseconds,
/// whole [`Usage`] readings): the report's figures are computed from
/// these in one place, [`Figures::into_measured`].
pub(super) struct Figures {
    /// The server's launch.
    pub(super) server_spawned: i64,
    /// When it wrote its kubeconfig.
    pub(super) served: i64,
    /// The server when it served, after the idle window, once every
    /// crashed node was found out, before the pod list and at the end.
    pub(super) at_serve: Usage,
    pub(super) at_run: Usage,
    pub(super) observed: Usage,
    pub(super) before_list: Usage,
    pub(super) server_end: Usage,
    /// The server's cores while only its kubelets ran.
    pub(super) idle_cores: f64,
    /// Seconds from run's start until every crashed node was found out.
    pub(super) run_seconds: f64,
    /// The leader's CPU at the two ends of its steady window.
    pub(super) steady: [Option<CpuAt>; 2],
    /// The leader's launch, and its line `every cache synced`.
    pub(super) leader_spawned: i64,
    pub(super) synced: i64,
    pub(super) run_to_sync: Usage,
    /// The warm standby's sync, seconds.
    pub(super) standby_synced: Option<f64>,
    /// The replica running at the end: the new leader after a failover.
    pub(super) last_leader: Usage,
    pub(super) crash: i64,
    pub(super) detected: Detection,
    pub(super) killed: Option<Killed>,
    pub(super) taken: Option<Taken>,
    /// When the new leader logged [`Figures::decides`].
    pub(super) decided: Option<i64>,
    /// The new leader's log line that says it decides.
    pub(super) decides: &'static str,
    pub(super) lag: LeaseLag,
    pub(super) listed: Listed,
    pub(super) harness_cpu: f64,
    /// With `--zone-outage`: the zone, the controller's backlog, the
    /// deletions.
    pub(super) zone: Option<ZoneFigures>,
    pub(super) wall_seconds: f64,
    pub(super) problems: Vec<String>,
}

impl Figures {
    /// The report; an error only when a failover run never killed its
    /// leader (the timeline would have failed first).
    pub(super) fn into_measured(self, o: &Options) -> Result<Measured> {
        let mut report = Map::new();
        insert(&mut report, self.common(o));
        let mut notes = notes();
        if o.failover {
            insert(&mut report, self.failover(o)?);
            notes.push(self.failover_note());
        }
        if let Some(z) = &self.zone {
            insert(&mut report, self.zone_outage(o, z));
            notes.extend(zone_notes());
        }
        insert(
            &mut report,
            json!({
                "harness_cpu_seconds": round3(self.harness_cpu),
                "wall_seconds": round3(self.wall_seconds),
                "notes": notes,
                "problems": self.problems,
            }),
        );
        Ok(Measured { report: Value::Object(report), problems: self.problems })
    }

    /// The keys of every run.
    fn common(&self, o: &Options) -> Value {
        let leader = self.killed.map_or(self.last_leader, |k| k.leader);
        let d = &self.detected;
        let zone_firsts: Vec<f64> = d.zone_first_taint.values().flatten().copied().collect();
        json!({
            "nodes": o.nodes,
            "pods": o.nodes * o.pods_per_node,
            "zones": o.zones,
            "failover": o.failover,
            "crash_at_seconds": o.crash_at.as_secs(),
            "server_start_seconds": secs(self.server_spawned, self.served),
            "server_rss_bytes": self.server_end.rss,
            "server_rss_peak_bytes": self.server_end.peak,
            "server_cpu_seconds": round3(self.server_end.cpu),
            "server_cpu_seconds_to_serve": round3(self.at_serve.cpu),
            "server_idle_cores": round3(self.idle_cores),
            "run_steady_cores": match self.steady {
                [Some((t0, c0)), Some((t1, c1))] if t1 > t0 => json!(round3((c1 - c0) / ((t1 - t0) as f64 / 1e9))),
                _ => Value::Null,
            },
            "server_cores_with_run": round3((self.observed.cpu - self.at_run.cpu) / self.run_seconds),
            "pods_list_seconds": self.listed.seconds,
            "pods_listed": self.listed.pods,
            "pods_list_pages": self.listed.pages,
            "pods_list_bytes": self.listed.bytes,
            "pods_list_server_cpu_seconds": round3(self.server_end.cpu - self.before_list.cpu),
            "lease_watch_events_per_second": round3(self.lag.events as f64 / self.lag.window.max(1e-9)),
            "lease_watch_lag_p50_seconds": percentile(&self.lag.lags, 0.5).map(round3),
            "lease_watch_lag_p99_seconds": percentile(&self.lag.lags, 0.99).map(round3),
            "lease_watch_lag_max_seconds": max(&self.lag.lags).map(round3),
            "sync_seconds": secs(self.leader_spawned, self.synced),
            "run_cpu_seconds_to_sync": round3(self.run_to_sync.cpu),
            "run_rss_bytes": leader.peak,
            "run_rss_end_bytes": leader.rss,
            "run_cpu_seconds": round3(leader.cpu),
            "crashed_nodes": d.crashed,
            "detected_nodes": d.detect.len(),
            "detect_seconds": max(&d.detect),
            "detect_seconds_median": percentile(&d.detect, 0.5),
            "detect_seconds_min": percentile(&d.detect, 0.0),
            "detect_seen_seconds": max(&d.detect_seen),
            "taint_seconds": max(&zone_firsts),
            "taint_seconds_min": percentile(&zone_firsts, 0.0),
            "tainted_nodes": d.tainted,
            "healthy_nodes_marked_unknown": d.healthy_marked.len(),
        })
    }

    /// The keys of a `--zone-outage` run (docs/run.md, "A zone outage").
    fn zone_outage(&self, o: &Options, z: &ZoneFigures) -> Value {
        let (seen, e) = (&z.seen, &z.evictions);
        let (outage, toleration) = match o.incident {
            Incident::ZoneOutage { outage, toleration } => (outage.as_secs(), toleration.as_secs()),
            Incident::NodeCrash => (0, 0),
        };
        let per_pod = &e.requests_per_pod;
        json!({
            "incident": "zone-outage",
            "outage_seconds": outage,
            "default_toleration_seconds": toleration,
            "zone_nodes": seen.nodes,
            "run_peak_rss_bytes": self.last_leader.peak,
            "run_rss_at_outage_bytes": z.watch.rss_at_outage,
            "run_rss_max_in_outage_bytes": z.watch.rss_max,
            "write_queue_max": z.watch.queue_max,
            "writes_wanted_max": z.watch.wanted_max,
            "zone_unknown_nodes": seen.unknown.len(),
            "zone_unknown_seconds": seen.all_unknown(),
            "zone_unknown_seconds_median": percentile(&seen.unknown, 0.5),
            "zone_tainted_nodes": seen.tainted.len(),
            "zone_first_taint_seconds": percentile(&seen.tainted, 0.0),
            "zone_tainted_seconds": seen.all_tainted(),
            "zone_taint_rate_per_second": seen.taint_rate(),
            "requests_per_evicted_pod": (!per_pod.is_empty())
                .then(|| round3(per_pod.iter().sum::<f64>() / per_pod.len() as f64)),
            "requests_per_evicted_pod_max": max(per_pod),
            "deletions_before_heal": e.before_heal,
            "deletions_due_before_heal": e.due_before_heal,
            "deletions_after_heal": e.after_heal,
            "deletions_early": e.early.len(),
            "deletions_unlisted": e.unlisted.len(),
            "deletions_tolerated": e.tolerated.len(),
            "deletions_duplicated": e.duplicated,
            "heal_after_outage_seconds": secs(self.crash, z.heal),
        })
    }

    /// The keys of a `--failover` run.
    fn failover(&self, o: &Options) -> Result<Value> {
        let k = self.killed.context("the leader was never killed")?;
        let acquired = self.taken.as_ref().map(|t| t.acquired.unwrap_or(t.seen));
        let mut v = json!({
            "standby": if o.cold { "cold" } else { "warm" },
            "standby_rss_bytes": k.standby.rss,
            "standby_cpu_seconds": round3(k.standby.cpu),
            "kill_after_crash_seconds": secs(self.crash, k.at),
            "lease_taken_after_kill_seconds": acquired.map(|a| secs(k.at, a)),
            "takeover_seconds": acquired.zip(self.decided).map(|(a, d)| secs_fine(a, d)),
            "failover_detect_seconds": max(&self.detected.after_kill),
            "failover_detect_seconds_median": percentile(&self.detected.after_kill, 0.5),
            "failover_detected_nodes": self.detected.after_kill.len(),
            "marked_before_the_kill": self.detected.before_kill,
            "new_leader_rss_bytes": self.last_leader.peak,
            "new_leader_cpu_seconds": round3(self.last_leader.cpu),
        });
        if let Some(s) = self.standby_synced {
            v["standby_sync_seconds"] = json!(s);
        }
        Ok(v)
    }

    /// How the failover keys were taken.
    fn failover_note(&self) -> String {
        format!(
            "failover: run_rss_bytes and run_cpu_seconds are the first leader's when it was killed; takeover_seconds \
             runs from the new holder's acquireTime{} to its log line {:?}; failover_detect_seconds is \
             detect_seconds over the nodes marked Unknown after the kill",
            if self.taken.as_ref().is_some_and(|t| t.acquired.is_none()) {
                " (absent: when the harness saw it)"
            } else {
                ""
            },
            self.decides
        )
    }
}

/// How the keys of every run were taken.
fn notes() -> Vec<String> {
    vec![
        "detect_seconds: per crashed node, Ready=Unknown's lastTransitionTime minus its last heartbeat (the later of \
         its Lease's renewTime and Ready's lastHeartbeatTime); the max over the crashed nodes (also _median, _min). \
         Condition and taint times are whole seconds (renewTime has microseconds), so a figure may read up to 1 s \
         short; detect_seen_seconds is to when the harness's node watch delivered the change"
            .to_string(),
        "taint_seconds: each zone's first crashed node tainted unreachable:NoExecute, timeAdded minus its last \
         heartbeat, the max over zones (the others follow at the zone's --node-eviction-rate and are not waited for)"
            .to_string(),
        format!(
            "crashed nodes: those whose node Lease was {} s old {} s after the crash was due",
            STALE_LEASE.as_secs(),
            CENSUS_AFTER_CRASH.as_secs()
        ),
        format!(
            "server_cpu_seconds from its launch (the fleet's build: server_cpu_seconds_to_serve) to the end (the pod \
             list included); server_idle_cores over {} s before run; server_cores_with_run from run's start until \
             every crashed node was found out",
            IDLE_WINDOW.as_secs()
        ),
        format!(
            "lease_watch_lag: each node Lease event's arrival minus its spec.renewTime, on a watch of {} s after the \
             incident; pods_list: limit={PAGE} with continue tokens over HTTPS, pages received whole, not decoded",
            LEASE_WINDOW.as_secs()
        ),
    ]
}

/// How the keys of a `--zone-outage` run were taken.
fn zone_notes() -> Vec<String> {
    vec![
        "zone-outage: the first zone's kubelets lose the API server at crash_at_seconds and get it back \
         outage_seconds later; zone_nodes are the nodes whose Lease stopped; the zone's figures (and \
         detect_seconds, taint_seconds) are as the zone stood at the heal; every _seconds figure of the zone \
         counts from the outage: zone_unknown_seconds until the last of them read Ready=Unknown on the harness's \
         node watch (null if one never did), zone_tainted_seconds until the last was tainted \
         unreachable:NoExecute (timeAdded; null while some are not: a large zone is tainted at \
         --node-eviction-rate)"
            .to_string(),
        "run_peak_rss_bytes is run's VmHWM at the end (its sync included); run_rss_max_in_outage_bytes the most \
         of its RSS sampled every 2 s from the outage, write_queue_max the most of nodewarden_write_queue_depth \
         (summed over classes: writes built and not yet sent) and writes_wanted_max the most of \
         nodewarden_writes_wanted (marks decided and not yet built) on the same samples"
            .to_string(),
        "deletions: from the served cluster's request journal (every request to one pod or node); a pod counts \
         as deleted at the first DELETE answered 2xx; due before the heal: pods of a tainted zone node (listed \
         when its taint arrived) whose shortest matching tolerationSeconds ran out from the taint's timeAdded \
         before the heal; early, unlisted (no tainted zone node held it), tolerated (for ever) and duplicated \
         deletions fail the run; requests_per_evicted_pod: every request to a deleted pod (reads, status \
         patches, the DELETE), the mean (_max: the most)"
            .to_string(),
    ]
}

/// Adds an object's entries to the report.
fn insert(report: &mut Map<String, Value>, entries: Value) {
    if let Value::Object(m) = entries {
        report.extend(m);
    }
}
