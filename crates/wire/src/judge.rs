//! Judging a scenario file's expectations from what the served cluster
//! held (its journal, [`nodewarden_apiserver::journal`]) and what the
//! controller's `/metrics` said (zone states and rates), with replay's own
//! checks ([`nodewarden_sim::evaluate`]).
//!
//! The served cluster's state is exact and piecewise constant: it changes
//! only at journal lines. An expectation holds when it is found true at
//! some instant from its `at` to `at` + the tolerance, as replay's
//! expectations do under API latency; it is checked at `at` (after every
//! change stamped at or before it) and after every change or scrape in the
//! window.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;
use std::path::Path;

use nodewarden_cluster::rules::pod_conditions::PodConditions;
use nodewarden_cluster::{Scenario, SimPod};
use nodewarden_engine::{NodeSnapshot, ObjectRef, ZoneReport};
use nodewarden_harness::prometheus::named;
use nodewarden_model::{ConditionStatus, PodScheduling, Span, Timestamp, ZoneKey, ZoneState};
use nodewarden_objects::{Detail, Reader, TimeBase};
use nodewarden_sim::{ExpectRecord, Observed, evaluate};
use serde_json::Value;

use crate::WireError;

/// One line of the journal, read.
#[derive(Debug)]
enum Line {
    Change { kind: String, key: String, deleted: bool, object: Value },
    Write { path: String, agent: String, code: u16 },
}

/// Something that happened at a scenario time: a journal line, or a
/// scrape of the controller's zones.
#[derive(Debug)]
enum Happening {
    Journal(Line),
    Zones(Vec<ZoneReport>),
}

/// The served cluster at one instant, rebuilt from the journal.
#[derive(Default)]
pub struct ServedView {
    nodes: BTreeMap<String, NodeSnapshot>,
    ever: BTreeSet<String>,
    pods: BTreeMap<String, SimPod>,
    writes: HashMap<String, u64>,
    /// Event key -> (reason, object, times recorded).
    events: BTreeMap<String, (String, String, u64)>,
}

impl Observed for ServedView {
    fn node(&self, name: &str) -> Option<&NodeSnapshot> {
        self.nodes.get(name)
    }
    fn nodes(&self) -> Box<dyn Iterator<Item = &NodeSnapshot> + '_> {
        Box::new(self.nodes.values())
    }
    fn node_ever_existed(&self, name: &str) -> bool {
        self.ever.contains(name)
    }
    fn pod(&self, key: &str) -> Option<&SimPod> {
        self.pods.get(key)
    }
    fn writes(&self, object: &ObjectRef) -> u64 {
        self.writes.get(&object.to_string()).copied().unwrap_or(0)
    }
    fn recorded_events(&self) -> Vec<(&str, String)> {
        self.events
            .values()
            .flat_map(|(reason, object, n)| (0..*n).map(move |_| (reason.as_str(), object.clone())))
            .collect()
    }
}

/// A pod as replay's checks read it, from the stored JSON; `None` for one
/// the controller could not read either (no name, namespace or uid).
fn sim_pod(key: &str, v: &Value, now: Timestamp) -> Option<SimPod> {
    let s = nodewarden_objects::pod_reading(v, now, Detail::Lifecycle)?;
    let conditions: PodConditions = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| {
                    let kind = c.get("type")?.as_str()?;
                    let status = match c.get("status")?.as_str()? {
                        "True" => ConditionStatus::True,
                        "False" => ConditionStatus::False,
                        _ => ConditionStatus::Unknown,
                    };
                    Some((kind, status))
                })
                .collect()
        })
        .unwrap_or_default();
    // Marked unschedulable by a scheduler: `PodScheduled=False`, reason
    // Unschedulable (what replay's `unschedulable` reads).
    let unschedulable = v.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some("PodScheduled")
                && c.get("status").and_then(Value::as_str) == Some("False")
                && c.get("reason").and_then(Value::as_str) == Some("Unschedulable")
        })
    });
    Some(SimPod {
        key: key.to_string(),
        uid: s.uid,
        node: s.node,
        daemonset: s.daemonset,
        terminating: s.terminating,
        tolerations: s.tolerations.into(),
        conditions,
        reason: v.pointer("/status/reason").and_then(Value::as_str).map(str::to_string),
        deleted: false,
        refuse_deletions: 0,
        scheduling: unschedulable
            .then(|| Box::new(PodScheduling { unschedulable_since: Some(now), ..PodScheduling::default() })),
        report_scheduling: false,
    })
}

/// `node` or `namespace/name` of an Event's object, and its recorded count.
fn event_of(v: &Value) -> Option<(String, String, u64)> {
    let reason = v.get("reason")?.as_str()?.to_string();
    let object = v.get("involvedObject").or_else(|| v.get("regarding"))?;
    let name = object.get("name")?.as_str()?;
    let object = match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => format!("{}/{name}", object.get("namespace").and_then(Value::as_str).unwrap_or("default")),
        _ => name.to_string(),
    };
    let count = v
        .get("count")
        .and_then(Value::as_u64)
        .or_else(|| v.pointer("/series/count").and_then(Value::as_u64))
        .unwrap_or(1)
        .max(1);
    Some((reason, object, count))
}

