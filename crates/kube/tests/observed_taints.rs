//! The taint manager over the wire: pods leave crashed nodes when their
//! tolerations run out counted from the taint as *observed*, which is what
//! the safety interlock counts from, so over a real API (a watch delay
//! between the taint's write and its sight) the interlock has nothing to
//! refuse; the deletion counter counts the deletions the API accepted,
//! once each; and no pod is told its deletion was cancelled when nothing
//! cancelled it.
//!
//! Against `nodewarden sim --serve` in-process on loopback, serving a
//! scenario file (so pods may tolerate nothing at all: the
//! DefaultTolerationSeconds admission is off), with periods shortened about
//! twenty times, nodewarden driven through kube-rs as `nodewarden run`
//! drives it. What the tests read:
//! - the metrics the controller records, through a recorder installed as
//!   the process's global one (as `nodewarden run`'s Prometheus exporter
//!   is: the engine records on a thread of its own), reset per test, the
//!   tests taking turns;
//! - the served store's own change feed: when each node was first seen
//!   tainted NoExecute and when each pod was deleted, on the server's side;
//! - the Events the controller recorded, listed through the API;
//! - what the controller logged at INFO and above (printed, for the figures).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use common::{client, fast_config, serve};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;
use nodewarden_apiserver::Kind;
use nodewarden_apiserver::store::EventType;
use nodewarden_apiserver::{ServeSource, Served};
use nodewarden_kube::{RunOptions, start as run};
use nodewarden_model::ControllerConfig;
use serde_json::Value;

// ---------------------------------------------------------------------------
// Metrics: a global recorder of counters (gauges and histograms dropped).

/// Every counter recorded since the last [`reset_counters`], by
/// `name{label="value",...}`.
static COUNTERS: Mutex<BTreeMap<String, Arc<AtomicU64>>> = Mutex::new(BTreeMap::new());

struct CounterRecorder;

impl metrics::Recorder for CounterRecorder {
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let mut labels: Vec<String> = key.labels().map(|l| format!("{}={:?}", l.key(), l.value())).collect();
        labels.sort();
        let name =
            if labels.is_empty() { key.name().to_string() } else { format!("{}{{{}}}", key.name(), labels.join(",")) };
        let mut counters = COUNTERS.lock().unwrap_or_else(PoisonError::into_inner);
        metrics::Counter::from_arc(counters.entry(name).or_default().clone())
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

fn reset_counters() {
    COUNTERS.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// The counter `name` summed over its label sets (0 when never recorded).
fn counter(name: &str) -> u64 {
    let counters = COUNTERS.lock().unwrap_or_else(PoisonError::into_inner);
    counters
        .iter()
        .filter(|(k, _)| *k == name || k.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))
        .map(|(_, v)| v.load(Ordering::Relaxed))
        .sum()
}

/// The counters `name` with each label set.
fn counters_named(name: &str) -> BTreeMap<String, u64> {
    let counters = COUNTERS.lock().unwrap_or_else(PoisonError::into_inner);
    counters
        .iter()
        .filter(|(k, _)| *k == name || k.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))
        .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
        .collect()
}

// ---------------------------------------------------------------------------
// Logs: what nodewarden's crates log at INFO and above, kept per test.

static LOGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static STARTED: Mutex<Option<Instant>> = Mutex::new(None);

struct LogCapture;

#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }
}

impl tracing::Subscriber for LogCapture {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        *m.level() <= tracing::Level::INFO && m.target().starts_with("nodewarden")
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, e: &tracing::Event<'_>) {
        let mut f = Fields::default();
        e.record(&mut f);
        let at = STARTED.lock().unwrap_or_else(PoisonError::into_inner).map_or(0.0, |s| s.elapsed().as_secs_f64());
        let line = format!("{at:7.3}s {:5} {}: {}{}", e.metadata().level(), e.metadata().target(), f.message, f.rest);
        LOGS.lock().unwrap_or_else(PoisonError::into_inner).push(line);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// The tests take turns: the recorder and the log are the process's.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Installs the recorder and the log capture (once), and starts this
/// test's figures from nothing.
fn fresh_figures() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = metrics::set_global_recorder(CounterRecorder);
        let _ = tracing::subscriber::set_global_default(LogCapture);
    });
    reset_counters();
    LOGS.lock().unwrap_or_else(PoisonError::into_inner).clear();
    *STARTED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
}

