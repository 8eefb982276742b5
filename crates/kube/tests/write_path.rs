//! The write path under backlog, outages and throttling: every write is
//! still true when it is sent.
//!
//! Against `nodewarden sim --serve` in-process on loopback, serving a
//! scenario file, periods shortened about twenty times, and a client rate
//! limit low enough that writes wait their turn for seconds, as 20 QPS
//! makes them wait in a zone outage of hundreds of nodes. A recording
//! proxy between the controller and the server says which requests reached
//! the server, and when.

mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime};

use common::{Proxy, client, eventually, fast_config, serve};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use nodewarden_apiserver::ApiFault;
use nodewarden_apiserver::ServeSource;
use nodewarden_kube::{ElectionConfig, Fence, RunOptions, WriterOptions, campaign, start as run};

/// A scenario: `nodes` (name, zone), each heartbeating every 200 ms with
/// 1 s Leases, `pods` untolerating pods on each node of `crowded`, and
/// `events` as written. No default tolerations are admitted, so those pods
/// are due for deletion as soon as their node is seen tainted.
fn scenario(nodes: &[(&str, &str)], crowded: &[&str], pods: usize, events: &str) -> nodewarden_cluster::Scenario {
    let mut y = common::scenario_preamble("write path");
    for (name, zone) in nodes {
        let _ = writeln!(
            y,
            "- {{name: {name}, zone: {zone}, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, \
             lease: 0s, kubelet: true}}"
        );
    }
    y.push_str("pods:\n");
    for node in crowded {
        for i in 0..pods {
            let _ = writeln!(y, "- {{name: default/p{i}-{node}, node: {node}}}");
        }
    }
    y.push_str("events:\n");
    y.push_str(events);
    nodewarden_cluster::parse_scenario(&y).unwrap_or_else(|e| panic!("scenario: {e}\n{y}"))
}

async fn serve_file(s: nodewarden_cluster::Scenario) -> nodewarden_apiserver::Served {
    let mut opts = common::options();
    opts.source = ServeSource::File(Box::new(s));
    opts.scenario_speed = 1.0;
    serve(opts).await
}

fn has_noexecute(n: &Node) -> bool {
    n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.effect == "NoExecute"))
}

/// A node crashes with 30 pods that tolerate nothing and comes back while
/// their deletions still wait behind a 4-requests-a-second client: the
/// deletions still queued when the node's NoExecute taint comes off are
/// withdrawn, never sent. Before writes were judged at send time, every
/// queued deletion went out, minutes late, to pods of a healthy node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_cancelled_while_queued_is_never_sent() {
    let nodes = [("n1", "a"), ("n2", "a"), ("n3", "b")];
    let served =
        serve_file(scenario(&nodes, &["n1"], 30, "- {at: 1s, kubelet-stop: [n1]}\n- {at: 9s, kubelet-start: [n1]}\n"))
            .await;
    let proxy = Proxy::start(&served).await;
    let c = client(&served).await;
    let config = nodewarden_model::ControllerConfig { node_eviction_rate: 10.0, ..fast_config() };
    let writer = WriterOptions { qps: 4.0, burst: 1, ..WriterOptions::default() };
    let running = run(proxy.client(), RunOptions { config, writer, ..RunOptions::default() }).expect("config");

    // When the node was last seen carrying a NoExecute taint, and when seen
    // without one after that.
    let nodes_api: Api<Node> = Api::all(c.clone());
    let started = Instant::now();
    let (mut tainted_at, mut cleared_at) = (None::<SystemTime>, None::<SystemTime>);
    while started.elapsed() < Duration::from_secs(25) {
        let n = nodes_api.get("n1").await.expect("node n1");
        match (has_noexecute(&n), tainted_at) {
            (true, _) => tainted_at = Some(SystemTime::now()),
            (false, Some(_)) if cleared_at.is_none() => cleared_at = Some(SystemTime::now()),
            _ => {}
        }
        if cleared_at.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (Some(tainted_at), Some(cleared_at)) = (tainted_at, cleared_at) else {
        panic!("n1 was not tainted and then cleared within 25 s (tainted {tainted_at:?}, cleared {cleared_at:?})");
    };
    // Time for anything still queued to go out, if it were going to.
    tokio::time::sleep(Duration::from_secs(6)).await;
    running.stop();

    let deletions: Vec<_> =
        proxy.seen().into_iter().filter(|s| s.method == "DELETE" && s.path.contains("/pods/")).collect();
    // Sent once the taint was seen gone from the store: a deletion the
    // node's recovery had already called off.
    let after: Vec<_> = deletions.iter().filter(|s| s.at >= cleared_at).collect();
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for s in proxy.seen() {
        let what = if s.path.contains("/pods/") {
            "pod"
        } else if s.path.contains("/nodes/") {
            "node"
        } else {
            "other"
        };
        *by_kind.entry(format!("{} {what}", s.method)).or_default() += 1;
    }
    println!("requests: {by_kind:?}");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let left = pods.list(&ListParams::default()).await.expect("pods").items.len();
    println!(
        "deletions sent: {} ({} after the taint was seen gone, {:?} after it was last seen); pods left: {left}",
        deletions.len(),
        after.len(),
        cleared_at.duration_since(tainted_at).unwrap_or_default()
    );
    assert!(!deletions.is_empty(), "some deletions went out while the node was down");
    assert!(left > 0 && left < 30, "the rate limit let some deletions through, not all ({left} pods left)");
    assert!(after.is_empty(), "deletions reached the server after the node's taint came off: {after:?}");
}

