//! The incident as the nodes show it: a watch that keeps what each node
//! went through (Unknown, tainted, when, and when the harness saw it),
//! the census of the crashed nodes by their stale Leases, and the
//! detection and taint figures judged from both.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::StreamExt;
use nodewarden_harness::process::unix_nanos;
use nodewarden_objects::parse_rfc3339;
use serde_json::Value;

use super::api::Api;
use super::{nanos, secs};

/// The taint a node gets when it is unreachable (with effect NoExecute).
pub(super) const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

pub(super) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A time of `v` at `pointer` (RFC 3339), in Unix nanoseconds.
pub(super) fn time_at(v: &Value, pointer: &str) -> Option<i64> {
    parse_rfc3339(v.pointer(pointer)?.as_str()?)
}

/// What one node object says about its health.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct NodeFacts {
    pub(super) zone: String,
    /// Ready's status (`True`, `False`, `Unknown`).
    pub(super) ready: Option<String>,
    /// Ready's lastTransitionTime.
    pub(super) transition: Option<i64>,
    /// Ready's lastHeartbeatTime.
    pub(super) heartbeat: Option<i64>,
    /// The unreachable NoExecute taint is on the node, and its timeAdded.
    pub(super) tainted: bool,
    pub(super) taint_added: Option<i64>,
}

/// The node's name and facts; `None` for an object without a name.
pub(super) fn node_facts(node: &Value) -> Option<(String, NodeFacts)> {
    let name = node.pointer("/metadata/name")?.as_str()?.to_string();
    let zone = node.pointer("/metadata/labels").and_then(|l| l.get(ZONE_LABEL)).and_then(Value::as_str);
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")));
    let taint = node.pointer("/spec/taints").and_then(Value::as_array).and_then(|ts| {
        ts.iter().find(|t| {
            t.get("key").and_then(Value::as_str) == Some(UNREACHABLE)
                && t.get("effect").and_then(Value::as_str) == Some("NoExecute")
        })
    });
    Some((
        name,
        NodeFacts {
            zone: zone.unwrap_or_default().to_string(),
            ready: ready.and_then(|r| r.get("status")).and_then(Value::as_str).map(str::to_string),
            transition: ready.and_then(|r| time_at(r, "/lastTransitionTime")),
            heartbeat: ready.and_then(|r| time_at(r, "/lastHeartbeatTime")),
            tainted: taint.is_some(),
            taint_added: taint.and_then(|t| time_at(t, "/timeAdded")),
        },
    ))
}

/// What the harness's node watch saw of one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct NodeSeen {
    pub(super) zone: String,
    /// The latest Ready lastHeartbeatTime seen.
    pub(super) heartbeat: Option<i64>,
    /// Ready seen Unknown since it was last seen True: (its
    /// lastTransitionTime, when it arrived).
    pub(super) unknown: Option<(i64, i64)>,
    /// Ever seen Unknown (a live node marked by mistake, then Ready again,
    /// still counts).
    pub(super) ever_unknown: bool,
    /// The unreachable NoExecute taint seen since it was last absent:
    /// (timeAdded, arrival).
    pub(super) tainted: Option<(i64, i64)>,
}

impl NodeSeen {
    pub(super) fn take(&mut self, f: &NodeFacts, arrival: i64) {
        self.zone.clone_from(&f.zone);
        self.heartbeat = self.heartbeat.max(f.heartbeat);
        match f.ready.as_deref() {
            Some("Unknown") => {
                self.ever_unknown = true;
                if self.unknown.is_none() {
                    self.unknown = Some((f.transition.unwrap_or(arrival), arrival));
                }
            }
            // Heard from again: a later Unknown is a new episode.
            Some("True") => self.unknown = None,
            _ => {}
        }
        if !f.tainted {
            self.tainted = None;
        } else if self.tainted.is_none() {
            self.tainted = Some((f.taint_added.unwrap_or(arrival), arrival));
        }
    }
}

pub(super) type Book = Arc<Mutex<HashMap<String, NodeSeen>>>;

