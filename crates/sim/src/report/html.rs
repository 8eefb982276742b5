//! The HTML page of `nodewarden sim --report`: the summary, a timeline chart
//! per zone, the per-zone figures and safety checks as tables, and the JSON
//! figures, in one file with no script and no external resource, so it can
//! be attached to a ticket or opened offline.

use std::fmt::Write as _;

use nodewarden_model::Timestamp;

use super::svg::zone_svg;
use super::{RunInfo, esc, human, human_span, render_text, to_json};
use crate::simulation::Outcome;

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
    for (name, ok) in o.checks() {
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
