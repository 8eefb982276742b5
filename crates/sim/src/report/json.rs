//! The figures as JSON (`nodewarden sim --json`), for scripts and
//! `cargo xtask load`: every count, first and last instant per zone next to
//! what the configuration predicts, latency distributions, what the run cost
//! (wall time, memory, the engine's time per tick and phase), and optionally
//! the timeline samples the chart is drawn from. Times are seconds since the
//! start, rounded to the millisecond, so scripts need no parsing of `1m40s`.

use nodewarden_engine::ZoneState;
use nodewarden_model::{Span, Timestamp};
use serde_json::{Value, json};

use super::{RunInfo, Theory, dist, rate_at, round3};
use crate::statistics::Outcome;

fn ms_dist(nanos: &[u64]) -> Value {
    let v: Vec<f64> = nanos.iter().map(|&n| n as f64 / 1e6).collect();
    let mut d = dist(&v);
    if let Some(o) = d.as_object_mut() {
        o.remove("p90");
        o.remove("min");
    }
    d
}

fn secs(t: Timestamp) -> f64 {
    round3((t - Timestamp::EPOCH).as_secs_f64())
}

fn span_secs(s: Span) -> f64 {
    round3(s.as_secs_f64())
}

/// The figures as JSON; `timeline` adds the chart's data.
///
/// Long on purpose: one `json!` literal per section, in the order of the
/// document (a contract with the tools that read it), is easier to check
/// against the fields it promises than the same literal spread over helpers.
pub fn to_json(o: &Outcome, run: &RunInfo, timeline: bool) -> Value {
    let theory = Theory::of(o);
    let simulated = span_secs(o.simulated);
    let wall = run.wall_seconds.max(1e-9);
    let mut safety = serde_json::Map::new();
    for (name, ok) in o.checks() {
        safety.insert(name.to_string(), json!(ok));
    }
    let phases: serde_json::Map<String, Value> =
        o.costs.phases.iter().map(|(phase, v)| (phase.name().to_string(), ms_dist(v))).collect();
    let zones: Vec<Value> = o
        .zones
        .iter()
        .map(|z| {
            let rate = z.tainted.1.and_then(|(first, _)| rate_at(z, first));
            let predicted_last = match (z.tainted, rate) {
                ((n, Some((first, _))), Some(r)) if r > 0.0 && n > 0 => {
                    Some(secs(first) + (n as f64 - 1.0) / r)
                }
                _ => None,
            };
            json!({
                "zone": z.key,
                "nodes": z.nodes,
                "pods": z.pods,
                "nodes_failed": z.nodes_failed,
                "failures": z.failures,
                "first_failure_seconds": z.failed.map(|s| secs(s.0)),
                "seen_dead": z.seen_dead.0,
                "first_seen_dead_seconds": z.seen_dead.1.map(|s| secs(s.0)),
                "last_seen_dead_seconds": z.seen_dead.1.map(|s| secs(s.1)),
                "predicted_first_seen_dead_seconds": z.failed.map(|s| [secs(s.0 + theory.detect.0), secs(s.0 + theory.detect.1)]),
                "false_alarms": z.false_alarms,
                "tainted": z.tainted.0,
                "first_tainted_seconds": z.tainted.1.map(|s| secs(s.0)),
                "last_tainted_seconds": z.tainted.1.map(|s| secs(s.1)),
                "taint_rate_per_second": rate,
                "predicted_last_tainted_seconds": predicted_last,
                "untainted": z.untainted,
                "pods_evicted": z.evicted.0,
                "first_eviction_seconds": z.evicted.1.map(|s| secs(s.0)),
                "last_eviction_seconds": z.evicted.1.map(|s| secs(s.1)),
                "daemonset_pods_evicted": z.daemonset_evicted,
                "states": z.states.iter().map(|(t, s, r)| json!({"at_seconds": secs(*t), "state": s.map(ZoneState::as_str), "rate": r})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut v = json!({
        "scenario": o.scenario,
        "description": o.description,
        "seed": run.seed,
        "api_latency": o.api_latency.to_string(),
        "held_back": o.held_back,
        "nodes": o.nodes,
        "pods": o.pods,
        "zone_count": o.zones.len(),
        "simulated_seconds": simulated,
        "wall_seconds": round3(run.wall_seconds),
        "speedup": round3(simulated / wall),
        "peak_rss_bytes": run.peak_rss_bytes,
        "rss_before_controller_bytes": run.rss_before_controller_bytes,
        "cpu_seconds": run.cpu_seconds.map(round3),
        "cpu_seconds_per_simulated_hour": run.cpu_seconds.map(|c| round3(c * 3600.0 / simulated.max(1e-9))),
        "steps": o.steps,
        "observations": o.observations,
        "actions": o.actions,
        "writes_failed": o.writes_failed,
        "observations_per_second": round3(o.observations as f64 / wall),
        "actions_per_second": round3(o.actions as f64 / wall),
        "observations_per_simulated_second": round3(o.observations as f64 / simulated.max(1e-9)),
        "actions_per_simulated_second": round3(o.actions as f64 / simulated.max(1e-9)),
        "tick_ms": ms_dist(&o.costs.tick),
        "phase_ms": phases,
        "slowest_health_passes": o.costs.slowest_health.iter().map(|p| json!({
            "at_seconds": round3(secs(p.at)),
            "ms": round3(p.nanos as f64 / 1e6),
            "tick_actions": p.actions,
        })).collect::<Vec<_>>(),
        "latency": {
            "detection_seconds": dist(&o.latencies.detection),
            "detection_expected_seconds": [span_secs(theory.detect.0), span_secs(theory.detect.1)],
            "tainting_seconds": dist(&o.latencies.tainting),
            "tainting_expected": "0 for the first node of a zone, then one node per 1/rate seconds (see zones[].taint_rate_per_second)",
            "eviction_seconds": dist(&o.latencies.eviction),
            "eviction_minus_toleration_seconds": dist(&o.latencies.eviction_vs_toleration),
            "eviction_expected": "each pod at its node's taint + its tolerationSeconds: eviction_minus_toleration_seconds is 0, never negative",
        },
        "config": {
            "node-monitor-period": span_secs(o.config.node_monitor_period),
            "node-monitor-grace-period": span_secs(o.config.node_monitor_grace_period),
            "node-eviction-rate": o.config.node_eviction_rate,
            "secondary-node-eviction-rate": o.config.secondary_node_eviction_rate,
            "large-cluster-size-threshold": o.config.large_cluster_size_threshold,
            "unhealthy-zone-threshold": o.config.unhealthy_zone_threshold,
            "enable-taint-manager": o.config.enable_taint_manager,
            "default-toleration-seconds": o.admission.unreachable_seconds,
            "lease-renew-interval-seconds": span_secs(o.kubelet.lease_every),
        },
        "faults": o.faults.iter().map(|(t, w)| json!({"at_seconds": secs(*t), "what": w})).collect::<Vec<_>>(),
        "zones": zones,
        "safety": safety,
        "safe": o.safe(),
        "violations": o.violations,
    });
    if !o.addons.is_empty()
        && let Some(obj) = v.as_object_mut()
    {
        let addons: Vec<Value> = o
            .addons
            .iter()
            .map(|a| {
                json!({
                    "addon": a.addon,
                    "unschedulable_seconds": a.unschedulable_since.map(secs),
                    "bound_seconds": a.bound.as_ref().map(|(t, _)| secs(*t)),
                    "bound_to": a.bound.as_ref().map(|(_, n)| n),
                    "pods_evicted": a.evicted,
                    "evictions_refused": a.refused,
                    "minimum_evictions": a.minimum,
                })
            })
            .collect();
        obj.insert("addons".into(), json!(addons));
        obj.insert("rescheduler".into(), json!(o.config.enable_rescheduler));
    }
    if timeline && let Some(obj) = v.as_object_mut() {
        let samples: Vec<Value> = o
            .timeline
            .iter()
            .map(|(t, zs)| {
                json!({"t": secs(*t), "zones": zs.iter().map(|s| json!([s.ready, s.not_ready, s.unknown, s.tainted, s.evicted])).collect::<Vec<_>>()})
            })
            .collect();
        obj.insert(
            "timeline".into(),
            json!({"per_zone": ["ready", "not_ready", "unknown", "tainted", "pods_evicted"], "samples": samples}),
        );
    }
    v
}
