//! What a simulation shows: a summary a person reads at 3 a.m. (`text.rs`),
//! the same figures as JSON for scripts (`json.rs`), and a self-contained
//! HTML page (`html.rs`) with a timeline chart per zone (`svg.rs`).
//!
//! This file holds what those renderings share, so they cannot disagree:
//! the driver's [`RunInfo`] and [`process_usage`], the name of the
//! [`CONTRACT`] check, time formatting for people ([`human`],
//! [`human_span`]), sample distributions, and the `Theory` of what the
//! configuration predicts. Each output's entry point is re-exported here:
//! [`render_text`], [`to_json`], [`render_html`].

mod html;
mod json;
mod svg;
mod text;

pub use html::render_html;
pub use json::to_json;
pub use text::render_text;

use nodewarden_model::{Span, Timestamp};
use serde_json::{Value, json};

// The check names live with the checks (statistics); they are re-exported
// here, where the reports that print them have always found them.
pub use crate::statistics::{CONTRACT, INTERLOCK_SILENT};
use crate::statistics::{Outcome, ZoneTally};

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
        // node dead at the first pass after the grace period; the Unknown
        // status lands a write latency later.
        let landing = o.api_latency.write_latency.max;
        Theory { detect: (grace + -lease, grace + period + period + landing) }
    }
}

/// The zone's rate (nodes per second) in effect at `t`.
fn rate_at(z: &ZoneTally, t: Timestamp) -> Option<f64> {
    z.states.iter().take_while(|(at, _, _)| *at <= t).last().map(|(_, _, r)| *r)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statistics::MarkKind;

    #[test]
    fn human_times() {
        let t = |ms| Timestamp::EPOCH + Span::from_millis(ms);
        assert_eq!(human(t(0)), "0s");
        assert_eq!(human(t(1500)), "1.5s");
        assert_eq!(human(t(100_000)), "1m40s");
        assert_eq!(human(t(3_725_000)), "1h02m05s");
    }

    fn run(builtin: nodewarden_cluster::Builtin, nodes: usize) -> Outcome {
        let opts = crate::SimOptions {
            source: crate::Source::Builtin(
                builtin,
                nodewarden_cluster::fleet::FleetSpec { nodes, zones: 3, pods_per_node: 4, seed: 1 },
            ),
            config: nodewarden_model::ControllerConfig::default(),
            duration: None,
            seed: 1,
            measure: false,
            api: None,
        };
        match crate::Simulation::new(opts).and_then(crate::Simulation::run) {
            Ok(o) => o,
            Err(e) => panic!("{builtin}: {e}"),
        }
    }

    #[test]
    fn the_page_marks_every_fault_and_folds_the_json_away() {
        // Rolling failure: one node after another, each down for 8m; the
        // summary has one line for all of them, the charts a mark each.
        let o = run(nodewarden_cluster::Builtin::RollingFailure, 120);
        let page = render_html(&o, &RunInfo::default());
        let downs: usize = o.zones.iter().map(|z| z.marks.iter().filter(|m| m.kind == MarkKind::Down).count()).sum();
        let ups: usize = o.zones.iter().map(|z| z.marks.iter().filter(|m| m.kind == MarkKind::Up).count()).sum();
        assert_eq!(o.faults.len(), 1, "{:?}", o.faults);
        assert_eq!((downs, ups), (6, 6), "every crash and every recovery, in its zone");
        assert_eq!(page.matches(r#"class="fault" data-kind="down""#).count(), 6);
        assert_eq!(page.matches(r#"class="fault" data-kind="up""#).count(), 6);
        // The JSON figures are folded away and offered as a download, not
        // laid out on the page.
        let folded = page.find("<details><summary>Figures (JSON)</summary><pre>").expect("folded JSON");
        assert_eq!(page.matches("&quot;actions_per_second&quot;").count(), 1, "the JSON once");
        assert!(page.find("&quot;actions_per_second&quot;").is_some_and(|i| i > folded));
        assert!(page.contains("href=\"data:application/json;base64,"));
        // Self-contained: no script, nothing fetched.
        assert!(!page.contains("<script") && !page.contains(" src="));
        // The summary wraps instead of running off the side.
        assert!(page.contains("white-space:pre-wrap"));
    }

    #[test]
    fn a_control_plane_outage_is_marked_in_every_zone() {
        let o = run(nodewarden_cluster::Builtin::ControlPlaneOutage, 30);
        for z in &o.zones {
            let marks: Vec<(Timestamp, MarkKind)> = z.marks.iter().map(|m| (m.at, m.kind)).collect();
            let t = |s| Timestamp::EPOCH + Span::from_secs(s);
            assert_eq!(marks, vec![(t(60), MarkKind::Cluster), (t(660), MarkKind::Cluster)], "{}", z.key);
        }
    }

    #[test]
    fn distribution() {
        let d = dist(&[3.0, 1.0, 2.0]);
        assert_eq!(d["p50"], 2.0);
        assert_eq!(d["max"], 3.0);
        assert_eq!(dist(&[])["count"], 0);
    }
}
