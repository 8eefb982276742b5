//! The timeline of one zone, as an inline SVG for the HTML page.
//!
//! A zone of 3,334 nodes in which 67 flap is a story about 67 nodes, so
//! each quantity gets its own panel, scaled to the largest value it
//! reaches rather than to the zone's size: nodes not Ready (Unknown and
//! NotReady), nodes carrying a NoExecute taint, and pods evicted, drawn
//! as bars per time bucket on their own axis so that one eviction is one
//! small bar, not a line across the page. A panel with nothing to show
//! is one line of text. Every fault that touched the zone (or the whole
//! cluster) is a vertical line across the panels, red when nodes went
//! down, green when they came back, grey for the rest, each with its
//! description as a tooltip. Plain SVG with no script, so the page stays
//! self-contained.

use std::fmt::Write as _;

use nodewarden_model::{Span, Timestamp};

use super::{esc, human};
use crate::statistics::{FaultMark, MarkKind, Outcome, ZoneSample};

/// One plotted quantity: name, colour, its value per sample.
type Line = (&'static str, &'static str, Vec<(Timestamp, usize)>);

/// How a panel draws its values.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Plot {
    /// Lines through the samples.
    Lines(Vec<Line>),
    /// Bars: (bucket start, count in the bucket), each `bucket` wide.
    Bars { colour: &'static str, bucket: Span, counts: Vec<(Timestamp, usize)> },
}

/// One panel: a title, what it plots and the top of its y axis.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Panel {
    /// Shown above the plot.
    pub(super) title: String,
    /// Shown instead of the plot when there is nothing to plot.
    pub(super) empty: String,
    /// The values.
    pub(super) plot: Plot,
    /// The largest value plotted (0: nothing to plot).
    pub(super) largest: usize,
    /// The top of the y axis: `largest` rounded up to a whole number of
    /// grid steps, at most five of them.
    pub(super) axis_max: usize,
    /// The grid step.
    pub(super) step: usize,
}

/// A zone's chart before it is drawn, so tests can look at its scales.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ZoneChart {
    /// Where the run ended, from the start.
    pub(super) end: Span,
    /// Nodes not Ready, tainted nodes, evictions.
    pub(super) panels: Vec<Panel>,
    /// Every fault that touched the zone.
    pub(super) marks: Vec<FaultMark>,
}

/// The grid step for values up to `largest`: 1, 2 or 5 times a power of
/// ten, the smallest that needs at most five steps. Returns (step, axis
/// top).
pub(super) fn nice_axis(largest: usize) -> (usize, usize) {
    if largest == 0 {
        return (1, 1);
    }
    let mut power = 1_usize;
    loop {
        for m in [1, 2, 5] {
            let step = m * power;
            let steps = largest.div_ceil(step);
            if steps <= 5 {
                return (step, steps * step);
            }
        }
        power = power.saturating_mul(10);
    }
}

/// The bucket for eviction bars: a round span that splits the run into at
/// most 120 bars, never finer than 5 s (the timeline's finest sampling).
fn bucket_for(end: Span) -> Span {
    let secs = end.as_secs_f64();
    let pick = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400]
        .into_iter()
        .find(|&b| secs / b as f64 <= 120.0)
        .unwrap_or(86_400);
    Span::from_secs(pick)
}

fn panel(title: String, empty: String, plot: Plot) -> Panel {
    let largest = match &plot {
        Plot::Lines(lines) => lines.iter().flat_map(|(_, _, v)| v.iter().map(|p| p.1)).max().unwrap_or(0),
        Plot::Bars { counts, .. } => counts.iter().map(|c| c.1).max().unwrap_or(0),
    };
    let (step, axis_max) = nice_axis(largest);
    Panel { title, empty, plot, largest, axis_max, step }
}

