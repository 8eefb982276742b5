//! A [`Summary`] for people: one sentence, a text table, or a page.
//!
//! Pure functions of the summary, so `nodewarden shadow report` renders a
//! summary fetched from `GET /shadow` (or saved from it) the same way the
//! running shadow would: the sentence says whether nodewarden would have
//! done what kube-controller-manager did and, when not, where to look
//! first; the table and the page give the counts behind it.

use std::fmt::Write as _;

use crate::kind::Verdict;
use crate::summary::{Distribution, KindSummary, Summary};

/// How many disagreements the table and the page list (the newest).
pub const LISTED_DISAGREEMENTS: usize = 20;

/// `1,204`: a count with thousands separated.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `42 s`, `0.3 s`, `-1.5 s`: seconds, one decimal below ten.
fn seconds(s: f64) -> String {
    let text = if s.abs() >= 10.0 { format!("{s:.0}") } else { format!("{s:.1}") };
    let text = text.strip_suffix(".0").unwrap_or(&text).to_string();
    let text = if text == "-0" { "0".to_string() } else { text };
    format!("{text} s")
}

/// `3 d 4 h`, `2 h 5 m`, `40 s`: a length of time in its two largest
/// units.
fn duration(total: f64) -> String {
    let total = if total.is_finite() && total > 0.0 { total as u64 } else { 0 };
    let units = [(total / 86_400, "d"), (total / 3_600 % 24, "h"), (total / 60 % 60, "m"), (total % 60, "s")];
    let Some(first) = units.iter().position(|(n, _)| *n > 0) else { return "0 s".to_string() };
    let mut out = format!("{} {}", units[first].0, units[first].1);
    if let Some((n, unit)) = units.get(first + 1)
        && *n > 0
    {
        let _ = write!(out, " {n} {unit}");
    }
    out
}

/// What a kind's disagreements are, with counts: `9 only-upstream, 2
/// later of 40 (largest difference 42 s)`.
fn kind_counts(k: &KindSummary) -> String {
    let parts: Vec<String> = [Verdict::OnlyUpstream, Verdict::OnlyNodewarden, Verdict::Later, Verdict::Earlier]
        .iter()
        .filter(|v| k.counts.of(**v) > 0)
        .map(|v| format!("{} {v}", count(k.counts.of(*v))))
        .collect();
    let mut out = format!("{} of {}", parts.join(", "), count(k.decisions));
    if k.counts.earlier + k.counts.later > 0
        && let Some(largest) = k.largest_difference_seconds
    {
        let _ = write!(out, " (largest difference {})", seconds(largest));
    }
    out
}

/// The kinds to look at first: the one with the most one-sided verdicts,
/// then the one with the largest differences among those that were
/// early or late (each at most once, at most two).
fn look_first(s: &Summary) -> Vec<&KindSummary> {
    let largest = |k: &KindSummary| k.largest_difference_seconds.unwrap_or(0.0);
    let timed = |k: &&KindSummary| k.counts.earlier + k.counts.later > 0;
    let mut out: Vec<&KindSummary> = Vec::new();
    // The most one-sided, then the most disagreements, then the largest
    // difference; the first of equals (max_by keeps the last, hence rev).
    let rank = |a: &&KindSummary, b: &&KindSummary| {
        (a.counts.one_sided(), a.counts.disagreements())
            .cmp(&(b.counts.one_sided(), b.counts.disagreements()))
            .then(largest(a).total_cmp(&largest(b)))
    };
    if let Some(most) = s.kinds.iter().filter(|k| k.counts.one_sided() > 0).rev().max_by(rank) {
        out.push(most);
    }
    let timed_kinds = s.kinds.iter().filter(timed).filter(|k| !out.iter().any(|o| o.kind == k.kind));
    let mut best: Option<&KindSummary> = None;
    for k in timed_kinds {
        if best.is_none_or(|b| largest(k) > largest(b)) {
            best = Some(k);
        }
    }
    out.extend(best);
    out
}