/// Lists the nodes, then watches them to the end (aborted by the caller),
/// keeping what each went through in `book`. Listed again when the watch
/// says its resourceVersion is too old.
pub(super) async fn watch_nodes(api: Api, book: Book) -> Result<()> {
    let mut rv: Option<String> = None;
    loop {
        let from = match rv.take() {
            Some(v) => v,
            None => {
                api.list("/api/v1/nodes", |item| {
                    if let Some((name, f)) = node_facts(item) {
                        let mut b = book.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        b.entry(name).or_default().take(&f, unix_nanos());
                    }
                })
                .await?
            }
        };
        let mut lines = api.watch("/api/v1/nodes", &from, 30).await?;
        let mut next = Some(from);
        while let Some(line) = lines.next().await {
            let line = line.context("reading the node watch")?;
            let arrival = unix_nanos();
            let event: Value = serde_json::from_str(&line).with_context(|| format!("a node watch event: {line}"))?;
            let object = &event["object"];
            match event["type"].as_str() {
                Some("ERROR") => {
                    next = None;
                    break;
                }
                Some("ADDED" | "MODIFIED") => {
                    if let Some((name, f)) = node_facts(object) {
                        book.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .entry(name)
                            .or_default()
                            .take(&f, arrival);
                    }
                }
                _ => {}
            }
            if let Some(v) = object.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                next = Some(v.to_string());
            }
        }
        rv = next;
    }
}

/// A node Lease's name and renewTime if it was not renewed for `age` at
/// `now`.
pub(super) fn stale_lease(lease: &Value, now: i64, age: Duration) -> Option<(String, i64)> {
    let renew = time_at(lease, "/spec/renewTime")?;
    let name = lease.pointer("/metadata/name")?.as_str()?;
    (renew <= now - nanos(age)).then(|| (name.to_string(), renew))
}

/// How the crashed nodes were found out, so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Detection {
    pub(super) crashed: usize,
    /// Per node marked Unknown: lastTransitionTime − last heartbeat, s.
    pub(super) detect: Vec<f64>,
    /// Per node marked Unknown: arrival on the watch − last heartbeat, s.
    pub(super) detect_seen: Vec<f64>,
    /// `detect` of the nodes marked after the leader was killed.
    pub(super) after_kill: Vec<f64>,
    /// Nodes marked before the leader was killed.
    pub(super) before_kill: usize,
    /// Crashed nodes not marked Unknown yet.
    pub(super) undetected: Vec<String>,
    /// Per zone with a crashed node: the zone's first taint, timeAdded −
    /// that node's last heartbeat, s; `None` while none is tainted.
    pub(super) zone_first_taint: BTreeMap<String, Option<f64>>,
    /// Crashed nodes tainted.
    pub(super) tainted: usize,
    /// Nodes that never stopped renewing but were marked Unknown.
    pub(super) healthy_marked: Vec<String>,
}

impl Detection {
    /// Every crashed node Unknown, every zone's first one tainted.
    pub(super) fn complete(&self) -> bool {
        self.undetected.is_empty() && self.zone_first_taint.values().all(Option::is_some)
    }
}