impl ZoneChart {
    /// The chart of a zone of `nodes` nodes from its samples and marks.
    pub(super) fn build(nodes: usize, samples: &[(Timestamp, &ZoneSample)], marks: &[FaultMark], end: Span) -> Self {
        let series = |get: fn(&ZoneSample) -> usize| samples.iter().map(|(t, s)| (*t, get(s))).collect::<Vec<_>>();
        let unknown = series(|s| s.unknown);
        let not_ready = series(|s| s.not_ready);
        let peak = |v: &[(Timestamp, usize)]| v.iter().map(|p| p.1).max().unwrap_or(0);
        let (pu, pn) = (peak(&unknown), peak(&not_ready));
        let counts: Vec<String> = [("Unknown", pu), ("NotReady", pn)]
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} (at most {n})"))
            .collect();
        let down = panel(
            format!("Nodes not Ready, of {nodes}: {}", counts.join(", ")),
            "Every node stayed Ready.".into(),
            Plot::Lines(vec![("Unknown", "#d62728", unknown), ("NotReady", "#ff9800", not_ready)]),
        );
        let tainted = series(|s| s.tainted);
        let pt = peak(&tainted);
        let taints = panel(
            format!("Nodes with a NoExecute taint (at most {pt} at once)"),
            "No node carried a NoExecute taint.".into(),
            Plot::Lines(vec![("tainted", "#8e44ad", tainted)]),
        );
        // Evictions so far, per sample, turned into counts per bucket.
        let bucket = bucket_for(end);
        let total = samples.last().map_or(0, |(_, s)| s.evicted);
        let mut counts: Vec<(Timestamp, usize)> = Vec::new();
        let mut before = 0;
        let mut start = Timestamp::EPOCH;
        let mut i = 0;
        while start - Timestamp::EPOCH < end && total > 0 {
            let stop = start + bucket;
            let mut so_far = before;
            while let Some((_, s)) = samples.get(i).filter(|(t, _)| *t < stop) {
                so_far = s.evicted;
                i += 1;
            }
            if so_far > before {
                counts.push((start, so_far - before));
            }
            before = so_far;
            start = stop;
        }
        // The last sample is taken at the end itself: its evictions go to
        // the last bucket.
        if let Some((_, s)) = samples.get(i..).and_then(<[_]>::last)
            && s.evicted > before
        {
            // The loop stopped at the first bucket past the end.
            let last = start - bucket;
            match counts.last_mut() {
                Some((at, n)) if *at == last => *n += s.evicted - before,
                _ => counts.push((last, s.evicted - before)),
            }
        }
        let per = human(Timestamp::EPOCH + bucket);
        let busiest = counts.iter().map(|c| c.1).max().unwrap_or(0);
        let evictions = panel(
            format!("Pods evicted per {per}: {total} in all, at most {busiest} in one {per}"),
            "No pod was evicted.".into(),
            Plot::Bars { colour: "#1f5fbf", bucket, counts },
        );
        ZoneChart { end, panels: vec![down, taints, evictions], marks: marks.to_vec() }
    }

    /// Draws the chart.
    ///
    /// Long on purpose: the drawing is one pass over the panels, laying out
    /// axes, plots and marks in the coordinates computed at its top; split,
    /// every piece would take the same dozen layout values as arguments.
    pub(super) fn svg(&self) -> String {
        let w = 1100.0_f64;
        let (left, right) = (60.0, 20.0);
        let pw = w - left - right;
        let end = self.end.as_secs_f64().max(1.0);
        let x = |t: Timestamp| left + ((t - Timestamp::EPOCH).as_secs_f64() / end).clamp(0.0, 1.0) * pw;
        // Panel geometry: (title baseline, plot top, plot height).
        let mut rows = Vec::new();
        let mut y = 22.0;
        for p in &self.panels {
            let ph = if p.largest == 0 {
                0.0
            } else if matches!(p.plot, Plot::Bars { .. }) {
                70.0
            } else {
                90.0
            };
            rows.push((y + 12.0, y + 18.0, ph));
            y += 18.0 + ph + if ph > 0.0 { 12.0 } else { 4.0 };
        }
        let (top, bottom) = (rows.first().map_or(22.0, |r| r.1), y - 4.0);
        let h = bottom + 22.0;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"##
        );
        // Round time ticks, at most about ten, with a light grid line.
        let step = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400]
            .into_iter()
            .find(|&st| end / f64::from(st) <= 10.0)
            .unwrap_or(86_400);
        let mut tick = 0;
        while f64::from(tick) <= end {
            let t = Timestamp::EPOCH + Span::from_secs(i64::from(tick));
            let xx = x(t);
            let _ = write!(
                svg,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{top}" y2="{bottom}" stroke="#eee"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"##,
                bottom + 16.0,
                human(t)
            );
            tick += step;
        }
        // The faults, across every panel (under the values and titles); a
        // label where there is room.
        let mut last_label = f64::NEG_INFINITY;
        for m in &self.marks {
            let xx = x(m.at);
            let (colour, kind) = match m.kind {
                MarkKind::Down => ("#c62828", "down"),
                MarkKind::Up => ("#2e7d32", "up"),
                MarkKind::Cluster => ("#555", "cluster"),
            };
            let _ = write!(
                svg,
                r##"<line class="fault" data-kind="{kind}" x1="{xx:.1}" x2="{xx:.1}" y1="14" y2="{bottom}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="4,3"><title>{} {}</title></line>"##,
                human(m.at),
                esc(&m.what)
            );
            if xx - last_label >= 48.0 {
                let _ = write!(
                    svg,
                    r##"<text x="{:.1}" y="11" fill="{colour}" font-size="10" text-anchor="middle">{}</text>"##,
                    xx,
                    human(m.at)
                );
                last_label = xx;
            }
        }
        for (p, &(title_y, ptop, ph)) in self.panels.iter().zip(&rows) {
            if p.largest == 0 {
                let _ = write!(
                    svg,
                    r##"<text x="{left}" y="{title_y}" fill="#777" class="empty-panel" paint-order="stroke" stroke="#fff" stroke-width="4">{}</text>"##,
                    esc(&p.empty)
                );
                continue;
            }
            let _ = write!(
                svg,
                r##"<text x="{left}" y="{title_y}" font-weight="bold" class="panel" data-axis-max="{}" paint-order="stroke" stroke="#fff" stroke-width="4">{}</text>"##,
                p.axis_max,
                esc(&p.title)
            );
            let _ =
                write!(svg, r##"<rect x="{left}" y="{ptop}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>"##);
            let yv = |v: usize| ptop + ph - v as f64 / p.axis_max as f64 * ph;
            let mut v = 0;
            while v <= p.axis_max {
                let yy = yv(v);
                let _ = write!(
                    svg,
                    r##"<line x1="{left}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end">{v}</text>"##,
                    left + pw,
                    left - 6.0,
                    yy + 4.0
                );
                v += p.step;
            }
            match &p.plot {
                Plot::Lines(lines) => {
                    for (name, colour, values) in lines {
                        if values.iter().all(|v| v.1 == 0) {
                            continue;
                        }
                        let points: Vec<String> =
                            values.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), yv(*v))).collect();
                        let _ = write!(
                            svg,
                            r##"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"><title>{name}</title></polyline>"##,
                            points.join(" ")
                        );
                    }
                }
                Plot::Bars { colour, bucket, counts } => {
                    let bw = (bucket.as_secs_f64() / end * pw).max(1.0);
                    for (t, n) in counts {
                        let (bx, by) = (x(*t), yv(*n));
                        let _ = write!(
                            svg,
                            r##"<rect class="bar" x="{bx:.1}" y="{by:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{n} evicted from {}</title></rect>"##,
                            (bw - 1.0).max(1.0),
                            ptop + ph - by,
                            human(*t)
                        );
                    }
                }
            }
        }
        svg.push_str("</svg>");
        svg
    }
}

