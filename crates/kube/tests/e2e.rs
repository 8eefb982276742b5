//! The adapter against `nodewarden sim --serve` in-process, on loopback:
//! a node crash end to end, and `--dry-run` beside a writing replica.

mod common;

use std::time::Duration;

use common::{client, fast_config, options, serve, unknown_and_tainted};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use kube::api::ListParams;
use nodewarden_engine::ActionKind;
use nodewarden_kube::{RunOptions, start as run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_node_is_marked_unknown_and_tainted_through_the_api() {
    let served = serve(options()).await;
    let c = client(&served).await;
    let running = run(c.clone(), RunOptions { config: fast_config(), ..RunOptions::default() }).expect("config");
    let nodes: Api<Node> = Api::all(c.clone());
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let n = nodes.get("node-000005").await.expect("get");
            if unknown_and_tainted(&n) == (true, true) {
                break;
            }
        }
    })
    .await
    .expect("timed out waiting for Unknown and the NoExecute taint");
    assert!(running.health.synced.load(std::sync::atomic::Ordering::Relaxed));
    // Crash at ~1 s, grace 2 s, monitor 0.2 s: detection and taint within a
    // few seconds of the crash.
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    for n in nodes.list(&ListParams::default()).await.expect("list").items {
        if n.metadata.name.as_deref() == Some("node-000005") {
            continue;
        }
        assert_eq!(unknown_and_tainted(&n), (false, false), "{:?}", n.metadata.name);
    }
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let evs =
                events.list(&ListParams::default().fields("involvedObject.name=node-000005")).await.expect("events");
            if evs.items.iter().any(|e| e.reason.as_deref() == Some("NodeNotReady")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("no NodeNotReady Event");
    running.stop();
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_nothing_and_reports_what_it_would_do() {
    let served = serve(options()).await;
    let c = client(&served).await;
    let running =
        run(c.clone(), RunOptions { config: fast_config(), dry_run: true, ..RunOptions::default() }).expect("config");
    tokio::time::sleep(Duration::from_secs(7)).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let n = nodes.get("node-000005").await.expect("get");
    // Nobody writes: the crashed node keeps its last Ready and no taint.
    assert_eq!(unknown_and_tainted(&n), (false, false));
    let actions = running.stop();
    assert!(
        actions
            .iter()
            .any(|a| matches!(&a.kind, ActionKind::UpdateNodeConditions { node, .. } if node == "node-000005")),
        "{actions:#?}"
    );
    assert!(
        actions.iter().any(|a| matches!(&a.kind, ActionKind::PatchNodeTaints { node, add, .. }
            if node == "node-000005" && add.iter().any(|t| t.key == "node.kubernetes.io/unreachable"))),
        "{actions:#?}"
    );
    served.stop();
}