/// Twenty nodes crash at once; their Unknown statuses wait behind a
/// A node status write (one strategic merge patch of its conditions).
fn node_status(s: &common::Seen) -> bool {
    s.method == "PATCH" && s.path.starts_with("/api/v1/nodes/") && s.path.ends_with("/status")
}

/// 2-requests-a-second client; the API server goes away for 5 s, during
/// which every kubelet comes back. Nothing decided before the outage goes
/// out after it: no node is written Unknown once the API is back, since
/// every one of them was renewing its Lease by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_decided_before_an_outage_is_not_sent_after_it() {
    let names: Vec<String> = (0..22).map(|i| format!("n{i:02}")).collect();
    let nodes: Vec<(&str, &str)> =
        names.iter().enumerate().map(|(i, n)| (n.as_str(), if i < 11 { "a" } else { "b" })).collect();
    let crashed: Vec<&str> = names.iter().take(20).map(String::as_str).collect();
    let events = format!(
        "- {{at: 1s, kubelet-stop: [{list}]}}\n- {{at: 6s, kubelet-start: [{list}]}}\n",
        list = crashed.join(", ")
    );
    let served = serve_file(scenario(&nodes, &[], 0, &events)).await;
    let proxy = Proxy::start(&served).await;
    let config = fast_config();
    let writer = WriterOptions { qps: 2.0, burst: 1, ..WriterOptions::default() };
    let running = run(proxy.client(), RunOptions { config, writer, ..RunOptions::default() }).expect("config");
    // The Unknown statuses are decided about 3.2 s in (crash + grace).
    eventually(Duration::from_secs(10), "the first Unknown status written", || {
        let proxy = &proxy;
        let any = proxy.seen().iter().any(node_status);
        async move { any }
    })
    .await;
    served.faults().inject(ApiFault::Outage, Some(Duration::from_secs(5)));
    let outage_ends = SystemTime::now() + Duration::from_secs(5);
    let before = proxy.seen().iter().filter(|s| node_status(s)).count();
    // The outage, then time for anything held back to go out, if it were
    // going to.
    tokio::time::sleep(Duration::from_secs(11)).await;
    running.stop();
    let after: Vec<_> = proxy.seen().into_iter().filter(|s| node_status(s) && s.at >= outage_ends).collect();
    println!("Unknown statuses sent before the outage: {before}; after it: {}", after.len());
    assert!(before < 20, "the rate limit held most statuses back ({before} went out before the outage)");
    assert!(after.is_empty(), "statuses decided before the outage were sent after it: {after:?}");
}

