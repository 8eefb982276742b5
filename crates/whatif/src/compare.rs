//! `--compare`: one snapshot and failure played under two configurations,
//! set side by side.
//!
//! Two configurations usually differ in *when* things happen (60 s
//! tolerations evict the same pods four minutes sooner), so the table has
//! the timings beside the counts: first and last NoExecute taint, first
//! and last eviction, and per workload the time of its last eviction and
//! the time it had no ready replica (median and worst). The list below it
//! names only the workloads whose fate (pods evicted, every ready replica
//! lost) or timing differs, each with what differs.
//!
//! The two runs draw the API's latency from the same seed, but once their
//! writes differ the draws fall differently, so the same eviction can land
//! a few hundred milliseconds apart. Times closer than [`SAME_WITHIN`]
//! count as the same.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use nodewarden_model::{Span, Timestamp};
use nodewarden_sim::report::{human, human_span};
use serde_json::{Value, json};

use crate::Played;
use crate::workloads::{WorkloadId, WorkloadReport};

/// Times closer than this are the same: more than the simulated API's
/// largest write latency plus watch delay (0.7 s), less than any
/// difference a configuration makes on purpose.
pub const SAME_WITHIN: Span = Span::from_secs(1);

/// One cell of the table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// A count.
    Count(usize),
    /// An instant from the snapshot's moment; `None`: it never happened.
    At(Option<Timestamp>),
    /// A length of time; `None`: nothing to measure.
    Took(Option<Span>),
    /// Safety checks held, of how many.
    Held {
        /// Checks that held.
        held: usize,
        /// Checks made.
        of: usize,
    },
}

fn abs(s: Span) -> Span {
    if s.is_negative() { -s } else { s }
}

/// To the second: the table reads at a glance, and the API's jitter is
/// below it anyway.
fn rounded(s: Span) -> Span {
    Span::from_millis((s.as_nanos() as f64 / 1e9).round() as i64 * 1000)
}

impl Cell {
    fn span(self) -> Option<Span> {
        match self {
            Cell::At(t) => t.map(|t| t - Timestamp::EPOCH),
            Cell::Took(s) => s,
            Cell::Count(_) | Cell::Held { .. } => None,
        }
    }

    /// The cell for people.
    pub fn text(self) -> String {
        match self {
            Cell::Count(n) => n.to_string(),
            Cell::At(None) | Cell::Took(None) => "-".to_string(),
            Cell::At(Some(t)) => human(Timestamp::EPOCH + rounded(t - Timestamp::EPOCH)),
            Cell::Took(Some(s)) => human_span(rounded(s)),
            Cell::Held { held, of } => format!("{held} of {of}"),
        }
    }

    /// True when the two differ: counts at all, times by [`SAME_WITHIN`]
    /// or more, or one happened and the other did not.
    pub fn differs(self, other: Cell) -> bool {
        match (self, other) {
            (Cell::Count(a), Cell::Count(b)) => a != b,
            (Cell::Held { held: a, of: x }, Cell::Held { held: b, of: y }) => a != b || x != y,
            _ => match (self.span(), other.span()) {
                (Some(a), Some(b)) => abs(b + -a) >= SAME_WITHIN,
                (a, b) => a.is_some() != b.is_some(),
            },
        }
    }

    /// `other` against this one, for the table's last column: `=`,
    /// `+3`, `-4m00s`, or `B only` / `A only` when one side has none.
    pub fn delta(self, other: Cell) -> String {
        if !self.differs(other) {
            return "=".to_string();
        }
        match (self, other) {
            (Cell::Count(a), Cell::Count(b)) => format!("{:+}", b as i64 - a as i64),
            (Cell::Held { held: a, .. }, Cell::Held { held: b, .. }) => format!("{:+}", b as i64 - a as i64),
            _ => match (self.span(), other.span()) {
                (Some(a), Some(b)) => {
                    let d = rounded(b + -a);
                    if d < Span::ZERO { format!("-{}", human_span(abs(d))) } else { format!("+{}", human_span(d)) }
                }
                (None, _) => "B only".to_string(),
                (_, None) => "A only".to_string(),
            },
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What it counts or times.
    pub label: &'static str,
    /// Under A.
    pub a: Cell,
    /// Under B.
    pub b: Cell,
}

/// A workload that fares differently.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadDiff {
    /// Which.
    pub id: WorkloadId,
    /// What differs, for people (`evicted 4m00s sooner under B`).
    pub what: Vec<String>,
    /// What happened to it under A, one line.
    pub a: String,
    /// Under B.
    pub b: String,
    /// A change of fate (evictions, every ready replica lost) rather than
    /// of timing: listed first.
    pub fate: bool,
    /// The largest timing difference: orders the rest.
    pub shift: Span,
}

/// The two runs side by side.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The table.
    pub rows: Vec<Row>,
    /// The workloads that fare differently, fate changes first, then the
    /// largest timing differences.
    pub workloads: Vec<WorkloadDiff>,
}

