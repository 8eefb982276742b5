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
use crate::statistics::{Outcome, ZoneTally};

fn state_name(s: Option<ZoneState>) -> &'static str {
    s.map_or("none", ZoneState::as_str)
}

/// Zone state changes (rate changes within a state included), as the
/// parts of a chain (`Normal at 0s (0.1/s)`, ...).
fn state_story(z: &ZoneTally) -> Vec<String> {
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
    parts
}

fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".to_string() } else { s.to_string() }
}

/// Lines of the summary are wrapped to this many columns, so it reads in a
/// terminal and on the HTML page without scrolling sideways.
pub(super) const WIDTH: usize = 110;

/// Writes `first` then `text`, wrapped at spaces to [`WIDTH`] columns,
/// each further line indented by `indent` spaces. Runs of spaces inside a
/// line (column alignment) are kept; a word longer than a line gets a line
/// of its own.
fn wrapped(s: &mut String, first: &str, indent: usize, text: &str) {
    let mut prefix = first.to_string();
    let mut rest = text.trim_end();
    loop {
        let room = WIDTH.saturating_sub(prefix.chars().count()).max(20);
        if rest.chars().count() <= room {
            let _ = writeln!(s, "{prefix}{rest}");
            return;
        }
        // The last space within the room (or just after it), else the
        // first one after it.
        let limit = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
        let within = if rest[limit..].starts_with(' ') { Some(limit) } else { rest[..limit].rfind(' ') };
        let cut =
            within.filter(|&i| !rest[..i].trim().is_empty()).or_else(|| rest[limit..].find(' ').map(|i| i + limit));
        let Some(cut) = cut else {
            let _ = writeln!(s, "{prefix}{rest}");
            return;
        };
        let _ = writeln!(s, "{prefix}{}", rest[..cut].trim_end());
        rest = rest[cut..].trim_start();
        prefix = " ".repeat(indent);
    }
}

/// A chain of parts joined by ` -> `, as [`field`] writes a value, but
/// broken only between parts (a part longer than a line is wrapped alone).
fn chain_field(s: &mut String, label: &str, parts: &[String]) {
    let mut line = String::new();
    let mut first = true;
    for (i, part) in parts.iter().enumerate() {
        let piece = if i + 1 < parts.len() { format!("{part} ->") } else { part.clone() };
        if !line.is_empty() && 24 + line.chars().count() + 1 + piece.chars().count() > WIDTH {
            let label = if first { label } else { "" };
            field(s, label, &line);
            first = false;
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&piece);
    }
    field(s, if first { label } else { "" }, &line);
}

/// One field of a zone's story: its label in a column, its value wrapped
/// beside it.
fn field(s: &mut String, label: &str, value: &str) {
    wrapped(s, &format!("    {label:<20}"), 24, value);
}