// ---------------------------------------------------------------------------
// The served cluster's side: when nodes were tainted and pods deleted.

#[derive(Debug, Default)]
struct Timeline {
    /// When each node was first stored with a NoExecute taint.
    tainted: BTreeMap<String, Instant>,
    /// Nodes stored without NoExecute taint after having had one (a taint
    /// really taken away: what would earn a "Cancelling deletion").
    untainted: Vec<(String, Instant)>,
    /// Each change of a node's taints: (node, when, the taints as stored).
    taint_changes: Vec<(String, Instant, String)>,
    /// Deleted pods, `namespace/name`, in order, with when.
    deleted: Vec<(String, Instant)>,
    /// The store's feed overflowed: the above may be incomplete.
    lagged: bool,
}

struct Watcher {
    timeline: Arc<Mutex<Timeline>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watcher {
    fn start(served: &Served) -> Watcher {
        let timeline = Arc::new(Mutex::new(Timeline::default()));
        let mut tasks = Vec::new();
        for kind in [Kind::Node, Kind::Pod] {
            let mut rx = common::store_changes(served, kind);
            let tl = timeline.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let change = rx.recv().await;
                    let now = Instant::now();
                    let mut t = tl.lock().unwrap_or_else(PoisonError::into_inner);
                    match change {
                        Ok(c) if kind == Kind::Pod => {
                            if c.kind == EventType::Deleted {
                                t.deleted.push((c.obj.key.clone(), now));
                            }
                        }
                        Ok(c) => {
                            let name = c.obj.name().to_string();
                            let v = c.obj.value();
                            let noexecute = v
                                .pointer("/spec/taints")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .any(|t| t["effect"] == "NoExecute");
                            let taints = v.pointer("/spec/taints").map_or_else(String::new, Value::to_string);
                            let last = t.taint_changes.iter().rev().find(|(n, _, _)| *n == name).map(|(_, _, ts)| ts);
                            if last.map_or(!taints.is_empty() && taints != "[]", |l| *l != taints) {
                                t.taint_changes.push((name.clone(), now, taints));
                            }
                            if noexecute {
                                t.tainted.entry(name).or_insert(now);
                            } else if t.tainted.contains_key(&name) && c.kind != EventType::Deleted {
                                t.untainted.push((name, now));
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => t.lagged = true,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            }));
        }
        Watcher { timeline, tasks }
    }

    fn snapshot<T>(&self, f: impl FnOnce(&Timeline) -> T) -> T {
        f(&self.timeline.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn finish(self) -> Timeline {
        for t in &self.tasks {
            t.abort();
        }
        std::mem::take(&mut *self.timeline.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

// ---------------------------------------------------------------------------
// The scenario.

/// A node: its name and zone.
struct NodeDef {
    name: &'static str,
    zone: &'static str,
}

/// The pods on `node`: `bare-NODE` tolerates nothing, `short-NODE`
/// tolerates unreachable and not-ready for `seconds`, `forever-NODE`
/// tolerates them forever.
fn pods_yaml(node: &str, seconds: i64) -> String {
    let tol = |secs: Option<i64>| {
        let s = secs.map_or(String::new(), |s| format!(", seconds: {s}"));
        format!(
            "[{{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute{s}}}, \
             {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute{s}}}]"
        )
    };
    format!(
        "- {{name: default/bare-{node}, node: {node}}}\n\
         - {{name: default/short-{node}, node: {node}, tolerations: {}}}\n\
         - {{name: default/forever-{node}, node: {node}, tolerations: {}}}\n",
        tol(Some(seconds)),
        tol(None)
    )
}

/// The crashed nodes and how long their `short-` pod tolerates the taint.
type Crashed = [(&'static str, i64)];

/// A scenario file: `nodes`, every one with a kubelet heartbeating every
/// 250 ms (1 s Leases), three pods on each ([`pods_yaml`]); the kubelets of
/// `crashed` stop at `crash_at`. No default tolerations are admitted.
fn scenario(nodes: &[NodeDef], crashed: &Crashed, crash_at: &str) -> nodewarden_cluster::Scenario {
    let mut y = common::scenario_preamble("observed taints");
    for n in nodes {
        let _ = writeln!(
            y,
            "- {{name: {}, zone: {}, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, \
             kubelet: true}}",
            n.name, n.zone
        );
    }
    y.push_str("pods:\n");
    for n in nodes {
        let seconds = crashed.iter().find(|(c, _)| *c == n.name).map_or(3, |(_, s)| *s);
        y.push_str(&pods_yaml(n.name, seconds));
    }
    let stopped: Vec<&str> = crashed.iter().map(|(n, _)| *n).collect();
    let _ = writeln!(y, "events:\n- {{at: {crash_at}, kubelet-stop: [{}]}}", stopped.join(", "));
    nodewarden_cluster::parse_scenario(&y).unwrap_or_else(|e| panic!("scenario: {e}\n{y}"))
}

/// Periods shortened about twenty times, and tainting fast enough for
/// every crashed node to be tainted within a second.
fn config() -> ControllerConfig {
    ControllerConfig { node_eviction_rate: 10.0, ..fast_config() }
}

/// What a run came to.
#[derive(Debug)]
struct Figures {
    /// `nodewarden_safety_interlock_blocked_total`, by invariant.
    refusals: BTreeMap<String, u64>,
    /// `node_collector_evictions_total`, all zones: NoExecute taints added.
    taints_counted: u64,
    /// Nodes the served store saw tainted NoExecute.
    tainted_nodes: usize,
    /// `taint_eviction_controller_pod_deletions_total`.
    counted: u64,
    /// Pods deleted from the served store (a pod twice: deleted twice).
    deleted: Vec<String>,
    /// `TaintManagerEviction` "Cancelling deletion" Events: (pod, message).
    cancelling: Vec<(String, String)>,
    /// Pods with a `TaintManagerEviction` "Marking for deletion" Event
    /// (one per deletion issued): the Events did get through.
    marked: Vec<String>,
    /// `FailedEviction` Events: (pod, type, message).
    failed_evictions: Vec<(String, String, String)>,
    /// Deletions before the pod's toleration ran out from when its node was
    /// stored tainted: (pod, seconds after the taint, tolerationSeconds).
    early: Vec<(String, f64, i64)>,
    /// The latest deletion after its toleration ran out, seconds.
    worst_lateness: f64,
    /// Other counters worth seeing.
    other: BTreeMap<String, u64>,
    /// From the crash to the last deletion.
    crash_to_done: Duration,
}

/// Serves `nodes` with `crashed` stopping at 2 s, runs nodewarden against
/// it until every pod that does not tolerate the crash forever is gone
/// (or `limit`), then gathers the [`Figures`].
async fn run_crash(nodes: &[NodeDef], crashed: &Crashed, limit: Duration) -> Figures {
    let mut opts = common::options();
    opts.source = ServeSource::File(Box::new(scenario(nodes, crashed, "2s")));
    opts.scenario_speed = 1.0;
    opts.server.record_writes = true;
    let served = serve(opts).await;
    let started = Instant::now();
    let watcher = Watcher::start(&served);
    let c = client(&served).await;
    let running = run(c.clone(), RunOptions { config: config(), ..RunOptions::default() }).expect("config");
    let crash = started + Duration::from_secs(2);

    // The pods that must go: every `bare-` and `short-` pod of the crashed
    // nodes, with how long each tolerates the taint.
    let due: BTreeMap<String, (String, i64)> = crashed
        .iter()
        .flat_map(|&(node, secs)| {
            [
                (format!("default/bare-{node}"), (node.to_string(), 0)),
                (format!("default/short-{node}"), (node.to_string(), secs)),
            ]
        })
        .collect();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let want: BTreeSet<String> = due.keys().map(|k| k.trim_start_matches("default/").to_string()).collect();
    // Until they are gone, or `limit` (then the figures say what is left).
    while started.elapsed() < limit {
        let left = pods.list(&ListParams::default()).await.map_or(usize::MAX, |list| {
            list.items.iter().filter(|p| p.metadata.name.as_ref().is_some_and(|n| want.contains(n))).count()
        });
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let crash_to_done = watcher
        .snapshot(|t| t.deleted.iter().map(|(_, at)| *at).max())
        .map_or(Duration::ZERO, |last| last.saturating_duration_since(crash));
    // Long enough for the deletions' answers, the watch events of the
    // deletions and every Event they lead to.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let events: Api<Event> = Api::all(c.clone());
    let events = events.list(&ListParams::default()).await.expect("list Events").items;
    running.stop();
    let timeline = watcher.finish();
    assert!(!timeline.lagged, "the store's change feed overflowed; the timeline is incomplete");

    let object = |e: &Event| {
        format!(
            "{}/{}",
            e.involved_object.namespace.as_deref().unwrap_or_default(),
            e.involved_object.name.as_deref().unwrap_or_default()
        )
    };
    let cancelling = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("TaintManagerEviction"))
        .filter(|e| e.message.as_deref().is_some_and(|m| m.starts_with("Cancelling deletion")))
        .map(|e| (object(e), e.message.clone().unwrap_or_default()))
        .collect();
    let marked = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("TaintManagerEviction"))
        .filter(|e| e.message.as_deref().is_some_and(|m| m.starts_with("Marking for deletion")))
        .map(object)
        .collect();
    let failed_evictions = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedEviction"))
        .map(|e| (object(e), e.type_.clone().unwrap_or_default(), e.message.clone().unwrap_or_default()))
        .collect();

    let mut early = Vec::new();
    let mut worst_lateness = f64::NEG_INFINITY;
    for (pod, at) in &timeline.deleted {
        let Some((node, secs)) = due.get(pod) else { continue };
        let Some(tainted) = timeline.tainted.get(node) else {
            early.push((pod.clone(), f64::NEG_INFINITY, *secs));
            continue;
        };
        let after = at.saturating_duration_since(*tainted).as_secs_f64();
        if at < tainted || after < *secs as f64 {
            early.push((pod.clone(), after, *secs));
        }
        worst_lateness = worst_lateness.max(after - *secs as f64);
    }

    let mut other = BTreeMap::new();
    for name in [
        "nodewarden_stale_observations_total",
        "nodewarden_write_failures_total",
        "nodewarden_write_refusals_total",
        "node_collector_evictions_total",
    ] {
        other.extend(counters_named(name));
    }
    let figures = Figures {
        refusals: counters_named(nodewarden_controller::INTERLOCK_METRIC),
        taints_counted: counters_named("node_collector_evictions_total").values().sum(),
        tainted_nodes: timeline.tainted.len(),
        counted: counter("taint_eviction_controller_pod_deletions_total"),
        deleted: timeline.deleted.iter().map(|(p, _)| p.clone()).collect(),
        cancelling,
        marked,
        failed_evictions,
        early,
        worst_lateness,
        other,
        crash_to_done,
    };
    let logs = LOGS.lock().unwrap_or_else(PoisonError::into_inner).clone();
    eprintln!("--- what nodewarden logged (INFO and above) ---");
    for l in &logs {
        eprintln!("{l}");
    }
    eprintln!("--- taints stored (seconds after start) ---");
    for (node, at) in &timeline.tainted {
        eprintln!("{node}: {:.3}s", at.saturating_duration_since(started).as_secs_f64());
    }
    for (node, at, taints) in &timeline.taint_changes {
        eprintln!("{:7.3}s {node} taints {taints}", at.saturating_duration_since(started).as_secs_f64());
    }
    for (node, at) in &timeline.untainted {
        eprintln!("{node}: taint taken away at {:.3}s", at.saturating_duration_since(started).as_secs_f64());
    }
    eprintln!("--- writes to nodes and pods the server accepted (seconds after start) ---");
    for w in served.writes() {
        if w.path.contains("/nodes/") || w.path.contains("/pods/") {
            let at = w.at.saturating_duration_since(started).as_secs_f64();
            eprintln!("{at:7.3}s {} {} {} {}", w.method, w.path, w.code, w.user_agent);
        }
    }
    eprintln!("--- figures ---\n{figures:#?}");
    eprintln!(
        "SUMMARY: interlock refusals {}, pod deletions counted {} / deleted from the store {}, \
         Cancelling deletion Events {}, FailedEviction Events {}, early deletions {}, \
         latest deletion {:.3}s after its toleration ran out, crash to last deletion {:.1}s, other counters {:?}",
        figures.refusals.values().sum::<u64>(),
        figures.counted,
        figures.deleted.len(),
        figures.cancelling.len(),
        figures.failed_evictions.len(),
        figures.early.len(),
        figures.worst_lateness,
        figures.crash_to_done.as_secs_f64(),
        figures.other,
    );
    served.stop();
    figures
}

/// What both tests require; every failure is listed, not only the first.
fn check(f: &Figures, crashed: &Crashed) {
    let mut problems = Vec::new();
    let refused: u64 = f.refusals.values().sum();
    if refused != 0 {
        problems.push(format!("the safety interlock held back {refused} writes: {:?}", f.refusals));
    }
    let mut deleted = f.deleted.clone();
    deleted.sort();
    let mut want: Vec<String> =
        crashed.iter().flat_map(|(n, _)| [format!("default/bare-{n}"), format!("default/short-{n}")]).collect();
    want.sort();
    if deleted != want {
        problems.push(format!("pods deleted from the store (a pod twice: deleted twice): {deleted:?}, want {want:?}"));
    }
    if f.counted != f.deleted.len() as u64 {
        problems.push(format!(
            "taint_eviction_controller_pod_deletions_total is {} for {} pods deleted from the store",
            f.counted,
            f.deleted.len()
        ));
    }
    let mut marked = f.marked.clone();
    marked.sort();
    marked.dedup();
    if marked != want {
        problems.push(format!("pods with a Marking for deletion Event: {marked:?}, want {want:?} (are Events read?)"));
    }
    if !f.cancelling.is_empty() {
        problems.push(format!("{} unearned Cancelling deletion Events: {:?}", f.cancelling.len(), f.cancelling));
    }
    if !f.failed_evictions.is_empty() {
        problems.push(format!("{} FailedEviction Events: {:?}", f.failed_evictions.len(), f.failed_evictions));
    }
    if !f.early.is_empty() {
        problems.push(format!("deleted before the toleration ran out: {:?}", f.early));
    }
    if f.taints_counted != f.tainted_nodes as u64 || f.tainted_nodes != crashed.len() {
        problems.push(format!(
            "node_collector_evictions_total is {} for {} nodes tainted in the store ({} crashed): a taint counted (and a token spent) twice",
            f.taints_counted,
            f.tainted_nodes,
            crashed.len()
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Three of nine nodes in one zone crash (a third of the zone: below the
/// unhealthy-zone threshold, so the zone stays Normal and taints at
/// node-eviction-rate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_crash_deletes_each_due_pod_once_without_refusals_or_cancellations() {
    let _turn = TURN.lock().await;
    fresh_figures();
    let started = Instant::now();
    let nodes: Vec<NodeDef> = ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"]
        .into_iter()
        .map(|name| NodeDef { name, zone: "region/zone-a" })
        .collect();
    let crashed: &Crashed = &[("n2", 2), ("n5", 3), ("n8", 4)];
    let f = run_crash(&nodes, crashed, Duration::from_secs(30)).await;
    eprintln!("node-crash: {:.1}s in all", started.elapsed().as_secs_f64());
    check(&f, crashed);
}

/// A whole zone of three (three nodes of nine) loses its kubelets: the
/// zone is in FullDisruption, the others Normal, so the zone is tainted at
/// node-eviction-rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_outage_deletes_each_due_pod_once_without_refusals_or_cancellations() {
    let _turn = TURN.lock().await;
    fresh_figures();
    let started = Instant::now();
    let nodes: Vec<NodeDef> = [
        ("a1", "region/zone-a"),
        ("a2", "region/zone-a"),
        ("a3", "region/zone-a"),
        ("b1", "region/zone-b"),
        ("b2", "region/zone-b"),
        ("b3", "region/zone-b"),
        ("c1", "region/zone-c"),
        ("c2", "region/zone-c"),
        ("c3", "region/zone-c"),
    ]
    .into_iter()
    .map(|(name, zone)| NodeDef { name, zone })
    .collect();
    let crashed: &Crashed = &[("a1", 2), ("a2", 3), ("a3", 4)];
    let f = run_crash(&nodes, crashed, Duration::from_secs(30)).await;
    eprintln!("zone-outage: {:.1}s in all", started.elapsed().as_secs_f64());
    check(&f, crashed);
}