/// The median (the lower one of an even count) and the largest.
fn median_and_max(mut v: Vec<Span>) -> (Option<Span>, Option<Span>) {
    v.sort();
    (v.get(v.len().saturating_sub(1) / 2).copied(), v.last().copied())
}

fn min_max(spans: impl Iterator<Item = Option<(Timestamp, Timestamp)>>) -> (Option<Timestamp>, Option<Timestamp>) {
    spans.flatten().fold((None, None), |(lo, hi), (a, b)| {
        (Some(lo.map_or(a, |x: Timestamp| x.min(a))), Some(hi.map_or(b, |x: Timestamp| x.max(b))))
    })
}

/// A run's column of the table, in [`ROWS`] order.
fn column(p: &Played) -> Vec<Cell> {
    let r = &p.report;
    let o = &p.outcome;
    let end = r.end;
    let (first_taint, last_taint) = min_max(o.zones.iter().map(|z| z.tainted.1));
    let (first_evict, last_evict) = min_max(o.zones.iter().map(|z| z.evicted.1));
    let counted = || r.workloads.iter().filter(|w| w.id.kind != "DaemonSet");
    let (last_p50, last_max) =
        median_and_max(counted().filter_map(|w| w.evicted.last()).map(|(t, _)| *t - Timestamp::EPOCH).collect());
    let (without_p50, without_max) =
        median_and_max(counted().filter(|w| w.lost_all()).map(|w| w.time_without(end)).collect());
    let checks = o.checks();
    vec![
        Cell::Count(r.lost_all().len()),
        Cell::Count(r.workloads.iter().map(|w| w.evicted.len()).sum()),
        Cell::Count(r.pdbs.iter().filter(|b| b.breached_at.is_some()).count()),
        Cell::Count(r.critical.iter().filter(|c| c.evicted.is_some()).count()),
        Cell::Count(o.zones.iter().map(|z| z.tainted.0).sum()),
        Cell::At(first_taint),
        Cell::At(last_taint),
        Cell::At(first_evict),
        Cell::At(last_evict),
        Cell::At(last_p50.map(|s| Timestamp::EPOCH + s)),
        Cell::At(last_max.map(|s| Timestamp::EPOCH + s)),
        Cell::Took(without_p50),
        Cell::Took(without_max),
        Cell::Held { held: checks.iter().filter(|c| c.1).count(), of: checks.len() },
    ]
}

/// The table's rows, in order.
pub const ROWS: [&str; 14] = [
    "workloads that lose every ready replica",
    "pods evicted",
    "PodDisruptionBudgets breached",
    "critical pods evicted",
    "nodes tainted NoExecute",
    "first NoExecute taint",
    "last NoExecute taint",
    "first eviction",
    "last eviction",
    "a workload's last eviction, median",
    "a workload's last eviction, latest",
    "time without a ready replica, median",
    "time without a ready replica, longest",
    "safety checks held",
];

/// An instant to the second, for people.
fn at(t: Timestamp) -> String {
    Cell::At(Some(t)).text()
}

/// One workload under one configuration, one line, to the second.
fn one_line(w: &WorkloadReport, end: Timestamp) -> String {
    let evicted = match (w.evicted.first(), w.evicted.last()) {
        (Some(a), Some(b)) if at(a.0) == at(b.0) => {
            format!("{} of {} evicted at {}", w.evicted.len(), w.replicas, at(a.0))
        }
        (Some(a), Some(b)) => format!("{} of {} evicted, {} .. {}", w.evicted.len(), w.replicas, at(a.0), at(b.0)),
        _ => format!("none of {} evicted", w.replicas),
    };
    let ready = match w.no_ready.first() {
        Some((from, _)) => {
            format!("no ready replica for {} (from {})", Cell::Took(Some(w.time_without(end))).text(), at(*from))
        }
        None => format!("at least {} ready throughout", w.min_ready),
    };
    format!("{evicted}; {ready}")
}