impl ServedView {
    fn apply(&mut self, line: Line, now: Timestamp, time: &TimeBase, controller_agent: &str) {
        match line {
            Line::Write { path, agent, code } => {
                // Replay counts every write the controller made, refused
                // ones too (a webhook's 400 or 403, a budget's 429); not the
                // adapter's own concurrency guards (409 Conflict, 422 from a
                // failed JSON patch test), after which it writes again.
                let counted = matches!(code, 200..=299 | 400 | 403 | 429);
                if counted
                    && agent.starts_with(controller_agent)
                    && let Some((_, key)) = nodewarden_apiserver::journal::written_object(&path)
                {
                    *self.writes.entry(key).or_default() += 1;
                }
            }
            Line::Change { kind, key, deleted, object } => match kind.as_str() {
                "Node" if deleted => {
                    self.nodes.remove(&key);
                }
                "Node" => {
                    self.ever.insert(key.clone());
                    if let Some(n) = Reader::new(Detail::Lifecycle).on(*time).node(&object, now) {
                        self.nodes.insert(key, n);
                    }
                }
                "Pod" => {
                    let Some(mut pod) = sim_pod(&key, &object, now) else { return };
                    if let Some(old) = self.pods.get(&key)
                        && let Some(since) = old.scheduling.as_ref().and_then(|s| s.unschedulable_since)
                        && let Some(s) = pod.scheduling.as_mut()
                    {
                        s.unschedulable_since = Some(since);
                    }
                    pod.deleted = deleted;
                    self.pods.insert(key, pod);
                }
                "Event" if !deleted => {
                    // Events expire from a real cluster; replay keeps every
                    // one, and so does this count.
                    if let Some(e) = event_of(&object) {
                        self.events.insert(key, e);
                    }
                }
                _ => {}
            },
        }
    }
}

/// Reads the journal: (scenario time, line), in the order written.
fn read_journal(path: &Path) -> Result<Vec<(Timestamp, Line)>, WireError> {
    let file = std::fs::File::open(path).map_err(|e| WireError::io(format!("reading {}", path.display()), e))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| WireError::io(format!("reading {}", path.display()), e))?;
        if line.trim().is_empty() {
            continue;
        }
        // A line cut short by the server's kill is the last one: skip it.
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            tracing::debug!(line = n + 1, "journal line cut short");
            continue;
        };
        let t = Timestamp::from_nanos(v.get("t").and_then(Value::as_i64).unwrap_or(0));
        let parsed = if v.get("write").is_some() {
            Line::Write {
                path: v.get("path").and_then(Value::as_str).unwrap_or_default().to_string(),
                agent: v.get("agent").and_then(Value::as_str).unwrap_or_default().to_string(),
                code: v.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok()).unwrap_or(200),
            }
        } else {
            Line::Change {
                kind: v.get("kind").and_then(Value::as_str).unwrap_or_default().to_string(),
                key: v.get("key").and_then(Value::as_str).unwrap_or_default().to_string(),
                deleted: v.get("deleted").and_then(Value::as_bool).unwrap_or(false),
                object: v.get("object").cloned().unwrap_or(Value::Null),
            }
        };
        out.push((t, parsed));
    }
    Ok(out)
}

