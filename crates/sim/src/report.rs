//! What a simulation shows: a summary a person reads at 3 a.m., the same
//! figures as JSON for scripts, and a self-contained HTML page with a
//! timeline chart.

use std::fmt::Write as _;

use nodewarden_engine::ZoneState;
use nodewarden_model::{Span, Timestamp};
use serde_json::{Value, json};

use crate::simulation::{Outcome, ZoneTally};

/// Facts about the run that only the driver knows: wall time and what the
/// process used.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunInfo {
    /// Wall time of the simulation loop.
    pub wall_seconds: f64,
    /// Seed of the run.
    pub seed: u64,
    /// Peak resident memory of the whole process (simulated cluster,
    /// invariant checker and controller), `VmHWM`.
    pub peak_rss_bytes: Option<u64>,
    /// Resident memory once the simulated cluster was built, before the
    /// controller started: the controller's share is roughly the peak
    /// minus this.
    pub rss_before_controller_bytes: Option<u64>,
    /// CPU time the process used (user + system).
    pub cpu_seconds: Option<f64>,
}

/// What this process used so far, read from `/proc/self` (Linux only;
/// `None` elsewhere): peak resident bytes, current resident bytes, CPU
/// seconds (user + system, at the usual 100 ticks per second).
pub fn process_usage() -> (Option<u64>, Option<u64>, Option<f64>) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |field: &str| {
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|v| v * 1024)
    };
    let cpu = std::fs::read_to_string("/proc/self/stat").ok().and_then(|stat| {
        // Fields after the command name, which is in parentheses.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) / 100.0)
    });
    (kb("VmHWM:"), kb("VmRSS:"), cpu)
}

/// The safety check the simulated API server makes itself: the controller
/// never writes to a pod that is deleted or terminating (so never deletes
/// one twice).
pub const CONTRACT: &str = "no_write_to_deleted_or_terminating_pod";