/// Zone `z`'s chart, drawn.
pub(super) fn zone_svg(o: &Outcome, z: usize) -> String {
    let Some(tally) = o.zones.get(z) else { return String::new() };
    let samples: Vec<(Timestamp, &ZoneSample)> =
        o.timeline.iter().filter_map(|(t, zs)| zs.get(z).map(|s| (*t, s))).collect();
    ZoneChart::build(tally.nodes, &samples, &tally.marks, o.simulated).svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(unknown: usize, tainted: usize, evicted: usize) -> ZoneSample {
        ZoneSample { ready: 3334 - unknown, not_ready: 0, unknown, tainted, evicted }
    }

    fn chart(samples: &[(i64, ZoneSample)], marks: &[FaultMark], end: i64) -> ZoneChart {
        let samples: Vec<(Timestamp, &ZoneSample)> =
            samples.iter().map(|(s, z)| (Timestamp::from_secs(*s), z)).collect();
        ZoneChart::build(3334, &samples, marks, Span::from_secs(end))
    }

    #[test]
    fn axes_follow_the_largest_value_not_the_zone_size() {
        assert_eq!(nice_axis(0), (1, 1));
        assert_eq!(nice_axis(1), (1, 1));
        assert_eq!(nice_axis(3), (1, 3));
        assert_eq!(nice_axis(5), (1, 5));
        assert_eq!(nice_axis(6), (2, 6));
        assert_eq!(nice_axis(67), (20, 80));
        assert_eq!(nice_axis(3334), (1000, 4000));
        // 67 of 3,334 nodes flap, 8 are tainted at most: each panel's axis
        // follows its own largest value.
        let c = chart(&[(0, sample(0, 0, 0)), (60, sample(67, 3, 0)), (120, sample(10, 8, 0))], &[], 1200);
        assert_eq!((c.panels[0].largest, c.panels[0].axis_max), (67, 80));
        assert_eq!((c.panels[1].largest, c.panels[1].axis_max), (8, 8));
        for p in &c.panels {
            assert!(p.axis_max >= p.largest && p.axis_max < p.largest.max(1) * 2, "{p:?}");
        }
        let svg = c.svg();
        assert!(svg.contains(r#"data-axis-max="80""#) && svg.contains(r#"data-axis-max="8""#), "{svg}");
    }

    #[test]
    fn evictions_have_their_own_panel_and_axis() {
        // One pod evicted: one bar of one in its own panel; the node
        // panels do not change scale for it.
        let c = chart(&[(0, sample(0, 0, 0)), (300, sample(5, 1, 0)), (400, sample(5, 1, 1))], &[], 1200);
        let Plot::Bars { counts, bucket, .. } = &c.panels[2].plot else { panic!("bars: {:?}", c.panels[2]) };
        assert_eq!(*bucket, Span::from_secs(10));
        assert_eq!(counts, &vec![(Timestamp::from_secs(400), 1)]);
        assert_eq!(c.panels[2].axis_max, 1);
        assert_eq!(c.panels[0].axis_max, 5);
        assert!(c.panels[2].title.contains("1 in all"), "{}", c.panels[2].title);
        let svg = c.svg();
        assert_eq!(svg.matches(r#"class="bar""#).count(), 1);
        assert_eq!(svg.matches(r#"class="panel""#).count(), 3);
        // Cumulative 10, 30, 30, 45 over the buckets: 10, 20, 15.
        let c = chart(
            &[(0, sample(0, 0, 0)), (5, sample(0, 0, 10)), (15, sample(0, 0, 30)), (25, sample(0, 0, 45))],
            &[],
            1200,
        );
        let Plot::Bars { counts, .. } = &c.panels[2].plot else { panic!() };
        assert_eq!(
            counts,
            &vec![(Timestamp::from_secs(0), 10), (Timestamp::from_secs(10), 20), (Timestamp::from_secs(20), 15)]
        );
        assert_eq!(counts.iter().map(|c| c.1).sum::<usize>(), 45);
    }

    #[test]
    fn every_fault_gets_a_mark_and_quiet_panels_are_one_line() {
        let marks: Vec<FaultMark> = (0..40)
            .map(|i| FaultMark {
                at: Timestamp::from_secs(60 + 30 * i),
                kind: if i % 2 == 0 { MarkKind::Down } else { MarkKind::Up },
                what: format!("node-{i} <crashes>"),
            })
            .collect();
        let c = chart(&[(0, sample(0, 0, 0)), (1800, sample(0, 0, 0))], &marks, 1800);
        let svg = c.svg();
        assert_eq!(svg.matches(r#"class="fault""#).count(), 40);
        assert_eq!(svg.matches(r#"data-kind="down""#).count(), 20);
        assert!(svg.contains("node-3 &lt;crashes&gt;"), "escaped");
        // Nothing happened: every panel is a line of text, no axis.
        assert_eq!(svg.matches(r#"class="empty-panel""#).count(), 3);
        assert!(!svg.contains(r#"class="panel""#));
    }
}
