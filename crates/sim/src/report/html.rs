//! The HTML page of `nodewarden sim --report`: what happened, a timeline
//! per zone, the per-zone figures and safety checks as tables, the text
//! summary, and the JSON figures folded away (and as a download), in one
//! file with no script and no external resource, so it can be attached to
//! a ticket or opened offline.

use std::fmt::Write as _;

use nodewarden_model::Timestamp;

use super::svg::zone_svg;
use super::{RunInfo, esc, human, human_span, render_text, to_json};
use crate::statistics::Outcome;

/// Standard base64 (RFC 4648, with padding), for the JSON download's
/// `data:` URL: a third larger than the JSON, where percent-encoding its
/// quotes, braces and spaces would double it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A self-contained page: what happened, a timeline per zone, the figures
/// as tables, the summary, and the JSON folded away. No script, no
/// external resource.
pub fn render_html(o: &Outcome, run: &RunInfo) -> String {
    let mut h = String::new();
    let title = format!("nodewarden sim: {}", o.scenario);
    let _ = write!(
        h,
        r##"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{}</title><style>
body{{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}}
h1{{font-size:22px}} h2{{font-size:17px;margin-top:28px}} h3{{font-size:14px;margin:18px 0 4px}}
pre{{background:#f6f6f6;padding:12px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}}
table{{border-collapse:collapse;font-size:13px}} td,th{{border:1px solid #ddd;padding:4px 8px;text-align:right}}
th{{background:#f0f0f0}} td:first-child,th:first-child{{text-align:left}}
.ok{{color:#2e7d32;font-weight:bold}} .bad{{color:#c62828;font-weight:bold}}
.down{{color:#c62828}} .up{{color:#2e7d32}} .cluster{{color:#555}}
details summary{{cursor:pointer;font-weight:bold}} ul.faults{{margin:4px 0;padding-left:20px}}
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
    if !o.faults.is_empty() {
        h.push_str(r#"<ul class="faults">"#);
        for (t, what) in &o.faults {
            let _ = write!(h, "<li>{}: {}</li>", human(*t), esc(what));
        }
        h.push_str("</ul>");
    }
    let _ = write!(
        h,
        r##"<h2>Timeline per zone</h2><p>Per zone, each panel is scaled to the largest value it reaches: nodes not Ready (<span class="down">Unknown</span>, <span style="color:#ff9800">NotReady</span>), nodes with a NoExecute taint (<span style="color:#8e44ad">purple</span>), and pods evicted per time bucket (<span style="color:#1f5fbf">bars</span>). Dashed lines are the faults: <span class="down">nodes go down</span>, <span class="up">nodes come back</span>, <span class="cluster">the control plane or the controller</span> (hover for what).</p>"##
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
    let file = format!("nodewarden-sim-{}.json", o.scenario.replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    let _ = write!(
        h,
        r##"<h2>Figures</h2><p>The figures <code>--json</code> prints: <a download="{}" href="data:application/json;base64,{}">download them</a> ({} KB), or unfold them here.</p><details><summary>Figures (JSON)</summary><pre>{}</pre></details></body></html>"##,
        esc(&file),
        base64(json.as_bytes()),
        json.len().div_ceil(1024),
        esc(&json)
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648() {
        for (plain, coded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }
}