/// How `b` differs from `a`, or `None` when it fares the same.
fn diff(a: &WorkloadReport, b: &WorkloadReport, end_a: Timestamp, end_b: Timestamp) -> Option<WorkloadDiff> {
    let mut what = Vec::new();
    let mut fate = false;
    let mut shift = Span::ZERO;
    if a.lost_all() != b.lost_all() {
        fate = true;
        what.push(format!("loses every ready replica only under {}", if a.lost_all() { "A" } else { "B" }));
    }
    if a.evicted.len() != b.evicted.len() {
        fate = true;
        let (x, y) = (a.evicted.len(), b.evicted.len());
        what.push(if y > x { format!("B evicts {} more", y - x) } else { format!("B evicts {} fewer", x - y) });
    }
    let mut timing = |label: &str, x: Option<Span>, y: Option<Span>, sooner: &str, later: &str| {
        if let (Some(x), Some(y)) = (x, y)
            && abs(y + -x) >= SAME_WITHIN
        {
            let d = rounded(y + -x);
            shift = shift.max(abs(d));
            let word = if d < Span::ZERO { sooner } else { later };
            what.push(format!("{label} {} {word} under B", human_span(abs(d))));
        }
    };
    let since = |t: Timestamp| t - Timestamp::EPOCH;
    timing(
        "first eviction",
        a.evicted.first().map(|e| since(e.0)),
        b.evicted.first().map(|e| since(e.0)),
        "sooner",
        "later",
    );
    timing(
        "last eviction",
        a.evicted.last().map(|e| since(e.0)),
        b.evicted.last().map(|e| since(e.0)),
        "sooner",
        "later",
    );
    if a.lost_all() && b.lost_all() {
        timing("no ready replica", Some(a.time_without(end_a)), Some(b.time_without(end_b)), "shorter", "longer");
    }
    if what.is_empty() {
        return None;
    }
    // "first eviction 4m00s sooner under B; last eviction 4m00s sooner
    // under B" says the same twice.
    if let Some(i) = what.iter().position(|w| w.starts_with("first eviction "))
        && let Some(j) = what.iter().position(|w| w.starts_with("last eviction "))
        && what[i]["first eviction ".len()..] == what[j]["last eviction ".len()..]
    {
        what[i] = format!("first and last eviction {}", &what[j]["last eviction ".len()..]);
        what.remove(j);
    }
    Some(WorkloadDiff { id: a.id.clone(), what, a: one_line(a, end_a), b: one_line(b, end_b), fate, shift })
}

/// Sets two runs of the same snapshot and failure side by side.
pub fn compare(a: &Played, b: &Played) -> Comparison {
    let (ca, cb) = (column(a), column(b));
    let rows = ROWS.iter().zip(ca.into_iter().zip(cb)).map(|(label, (a, b))| Row { label, a, b }).collect();
    let in_b: BTreeMap<&WorkloadId, &WorkloadReport> = b.report.workloads.iter().map(|w| (&w.id, w)).collect();
    let mut workloads: Vec<WorkloadDiff> =
        a.report.workloads.iter().filter_map(|w| diff(w, in_b.get(&w.id)?, a.report.end, b.report.end)).collect();
    workloads.sort_by(|x, y| y.fate.cmp(&x.fate).then(y.shift.cmp(&x.shift)).then(x.id.cmp(&y.id)));
    Comparison { rows, workloads }
}

impl Comparison {
    /// The table and the list, for people; at most `limit` workloads.
    pub fn render_text(&self, name_a: &str, name_b: &str, limit: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Side by side: A = {name_a}, B = {name_b}");
        let _ = writeln!(s, "  {:<40} {:>12} {:>12} {:>10}", "", "A", "B", "B - A");
        for r in &self.rows {
            let _ = writeln!(s, "  {:<40} {:>12} {:>12} {:>10}", r.label, r.a.text(), r.b.text(), r.a.delta(r.b));
        }
        let _ = writeln!(
            s,
            "  (times from the snapshot's moment, to the second; closer than {} counts as the same)",
            human_span(SAME_WITHIN)
        );
        if self.workloads.is_empty() {
            let _ = writeln!(s, "  Every workload fares the same under both.");
            return s;
        }
        let _ = writeln!(s, "  Workloads that fare differently ({}):", self.workloads.len());
        for w in self.workloads.iter().take(limit) {
            let _ = writeln!(s, "    {}: {}", w.id, w.what.join("; "));
            let _ = writeln!(s, "      A: {}", w.a);
            let _ = writeln!(s, "      B: {}", w.b);
        }
        if self.workloads.len() > limit {
            let _ = writeln!(
                s,
                "    ... and {} more (--json lists them all under compare.workloads)",
                self.workloads.len() - limit
            );
        }
        s
    }