/// Why the zone's rates were what they were, for each disrupted state it
/// went through (the rule is upstream's, docs/semantics.md): a zone with
/// no Ready node keeps the normal rate unless every zone is in that state;
/// a partly disrupted zone slows to the secondary rate when it is large,
/// and stops when it is small.
fn why_rates(o: &Outcome, z: &ZoneTally) -> Option<String> {
    let cfg = &o.config;
    let large = cfg.large_cluster_size_threshold;
    let mut reasons: Vec<String> = Vec::new();
    let mut said: Vec<(ZoneState, bool)> = Vec::new();
    for (_, state, rate) in &z.states {
        let Some(state) = *state else { continue };
        let stopped = *rate <= 0.0;
        if said.contains(&(state, stopped)) {
            continue;
        }
        said.push((state, stopped));
        let r = fmt_rate(*rate);
        let reason = match state {
            ZoneState::FullDisruption if !stopped => format!(
                "FullDisruption (no Ready node) keeps the normal {r}/s because other zones still have Ready \
                 nodes: the zone failed, not the controller's own network (with every zone down, tainting would \
                 stop)"
            ),
            ZoneState::FullDisruption if cfg.node_eviction_rate > 0.0 => "FullDisruption in every zone: most \
                 likely the controller lost its own network, so nothing is tainted (rate 0) until a zone has Ready \
                 nodes again"
                .to_string(),
            ZoneState::FullDisruption => "FullDisruption at node-eviction-rate 0: nothing is tainted".to_string(),
            ZoneState::PartialDisruption if z.nodes > large as usize => format!(
                "PartialDisruption ({:.0}% or more of the nodes not Ready) slows to the secondary {r}/s, the zone \
                 having more than {large} nodes",
                cfg.unhealthy_zone_threshold * 100.0
            ),
            ZoneState::PartialDisruption => format!(
                "PartialDisruption ({:.0}% or more of the nodes not Ready) stops tainting (rate 0), the zone \
                 having {large} nodes or fewer",
                cfg.unhealthy_zone_threshold * 100.0
            ),
            ZoneState::Normal | ZoneState::Initial => continue,
        };
        reasons.push(reason);
    }
    (!reasons.is_empty()).then(|| format!("{}.", reasons.join("; ")))
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
///
/// Long on purpose: it writes the summary top to bottom in the order people
/// read it, each section a few lines of `writeln!`; split into functions, the
/// order of the output would no longer be visible in one place.
pub fn render_text(o: &Outcome, run: &RunInfo) -> String {
    let theory = Theory::of(o);
    let mut s = String::new();
    let sim = o.simulated.as_secs_f64();
    wrapped(&mut s, "", 4, &format!("nodewarden sim: {} ({})", o.scenario, o.description));
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
    let controller = format!(
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
    wrapped(&mut s, "", 12, &controller);
    wrapped(&mut s, "", 5, &api_line(o));
    let _ = writeln!(s, "\nWhat happened");
    for (t, what) in &o.faults {
        wrapped(&mut s, &format!("  {:>9}  ", human(*t)), 13, what);
    }
    if o.writes_failed > 0 {
        let failed = format!(
            "{} controller write(s) failed (API server unreachable, or a stale precondition); none changed the cluster",
            o.writes_failed
        );
        wrapped(&mut s, "  ", 2, &failed);
    }
    let _ = writeln!(s, "\nWhat the controller did, per zone");
    for z in &o.zones {
        let quiet =
            z.failures == 0 && z.seen_dead.0 == 0 && z.tainted.0 == 0 && z.evicted.0 == 0 && z.false_alarms == 0;
        if quiet {
            let line = format!(
                "{}: {} nodes, {} pods: nothing failed; nothing seen dead, tainted or evicted (as expected)",
                z.key, z.nodes, z.pods
            );
            wrapped(&mut s, "  ", 4, &line);
            continue;
        }
        let _ = writeln!(s, "  {}: {} nodes, {} pods", z.key, z.nodes, z.pods);
        if let Some((first, _)) = z.failed {
            let failed = format!("{} node(s), {} time(s), first at {}", z.nodes_failed, z.failures, human(first));
            field(&mut s, "failed", &failed);
            let seen = format!(
                "{} time(s), {:<22} expected from {} to {} after each failure (grace {} - Lease interval {} .. + 2 monitor periods{})",
                z.seen_dead.0,
                span_text(z.seen_dead.1),
                human_span(theory.detect.0),
                human_span(theory.detect.1),
                human_span(o.config.node_monitor_grace_period),
                human_span(o.kubelet.lease_every),
                if o.api_latency.is_instant() { "" } else { " + the write's latency" },
            );
            field(&mut s, "seen dead", &seen);
        } else {
            field(&mut s, "failed", "none");
        }
        if z.false_alarms > 0 {
            field(&mut s, "seen dead wrongly", &format!("{} time(s) (kubelet was fine)", z.false_alarms));
        }
        chain_field(&mut s, "zone state", &state_story(z));
        if let Some(why) = why_rates(o, z) {
            field(&mut s, "why these rates", &why);
        }
        match z.tainted {
            (0, _) => {
                let why = if z.seen_dead.0 == 0 {
                    "nothing to taint".to_string()
                } else {
                    "the zone's rate was 0 or every zone was down (expected: tainting stops then)".to_string()
                };
                field(&mut s, "NoExecute taints", &format!("none: {why}"));
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
                let taints = format!("{n} added, {:<24} {expected}", span_text(Some((first, last))));
                field(&mut s, "NoExecute taints", &taints);
            }
            (n, None) => field(&mut s, "NoExecute taints", &format!("{n} added")),
        }
        if z.untainted > 0 {
            field(&mut s, "taints removed", &z.untainted.to_string());
        }
        let evicted = format!(
            "{:<32} {}",
            format!("{}, {}", z.evicted.0, span_text(z.evicted.1)),
            if z.evicted.0 > 0 { "expected each at its node's taint + its toleration" } else { "" }
        );
        field(&mut s, "pods evicted", &evicted);
        if z.daemonset_evicted > 0 {
            field(&mut s, "DaemonSet pods", &format!("{} deleted", z.daemonset_evicted));
        }
        field(&mut s, "in short", &in_short(o, z));
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
        let _ = writeln!(s);
        wrapped(&mut s, "", 8, &format!("Safety: all {} checks held ({}).", names.len(), names.join(", ")));
    } else {
        let _ = writeln!(s);
        wrapped(&mut s, "", 21, &format!("SAFETY CHECKS FAILED: {}", failed.join(", ")));
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

    #[test]
    fn long_lines_wrap_at_spaces_under_their_label() {
        let mut s = String::new();
        let text = "word ".repeat(60);
        field(&mut s, "in short", &text);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.len() >= 3, "{s}");
        assert!(lines[0].starts_with("    in short            word"), "{s}");
        for l in &lines {
            assert!(l.chars().count() <= WIDTH, "{l:?} is longer than {WIDTH}");
        }
        for l in &lines[1..] {
            assert!(l.starts_with(&" ".repeat(24)) && !l.starts_with(&" ".repeat(25)), "{l:?}");
        }
        assert_eq!(s.split_whitespace().filter(|w| *w == "word").count(), 60, "no word lost");
        // Column alignment inside a short line is kept; a word longer than
        // the line is not cut.
        let mut s = String::new();
        field(&mut s, "pods evicted", "6954, 2m05s .. 50m00s      expected");
        assert_eq!(s, "    pods evicted        6954, 2m05s .. 50m00s      expected\n");
        let mut s = String::new();
        let long = "x".repeat(200);
        wrapped(&mut s, "", 2, &format!("a {long} b"));
        assert_eq!(s, format!("a\n  {long}\n  b\n"));
        // A chain of zone states breaks between states only.
        let parts: Vec<String> = ["Normal at 0s (0.1/s)", "PartialDisruption at 1m45s (0.01/s)"]
            .iter()
            .chain(&["FullDisruption at 1m50s (0.1/s)", "Normal at 50m05s (0.1/s)"])
            .map(|p| p.to_string())
            .collect();
        let mut s = String::new();
        chain_field(&mut s, "zone state", &parts);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines,
            [
                "    zone state          Normal at 0s (0.1/s) -> PartialDisruption at 1m45s (0.01/s) ->",
                "                        FullDisruption at 1m50s (0.1/s) -> Normal at 50m05s (0.1/s)",
            ]
        );
    }

    fn zone_outage(nodes: usize) -> Outcome {
        let opts = crate::SimOptions {
            source: crate::Source::Builtin(
                nodewarden_cluster::Builtin::ZoneOutage,
                nodewarden_cluster::fleet::FleetSpec { nodes, zones: 3, pods_per_node: 4, seed: 1 },
            ),
            config: nodewarden_model::ControllerConfig::default(),
            duration: Some(Span::from_secs(5 * 60)),
            seed: 1,
            measure: false,
            api: None,
        };
        match crate::Simulation::new(opts).and_then(crate::Simulation::run) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_fully_down_zone_says_why_it_keeps_the_normal_rate() {
        // Three zones of 60: zone-a goes down whole, passing through
        // PartialDisruption (over the 50-node threshold: the secondary
        // rate) to FullDisruption (the normal rate, the others being up).
        let o = zone_outage(180);
        let z = &o.zones[0];
        assert!(z.states.iter().any(|(_, s, r)| *s == Some(ZoneState::FullDisruption) && *r == 0.1), "{:?}", z.states);
        let text = render_text(&o, &RunInfo::default());
        let why = text.split("why these rates").nth(1).expect("a why line").split("NoExecute taints").next();
        let why = why.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            why.contains(
                "FullDisruption (no Ready node) keeps the normal 0.1/s because other zones still have Ready nodes"
            ),
            "{text}"
        );
        // The healthy zones need no explanation.
        assert_eq!(text.matches("why these rates").count(), 1, "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
    }
}