/// One sentence: `over 3 d 4 h, 1,204 decisions: all agree within 5 s`,
/// or, when the sides disagree, how often and which kind to look at first.
pub fn plain_verdict(s: &Summary) -> String {
    let over = format!("over {}", duration(s.watched_seconds));
    if s.decisions == 0 {
        let mut out = format!("{over}, no decisions compared yet");
        let pending = s.pending_nodewarden + s.pending_upstream;
        if pending > 0 {
            let _ = write!(out, " ({} waiting for the other side)", count(pending));
        }
        if !s.synced {
            out.push_str(" (the first list is not in yet)");
        }
        return out;
    }
    let decisions = format!("{} decision{}", count(s.decisions), if s.decisions == 1 { "" } else { "s" });
    let disagree = s.counts.disagreements();
    if disagree == 0 {
        let all = if s.decisions == 1 { "it agrees" } else { "all agree" };
        let mut out = format!("{over}, {decisions}: {all} within {}", seconds(s.tolerance_seconds));
        // NoExecute releases agree within a token of their zone's bucket
        // more: say so when one used it.
        let largest = s.kinds.iter().filter_map(|k| k.largest_difference_seconds).fold(0.0, f64::max);
        if largest > s.tolerance_seconds {
            let _ = write!(
                out,
                " (NoExecute releases within a token of their zone's bucket more; the largest difference {})",
                seconds(largest)
            );
        }
        return out;
    }
    let split: Vec<String> = [Verdict::OnlyUpstream, Verdict::OnlyNodewarden, Verdict::Later, Verdict::Earlier]
        .iter()
        .filter(|v| s.counts.of(**v) > 0)
        .map(|v| format!("{} {v}", count(s.counts.of(*v))))
        .collect();
    let mut out = format!(
        "{over}, {decisions}: {} agree, {} disagree ({})",
        count(s.counts.agree),
        count(disagree),
        split.join(", ")
    );
    for (i, k) in look_first(s).into_iter().enumerate() {
        let lead = if i == 0 { "; look first at" } else { "; then" };
        let _ = write!(out, "{lead} {}: {}", k.kind, kind_counts(k));
    }
    out
}

fn opt_seconds(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_string(), seconds)
}

fn signed_seconds(s: Option<f64>) -> String {
    match s {
        Some(s) if s > 0.0 => format!("+{}", seconds(s)),
        other => opt_seconds(other),
    }
}

/// Nodewarden's side of a zone: `Normal at 0.1/s`.
fn nodewarden_zone(state: Option<&str>, rate: Option<f64>) -> String {
    match (state, rate) {
        (Some(s), Some(r)) => format!("{s} at {r}/s"),
        (Some(s), None) => s.to_string(),
        (None, Some(r)) => format!("no state, at {r}/s"),
        (None, None) => "unknown to nodewarden".to_string(),
    }
}

/// kube-controller-manager's side of a zone: `14 taints, 0.1/s, Normal
/// (inferred)`.
fn upstream_zone(taints: u64, pace: Option<f64>, state: Option<&str>) -> String {
    let mut out = format!("{} taint{}", count(taints), if taints == 1 { "" } else { "s" });
    if let Some(p) = pace {
        let _ = write!(out, ", {}/s", round_rate(p));
    }
    if let Some(s) = state {
        let _ = write!(out, ", {s} (inferred)");
    }
    out
}

/// A rate to three significant digits: `0.0998`, `0.1`, `12.3`.
fn round_rate(r: f64) -> f64 {
    if r <= 0.0 || !r.is_finite() {
        return r;
    }
    let scale = 10f64.powi(2 - r.log10().floor() as i32);
    (r * scale).round() / scale
}

