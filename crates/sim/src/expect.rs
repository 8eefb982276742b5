//! Evaluating expectations against the simulated cluster and the engine's
//! zone reports.

use std::collections::BTreeSet;

use nodewarden_cluster::cluster::{Cluster, SimPod};
use nodewarden_cluster::scenario::{EventMatch, Expectation, NodeChecks, PodChecks, Subject, ZoneChecks};
use nodewarden_engine::{NodeSnapshot, ObjectRef, ZoneReport};
use nodewarden_model::{ConditionType, NodeCondition, TaintEffect, Timestamp, ZoneKey, keys};
use serde_json::{Map, Value, json};

use crate::output::ExpectRecord;

/// Collects per-check results: what was found, and which checks failed.
#[derive(Default)]
struct Tally {
    got: Map<String, Value>,
    failed: Vec<String>,
}

impl Tally {
    fn check(&mut self, key: &str, ok: bool, got: Value) {
        self.got.insert(key.to_string(), got);
        if !ok {
            self.failed.push(key.to_string());
        }
    }
}

/// What an expectation is checked against: the cluster as it stands, and
/// what was done to it so far. Replay's in-memory [`Cluster`] is one;
/// `cargo xtask wire` builds another from the served cluster's journal, so
/// a file means the same over the wire as in replay.
pub trait Observed {
    /// A node as stored now.
    fn node(&self, name: &str) -> Option<&NodeSnapshot>;
    /// Every node stored now.
    fn nodes(&self) -> Box<dyn Iterator<Item = &NodeSnapshot> + '_>;
    /// Whether the node was ever stored (a deleted one was).
    fn node_ever_existed(&self, name: &str) -> bool;
    /// A pod, stored now or deleted (its last state, `deleted` set).
    fn pod(&self, key: &str) -> Option<&SimPod>;
    /// Writes the controller made to the object so far (rule 11).
    fn writes(&self, object: &ObjectRef) -> u64;
    /// Every Event recorded so far, once per recording: (reason, object as
    /// `node` or `namespace/name`).
    fn recorded_events(&self) -> Vec<(&str, String)>;
}

impl Observed for Cluster {
    fn node(&self, name: &str) -> Option<&NodeSnapshot> {
        Cluster::node(self, name)
    }
    fn nodes(&self) -> Box<dyn Iterator<Item = &NodeSnapshot> + '_> {
        Box::new(Cluster::nodes(self))
    }
    fn node_ever_existed(&self, name: &str) -> bool {
        Cluster::node_ever_existed(self, name)
    }
    fn pod(&self, key: &str) -> Option<&SimPod> {
        Cluster::pod(self, key)
    }
    fn writes(&self, object: &ObjectRef) -> u64 {
        Cluster::writes(self, object)
    }
    fn recorded_events(&self) -> Vec<(&str, String)> {
        self.events().iter().map(|e| (e.event.reason, e.event.object.to_string())).collect()
    }
}

/// Checks expectation number `index` (from 1) at `at`, after everything due
/// at that instant has run.
pub fn evaluate(
    index: usize,
    at: Timestamp,
    x: &Expectation,
    cluster: &dyn Observed,
    zones: &[ZoneReport],
) -> ExpectRecord {
    let mut tally = Tally::default();
    let mut record = ExpectRecord {
        expect: index,
        at,
        ok: false,
        node: None,
        pod: None,
        zone: None,
        want: Value::Null,
        got: Value::Null,
        failed: Vec::new(),
        seen: None,
    };
    match &x.subject {
        Subject::Node { name, checks } => {
            record.node = Some(name.clone());
            record.want = to_json(checks);
            node_checks(&mut tally, name, checks, cluster);
        }
        Subject::Pod { key, checks } => {
            record.pod = Some(key.clone());
            record.want = to_json(checks);
            pod_checks(&mut tally, key, checks, cluster);
        }
        Subject::Zone { zone, checks } => {
            record.zone = Some(zone.clone());
            record.want = to_json(checks);
            zone_checks(&mut tally, zone, checks, cluster, zones);
        }
        Subject::EventsInclude(list) => {
            record.want = json!({ "events-include": list });
            let got = events_check(list, &cluster.recorded_events(), true);
            tally.check("events-include", got.1, got.0);
        }
        Subject::EventsExclude(list) => {
            record.want = json!({ "events-exclude": list });
            let got = events_check(list, &cluster.recorded_events(), false);
            tally.check("events-exclude", got.1, got.0);
        }
    }
    record.ok = tally.failed.is_empty();
    record.got = Value::Object(tally.got);
    record.failed = tally.failed;
    record
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn find_condition<'a>(conditions: &'a [NodeCondition], kind: &str) -> Option<&'a NodeCondition> {
    let kind = ConditionType::parse(kind);
    conditions.iter().find(|c| c.kind == kind)
}