    /// The same as JSON: each row with both values (seconds for times)
    /// and whether they differ, and every workload that fares
    /// differently.
    pub fn to_json(&self) -> Value {
        let value = |c: Cell| match c {
            Cell::Count(n) => json!(n),
            Cell::Held { held, of } => json!({"held": held, "of": of}),
            _ => json!(c.span().map(|s| s.as_secs_f64())),
        };
        json!({
            "same_within_seconds": SAME_WITHIN.as_secs_f64(),
            "rows": self.rows.iter().map(|r| json!({
                "what": r.label, "a": value(r.a), "b": value(r.b), "differs": r.a.differs(r.b),
            })).collect::<Vec<_>>(),
            "workloads": self.workloads.iter().map(|w| json!({
                "workload": w.id.to_string(), "differs": w.what, "a": w.a, "b": w.b,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(name: &str, evicted: &[i64], no_ready_from: Option<i64>) -> WorkloadReport {
        WorkloadReport {
            id: WorkloadId { kind: "Deployment".into(), namespace: "prod".into(), name: name.into() },
            replicas: 3,
            ready_at_start: 3,
            zones: Default::default(),
            on_failed_nodes: evicted.len(),
            evicted: evicted
                .iter()
                .enumerate()
                .map(|(i, s)| (Timestamp::from_secs(*s), format!("prod/{name}-{i}")))
                .collect(),
            no_ready: no_ready_from.map(|s| (Timestamp::from_secs(s), None)).into_iter().collect(),
            min_ready: if no_ready_from.is_some() { 0 } else { 3 - evicted.len() },
            critical: 0,
        }
    }

    #[test]
    fn cells_differ_by_a_second_or_more() {
        let at = |ms: i64| Cell::At(Some(Timestamp::EPOCH + Span::from_millis(ms)));
        assert!(!at(535_395).differs(at(535_409)), "jitter");
        assert!(at(535_395).differs(at(295_409)));
        assert_eq!(at(535_395).delta(at(295_409)), "-4m00s");
        assert_eq!(at(295_409).delta(at(535_395)), "+4m00s");
        assert_eq!(at(1000).delta(at(1400)), "=");
        assert_eq!(Cell::At(None).delta(at(1000)), "B only");
        assert_eq!(Cell::Count(151).delta(Cell::Count(151)), "=");
        assert_eq!(Cell::Count(151).delta(Cell::Count(140)), "-11");
        assert_eq!(at(535_395).text(), "8m55s");
        assert_eq!(Cell::Held { held: 12, of: 12 }.text(), "12 of 12");
    }

    #[test]
    fn only_workloads_whose_fate_or_timing_differs_are_listed() {
        let end = Timestamp::from_secs(3600);
        // Loses every replica in both runs, at the same times: not listed.
        let same = workload("same", &[535, 535, 536], Some(105));
        assert_eq!(diff(&same, &same.clone(), end, end), None);
        // Within the API's jitter: not listed either.
        let mut jitter = same.clone();
        jitter.evicted[2].0 = Timestamp::EPOCH + Span::from_millis(536_400);
        assert_eq!(diff(&same, &jitter, end, end), None);
        // The same fate, four minutes sooner.
        let sooner = workload("same", &[295, 295, 296], Some(105));
        let d = diff(&same, &sooner, end, end).expect("differs");
        assert!(!d.fate);
        assert_eq!(d.what, vec!["first and last eviction 4m00s sooner under B"]);
        assert_eq!(d.shift, Span::from_secs(240));
        assert_eq!(d.a, "3 of 3 evicted, 8m55s .. 8m56s; no ready replica for 58m15s (from 1m45s)");
        // Only the last eviction moves: said alone.
        let later = workload("same", &[535, 535, 600], Some(105));
        assert_eq!(diff(&same, &later, end, end).expect("differs").what, vec!["last eviction 1m04s later under B"]);
        // A different fate.
        let kept = workload("same", &[535], None);
        let d = diff(&same, &kept, end, end).expect("differs");
        assert!(d.fate);
        assert_eq!(d.what[..2], ["loses every ready replica only under A", "B evicts 2 fewer"]);
        assert_eq!(d.b, "1 of 3 evicted at 8m55s; at least 2 ready throughout");
    }
}
