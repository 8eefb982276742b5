//! What the served store saw happen, from its own change feed, and the
//! verdict taken from it.
//!
//! Each pod deletion is judged against its node as the store held it at
//! that instant (the feed delivers node and pod changes to one task in the
//! store's order), so "deleted from a node without a NoExecute taint" is
//! exact, not a poller's guess.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nodewarden_apiserver::Kind;
use nodewarden_apiserver::Served;
use nodewarden_apiserver::WriteRecord;
use nodewarden_apiserver::store::{Change, EventType};
use serde_json::Value;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::replica::Scraped;
use crate::{Scale, Trial, Verdict};

/// One pod deletion, as the store saw it.
#[derive(Clone, Debug)]
pub struct Deletion {
    /// `namespace/name`.
    pub pod: String,
    /// When the store deleted it.
    pub at: Instant,
    /// Its node carried a NoExecute taint then.
    pub node_tainted: bool,
    /// Since when, without a break.
    pub tainted_since: Option<Instant>,
    /// The pod's shortest NoExecute toleration, seconds.
    pub toleration: Option<i64>,
}

/// What the feed recorded.
#[derive(Debug, Default)]
pub struct History {
    /// Every pod deletion, in order.
    pub deletions: Vec<Deletion>,
    /// Nodes outside the lost zone seen Unknown or tainted NoExecute.
    pub healthy_marked: BTreeSet<String>,
    /// The feed overflowed: the record is incomplete.
    pub lagged: bool,
}

/// The node state the record keeps: tainted NoExecute since when.
type Nodes = HashMap<String, Option<Instant>>;

/// Records the store's node and pod changes from now on.
pub struct Recorder {
    history: Arc<Mutex<History>>,
    task: tokio::task::JoinHandle<()>,
}

fn changes(served: &Served, kind: Kind) -> Option<Receiver<Arc<Change>>> {
    let mut s = served.shared.store.lock();
    let rv = s.rv();
    s.watch(kind, Some(rv)).ok().map(|w| w.rx)
}

fn noexecute(v: &Value) -> bool {
    v.pointer("/spec/taints").and_then(Value::as_array).is_some_and(|t| t.iter().any(|t| t["effect"] == "NoExecute"))
}

fn ready(v: &Value) -> Option<String> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

fn shortest_toleration(v: &Value) -> Option<i64> {
    v.pointer("/spec/tolerations")
        .and_then(Value::as_array)?
        .iter()
        .filter(|t| t["effect"] == "NoExecute" || t["effect"].is_null())
        .filter_map(|t| t["tolerationSeconds"].as_i64())
        .min()
}

impl Recorder {
    /// Records from now; `lost` are the lost zone's nodes.
    pub fn start(served: &Served, lost: &[String]) -> Recorder {
        let history = Arc::new(Mutex::new(History::default()));
        let (nodes_rx, pods_rx) = (changes(served, Kind::Node), changes(served, Kind::Pod));
        let lost: BTreeSet<String> = lost.iter().cloned().collect();
        let h = history.clone();
        let task = tokio::spawn(async move {
            let (Some(mut nodes_rx), Some(mut pods_rx)) = (nodes_rx, pods_rx) else {
                h.lock().unwrap_or_else(PoisonError::into_inner).lagged = true;
                return;
            };
            let mut nodes: Nodes = HashMap::new();
            // One change of each kind held back, so the two feeds are
            // merged in the store's order (resourceVersion): the store
            // sends each change as it commits it, so when one feed holds
            // change R, every earlier change of the other is in its
            // channel already.
            let mut held: [Option<Arc<Change>>; 2] = [None, None];
            loop {
                for (slot, rx) in held.iter_mut().zip([&mut nodes_rx, &mut pods_rx]) {
                    if slot.is_none() {
                        match rx.try_recv() {
                            Ok(c) => *slot = Some(c),
                            Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {
                                h.lock().unwrap_or_else(PoisonError::into_inner).lagged = true;
                            }
                            Err(_) => {}
                        }
                    }
                }
                let next = match (&held[0], &held[1]) {
                    (Some(a), Some(b)) => Some(usize::from(b.rv < a.rv)),
                    (Some(_), None) => Some(0),
                    (None, Some(_)) => Some(1),
                    (None, None) => None,
                };
                let Some(i) = next else {
                    let got = tokio::select! {
                        c = nodes_rx.recv() => (0, c),
                        c = pods_rx.recv() => (1, c),
                    };
                    match got {
                        (i, Ok(c)) => held[i] = Some(c),
                        (_, Err(RecvError::Lagged(_))) => {
                            h.lock().unwrap_or_else(PoisonError::into_inner).lagged = true
                        }
                        (_, Err(RecvError::Closed)) => return,
                    }
                    continue;
                };
                if let Some(c) = held[i].take() {
                    let mut h = h.lock().unwrap_or_else(PoisonError::into_inner);
                    record(&mut h, &mut nodes, &lost, &c);
                }
            }
        });
        Recorder { history, task }
    }