/// A fixed-width text table: per kind its counts and largest difference,
/// then the zones, then the newest disagreements (at most
/// [`LISTED_DISAGREEMENTS`]), then the plain verdict.
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nodewarden shadow since {} ({}); window {}, tolerance {} (watch latency {})",
        s.since,
        duration(s.watched_seconds),
        seconds(s.window_seconds),
        seconds(s.tolerance_seconds),
        seconds(s.watch_latency_seconds)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<24}{:>10}{:>10}{:>10}{:>10}{:>17}{:>15}{:>10}{:>16}",
        "KIND",
        "DECISIONS",
        "AGREE",
        "EARLIER",
        "LATER",
        "ONLY-NODEWARDEN",
        "ONLY-UPSTREAM",
        "LARGEST",
        "WAITING NW/KCM"
    );
    /// One line of the table: a kind, or all of them.
    struct Row {
        name: String,
        decisions: u64,
        counts: crate::summary::Counts,
        largest: Option<f64>,
        waiting: (u64, u64),
    }
    let mut rows: Vec<Row> = s
        .kinds
        .iter()
        .map(|k| Row {
            name: k.kind.to_string(),
            decisions: k.decisions,
            counts: k.counts,
            largest: k.largest_difference_seconds,
            waiting: (k.pending_nodewarden, k.pending_upstream),
        })
        .collect();
    rows.push(Row {
        name: "all".to_string(),
        decisions: s.decisions,
        counts: s.counts,
        largest: s.kinds.iter().filter_map(|k| k.largest_difference_seconds).reduce(f64::max),
        waiting: (s.pending_nodewarden, s.pending_upstream),
    });
    for Row { name, decisions, counts: c, largest, waiting: (nw, kcm) } in rows {
        let _ = writeln!(
            out,
            "{name:<24}{:>10}{:>10}{:>10}{:>10}{:>17}{:>15}{:>10}{:>16}",
            count(decisions),
            count(c.agree),
            count(c.earlier),
            count(c.later),
            count(c.only_nodewarden),
            count(c.only_upstream),
            opt_seconds(largest),
            format!("{}/{}", count(nw), count(kcm))
        );
    }
    let _ = writeln!(
        out,
        "waiting: {} from nodewarden, {} from kube-controller-manager; excused by the restart rule: {}",
        count(s.pending_nodewarden),
        count(s.pending_upstream),
        count(s.excused)
    );
    if !s.zones.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "{:<24}{:<32}KUBE-CONTROLLER-MANAGER", "ZONE", "NODEWARDEN");
        for z in &s.zones {
            let _ = writeln!(
                out,
                "{:<24}{:<32}{}",
                z.zone,
                nodewarden_zone(z.nodewarden_state.as_deref(), z.nodewarden_rate),
                upstream_zone(z.upstream_taints, z.upstream_pace_per_second, z.upstream_state_inferred.as_deref())
            );
        }
    }
    if !s.disagreements.is_empty() {
        let shown = &s.disagreements[s.disagreements.len().saturating_sub(LISTED_DISAGREEMENTS)..];
        let _ = writeln!(out);
        let _ = writeln!(out, "DISAGREEMENTS (the latest {} of {} kept)", shown.len(), s.disagreements.len());
        let _ = writeln!(
            out,
            "{:<17}{:<24}{:<32}{:<26}{:<26}{:>9}",
            "VERDICT", "KIND", "OBJECT", "NODEWARDEN", "KUBE-CONTROLLER-MANAGER", "DIFF"
        );
        for d in shown {
            let _ = writeln!(
                out,
                "{:<17}{:<24}{:<32}{:<26}{:<26}{:>9}",
                d.verdict.as_str(),
                d.kind.as_str(),
                d.object,
                d.nodewarden_at.as_deref().map_or_else(|| "-".to_string(), to_millis),
                d.upstream_at.as_deref().map_or_else(|| "-".to_string(), to_millis),
                signed_seconds(d.difference_seconds)
            );
            let _ = writeln!(out, "{:<17}{}", "", d.reason);
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "verdict: {}", plain_verdict(s));
    out
}

/// An instant as the summary writes it (RFC 3339, to the nanosecond), cut
/// to the millisecond for a table column: `2026-11-29T10:01:20.917Z`.
fn to_millis(at: &str) -> String {
    match at.split_once('.') {
        Some((whole, fraction)) => {
            let digits: String = fraction.chars().take_while(char::is_ascii_digit).take(3).collect();
            let zone = fraction.trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{whole}.{digits:0<3}{zone}")
        }
        None => at.to_string(),
    }
}