/// Thirty per cent of requests answered 429 with `Retry-After: 1` for
/// 10 s: the leader keeps its Lease (renewed on a client of its own, one
/// request a renewal, retried within a quarter of the retry period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_renewed_through_throttling() {
    let served = serve(common::options()).await;
    let c = client(&served).await;
    let config = ElectionConfig {
        namespace: "kube-system".into(),
        name: "nodewarden".into(),
        identity: "replica-a".into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    };
    let fence = Fence::closed();
    let leadership = campaign(c.clone(), config, fence.clone()).await.expect("elected");
    served.faults().inject(ApiFault::Throttle { rate: 0.3, retry_after: 1 }, Some(Duration::from_secs(10)));
    let lost = tokio::time::timeout(Duration::from_secs(11), leadership.lost()).await;
    assert!(lost.is_err(), "leadership was lost under 30% throttling");
    assert!(fence.allows(), "the fence is still open");
    leadership.release().await;
}

/// A node that goes down, stays down for a while and comes back is
/// tainted once in one run: one patch adds `unreachable:NoSchedule`, one
/// `unreachable:NoExecute`, nothing more while it stays down, and one
/// patch takes each off when it is back, every one accepted the first
/// time although the recovering kubelet posts its status every 200 ms
/// (the patches are guarded by the taints they read, not by the node's
/// resourceVersion, which every status post changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stays_down_is_tainted_once() {
    let nodes = [("n1", "a"), ("n2", "a"), ("n3", "b")];
    let events = "- {at: 1s, kubelet-stop: [n1]}\n- {at: 9s, kubelet-start: [n1]}\n";
    let served = serve_file(scenario(&nodes, &["n1"], 3, events)).await;
    let proxy = Proxy::start(&served).await;
    let c = client(&served).await;
    // A busy client: a patch goes out a third of a second after its read,
    // while the kubelet posts its status every 200 ms.
    let writer = WriterOptions { qps: 3.0, burst: 1, ..WriterOptions::default() };
    let running =
        run(proxy.client(), RunOptions { config: fast_config(), writer, ..RunOptions::default() }).expect("config");
    let nodes_api: Api<Node> = Api::all(c.clone());
    eventually(Duration::from_secs(15), "n1 tainted NoExecute", || {
        let api = nodes_api.clone();
        async move { api.get("n1").await.is_ok_and(|n| has_noexecute(&n)) }
    })
    .await;
    // Down for twenty-five monitor periods and more, then back.
    let down = proxy.writes_to("/api/v1/nodes/n1").len();
    eventually(Duration::from_secs(15), "n1 untainted after its kubelet came back", || {
        let api = nodes_api.clone();
        async move { api.get("n1").await.is_ok_and(|n| n.spec.and_then(|s| s.taints).is_none_or(|t| t.is_empty())) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    running.stop();
    let patches = proxy.writes_to("/api/v1/nodes/n1");
    let statuses = proxy.writes_to("/api/v1/nodes/n1/status");
    println!("n1: {} taint patches ({down} while down), {} status writes", patches.len(), statuses.len());
    assert_eq!(down, 2, "one NoSchedule and one NoExecute taint while down: {patches:?}");
    assert_eq!(patches.len(), 4, "each taint added once and removed once: {patches:?}");
    assert!(patches.iter().all(|p| p.status == 200), "every patch accepted the first time: {patches:?}");
    assert_eq!(statuses.len(), 1, "one Unknown status: {statuses:?}");
}

/// The API server and its kubelets freeze for 5 s (longer than the 3 s
/// grace period): nothing answers, the watches fall silent without an
/// error. Every node was healthy all along, so none may be written
/// Unknown: the adapter's probe sees the server stop answering, the engine
/// decides nothing meanwhile, and once the server answers it waits for the
/// watches to deliver the heartbeats that came with the thaw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_api_server_is_not_taken_for_dead_nodes() {
    let nodes = [("n1", "a"), ("n2", "a"), ("n3", "b"), ("n4", "b")];
    let served = serve_file(scenario(&nodes, &[], 0, "- {at: 1h, kubelet-stop: [n1]}\n")).await;
    let proxy = Proxy::start(&served).await;
    let config = nodewarden_model::ControllerConfig {
        node_monitor_grace_period: nodewarden_model::Span::from_secs(3),
        ..fast_config()
    };
    let running = run(proxy.client(), RunOptions { config, ..RunOptions::default() }).expect("config");
    let health = running.health.clone();
    eventually(Duration::from_secs(10), "every cache synced", || {
        let h = health.clone();
        async move { h.synced.load(std::sync::atomic::Ordering::Relaxed) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    served.faults().inject(ApiFault::Freeze, Some(Duration::from_secs(5)));
    tokio::time::sleep(Duration::from_secs(5 + 6)).await;
    running.stop();
    let statuses: Vec<_> =
        proxy.seen().into_iter().filter(|s| s.method != "GET" && s.path.starts_with("/api/v1/nodes/")).collect();
    println!("node writes: {statuses:?}");
    assert!(statuses.is_empty(), "healthy nodes were written to across the freeze: {statuses:?}");
}

/// A node crashes with 30 pods that tolerate nothing, behind a
/// 4-requests-a-second client. Each pod is marked not ready when the node
/// goes Unknown and is due for deletion as soon as the node is seen
/// tainted, while most of the marks still wait for a token. Each pod's
/// status write is one PATCH of `pods/status`, with no read before it and
/// never a PUT; a mark still waiting when its pod's `DisruptionTarget` is
/// decided goes in the same patch; no pod costs more requests than
/// upstream's three (status, condition, DELETE). Before, every pod cost
/// five (a read and an update for each status write, and the DELETE).
/// The node's taint patches need no read either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_pod_costs_at_most_three_requests_and_two_when_its_writes_waited_together() {
    let nodes = [("n1", "a"), ("n2", "a"), ("n3", "b")];
    let served = serve_file(scenario(&nodes, &["n1"], 30, "- {at: 1s, kubelet-stop: [n1]}\n")).await;
    let proxy = Proxy::start(&served).await;
    let config = nodewarden_model::ControllerConfig { node_eviction_rate: 10.0, ..fast_config() };
    let writer = WriterOptions { qps: 4.0, burst: 1, ..WriterOptions::default() };
    let running = run(proxy.client(), RunOptions { config, writer, ..RunOptions::default() }).expect("config");

    let names: Vec<String> = (0..30).map(|i| format!("p{i}-n1")).collect();
    let deleted = |seen: &[common::Seen], name: &str| {
        seen.iter().any(|s| s.method == "DELETE" && s.path == common::pod_path(name) && s.status < 300)
    };
    eventually(Duration::from_secs(45), "every pod of n1 deleted", || {
        let seen = proxy.seen();
        let all = names.iter().all(|n| deleted(&seen, n));
        async move { all }
    })
    .await;
    running.stop();

    let seen = proxy.seen();
    let mut merged = 0;
    for name in &names {
        let path = common::pod_path(name);
        let status = format!("{path}/status");
        let to_pod: Vec<_> = seen.iter().filter(|s| s.path == path || s.path == status).collect();
        let shape: Vec<String> = to_pod.iter().map(|s| format!("{} {}", s.method, s.path)).collect();
        assert!(to_pod.len() <= 3, "{name}: {} requests, more than upstream's 3: {shape:?}", to_pod.len());
        assert!(
            to_pod.iter().all(|s| s.method == "DELETE" || (s.method == "PATCH" && s.path == status)),
            "{name}: only status PATCHes and the DELETE, no read, no PUT: {shape:?}"
        );
        assert!(to_pod.iter().all(|s| s.status < 300), "{name}: every request accepted: {to_pod:?}");
        if to_pod.len() == 2 {
            merged += 1;
        }
    }
    println!("{merged} of {} pods cost two requests (their mark and DisruptionTarget in one patch)", names.len());
    assert!(merged > 0, "no pod's mark was still waiting when its DisruptionTarget was decided");
    // n1's taint patches (unreachable NoSchedule, then NoExecute) read
    // nothing: the first is guarded by the resourceVersion its Unknown
    // status write's answer showed (it had no taints to test), the second
    // by the taints the first one's answer showed.
    let reads: Vec<_> = seen.iter().filter(|s| s.method == "GET" && s.path == "/api/v1/nodes/n1").collect();
    let patches = seen.iter().filter(|s| s.method == "PATCH" && s.path == "/api/v1/nodes/n1").count();
    assert!(patches >= 2, "n1 tainted NoSchedule and NoExecute: {patches} patches");
    assert!(reads.is_empty(), "n1 read before its taint patches {} times: {reads:?}", reads.len());
}