/// `crashed` (name → Lease renewTime) judged by what the node watch saw;
/// `killed_at`: when the leader was killed, if it was.
pub(super) fn detection(
    crashed: &BTreeMap<String, i64>,
    book: &HashMap<String, NodeSeen>,
    killed_at: Option<i64>,
) -> Detection {
    let mut d = Detection { crashed: crashed.len(), ..Detection::default() };
    // Per zone: (timeAdded, arrival, latency) of its first taint.
    let mut firsts: BTreeMap<String, Option<(i64, i64, f64)>> = BTreeMap::new();
    for (name, &renew) in crashed {
        let Some(seen) = book.get(name) else {
            d.undetected.push(name.clone());
            continue;
        };
        let heartbeat = seen.heartbeat.map_or(renew, |h| h.max(renew));
        let first = firsts.entry(seen.zone.clone()).or_default();
        match seen.unknown {
            Some((transition, arrival)) => {
                let s = secs(heartbeat, transition);
                d.detect.push(s);
                d.detect_seen.push(secs(heartbeat, arrival));
                match killed_at {
                    Some(k) if transition.max(arrival) >= k => d.after_kill.push(s),
                    Some(_) => d.before_kill += 1,
                    None => {}
                }
            }
            None => d.undetected.push(name.clone()),
        }
        if let Some((added, arrival)) = seen.tainted {
            d.tainted += 1;
            if first.is_none_or(|(a, r, _)| (added, arrival) < (a, r)) {
                *first = Some((added, arrival, secs(heartbeat, added)));
            }
        }
    }
    d.zone_first_taint = firsts.into_iter().map(|(z, f)| (z, f.map(|(_, _, s)| s))).collect();
    d.healthy_marked =
        book.iter().filter(|(n, s)| s.ever_unknown && !crashed.contains_key(*n)).map(|(n, _)| n.clone()).collect();
    d.healthy_marked.sort();
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::wire_load::STALE_LEASE;
    use crate::wire_load::test_clock::{T0, at};

    fn node(name: &str, zone: &str, ready: &str, transition: f64, heartbeat: f64, taint: Option<f64>) -> Value {
        let taints: Vec<Value> = taint
            .map(|t| json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": at(t)}))
            .into_iter()
            .chain([json!({"key": UNREACHABLE, "effect": "NoSchedule"})])
            .collect();
        json!({
            "metadata": {"name": name, "labels": {ZONE_LABEL: zone}},
            "spec": {"taints": taints},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": at(0.0)},
                {"type": "Ready", "status": ready, "lastTransitionTime": at(transition), "lastHeartbeatTime": at(heartbeat)},
            ]},
        })
    }

    fn take(book: &mut HashMap<String, NodeSeen>, v: &Value, arrival: f64) {
        let (name, f) = node_facts(v).expect("a node");
        book.entry(name).or_default().take(&f, T0 + (arrival * 1e9) as i64);
    }

    #[test]
    fn detection_counts_from_the_last_heartbeat() {
        let mut book = HashMap::new();
        for n in ["a", "b", "c", "h"] {
            take(&mut book, &node(n, if n == "c" { "z2" } else { "z1" }, "True", 0.0, 0.0, None), 0.0);
        }
        let (_, f) = node_facts(&node("a", "z1", "Unknown", 50.0, 5.0, Some(51.0))).expect("facts");
        assert_eq!((f.ready.as_deref(), f.tainted, f.taint_added), (Some("Unknown"), true, Some(T0 + 51_000_000_000)));
        // a: marked at 50 (heartbeat: its Lease at 8, after Ready's 5) and tainted.
        take(&mut book, &node("a", "z1", "Unknown", 50.0, 5.0, Some(51.0)), 50.4);
        // b: marked after the kill at 60, not tainted (z1's limiter).
        take(&mut book, &node("b", "z1", "Unknown", 62.0, 9.0, None), 62.3);
        // A later event does not move what was first seen.
        take(&mut book, &node("a", "z1", "Unknown", 70.0, 5.0, Some(71.0)), 71.0);
        let crashed: BTreeMap<String, i64> =
            [("a", 8.0), ("b", 2.0), ("c", 4.0)].map(|(n, r)| (n.to_string(), T0 + (r * 1e9) as i64)).into();
        let d = detection(&crashed, &book, Some(T0 + 60_000_000_000));
        assert_eq!(d.crashed, 3);
        assert_eq!(d.detect, vec![42.0, 53.0]);
        assert_eq!(d.detect_seen, vec![42.4, 53.3]);
        assert_eq!((d.after_kill.clone(), d.before_kill), (vec![53.0], 1));
        assert_eq!(d.undetected, vec!["c".to_string()]);
        assert_eq!(d.zone_first_taint, BTreeMap::from([("z1".into(), Some(43.0)), ("z2".into(), None)]));
        assert_eq!(d.tainted, 1);
        assert!(d.healthy_marked.is_empty() && !d.complete());

        // c: marked by mistake at 1 while it lived, Ready again at 3 (the
        // taint gone), then crashed; only the later episode counts.
        take(&mut book, &node("c", "z2", "Unknown", 1.0, 0.0, Some(1.0)), 1.2);
        take(&mut book, &node("c", "z2", "True", 3.0, 3.0, None), 3.1);
        take(&mut book, &node("c", "z2", "Unknown", 45.0, 4.0, Some(45.0)), 45.1);
        // h: marked by mistake, then Ready again: still a false mark.
        take(&mut book, &node("h", "z1", "Unknown", 45.0, 4.0, None), 45.1);
        take(&mut book, &node("h", "z1", "True", 50.0, 50.0, None), 50.1);
        let d = detection(&crashed, &book, None);
        assert!(d.complete());
        assert_eq!(d.detect, vec![42.0, 53.0, 41.0]);
        assert_eq!(d.zone_first_taint.get("z2"), Some(&Some(41.0)));
        assert_eq!(d.healthy_marked, vec!["h".to_string()]);
        assert_eq!((d.after_kill.len(), d.before_kill), (0, 0));
    }

    #[test]
    fn stale_leases_are_the_crashed_nodes() {
        let lease = |n: &str, renew: f64| json!({"metadata": {"name": n}, "spec": {"renewTime": at(renew)}});
        let now = T0 + 31_000_000_000;
        assert_eq!(stale_lease(&lease("old", 10.0), now, STALE_LEASE), Some(("old".to_string(), T0 + 10_000_000_000)));
        assert_eq!(stale_lease(&lease("fresh", 25.0), now, STALE_LEASE), None);
        assert_eq!(stale_lease(&json!({"metadata": {"name": "never"}, "spec": {}}), now, STALE_LEASE), None);
    }
}