/// p50/p90/p99/max/min of a sample.
fn dist(values: &[f64]) -> Value {
    if values.is_empty() {
        return json!({"count": 0});
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    json!({
        "count": v.len(),
        "min": round3(v[0]),
        "p50": round3(q(0.5)),
        "p90": round3(q(0.9)),
        "p99": round3(q(0.99)),
        "max": round3(v[v.len() - 1]),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

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

/// Formats a time for people: `1m40s`, `1h2m`, `350ms`.
pub fn human(t: Timestamp) -> String {
    human_span(t - Timestamp::EPOCH)
}

/// Formats a span for people.
pub fn human_span(s: Span) -> String {
    let ms = s.as_nanos() / 1_000_000;
    let (sign, ms) = if ms < 0 { ("-", -ms) } else { ("", ms) };
    let (h, m, sec, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let frac = if frac == 0 { String::new() } else { format!(".{}", format!("{frac:03}").trim_end_matches('0')) };
    match (h, m) {
        (0, 0) => format!("{sign}{sec}{frac}s"),
        (0, _) => format!("{sign}{m}m{sec:02}{frac}s"),
        _ => format!("{sign}{h}h{m:02}m{sec:02}{frac}s"),
    }
}

/// What the configuration predicts, shared by every rendering.
struct Theory {
    /// Failure to Unknown: earliest and latest.
    detect: (Span, Span),
}

impl Theory {
    fn of(o: &Outcome) -> Theory {
        let grace = o.config.node_monitor_grace_period;
        let period = o.config.node_monitor_period;
        let lease = o.kubelet.lease_every;
        // The last heartbeat came up to one Lease interval before the
        // failure; the controller sees it at its next pass and declares the
        // node dead at the first pass after the grace period.
        Theory { detect: (grace + -lease, grace + period + period) }
    }
}

/// The zone's rate (nodes per second) in effect at `t`.
fn rate_at(z: &ZoneTally, t: Timestamp) -> Option<f64> {
    z.states.iter().take_while(|(at, _, _)| *at <= t).last().map(|(_, _, r)| *r)
}

fn state_name(s: Option<ZoneState>) -> &'static str {
    s.map_or("none", ZoneState::as_str)
}

/// Zone state changes (rate changes within a state included), as text.
fn state_story(z: &ZoneTally) -> String {
    let mut parts = Vec::new();
    for (t, s, r) in &z.states {
        parts.push(format!("{} at {} ({}/s)", state_name(*s), human(*t), fmt_rate(*r)));
    }
    if parts.len() > 6 {
        let n = parts.len();
        let mut short: Vec<String> = parts[..3].to_vec();
        short.push(format!("... {} more ...", n - 5));
        short.extend(parts[n - 2..].iter().cloned());
        parts = short;
    }
    parts.join(" -> ")
}

fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".to_string() } else { s.to_string() }
}

fn span_text(span: Option<(Timestamp, Timestamp)>) -> String {
    match span {
        Some((a, b)) if a == b => format!("at {}", human(a)),
        Some((a, b)) => format!("{} .. {}", human(a), human(b)),
        None => "-".to_string(),
    }
}

/// One sentence on how the zone's story went, for the 3 a.m. reader.
fn in_short(o: &Outcome, z: &ZoneTally) -> String {
    let mut parts = Vec::new();
    if z.failures > 0 {
        if z.seen_dead.0 == z.failures {
            let worst = o.latencies.detection.iter().copied().fold(0.0_f64, f64::max);
            parts.push(format!("every failure was noticed (within {worst:.0}s)"));
        } else {
            parts.push(format!("{} of {} failures were noticed", z.seen_dead.0, z.failures));
        }
    }
    if z.tainted.0 > 0 {
        parts.push("nodes were tainted no faster than the zone's rate".to_string());
    } else if z.seen_dead.0 > 0 {
        parts.push("no node was tainted".to_string());
    }
    let single = z.failures == z.nodes_failed && o.restarts == 0;
    if single && z.recoveries > 0 && z.tainted.0 < z.nodes_failed {
        parts.push(format!(
            "{} node(s) came back before their turn in the queue, and kept their pods",
            z.nodes_failed - z.tainted.0
        ));
    }
    if z.evicted.0 > 0 {
        let late = o.latencies.eviction_vs_toleration.iter().filter(|&&d| d > 0.15).count();
        if late == 0 {
            parts.push("pods were evicted exactly when their tolerations ran out".to_string());
        } else {
            parts.push(format!("{late} pod(s) (all zones) were evicted later than their tolerations allowed"));
        }
    } else if z.tainted.0 > 0 {
        parts.push("no pod was evicted".to_string());
    }
    if z.daemonset_evicted == 0 && z.tainted.0 > 0 {
        parts.push("DaemonSet pods stayed".to_string());
    }
    if z.false_alarms > 0 {
        parts.push(format!("{} healthy node(s) were declared dead", z.false_alarms));
    }
    let mut out = parts.join("; ");
    out.push('.');
    out
}

/// The figures as JSON; `timeline` adds the chart's data.
pub fn to_json(o: &Outcome, run: &RunInfo, timeline: bool) -> Value {
    let theory = Theory::of(o);
    let simulated = span_secs(o.simulated);
    let wall = run.wall_seconds.max(1e-9);
    let mut safety = serde_json::Map::new();
    for (inv, ok) in &o.safety {
        safety.insert(inv.name().to_string(), json!(ok));
    }
    safety.insert(CONTRACT.into(), json!(o.contract_violations == 0));
    let phases: serde_json::Map<String, Value> =
        o.costs.phases.iter().map(|(name, v)| ((*name).to_string(), ms_dist(v))).collect();
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

/// The summary for people.
pub fn render_text(o: &Outcome, run: &RunInfo) -> String {
    let theory = Theory::of(o);
    let mut s = String::new();
    let sim = o.simulated.as_secs_f64();
    let _ = writeln!(s, "nodewarden sim: {} ({})", o.scenario, o.description);
    let _ = writeln!(
        s,
        "{} nodes in {} zone(s), {} pods; {} simulated in {:.1}s of wall time ({:.0}x), seed {}",
        o.nodes,
        o.zones.len(),
        o.pods,
        human_span(o.simulated),
        run.wall_seconds,
        sim / run.wall_seconds.max(1e-9),
        run.seed
    );
    let _ = writeln!(
        s,
        "controller: grace {}, monitor every {}, taint rate {}/s (secondary {}/s), pods tolerate {} by default{}",
        human_span(o.config.node_monitor_grace_period),
        human_span(o.config.node_monitor_period),
        fmt_rate(o.config.node_eviction_rate),
        fmt_rate(o.config.secondary_node_eviction_rate),
        o.admission.unreachable_seconds.map_or("forever".to_string(), |x| format!("{x}s")),
        if o.config.enable_taint_manager { "" } else { "; legacy eviction mode" },
    );
    let _ = writeln!(s, "\nWhat happened");
    for (t, what) in &o.faults {
        let _ = writeln!(s, "  {:>9}  {what}", human(*t));
    }
    if o.writes_failed > 0 {
        let _ = writeln!(
            s,
            "  {} controller write(s) failed (API server unreachable, or a stale precondition); none changed the cluster",
            o.writes_failed
        );
    }
    let _ = writeln!(s, "\nWhat the controller did, per zone");
    for z in &o.zones {
        let quiet =
            z.failures == 0 && z.seen_dead.0 == 0 && z.tainted.0 == 0 && z.evicted.0 == 0 && z.false_alarms == 0;
        if quiet {
            let _ = writeln!(
                s,
                "  {}: {} nodes, {} pods: nothing failed; nothing seen dead, tainted or evicted (as expected)",
                z.key, z.nodes, z.pods
            );
            continue;
        }
        let _ = writeln!(s, "  {}: {} nodes, {} pods", z.key, z.nodes, z.pods);
        if let Some((first, _)) = z.failed {
            let _ = writeln!(
                s,
                "    failed              {} node(s), {} time(s), first at {}",
                z.nodes_failed,
                z.failures,
                human(first)
            );
            let _ = writeln!(
                s,
                "    seen dead           {} time(s), {:<22} expected from {} to {} after each failure (grace {} - Lease interval {} .. + 2 monitor periods)",
                z.seen_dead.0,
                span_text(z.seen_dead.1),
                human_span(theory.detect.0),
                human_span(theory.detect.1),
                human_span(o.config.node_monitor_grace_period),
                human_span(o.kubelet.lease_every),
            );
        } else {
            let _ = writeln!(s, "    failed              none");
        }
        if z.false_alarms > 0 {
            let _ = writeln!(s, "    seen dead wrongly   {} time(s) (kubelet was fine)", z.false_alarms);
        }
        let _ = writeln!(s, "    zone state          {}", state_story(z));
        match z.tainted {
            (0, _) => {
                let why = if z.seen_dead.0 == 0 {
                    "nothing to taint".to_string()
                } else {
                    "the zone's rate was 0 or every zone was down (expected: tainting stops then)".to_string()
                };
                let _ = writeln!(s, "    NoExecute taints    none: {why}");
            }
            (n, Some((first, last))) => {
                let once = z.failures == z.nodes_failed && o.restarts == 0;
                let expected = match rate_at(z, first) {
                    Some(r) if r > 0.0 && !once => format!(
                        "expected at most one per {} ({}/s)",
                        human_span(Span::from_secs_f64(1.0 / r).unwrap_or(Span::ZERO)),
                        fmt_rate(r)
                    ),
                    Some(r) if r > 0.0 => format!(
                        "expected one per {} at {}/s: last at {}",
                        human_span(Span::from_secs_f64(1.0 / r).unwrap_or(Span::ZERO)),
                        fmt_rate(r),
                        human(first + Span::from_secs_f64((n as f64 - 1.0) / r).unwrap_or(Span::ZERO))
                    ),
                    _ => String::new(),
                };
                let _ =
                    writeln!(s, "    NoExecute taints    {n} added, {:<24} {expected}", span_text(Some((first, last))));
            }
            (n, None) => {
                let _ = writeln!(s, "    NoExecute taints    {n} added");
            }
        }
        if z.untainted > 0 {
            let _ = writeln!(s, "    taints removed      {}", z.untainted);
        }
        let _ = writeln!(
            s,
            "    pods evicted        {:<32} {}",
            format!("{}, {}", z.evicted.0, span_text(z.evicted.1)),
            if z.evicted.0 > 0 { "expected each at its node's taint + its toleration" } else { "" }
        );
        if z.daemonset_evicted > 0 {
            let _ = writeln!(s, "    DaemonSet pods      {} deleted", z.daemonset_evicted);
        }
        let _ = writeln!(s, "    in short            {}", in_short(o, z));
    }
    let l = &o.latencies;
    if !l.detection.is_empty() || !l.eviction.is_empty() {
        let _ = writeln!(s, "\nLatencies (seconds)        count      p50      p90      max   expected");
        let row = |s: &mut String, name: &str, v: &[f64], expected: String| {
            if v.is_empty() {
                return;
            }
            let d = dist(v);
            let g = |k: &str| d.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            let _ = writeln!(
                s,
                "  {name:<24} {:>6} {:>8.1} {:>8.1} {:>8.1}   {expected}",
                v.len(),
                g("p50"),
                g("p90"),
                g("max")
            );
        };
        row(
            &mut s,
            "failure -> seen dead",
            &l.detection,
            format!("{:.0} .. {:.0}", theory.detect.0.as_secs_f64(), theory.detect.1.as_secs_f64()),
        );
        row(&mut s, "seen dead -> tainted", &l.tainting, "0, then queued at the zone rate".into());
        row(&mut s, "tainted -> evicted", &l.eviction, "the pod's toleration".into());
        row(&mut s, "evicted - toleration", &l.eviction_vs_toleration, "0 (never below)".into());
    }
    let failed: Vec<&str> = o.safety.iter().filter(|(_, ok)| !ok).map(|(i, _)| i.name()).collect();
    if failed.is_empty() && o.contract_violations == 0 {
        let mut names: Vec<&str> = o.safety.iter().map(|(i, _)| i.name()).collect();
        names.push(CONTRACT);
        let _ = writeln!(s, "\nSafety: all {} checks held ({}).", names.len(), names.join(", "));
    } else {
        let _ = writeln!(s, "\nSAFETY CHECKS FAILED: {}", failed.join(", "));
        if o.contract_violations > 0 {
            let _ = writeln!(s, "  {} write(s) to deleted or terminating pods", o.contract_violations);
        }
        for v in &o.violations {
            let _ = writeln!(s, "  {v}");
        }
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A chart line: name, colour, dash pattern, value, right axis.
type Series = (&'static str, &'static str, &'static str, fn(&crate::simulation::ZoneSample) -> usize, bool);

/// One zone's chart: node counts (left axis) and evicted pods (right axis).
fn zone_svg(o: &Outcome, z: usize) -> String {
    let (w, h) = (1100.0_f64, 230.0_f64);
    let (left, right, top, bottom) = (60.0, 70.0, 24.0, 30.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let end = o.simulated.as_secs_f64().max(1.0);
    let nodes = o.zones.get(z).map_or(1, |t| t.nodes).max(1) as f64;
    // Rounded up to a multiple of 4, so the right axis has whole numbers.
    let evicted = o.timeline.iter().filter_map(|(_, zs)| zs.get(z)).map(|s| s.evicted).max().unwrap_or(0);
    let pods_max = (evicted.max(1).div_ceil(4) * 4) as f64;
    let x = |t: Timestamp| left + (t - Timestamp::EPOCH).as_secs_f64() / end * pw;
    let y = |v: f64, max: f64| top + ph - v / max * ph;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"##
    );
    let _ = write!(svg, r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>"##);
    // Grid and axes.
    for i in 0..=4 {
        let v = nodes * f64::from(i) / 4.0;
        let yy = y(v, nodes);
        let _ = write!(
            svg,
            r##"<line x1="{left}" x2="{}" y1="{yy}" y2="{yy}" stroke="#e4e4e4"/><text x="{}" y="{}" text-anchor="end">{:.0}</text>"##,
            left + pw,
            left - 6.0,
            yy + 4.0,
            v
        );
        if evicted > 0 || i == 0 {
            let p = pods_max * f64::from(i) / 4.0;
            let _ = write!(
                svg,
                r##"<text x="{}" y="{}" fill="#1f5fbf">{:.0}</text>"##,
                left + pw + 6.0,
                y(p, pods_max) + 4.0,
                p
            );
        }
    }
    // Round time ticks, at most about ten of them.
    let step = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400]
        .into_iter()
        .find(|&st| end / f64::from(st) <= 10.0)
        .unwrap_or(86_400);
    let mut tick = 0;
    while f64::from(tick) <= end {
        let t = Timestamp::EPOCH + Span::from_secs(i64::from(tick));
        let _ = write!(svg, r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##, x(t), top + ph + 16.0, human(t));
        tick += step;
    }
    for (t, what) in &o.faults {
        let xx = x(*t);
        let _ = write!(
            svg,
            r##"<line x1="{xx}" x2="{xx}" y1="{top}" y2="{}" stroke="#999" stroke-dasharray="3,3"><title>{} {}</title></line>"##,
            top + ph,
            human(*t),
            esc(what)
        );
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" fill="#777" font-size="10">{}</text>"##,
            xx + 3.0,
            top + 11.0,
            human(*t)
        );
    }
    let series: [Series; 5] = [
        ("ready", "#2e9e44", "", |s| s.ready, false),
        ("unknown (unreachable)", "#d62728", "", |s| s.unknown, false),
        ("not ready", "#ff9800", "", |s| s.not_ready, false),
        ("NoExecute tainted", "#8e44ad", "6,3", |s| s.tainted, false),
        ("pods evicted (right axis)", "#1f5fbf", "", |s| s.evicted, true),
    ];
    for (i, (name, colour, dash, get, pods)) in series.iter().enumerate() {
        let max = if *pods { pods_max } else { nodes };
        let points: Vec<String> = o
            .timeline
            .iter()
            .filter_map(|(t, zs)| zs.get(z).map(|s| format!("{:.1},{:.1}", x(*t), y(get(s) as f64, max))))
            .collect();
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" points="{}"/>"##,
            points.join(" ")
        );
        let lx = left + 10.0 + i as f64 * 190.0;
        let _ = write!(
            svg,
            r##"<line x1="{lx}" x2="{}" y1="12" y2="12" stroke="{colour}" stroke-width="3" stroke-dasharray="{dash}"/><text x="{}" y="16">{name}</text>"##,
            lx + 18.0,
            lx + 22.0
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A self-contained page: the summary, a timeline chart per zone, and the
/// figures as a table. No script, no external resource.
pub fn render_html(o: &Outcome, run: &RunInfo) -> String {
    let mut h = String::new();
    let title = format!("nodewarden sim: {}", o.scenario);
    let _ = write!(
        h,
        r##"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{}</title><style>
body{{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}}
h1{{font-size:22px}} h2{{font-size:17px;margin-top:28px}}
pre{{background:#f6f6f6;padding:12px;overflow-x:auto;font-size:12px}}
table{{border-collapse:collapse;font-size:13px}} td,th{{border:1px solid #ddd;padding:4px 8px;text-align:right}}
th{{background:#f0f0f0}} td:first-child,th:first-child{{text-align:left}}
.ok{{color:#2e7d32;font-weight:bold}} .bad{{color:#c62828;font-weight:bold}}
</style></head><body>"##,
        esc(&title)
    );
    let _ = write!(h, "<h1>{}</h1><p>{}</p>", esc(&title), esc(&o.description));
    let failed = !o.safe();
    let _ = write!(
        h,
        r##"<p>{} nodes in {} zone(s), {} pods; {} simulated in {:.1} s of wall time. Safety: <span class="{}">{}</span></p>"##,
        o.nodes,
        o.zones.len(),
        o.pods,
        human_span(o.simulated),
        run.wall_seconds,
        if failed { "bad" } else { "ok" },
        if failed { "CHECKS FAILED" } else { "every check held" }
    );
    let _ = write!(
        h,
        "<h2>Timeline per zone</h2><p>Nodes by Ready status and NoExecute taint (left axis), pods evicted so far (right axis, blue); dashed vertical lines are the faults (hover for what).</p>"
    );
    for (i, z) in o.zones.iter().enumerate() {
        let _ = write!(h, "<h3>{} ({} nodes, {} pods)</h3>{}", esc(&z.key), z.nodes, z.pods, zone_svg(o, i));
    }
    let _ = write!(
        h,
        "<h2>Per zone</h2><table><tr><th>zone</th><th>nodes</th><th>failed</th><th>seen dead</th><th>first seen dead</th><th>tainted</th><th>first tainted</th><th>last tainted</th><th>pods evicted</th><th>first eviction</th><th>last eviction</th></tr>"
    );
    let opt = |s: Option<(Timestamp, Timestamp)>, last: bool| {
        s.map_or("-".to_string(), |(a, b)| human(if last { b } else { a }))
    };
    for z in &o.zones {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&z.key),
            z.nodes,
            z.nodes_failed,
            z.seen_dead.0,
            opt(z.seen_dead.1, false),
            z.tainted.0,
            opt(z.tainted.1, false),
            opt(z.tainted.1, true),
            z.evicted.0,
            opt(z.evicted.1, false),
            opt(z.evicted.1, true)
        );
    }
    h.push_str("</table><h2>Safety checks</h2><table><tr><th>check</th><th>held</th></tr>");
    let contract = (CONTRACT, o.contract_violations == 0);
    for (name, ok) in o.safety.iter().map(|(i, ok)| (i.name(), *ok)).chain(std::iter::once(contract)) {
        let _ = write!(
            h,
            r##"<tr><td>{}</td><td class="{}">{}</td></tr>"##,
            name,
            if ok { "ok" } else { "bad" },
            if ok { "yes" } else { "NO" }
        );
    }
    let _ = write!(h, "</table><h2>Summary</h2><pre>{}</pre>", esc(&render_text(o, run)));
    let json = serde_json::to_string_pretty(&to_json(o, run, false)).unwrap_or_default();
    let _ = write!(h, "<h2>Figures (JSON)</h2><pre>{}</pre></body></html>", esc(&json));
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_times() {
        let t = |ms| Timestamp::EPOCH + Span::from_millis(ms);
        assert_eq!(human(t(0)), "0s");
        assert_eq!(human(t(1500)), "1.5s");
        assert_eq!(human(t(100_000)), "1m40s");
        assert_eq!(human(t(3_725_000)), "1h02m05s");
        assert_eq!(fmt_rate(0.1), "0.1");
        assert_eq!(fmt_rate(0.0), "0");
    }

    #[test]
    fn distribution() {
        let d = dist(&[3.0, 1.0, 2.0]);
        assert_eq!(d["p50"], 2.0);
        assert_eq!(d["max"], 3.0);
        assert_eq!(dist(&[])["count"], 0);
    }
}