fn node_checks(tally: &mut Tally, name: &str, checks: &NodeChecks, cluster: &dyn Observed) {
    let node = cluster.node(name);
    let present = node.is_some();
    if let Some(want) = checks.ready {
        let got = node.and_then(|n| find_condition(&n.conditions, "Ready")).map(|c| c.status);
        tally.check("ready", got == Some(want), to_json(&got));
    }
    let actual: Option<BTreeSet<String>> = node.map(|n| n.taints.iter().map(|t| t.short()).collect());
    let actual_json = to_json(&actual);
    let want_set = |list: &[nodewarden_cluster::scenario::TaintRef]| -> BTreeSet<String> {
        list.iter().map(ToString::to_string).collect()
    };
    if let Some(want) = &checks.taints {
        let ok = actual.as_ref().is_some_and(|a| *a == want_set(want));
        tally.check("taints", ok, actual_json.clone());
    }
    if let Some(want) = &checks.has_taints {
        let ok = actual.as_ref().is_some_and(|a| want_set(want).is_subset(a));
        tally.check("has-taints", ok, actual_json.clone());
    }
    if let Some(want) = &checks.lacks_taints {
        let ok = actual.as_ref().is_some_and(|a| want_set(want).is_disjoint(a));
        tally.check("lacks-taints", ok, actual_json);
    }
    if let Some(want) = &checks.conditions {
        let mut got = Map::new();
        let mut ok = present;
        for (kind, status) in want {
            let g = node.and_then(|n| find_condition(&n.conditions, kind)).map(|c| c.status);
            ok &= g == *status;
            got.insert(kind.clone(), to_json(&g));
        }
        tally.check("conditions", ok, Value::Object(got));
    }
    if let Some(want) = &checks.condition_reasons {
        let mut got = Map::new();
        let mut ok = present;
        for (kind, reason) in want {
            let g = node.and_then(|n| find_condition(&n.conditions, kind)).map(|c| c.reason.clone());
            ok &= g == *reason;
            got.insert(kind.clone(), to_json(&g));
        }
        tally.check("condition-reasons", ok, Value::Object(got));
    }
    if let Some(want) = &checks.labels {
        let mut got = Map::new();
        let mut ok = present;
        for (key, value) in want {
            let g = node.and_then(|n| n.labels.get(key)).cloned();
            ok &= g == *value;
            got.insert(key.clone(), to_json(&g));
        }
        tally.check("labels", ok, Value::Object(got));
    }
    if let Some(want) = checks.writes {
        let got = cluster.writes(&ObjectRef::Node(name.to_string()));
        tally.check("writes", got == want, json!(got));
    }
    if let Some(want) = checks.deleted {
        let got = if present {
            Some(false)
        } else if cluster.node_ever_existed(name) {
            Some(true)
        } else {
            None
        };
        tally.check("deleted", got == Some(want), to_json(&got));
    }
}