/// Zone reports from a `/metrics` page (`nodewarden_zone_state`,
/// `nodewarden_zone_rate`).
pub fn zones_from_metrics(text: &str) -> Vec<ZoneReport> {
    let mut zones: BTreeMap<String, ZoneReport> = BTreeMap::new();
    let entry = |zones: &mut BTreeMap<String, ZoneReport>, zone: &str| {
        zones
            .entry(zone.to_string())
            .or_insert_with(|| ZoneReport {
                key: ZoneKey::parse(zone),
                state: None,
                rate: 0.0,
                size: 0,
                not_ready: 0,
                queued: 0,
            })
            .key
            .clone()
    };
    for s in named(text, "nodewarden_zone_state") {
        let (Some(zone), Some(state)) = (s.label("zone"), s.label("state")) else { continue };
        entry(&mut zones, zone);
        if s.value == 1.0
            && let Some(z) = zones.get_mut(zone)
        {
            z.state = [ZoneState::Initial, ZoneState::Normal, ZoneState::PartialDisruption, ZoneState::FullDisruption]
                .into_iter()
                .find(|s| s.as_str() == state);
        }
    }
    for s in named(text, "nodewarden_zone_rate") {
        let Some(zone) = s.label("zone") else { continue };
        entry(&mut zones, zone);
        if let Some(z) = zones.get_mut(zone) {
            z.rate = s.value;
        }
    }
    let mut out: Vec<ZoneReport> = zones.into_values().collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The verdict on one file's expectations.
#[derive(Debug)]
pub struct Judged {
    /// One record a expectation, in file order; `seen` is when it held (or,
    /// failing, the end of its window).
    pub records: Vec<ExpectRecord>,
    /// The largest `seen - at` of the expectations that held.
    pub largest_deviation: Span,
    /// Which expectation (from 1) it was, when one came true late.
    pub largest_expect: Option<usize>,
}

/// Judges `scenario`'s expectations against the journal at `journal` and
/// the zone scrapes (scenario time, reports), each within `tolerance`
/// after its `at`. `time` reads the journal's timestamps (the scenario's
/// t=0 on the Unix clock); `controller_agent` is the prefix of the
/// controller's User-Agent (its writes are counted).
pub fn judge(
    scenario: &Scenario,
    journal: &Path,
    scrapes: Vec<(Timestamp, Vec<ZoneReport>)>,
    tolerance: Span,
    time: TimeBase,
    controller_agent: &str,
) -> Result<Judged, WireError> {
    let mut timeline: Vec<(Timestamp, Happening)> =
        read_journal(journal)?.into_iter().map(|(t, l)| (t, Happening::Journal(l))).collect();
    timeline.extend(scrapes.into_iter().map(|(t, z)| (t, Happening::Zones(z))));
    // Stable: journal lines keep their order among equal times.
    timeline.sort_by_key(|(t, _)| *t);

    let mut order: Vec<usize> = (0..scenario.expect.len()).collect();
    order.sort_by_key(|&i| scenario.expect[i].at);
    let at = |i: usize| Timestamp::EPOCH + scenario.expect[i].at;
    let mut results: Vec<Option<ExpectRecord>> = vec![None; scenario.expect.len()];
    let mut last: Vec<Option<ExpectRecord>> = vec![None; scenario.expect.len()];
    let mut view = ServedView::default();
    let mut zones: Vec<ZoneReport> = Vec::new();
    let mut pending = order.into_iter().peekable();
    let mut open: Vec<usize> = Vec::new();
    let mut check =
        |i: usize, t: Timestamp, view: &ServedView, zones: &[ZoneReport], results: &mut Vec<Option<ExpectRecord>>| {
            let mut r = evaluate(i + 1, at(i), &scenario.expect[i], view, zones);
            r.seen = Some(t);
            let ok = r.ok;
            if ok {
                results[i] = Some(r);
            } else {
                last[i] = Some(r);
            }
            ok
        };
    let mut timeline = timeline.into_iter().peekable();
    loop {
        let next_t = timeline.peek().map(|(t, _)| *t);
        // Open every expectation due before the next change: the state at
        // its `at` is the state now.
        while let Some(&i) = pending.peek() {
            if next_t.is_some_and(|t| at(i) >= t) {
                break;
            }
            pending.next();
            if !check(i, at(i), &view, &zones, &mut results) {
                open.push(i);
            }
        }
        let Some((t, happening)) = timeline.next() else { break };
        // Windows that closed before this change failed.
        open.retain(|&i| at(i) + tolerance >= t);
        match happening {
            Happening::Journal(line) => view.apply(line, t, &time, controller_agent),
            Happening::Zones(z) => zones = z,
        }
        // Several changes may share an instant: check after the last.
        if timeline.peek().is_some_and(|(next, _)| *next == t) {
            continue;
        }
        open.retain(|&i| !check(i, t, &view, &zones, &mut results));
    }
    let mut records = Vec::with_capacity(results.len());
    let mut largest = Span::ZERO;
    let mut largest_expect = None;
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(r) => {
                if let Some(seen) = r.seen
                    && seen - r.at > largest
                {
                    largest = seen - r.at;
                    largest_expect = Some(i + 1);
                }
                records.push(r);
            }
            None => {
                let mut r =
                    last[i].take().unwrap_or_else(|| evaluate(i + 1, at(i), &scenario.expect[i], &view, &zones));
                r.ok = false;
                // Checked until the end of its window.
                r.seen = Some(at(i) + tolerance);
                records.push(r);
            }
        }
    }
    Ok(Judged { records, largest_deviation: largest, largest_expect })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_read_from_metrics() {
        let text = "# TYPE nodewarden_zone_state gauge\n\
            nodewarden_zone_state{state=\"Normal\",zone=\"r/a\"} 0\n\
            nodewarden_zone_state{state=\"FullDisruption\",zone=\"r/a\"} 1\n\
            nodewarden_zone_state{state=\"Normal\",zone=\"/\"} 1\n\
            nodewarden_zone_rate{zone=\"r/a\"} 0.01\n\
            nodewarden_zone_rate{zone=\"/\"} 0.1\n";
        let zones = zones_from_metrics(text);
        assert_eq!(zones.len(), 2);
        let a = zones.iter().find(|z| z.key == ZoneKey::parse("r/a")).expect("r/a");
        assert_eq!(a.state, Some(ZoneState::FullDisruption));
        assert_eq!(a.rate, 0.01);
        let empty = zones.iter().find(|z| z.key == ZoneKey::parse("/")).expect("/");
        assert_eq!(empty.state, Some(ZoneState::Normal));
    }
}
