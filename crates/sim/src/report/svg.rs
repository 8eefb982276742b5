//! The timeline chart of one zone, as an inline SVG for the HTML page:
//! nodes by Ready status and NoExecute taint against the left axis, pods
//! evicted so far against the right, faults as dashed vertical lines.
//! Plain SVG with no script, so the page stays self-contained.

use std::fmt::Write as _;

use nodewarden_model::{Span, Timestamp};

use super::{esc, human};
use crate::simulation::Outcome;

/// A chart line: name, colour, dash pattern, value, right axis.
type Series = (&'static str, &'static str, &'static str, fn(&crate::simulation::ZoneSample) -> usize, bool);

/// One zone's chart: node counts (left axis) and evicted pods (right axis).
pub(super) fn zone_svg(o: &Outcome, z: usize) -> String {
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