fn pod_checks(tally: &mut Tally, key: &str, checks: &PodChecks, cluster: &dyn Observed) {
    // A deleted pod's last state stays checkable; a pod not created yet has none.
    let pod = cluster.pod(key);
    if let Some(want) = checks.deleted {
        let got = pod.map(|p| p.deleted);
        tally.check("deleted", got == Some(want), to_json(&got));
    }
    if let Some(want) = checks.ready {
        let got = pod.and_then(|p| p.ready());
        tally.check("ready", got == Some(want), to_json(&got));
    }
    if let Some(want) = &checks.reason {
        let got = pod.map(|p| p.reason.clone());
        let ok = got.as_ref() == Some(want);
        tally.check("reason", ok, to_json(&got.flatten()));
    }
    if let Some(want) = &checks.conditions {
        let mut got = Map::new();
        let mut ok = pod.is_some();
        for (kind, status) in want {
            let g = pod.and_then(|p| p.conditions.get(kind)).copied();
            ok &= g == *status;
            got.insert(kind.clone(), to_json(&g));
        }
        tally.check("conditions", ok, Value::Object(got));
    }
    if let Some(want) = checks.writes {
        let got = cluster.writes(&ObjectRef::Pod(key.to_string()));
        tally.check("writes", got == want, json!(got));
    }
    if let Some(want) = &checks.node {
        let got = pod.map(|p| p.node.clone());
        let ok = got.as_ref() == Some(want);
        tally.check("node", ok, to_json(&got.flatten()));
    }
    if let Some(want) = checks.terminating {
        let got = pod.map(|p| p.is_terminating());
        tally.check("terminating", got == Some(want), to_json(&got));
    }
    if let Some(want) = checks.unschedulable {
        let got = pod.map(|p| p.unschedulable());
        tally.check("unschedulable", got == Some(want), to_json(&got));
    }
}

/// Nodes of `zone` (by their labels, as the controller computes zones)
/// carrying a not-ready or unreachable NoExecute taint.
pub fn tainted_in_zone(cluster: &dyn Observed, zone: &ZoneKey) -> u64 {
    let count = cluster
        .nodes()
        .filter(|n| ZoneKey::from_labels(&n.labels) == *zone)
        .filter(|n| {
            n.taints.iter().any(|t| {
                t.is(keys::TAINT_NOT_READY, TaintEffect::NoExecute)
                    || t.is(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute)
            })
        })
        .count();
    u64::try_from(count).unwrap_or(u64::MAX)
}

