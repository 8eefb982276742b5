//! The adapter under adverse conditions, against `nodewarden sim --serve`
//! in-process on loopback with periods shortened about twenty times:
//! malformed objects in the cluster, API outages, 5xx and 429 storms,
//! dropped watches, and a controller restarted mid-eviction.

mod common;

use std::time::Duration;

use common::{CRASHED, client, create_pod, eventually, fast_config, options, serve, store_raw, unknown_and_tainted};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use nodewarden_apiserver::Kind;
use nodewarden_kube::{RunOptions, start as run};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_do_not_keep_the_caches_from_syncing() {
    let served = serve(options()).await;
    let c = client(&served).await;
    // Objects no typed client can decode, as an older server or a
    // hand-edited etcd could leave them.
    let absurd = "9999-12-31T23:59:59Z";
    store_raw(
        &served,
        Kind::Node,
        "",
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "rogue", "uid": "rogue-uid", "creationTimestamp": absurd,
                            "labels": {"topology.kubernetes.io/zone": 7}},
               "spec": {"taints": "many", "unschedulable": "no"},
               "status": {"conditions": [{"type": "Ready", "status": "Sometimes", "lastHeartbeatTime": absurd},
                                         {"type": "Ready", "status": "True", "lastHeartbeatTime": "yesterday"}]}}),
    );
    store_raw(
        &served,
        Kind::Pod,
        "default",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "garbled", "namespace": "default", "uid": "garbled-uid",
                            "creationTimestamp": absurd, "ownerReferences": "none"},
               "spec": {"nodeName": CRASHED, "containers": [{"name": "c", "image": "i"}],
                        "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Sideways",
                                         "effect": "NoExecute", "tolerationSeconds": "0"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": 5}]}}),
    );
    store_raw(
        &served,
        Kind::Lease,
        "kube-node-lease",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "rogue", "namespace": "kube-node-lease", "uid": "rogue-lease",
                            "creationTimestamp": absurd},
               "spec": {"renewTime": absurd, "holderIdentity": 3}}),
    );
    // The point of the test: a typed list of these fails as a whole.
    assert!(Api::<Node>::all(c.clone()).list(&ListParams::default()).await.is_err());
    assert!(Api::<Pod>::all(c.clone()).list(&ListParams::default()).await.is_err());
    // A well-formed pod on the node that will crash, tolerating its taint
    // for 1 s: it must go, the garbled one must stay.
    create_pod(&c, "short", CRASHED, 1).await;
    let running = run(c.clone(), RunOptions { config: fast_config(), ..RunOptions::default() }).expect("config");
    let health = running.health.clone();
    eventually(Duration::from_secs(10), "every cache synced", || {
        let h = health.clone();
        async move { h.synced.load(std::sync::atomic::Ordering::Relaxed) }
    })
    .await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    eventually(Duration::from_secs(20), "the crashed node tainted and its pod deleted", || {
        let (nodes, pods) = (nodes.clone(), pods.clone());
        async move {
            let tainted = nodes.get(CRASHED).await.is_ok_and(|n| unknown_and_tainted(&n) == (true, true));
            tainted && pods.get_opt("short").await.is_ok_and(|p| p.is_none())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop();
    let raw = served.shared.store.lock().get(Kind::Pod, "default/garbled").is_some();
    assert!(raw, "the pod whose tolerations cannot be read was deleted");
    served.stop();
}

use common::{History, Proxy, Recorder, Seen, pod_path};
use nodewarden_apiserver::ApiFault;
use nodewarden_kube::Running;

/// The pods the fault tests create on the node that crashes, with their
/// `tolerationSeconds` for its taints.
const VICTIMS: [(&str, i64); 3] = [("v1", 1), ("v2", 3), ("v3", 5)];

/// A served cluster whose node [`CRASHED`] crashes at about 1 s, with the
/// [`VICTIMS`] on it, a proxy that logs what reaches the server, and a
/// recorder of the store's changes.
async fn cluster() -> (nodewarden_apiserver::Served, Proxy, Recorder) {
    let served = serve(options()).await;
    let proxy = Proxy::start(&served).await;
    let recorder = Recorder::start(&served);
    let c = client(&served).await;
    for (name, secs) in VICTIMS {
        create_pod(&c, name, CRASHED, secs).await;
    }
    (served, proxy, recorder)
}

fn start(proxy: &Proxy) -> Running {
    run(proxy.client(), RunOptions { config: fast_config(), ..RunOptions::default() }).expect("config")
}

async fn wait_synced(running: &Running) {
    let health = running.health.clone();
    eventually(Duration::from_secs(10), "every cache synced", || {
        let h = health.clone();
        async move { h.synced.load(std::sync::atomic::Ordering::Relaxed) }
    })
    .await;
}

async fn wait_tainted(served: &nodewarden_apiserver::Served) {
    let nodes: Api<Node> = Api::all(client(served).await);
    eventually(Duration::from_secs(20), "the crashed node Unknown and tainted", || {
        let nodes = nodes.clone();
        async move { nodes.get(CRASHED).await.is_ok_and(|n| unknown_and_tainted(&n) == (true, true)) }
    })
    .await;
}

async fn wait_victims_gone(served: &nodewarden_apiserver::Served, limit: Duration) {
    let pods: Api<Pod> = Api::namespaced(client(served).await, "default");
    eventually(limit, "every victim deleted", || {
        let pods = pods.clone();
        async move {
            for (name, _) in VICTIMS {
                if !pods.get_opt(name).await.is_ok_and(|p| p.is_none()) {
                    return false;
                }
            }
            true
        }
    })
    .await;
}

/// A request the server processed (an injected fault answers before any
/// processing, with 429 or 5xx).
fn processed(s: &Seen) -> bool {
    s.status != 429 && s.status < 500
}

fn unix(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// When the crashed node's first NoExecute taint was added (Unix seconds).
fn first_taint(history: &History) -> f64 {
    let first = history
        .noexecute
        .iter()
        .filter_map(|(_, _, at)| at.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_nanosecond() as f64 / 1e9)
        .fold(f64::INFINITY, f64::min);
    assert!(first.is_finite(), "the crashed node was never tainted: {:?}", history.noexecute);
    first
}

/// What every fault test requires of the run, from the server's side:
/// only the crashed node ever carried a NoExecute taint; exactly the
/// victims were deleted, each by exactly one DELETE the server processed,
/// none before its toleration ran out from its taint's `timeAdded`.
fn check(history: &History, proxy: &Proxy) {
    assert!(!history.lagged, "the store's change feed overflowed; the history is incomplete");
    let tainted: Vec<&(String, String, String)> = history.noexecute.iter().collect();
    assert!(tainted.iter().all(|(node, _, _)| node == CRASHED), "NoExecute taints on healthy nodes: {tainted:?}");
    let taint_added = first_taint(history);
    // Nothing was written to what is healthy: no node status, taint or
    // pod readiness decided on heartbeats the controller could not see.
    let on_crashed = |path: &str| {
        path.starts_with(&format!("/api/v1/nodes/{CRASHED}"))
            || VICTIMS.iter().any(|(n, _)| path.starts_with(&pod_path(n)))
            || path.contains(&CRASHED[5..])
    };
    let stray: Vec<String> = proxy
        .seen()
        .iter()
        .filter(|s| matches!(s.method.as_str(), "PUT" | "PATCH" | "DELETE") && (200..300).contains(&s.status))
        .filter(|s| !on_crashed(&s.path))
        .map(|s| format!("{} {} {}", s.method, s.path, s.status))
        .collect();
    assert!(stray.is_empty(), "writes to healthy objects: {stray:#?}");
    let mut deleted = history.deleted_pods.clone();
    deleted.sort();
    let want: Vec<String> = VICTIMS.iter().map(|(n, _)| format!("default/{n}")).collect();
    assert_eq!(deleted, want, "pods deleted (a pod twice: deleted twice)");
    for (name, secs) in VICTIMS {
        let deletes: Vec<Seen> = proxy
            .writes_to(&pod_path(name))
            .into_iter()
            .filter(|s| s.method == "DELETE" || s.path.ends_with("/eviction"))
            .filter(processed)
            .collect();
        assert_eq!(deletes.len(), 1, "{name}: DELETEs the server processed: {deletes:?}");
        assert_eq!(deletes[0].status, 200, "{name}: {deletes:?}");
        let at = unix(deletes[0].at);
        // The deletion may not come before the toleration ran out (taints
        // are stamped by the controller's clock, this is the test's: the
        // same machine).
        assert!(
            at >= taint_added + secs as f64 - 0.05,
            "{name} deleted at {at}, taint at {taint_added}, tolerates {secs}s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_outage_evicts_nothing_and_loses_nothing() {
    let (served, proxy, recorder) = cluster().await;
    let running = start(&proxy);
    wait_synced(&running).await;
    wait_tainted(&served).await;
    // The outage begins as the first victim's toleration ends, and lasts
    // longer than every victim's toleration and twice the grace period
    // (2 minutes against 40 s, scaled): the deletions come due in it, and
    // the controller sees every node go silent.
    let outage_begins = std::time::SystemTime::now();
    served.faults().inject(ApiFault::Outage, Some(Duration::from_secs(6)));
    let outage_ends = outage_begins + Duration::from_secs(6);
    tokio::time::sleep(Duration::from_secs(6)).await;
    wait_victims_gone(&served, Duration::from_secs(20)).await;
    // A few monitor periods after the outage: nothing more happens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    running.stop();
    let history = recorder.finish();
    check(&history, &proxy);
    // The deletions that came due during the outage were sent after it
    // (on a loaded machine the outage may begin after some were due).
    let tainted = first_taint(&history);
    let mut due_in_outage = 0;
    for (name, secs) in VICTIMS {
        if tainted + secs as f64 <= unix(outage_begins) {
            continue;
        }
        due_in_outage += 1;
        let sent = proxy.writes_to(&pod_path(name)).into_iter().find(|s| s.method == "DELETE").map(|s| s.at);
        assert!(sent.is_some_and(|t| t >= outage_ends), "{name} ({secs}s): {sent:?}");
    }
    assert!(due_in_outage > 0, "no deletion came due during the outage");
    proxy.stop();
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_storm_and_dropped_watches_lose_and_repeat_nothing() {
    let (served, proxy, recorder) = cluster().await;
    let running = start(&proxy);
    wait_synced(&running).await;
    // Half of all requests fail with 503 from before the crash until the
    // last victim is due, and every watch is cut twice on the way.
    served.faults().inject(ApiFault::Errors { rate: 0.5, code: 503 }, Some(Duration::from_secs(9)));
    tokio::time::sleep(Duration::from_secs(3)).await;
    served.faults().inject(ApiFault::DropWatches, None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    served.faults().inject(ApiFault::DropWatches, None);
    wait_tainted(&served).await;
    wait_victims_gone(&served, Duration::from_secs(25)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop();
    check(&recorder.finish(), &proxy);
    let failed = proxy.seen().iter().filter(|s| s.status == 503).count();
    assert!(failed > 10, "the storm did not bite: {failed} requests failed");
    proxy.stop();
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_is_waited_out_as_retry_after_asks() {
    let (served, proxy, recorder) = cluster().await;
    let running = start(&proxy);
    wait_synced(&running).await;
    wait_tainted(&served).await;
    // Every request is throttled for 4 s, asking clients to wait 2 s.
    served.faults().inject(ApiFault::Throttle { rate: 1.0, retry_after: 2 }, Some(Duration::from_secs(4)));
    wait_victims_gone(&served, Duration::from_secs(25)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop();
    check(&recorder.finish(), &proxy);
    // After a 429, the writer's next attempt at the same object comes at
    // least Retry-After later (one object's writes go out one at a time).
    let writes: Vec<Seen> =
        proxy.seen().into_iter().filter(|s| matches!(s.method.as_str(), "DELETE" | "PUT" | "PATCH")).collect();
    let mut throttled = 0;
    for (i, s) in writes.iter().enumerate() {
        if s.status != 429 {
            continue;
        }
        throttled += 1;
        if let Some(next) = writes[i + 1..].iter().find(|n| n.path == s.path && n.method == s.method) {
            let gap = next.at.duration_since(s.at).unwrap_or_default();
            assert!(gap >= Duration::from_millis(1900), "{} {} retried after {gap:?}", s.method, s.path);
        }
    }
    // A 429 delays only the request that got it, for Retry-After; the
    // storm may meet only reads and Events: it must have met something.
    let met = proxy.seen().iter().filter(|s| s.status == 429).count();
    assert!(met + throttled > 0, "the storm met no request");
    proxy.stop();
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_eviction_deletes_nothing_twice_or_early() {
    let (served, proxy, recorder) = cluster().await;
    let first = start(&proxy);
    wait_synced(&first).await;
    wait_tainted(&served).await;
    // Stop the first controller just after the first victim went, with the
    // others' deletions scheduled, and start a second from nothing.
    let pods: Api<Pod> = Api::namespaced(client(&served).await, "default");
    eventually(Duration::from_secs(10), "the first victim deleted", || {
        let pods = pods.clone();
        async move { pods.get_opt(VICTIMS[0].0).await.is_ok_and(|p| p.is_none()) }
    })
    .await;
    first.stop();
    let second = start(&proxy);
    wait_synced(&second).await;
    wait_victims_gone(&served, Duration::from_secs(25)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    second.stop();
    check(&recorder.finish(), &proxy);
    proxy.stop();
    served.stop();
}