    /// What was recorded; stops recording.
    pub fn finish(self) -> History {
        self.task.abort();
        std::mem::take(&mut *self.history.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn record(h: &mut History, nodes: &mut Nodes, lost: &BTreeSet<String>, c: &Change) {
    let v = c.obj.value();
    let now = Instant::now();
    if v["kind"] == "Node" {
        let name = c.obj.name().to_string();
        let tainted = c.kind != EventType::Deleted && noexecute(&v);
        let since = nodes.entry(name.clone()).or_default();
        *since = match (tainted, *since) {
            (true, Some(s)) => Some(s),
            (true, None) => Some(now),
            (false, _) => None,
        };
        if !lost.contains(&name) && name != "rogue" && (tainted || ready(&v).as_deref() == Some("Unknown")) {
            h.healthy_marked.insert(name);
        }
        return;
    }
    if c.kind != EventType::Deleted {
        return;
    }
    let node = v.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
    let since = nodes.get(&node).copied().flatten();
    h.deletions.push(Deletion {
        pod: c.obj.key.clone(),
        at: now,
        node_tainted: since.is_some(),
        tainted_since: since,
        toleration: shortest_toleration(&v),
    });
}

/// Ready nodes carrying a controller taint (`unreachable` or `not-ready`,
/// either effect) now.
pub fn ready_still_tainted(served: &Served) -> usize {
    let s = served.shared.store.lock();
    let snapshot = s.snapshot(Kind::Node);
    snapshot
        .iter_from("", None)
        .map(|o| o.value())
        .filter(|v| ready(v).as_deref() == Some("True"))
        .filter(|v| {
            v.pointer("/spec/taints").and_then(Value::as_array).is_some_and(|t| {
                t.iter().any(|t| {
                    matches!(t["key"].as_str(), Some("node.kubernetes.io/unreachable" | "node.kubernetes.io/not-ready"))
                })
            })
        })
        .count()
}

/// The verdict of a trial from what was recorded.
#[allow(clippy::too_many_arguments)]
pub fn verdict(
    trial: Trial,
    scale: &Scale,
    history: History,
    writes: &[WriteRecord],
    scraped: Scraped,
    ready_still_tainted: usize,
    start: Instant,
    heal: Duration,
    offset: Duration,
) -> Verdict {
    let lost_prefix = format!("default/{}-", crate::ZONES[0].trim_start_matches("zone-"));
    let in_lost = |d: &Deletion| d.pod.starts_with(&lost_prefix);
    let heal_at = start + heal;
    let expected = scale.nodes_per_zone * scale.pods_per_node;
    let deleted_before_heal: BTreeSet<&str> =
        history.deletions.iter().filter(|d| in_lost(d) && d.at < heal_at).map(|d| d.pod.as_str()).collect();
    let on_untainted_node = history.deletions.iter().filter(|d| !d.node_tainted).count();
    let early = history
        .deletions
        .iter()
        .filter(|d| match (d.tainted_since, d.toleration) {
            (Some(since), Some(secs)) => d.at < since + Duration::from_secs(u64::try_from(secs).unwrap_or(0)),
            _ => false,
        })
        .count();
    let outside = history.deletions.iter().filter(|d| !in_lost(d) && d.pod != "default/garbled").count();
    // Accepted deletions (DELETE of a pod, or an Eviction) per pod.
    let mut accepted: BTreeMap<String, usize> = BTreeMap::new();
    for w in writes {
        let pod = match (w.method.as_str(), w.path.strip_suffix("/eviction")) {
            ("DELETE", None) if w.path.contains("/pods/") => w.path.as_str(),
            ("POST", Some(p)) => p,
            _ => continue,
        };
        *accepted.entry(pod.to_string()).or_default() += 1;
    }
    let duplicate = accepted.values().filter(|n| **n > 1).count();
    let ratio = if expected == 0 { 1.0 } else { deleted_before_heal.len() as f64 / expected as f64 };

    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(
        ratio >= 0.99,
        format!("{} of {expected} due deletions before the heal (target 99%)", deleted_before_heal.len()),
    );
    check(on_untainted_node == 0, format!("{on_untainted_node} deletions on a node without a NoExecute taint"));
    check(early == 0, format!("{early} deletions before the toleration ran out"));
    check(duplicate == 0, format!("{duplicate} pods deleted more than once"));
    check(outside == 0, format!("{outside} pods deleted outside the lost zone"));
    check(history.healthy_marked.is_empty(), format!("healthy nodes marked: {:?}", history.healthy_marked));
    check(scraped.interlock_refusals == 0, format!("{} interlock refusals", scraped.interlock_refusals));
    check(ready_still_tainted == 0, format!("{ready_still_tainted} Ready nodes still tainted after the recovery"));
    check(!history.lagged, "the store's feed overflowed: the record is incomplete".into());
    if trial == Trial::ProbeFlakes {
        check(
            scraped.api_silences == 0,
            format!("the engine stopped deciding {} times for want of an answer", scraped.api_silences),
        );
    }
    if trial == Trial::ApiThrottle {
        check(
            scraped.leadership_lost == 0,
            format!("{} replicas lost their Lease to throttling", scraped.leadership_lost),
        );
    }
    let last_due = scale.last_due() + offset;
    Verdict {
        trial,
        scale: scale.name,
        expected_before_heal: expected,
        deleted_before_heal: deleted_before_heal.len(),
        ratio: (ratio * 1000.0).round() / 1000.0,
        on_untainted_node,
        early,
        duplicate,
        outside_the_lost_zone: outside,
        healthy_nodes_marked: history.healthy_marked.len(),
        interlock_refusals: scraped.interlock_refusals,
        withdrawn: scraped.withdrawn,
        write_lag_max_seconds: scraped.write_lag_max,
        ready_still_tainted,
        leadership_lost: scraped.leadership_lost,
        api_silences: scraped.api_silences,
        replicas_started: scraped.started,
        last_due_seconds: last_due.as_secs_f64(),
        heal_seconds: heal.as_secs_f64(),
        wall_seconds: 0.0,
        pass: failures.is_empty(),
        failures,
        logs: None,
    }
}
