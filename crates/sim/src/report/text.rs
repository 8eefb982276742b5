//! The summary for people, the default output of `nodewarden sim`: what
//! happened, what the controller did in each zone set against what the
//! configuration predicts, the latencies, and whether every safety check
//! held. Written to be read at 3 a.m., so each zone ends with one sentence
//! saying how its story went.

use std::fmt::Write as _;

use nodewarden_engine::ZoneState;
use nodewarden_model::{Span, Timestamp};
use serde_json::Value;

use super::{RunInfo, Theory, dist, human, human_span, rate_at};
use crate::simulation::{Outcome, ZoneTally};

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

/// The API the controller talked to: how slow, and what follows from it.
fn api_line(o: &Outcome) -> String {
    if o.api_latency.is_instant() {
        return "API: no latency (--api-latency none): each write lands at once, each change is seen at once".into();
    }
    format!(
        "API: writes land {} after they are sent, watch events arrive {} after the change (--api-latency); \
         deadlines run from what the controller observed",
        o.api_latency.write_latency, o.api_latency.watch_delay
    )
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
        "controller: grace {}, monitor every {}, taint rate {}/s (secondary {}/s), {}{}",
        human_span(o.config.node_monitor_grace_period),
        human_span(o.config.node_monitor_period),
        fmt_rate(o.config.node_eviction_rate),
        fmt_rate(o.config.secondary_node_eviction_rate),
        // No admission default: a pod tolerates only what it declares.
        o.admission
            .unreachable_seconds
            .map_or("pods get no default toleration".to_string(), |x| format!("pods tolerate {x}s by default")),
        if o.config.enable_taint_manager { "" } else { "; legacy eviction mode" },
    );
    let _ = writeln!(s, "{}", api_line(o));
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
                "    seen dead           {} time(s), {:<22} expected from {} to {} after each failure (grace {} - Lease interval {} .. + 2 monitor periods{})",
                z.seen_dead.0,
                span_text(z.seen_dead.1),
                human_span(theory.detect.0),
                human_span(theory.detect.1),
                human_span(o.config.node_monitor_grace_period),
                human_span(o.kubelet.lease_every),
                if o.api_latency.is_instant() { "" } else { " + the write's latency" },
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
    if !o.addons.is_empty() {
        addons_text(&mut s, o);
    }
    let checks = o.checks();
    let failed: Vec<&str> = checks.iter().filter(|(_, ok)| !ok).map(|(name, _)| *name).collect();
    if failed.is_empty() {
        let names: Vec<&str> = checks.iter().map(|(name, _)| *name).collect();
        let _ = writeln!(s, "\nSafety: all {} checks held ({}).", names.len(), names.join(", "));
    } else {
        let _ = writeln!(s, "\nSAFETY CHECKS FAILED: {}", failed.join(", "));
        if o.contract_violations > 0 {
            let _ = writeln!(s, "  {} write(s) to deleted or terminating pods", o.contract_violations);
        }
        if o.held_back > 0 {
            let _ = writeln!(s, "  {} write(s) held back by the safety interlock", o.held_back);
        }
        for v in &o.violations {
            let _ = writeln!(s, "  {v}");
        }
    }
    s
}

/// Per critical addon: when it became Unschedulable, when and where it
/// was bound, the pods evicted for it against the minimum possible.
fn addons_text(s: &mut String, o: &Outcome) {
    let _ = writeln!(s, "\nCritical addons (rescheduler {})", if o.config.enable_rescheduler { "on" } else { "off" });
    let (mut bound, mut lost, mut evicted, mut minimum) = (0, 0, 0, 0);
    let mut longest = Span::ZERO;
    for a in &o.addons {
        let Some(since) = a.unschedulable_since else {
            let _ = writeln!(s, "  {:<32} never unschedulable", a.addon);
            continue;
        };
        lost += 1;
        evicted += a.evicted;
        minimum += a.minimum.unwrap_or(0);
        let placed = match &a.bound {
            Some((t, node)) => {
                bound += 1;
                longest = longest.max(*t - since);
                format!("bound to {node} at {} ({} later)", human(*t), human_span(*t - since))
            }
            None => "NOT BOUND by the end".to_string(),
        };
        let min = a.minimum.map_or("no node could take it".to_string(), |m| m.to_string());
        let refused = if a.refused > 0 { format!(", {} refused by budgets", a.refused) } else { String::new() };
        let _ = writeln!(
            s,
            "  {:<32} unschedulable at {}, {placed}; {} pod(s) evicted for it{refused} (minimum {min})",
            a.addon,
            human(since),
            a.evicted
        );
    }
    let took = if bound > 0 {
        format!(" (the slowest {} after it became unschedulable)", human_span(longest))
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "  in short: {bound} of {lost} lost addon(s) scheduled again{took}; {evicted} pod(s) evicted against a minimum \
         of {minimum} (per addon, the fewest pods on one node whose removal makes it fit, ignoring budgets)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(fmt_rate(0.1), "0.1");
        assert_eq!(fmt_rate(0.0), "0");
    }
}
