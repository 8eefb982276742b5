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
use nodewarden_apiserver::resource::Kind;
use nodewarden_kube::{RunOptions, start as run};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_do_not_keep_the_caches_from_syncing() {
    let served = serve(options()).await;
    let c = client(&served);
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