/// `s` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and
/// attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The label of bucket `i` of a distribution: `<= -300 s`, `-60 to -30 s`,
/// `> 300 s`.
fn bucket_label(d: &Distribution, i: usize) -> String {
    let trim = |x: f64| seconds(x).trim_end_matches(" s").to_string();
    match (i.checked_sub(1).and_then(|j| d.bounds.get(j)), d.bounds.get(i)) {
        (None, Some(hi)) => format!("≤ {} s", trim(*hi)),
        (Some(lo), Some(hi)) => format!("{} to {} s", trim(*lo), trim(*hi)),
        (Some(lo), None) => format!("> {} s", trim(*lo)),
        (None, None) => String::new(),
    }
}

/// A kind's differences as CSS bars, one row per bucket.
fn bars(out: &mut String, k: &KindSummary) {
    let most = k.differences.counts.iter().copied().max().unwrap_or(0).max(1);
    let _ = writeln!(out, "<h3>{}</h3>\n<table class=\"bars\">", escape(k.kind.as_str()));
    for (i, n) in k.differences.counts.iter().enumerate() {
        let width = *n as f64 * 100.0 / most as f64;
        let _ = writeln!(
            out,
            "<tr><td class=\"num\">{}</td><td class=\"bar\"><div style=\"width:{width:.1}%\"></div></td><td class=\"num\">{}</td></tr>",
            escape(&bucket_label(&k.differences, i)),
            count(*n)
        );
    }
    out.push_str("</table>\n");
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
th,td{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:left}\
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
td.bar{width:24em}td.bar div{background:#4a7bd0;height:.9em}\
p.verdict{font-size:1.2em;font-weight:600}\
.small{color:#666;font-size:.9em}";

/// One self-contained page (no scripts, no external assets): the verdict,
/// the counts per kind, the zones, the newest disagreements and, per kind,
/// how the time differences are spread. Every string is escaped.
pub fn html(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>nodewarden shadow</title>\n<style>{STYLE}</style>\n</head>\n<body>"
    );
    let _ = writeln!(out, "<h1>nodewarden shadow</h1>");
    let _ = writeln!(out, "<p class=\"verdict\">{}</p>", escape(&plain_verdict(s)));
    let _ = writeln!(
        out,
        "<p class=\"small\">Since {} ({}), at {}. Window {}, tolerance {} (node-monitor-period, a tainting pass and the watch latency {}, at least 1 s). \
         Waiting: {} from nodewarden, {} from kube-controller-manager. Excused by the restart rule: {}.</p>",
        escape(&s.since),
        escape(&duration(s.watched_seconds)),
        escape(&s.now),
        escape(&seconds(s.window_seconds)),
        escape(&seconds(s.tolerance_seconds)),
        escape(&seconds(s.watch_latency_seconds)),
        count(s.pending_nodewarden),
        count(s.pending_upstream),
        count(s.excused)
    );
    out.push_str("<h2>Decisions</h2>\n<table>\n<tr><th>kind</th>");
    for h in ["decisions", "agree", "earlier", "later", "only-nodewarden", "only-upstream", "largest difference"] {
        let _ = write!(out, "<th class=\"num\">{h}</th>");
    }
    out.push_str("</tr>\n");
    for k in &s.kinds {
        let _ = write!(out, "<tr><td>{}</td><td class=\"num\">{}</td>", escape(k.kind.as_str()), count(k.decisions));
        for v in Verdict::ALL {
            let _ = write!(out, "<td class=\"num\">{}</td>", count(k.counts.of(v)));
        }
        let _ = writeln!(out, "<td class=\"num\">{}</td></tr>", escape(&opt_seconds(k.largest_difference_seconds)));
    }
    out.push_str("</table>\n");
    if !s.zones.is_empty() {
        out.push_str(
            "<h2>Zones</h2>\n<table>\n<tr><th>zone</th><th>nodewarden</th><th>kube-controller-manager</th></tr>\n",
        );
        for z in &s.zones {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&z.zone),
                escape(&nodewarden_zone(z.nodewarden_state.as_deref(), z.nodewarden_rate)),
                escape(&upstream_zone(
                    z.upstream_taints,
                    z.upstream_pace_per_second,
                    z.upstream_state_inferred.as_deref()
                ))
            );
        }
        out.push_str("</table>\n");
    }
    if !s.disagreements.is_empty() {
        let shown = &s.disagreements[s.disagreements.len().saturating_sub(LISTED_DISAGREEMENTS)..];
        let _ = writeln!(
            out,
            "<h2>Disagreements</h2>\n<p class=\"small\">The latest {} of {} kept, newest last.</p>\n<table>\n\
             <tr><th>verdict</th><th>kind</th><th>object</th><th>nodewarden</th><th>kube-controller-manager</th>\
             <th class=\"num\">difference</th><th>facts</th></tr>",
            shown.len(),
            s.disagreements.len()
        );
        for d in shown {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(d.verdict.as_str()),
                escape(d.kind.as_str()),
                escape(&d.object),
                escape(d.nodewarden_at.as_deref().unwrap_or("-")),
                escape(d.upstream_at.as_deref().unwrap_or("-")),
                escape(&signed_seconds(d.difference_seconds)),
                escape(&d.reason)
            );
        }
        out.push_str("</table>\n");
    }
    let timed: Vec<&KindSummary> = s.kinds.iter().filter(|k| k.differences.counts.iter().any(|n| *n > 0)).collect();
    if !timed.is_empty() {
        out.push_str(
            "<h2>Time differences</h2>\n<p class=\"small\">Nodewarden's time minus kube-controller-manager's, \
             per pair matched: below zero nodewarden was earlier.</p>\n",
        );
        for k in timed {
            bars(&mut out, k);
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn instants_in_the_table_are_cut_to_the_millisecond() {
        assert_eq!(to_millis("2026-11-29T10:01:20.917864055Z"), "2026-11-29T10:01:20.917Z");
        assert_eq!(to_millis("2026-11-29T10:01:20.5Z"), "2026-11-29T10:01:20.500Z");
        assert_eq!(to_millis("2026-11-29T10:00:58Z"), "2026-11-29T10:00:58Z");
    }
    use super::*;
    use crate::kind::DecisionKind;
    use crate::summary::{Counts, Disagreement, ZoneSummary};
    use crate::tally::Tally;

    fn summary(counts: &[(DecisionKind, Counts, Option<f64>)]) -> Summary {
        let mut kinds = Tally::default().kinds(|_, _| 0);
        for (kind, c, largest) in counts {
            let k = kinds.iter_mut().find(|k| k.kind == *kind).unwrap();
            k.counts = *c;
            k.decisions = c.total();
            k.largest_difference_seconds = *largest;
        }
        let mut all = Counts::default();
        for k in &kinds {
            for v in Verdict::ALL {
                for _ in 0..k.counts.of(v) {
                    all.add(v);
                }
            }
        }
        Summary {
            since: "2027-01-15T08:00:00Z".into(),
            now: "2027-01-18T12:00:00Z".into(),
            watched_seconds: (3 * 86_400 + 4 * 3_600 + 17) as f64,
            window_seconds: 600.0,
            tolerance_seconds: 5.0,
            watch_latency_seconds: 0.0,
            synced: true,
            decisions: all.total(),
            counts: all,
            pending_nodewarden: 0,
            pending_upstream: 0,
            excused: 0,
            kinds,
            zones: Vec::new(),
            disagreements: Vec::new(),
        }
    }

    #[test]
    fn all_agree_is_said_in_one_short_sentence() {
        let c = Counts { agree: 1_204, ..Counts::default() };
        let s = summary(&[(DecisionKind::PodDeletion, c, Some(1.2))]);
        assert_eq!(plain_verdict(&s), "over 3 d 4 h, 1,204 decisions: all agree within 5 s");
        assert!(s.all_agree());
        let none = Summary { decisions: 0, counts: Counts::default(), watched_seconds: 125.0, ..s };
        assert_eq!(plain_verdict(&none), "over 2 m 5 s, no decisions compared yet");
        let token =
            summary(&[(DecisionKind::NoExecuteUnreachable, Counts { agree: 20, ..Counts::default() }, Some(13.2))]);
        assert_eq!(
            plain_verdict(&token),
            "over 3 d 4 h, 20 decisions: all agree within 5 s \
             (NoExecute releases within a token of their zone's bucket more; the largest difference 13 s)"
        );
    }

    #[test]
    fn disagreements_say_where_to_look_first() {
        let s = summary(&[
            (DecisionKind::Unknown, Counts { agree: 100, ..Counts::default() }, Some(0.5)),
            (
                DecisionKind::NoExecuteUnreachable,
                Counts { agree: 31, only_upstream: 9, only_nodewarden: 2, ..Counts::default() },
                Some(3.0),
            ),
            (DecisionKind::PodDeletion, Counts { agree: 900, later: 3, earlier: 1, ..Counts::default() }, Some(42.0)),
            (DecisionKind::PodsNotReady, Counts { agree: 9, later: 1, ..Counts::default() }, Some(12.0)),
        ]);
        assert_eq!(
            plain_verdict(&s),
            "over 3 d 4 h, 1,056 decisions: 1,040 agree, 16 disagree (9 only-upstream, 2 only-nodewarden, 4 later, 1 earlier); \
             look first at noexecute-unreachable: 9 only-upstream, 2 only-nodewarden of 42; \
             then pod-deletion: 3 later, 1 earlier of 904 (largest difference 42 s)"
        );
        assert!(!s.all_agree());
        let t = table(&s);
        assert!(t.contains("noexecute-unreachable"), "{t}");
        assert!(t.lines().last().unwrap().starts_with("verdict: over 3 d 4 h"), "{t}");
        let row = t.lines().find(|l| l.starts_with("pod-deletion")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["pod-deletion", "904", "900", "1", "3", "0", "0", "42", "s", "0/0"]
        );
    }

    #[test]
    fn among_equally_one_sided_kinds_the_one_with_more_disagreements_comes_first() {
        let s = summary(&[
            (DecisionKind::Unknown, Counts { agree: 1, only_upstream: 1, ..Counts::default() }, Some(3.0)),
            (
                DecisionKind::NoExecuteUnreachable,
                Counts { only_upstream: 1, later: 1, ..Counts::default() },
                Some(39.0),
            ),
        ]);
        let v = plain_verdict(&s);
        assert!(v.contains("look first at noexecute-unreachable: 1 only-upstream, 1 later of 2"), "{v}");
        assert!(!v.contains("then"), "no other kind was early or late: {v}");
    }

    #[test]
    fn the_page_escapes_every_string_and_has_no_script() {
        let mut s = summary(&[(DecisionKind::PodDeletion, Counts { later: 1, ..Counts::default() }, Some(42.0))]);
        s.disagreements.push(Disagreement {
            object: "ns/<script>alert('x')</script>".into(),
            kind: DecisionKind::PodDeletion,
            verdict: Verdict::Later,
            nodewarden_at: Some("2027-01-15T08:00:42Z".into()),
            upstream_at: Some("2027-01-15T08:00:00Z".into()),
            difference_seconds: Some(42.0),
            reason: "taint \"a&b\" not tolerated".into(),
        });
        s.zones.push(ZoneSummary {
            zone: "r/<z>".into(),
            nodewarden_state: Some("Normal".into()),
            nodewarden_rate: Some(0.1),
            upstream_taints: 3,
            upstream_pace_per_second: Some(0.1),
            upstream_state_inferred: Some("Normal".into()),
        });
        s.kinds[6].differences.counts[13] = 1;
        let page = html(&s);
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("ns/&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(page.contains("taint &quot;a&amp;b&quot; not tolerated"));
        assert!(page.contains("r/&lt;z&gt;"));
        assert!(!page.contains("http"), "no external asset");
        assert!(page.contains("30 to 60 s"), "the distribution is drawn");
        assert!(page.contains("width:100.0%"));
    }

    #[test]
    fn numbers_and_lengths_read_as_people_write_them() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(duration(40.0), "40 s");
        assert_eq!(duration(3_600.0), "1 h");
        assert_eq!(duration(90_061.0), "1 d 1 h");
        assert_eq!(seconds(0.26), "0.3 s");
        assert_eq!(seconds(-42.4), "-42 s");
        assert_eq!(seconds(5.0), "5 s");
        assert_eq!(round_rate(0.099_83), 0.0998);
    }
}