fn same_rate(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn zone_checks(tally: &mut Tally, zone: &str, checks: &ZoneChecks, cluster: &dyn Observed, zones: &[ZoneReport]) {
    let key = ZoneKey::parse(zone);
    let report = zones.iter().find(|z| z.key == key);
    if let Some(want) = &checks.state {
        let got = report.and_then(|r| r.state);
        tally.check("state", got == want.map(|s| s.0), to_json(&got.map(|s| s.as_str())));
    }
    if let Some(want) = checks.rate {
        let got = report.map_or(0.0, |r| r.rate);
        tally.check("rate", same_rate(got, want), json!(got));
    }
    if let Some(want) = checks.tainted {
        let got = tainted_in_zone(cluster, &key);
        tally.check("tainted", got == want, json!(got));
    }
}

fn matches(m: &EventMatch, (reason, object): &(&str, String)) -> bool {
    *reason == m.reason && m.object.as_ref().is_none_or(|o| o == object)
}

/// Counts each matcher's Events; returns what was found and whether the
/// list holds (include: at least one, or exactly `count`; exclude: none).
fn events_check(list: &[EventMatch], events: &[(&str, String)], include: bool) -> (Value, bool) {
    let mut ok = true;
    let mut got = Vec::new();
    for m in list {
        let n = events.iter().filter(|e| matches(m, e)).count() as u64;
        ok &= match (include, m.count) {
            (true, Some(c)) => n == c,
            (true, None) => n >= 1,
            (false, _) => n == 0,
        };
        let mut entry = Map::new();
        entry.insert("reason".into(), json!(m.reason));
        if let Some(o) = &m.object {
            entry.insert("object".into(), json!(o));
        }
        entry.insert("count".into(), json!(n));
        got.push(Value::Object(entry));
    }
    (Value::Array(got), ok)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_engine::{Action, ActionId, ActionKind, Event, EventType, WriteSlot, ZoneState};
    use nodewarden_model::{ConditionStatus, Span, Taint};

    use super::*;
    use nodewarden_cluster::admission::AdmissionDefaults;
    use nodewarden_cluster::scenario::{NodeSpec, PodSpec, TaintRef, TimeSpec, ZoneStateSpec};

    fn world() -> Cluster {
        let mut c = Cluster::new(AdmissionDefaults::default());
        for (name, zone) in [("a", "r/z"), ("b", "r/z"), ("c", "r/y")] {
            c.add_node(
                &NodeSpec {
                    name: name.into(),
                    zone: Some(zone.into()),
                    labels: BTreeMap::from([("kubernetes.io/os".into(), "linux".into())]),
                    created: None,
                    ready: Some(ConditionStatus::True),
                    heartbeat: Some(TimeSpec::Now),
                    transition: None,
                    conditions: BTreeMap::new(),
                    lease: None,
                    taints: vec![],
                    unschedulable: false,
                    kubelet: false,
                    allocatable: None,
                },
                Timestamp::EPOCH,
            );
        }
        c.add_pod(&PodSpec::bound("default/p", "a"));
        let taint = |node: &str, id: u64| Action {
            id: ActionId(id),
            kind: ActionKind::PatchNodeTaints {
                node: node.into(),
                add: vec![Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute)],
                remove: vec![],
                slot: WriteSlot::NoExecuteTaints,
            },
        };
        c.apply_action(Timestamp::EPOCH, &taint("a", 1));
        c.apply_action(Timestamp::EPOCH, &taint("c", 2));
        for _ in 0..2 {
            c.apply_action(
                Timestamp::EPOCH,
                &Action {
                    id: ActionId(3),
                    kind: ActionKind::RecordEvent(Event {
                        object: ObjectRef::Pod("default/p".into()),
                        kind: EventType::Normal,
                        reason: "TaintManagerEviction",
                        message: String::new(),
                    }),
                },
            );
        }
        c
    }

    fn run(subject: Subject, c: &Cluster, zones: &[ZoneReport]) -> ExpectRecord {
        evaluate(1, Timestamp::EPOCH, &Expectation { at: Span::ZERO, subject }, c, zones)
    }

    fn tr(s: &str) -> TaintRef {
        s.parse().unwrap()
    }

    #[test]
    fn node_taint_checks() {
        let c = world();
        let ur = "node.kubernetes.io/unreachable:NoExecute";
        let nr = "node.kubernetes.io/not-ready:NoExecute";
        let node = |checks| Subject::Node { name: "a".into(), checks };
        let r = run(node(NodeChecks { taints: Some(vec![tr(ur)]), ..Default::default() }), &c, &[]);
        assert!(r.ok, "{r:?}");
        let r = run(node(NodeChecks { taints: Some(vec![]), ..Default::default() }), &c, &[]);
        assert!(!r.ok);
        assert_eq!(r.failed, ["taints"]);
        assert_eq!(r.got, json!({"taints": [ur]}));
        let r = run(
            node(NodeChecks { has_taints: Some(vec![tr(ur)]), lacks_taints: Some(vec![tr(nr)]), ..Default::default() }),
            &c,
            &[],
        );
        assert!(r.ok, "{r:?}");
        let r = run(node(NodeChecks { lacks_taints: Some(vec![tr(ur)]), ..Default::default() }), &c, &[]);
        assert!(!r.ok);
    }

    #[test]
    fn node_status_label_and_write_checks() {
        let c = world();
        let r = run(
            Subject::Node {
                name: "a".into(),
                checks: NodeChecks {
                    ready: Some(ConditionStatus::True),
                    conditions: Some(BTreeMap::from([("MemoryPressure".into(), None)])),
                    condition_reasons: Some(BTreeMap::from([("Ready".into(), Some("KubeletReady".into()))])),
                    labels: Some(BTreeMap::from([
                        ("kubernetes.io/os".into(), Some("linux".into())),
                        ("absent".into(), None),
                    ])),
                    writes: Some(1),
                    deleted: Some(false),
                    ..Default::default()
                },
            },
            &c,
            &[],
        );
        assert!(r.ok, "{r:?}");
        let r = run(
            Subject::Node {
                name: "a".into(),
                checks: NodeChecks { ready: Some(ConditionStatus::Unknown), writes: Some(2), ..Default::default() },
            },
            &c,
            &[],
        );
        assert_eq!(r.failed, ["ready", "writes"]);
        assert_eq!(r.got, json!({"ready": "True", "writes": 1}));
    }

    #[test]
    fn pod_checks_survive_deletion() {
        let mut c = world();
        let r = run(
            Subject::Pod {
                key: "default/p".into(),
                checks: PodChecks { deleted: Some(false), ready: Some(true), reason: Some(None), ..Default::default() },
            },
            &c,
            &[],
        );
        assert!(r.ok, "{r:?}");
        c.delete_pod("default/p");
        let r = run(
            Subject::Pod {
                key: "default/p".into(),
                checks: PodChecks { deleted: Some(true), ready: Some(true), writes: Some(0), ..Default::default() },
            },
            &c,
            &[],
        );
        assert!(r.ok, "{r:?}");
        let r = run(
            Subject::Pod {
                key: "default/nope".into(),
                checks: PodChecks { deleted: Some(true), ..Default::default() },
            },
            &c,
            &[],
        );
        assert!(!r.ok);
    }

    #[test]
    fn zone_checks_use_reports_and_cluster_taints() {
        let c = world();
        let zones = [ZoneReport {
            key: ZoneKey::new("r", "z"),
            state: Some(ZoneState::Normal),
            rate: 0.1,
            size: 2,
            not_ready: 0,
            queued: 0,
        }];
        let zone = |z: &str, checks| Subject::Zone { zone: z.into(), checks };
        let r = run(
            zone(
                "r/z",
                ZoneChecks { state: Some(Some(ZoneStateSpec(ZoneState::Normal))), rate: Some(0.1), tainted: Some(1) },
            ),
            &c,
            &zones,
        );
        assert!(r.ok, "{r:?}");
        // A zone the engine does not report: no state, rate 0.
        let r = run(zone("r/y", ZoneChecks { state: Some(None), rate: Some(0.0), tainted: Some(1) }), &c, &zones);
        assert!(r.ok, "{r:?}");
        let r = run(
            zone("r/y", ZoneChecks { state: Some(Some(ZoneStateSpec(ZoneState::Normal))), ..Default::default() }),
            &c,
            &zones,
        );
        assert_eq!(r.got, json!({"state": null}));
        assert!(!r.ok);
    }

    #[test]
    fn event_checks() {
        let c = world();
        let m = |object: Option<&str>, count| EventMatch {
            reason: "TaintManagerEviction".into(),
            object: object.map(Into::into),
            count,
        };
        assert!(run(Subject::EventsInclude(vec![m(Some("default/p"), None)]), &c, &[]).ok);
        assert!(run(Subject::EventsInclude(vec![m(None, Some(2))]), &c, &[]).ok);
        let r = run(Subject::EventsInclude(vec![m(Some("default/p"), Some(1))]), &c, &[]);
        assert!(!r.ok);
        assert_eq!(
            r.got,
            json!({"events-include": [{"reason": "TaintManagerEviction", "object": "default/p", "count": 2}]})
        );
        assert!(!run(Subject::EventsExclude(vec![m(Some("default/p"), None)]), &c, &[]).ok);
        assert!(run(Subject::EventsExclude(vec![m(Some("default/q"), None)]), &c, &[]).ok);
    }
}
