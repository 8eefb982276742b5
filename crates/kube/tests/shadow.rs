//! `--dry-run` beside a writing replica during a zone outage: the shadow
//! sends nothing (the server's write log has no request of its), and what
//! it would have done is what the writing replica did.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use nodewarden_apiserver::{ServeSource, Served, ServerConfig};
use nodewarden_cluster::builtin::Builtin;
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_engine::{Action, ActionKind};
use nodewarden_kube::{RunOptions, start};
use nodewarden_model::ControllerConfig;
use nodewarden_shadow::DecisionKind;

async fn serve() -> Served {
    // zone-outage cuts the first zone off at 1m: at 60x, after 1 s.
    let mut opts = common::options();
    opts.source =
        ServeSource::Fleet(FleetSpec { nodes: 12, zones: 2, pods_per_node: 2, seed: 5 }, Some(Builtin::ZoneOutage));
    opts.server = ServerConfig { record_writes: true, record_requests: true, ..opts.server };
    common::serve(opts).await
}

fn config() -> ControllerConfig {
    // Fast enough to taint the whole zone within the test.
    ControllerConfig { node_eviction_rate: 5.0, ..common::fast_config() }
}

async fn client(served: &Served, agent: &str) -> kube::Client {
    nodewarden_testkit::served::client(served, agent, true).await
}

/// Nodes the actions set Unknown, and nodes they tainted NoExecute.
fn summary(actions: &[Action]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut unknown = BTreeSet::new();
    let mut tainted = BTreeSet::new();
    for a in actions {
        match &a.kind {
            ActionKind::UpdateNodeConditions { node, .. } => {
                unknown.insert(node.clone());
            }
            ActionKind::PatchNodeTaints { node, add, .. }
                if add
                    .iter()
                    .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect.as_str() == "NoExecute") =>
            {
                tainted.insert(node.clone());
            }
            _ => {}
        }
    }
    (unknown, tainted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_replica_writes_nothing_and_would_have_done_what_the_leader_did() {
    let served = serve().await;
    let shadow =
        start(client(&served, "shadow").await, RunOptions { config: config(), dry_run: true, ..RunOptions::default() })
            .expect("config");
    let leader = start(client(&served, "leader").await, RunOptions { config: config(), ..RunOptions::default() })
        .expect("config");
    // Outage at ~1 s, grace 2 s, six nodes tainted at 5/s: done by ~6 s on
    // an idle machine.
    zone_tainted(&served).await;
    // A moment for the shadow's last decisions and its next summary
    // (published once a second).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let board = shadow.shadow.clone().expect("a dry-run replica has a shadow");
    let report = board.lock().expect("board").clone().expect("a summary once synced");
    let would = shadow.stop();
    leader.stop();
    let writes = served.writes();
    assert!(writes.iter().all(|w| w.user_agent != "shadow"), "the shadow wrote: {writes:#?}");
    // Nor tried to: every request it sent, answered or not, only reads.
    let sent: Vec<_> = served.requests().into_iter().filter(|r| r.user_agent == "shadow").collect();
    assert!(sent.iter().any(|r| r.verb == "watch"), "the shadow's requests are recorded: {sent:?}");
    let not_read: Vec<String> =
        sent.iter().filter(|r| !["get", "list", "watch"].contains(&r.verb.as_str())).map(|r| r.to_string()).collect();
    assert!(not_read.is_empty(), "the shadow sent requests that are not reads: {not_read:#?}");
    let (unknown, tainted) = summary(&would);
    let written = |status: bool| -> BTreeSet<String> {
        writes
            .iter()
            .filter(|w| w.user_agent == "leader")
            .filter_map(|w| w.path.strip_prefix("/api/v1/nodes/"))
            .filter_map(|p| if status { p.strip_suffix("/status") } else { Some(p) })
            .filter(|p| !p.contains('/'))
            .map(str::to_string)
            .collect()
    };
    let (leader_unknown, leader_tainted) = (written(true), written(false));
    let zone: BTreeSet<String> = (0..6).map(|i| format!("node-{i:06}")).collect();
    assert_eq!(leader_unknown, zone, "the leader marks the zone's six nodes Unknown");
    assert_eq!(leader_tainted, zone, "and taints them");
    // The shadow decides on the same facts, but it also sees the leader's
    // writes: a node the leader marked first needs nothing more, so the
    // shadow reports a subset, never an action the leader did not take.
    // How many Unknown statuses the shadow reports depends on whose monitor
    // pass comes first (the two start a few milliseconds apart): any
    // number, as long as the leader made each.
    assert!(unknown.is_subset(&leader_unknown), "{unknown:?}");
    assert!(tainted.is_subset(&leader_tainted) && !tainted.is_empty(), "{tainted:?}");

    // Whoever wrote first, the shadow matched each of the leader's
    // decisions with one of its own, within a pass and the watch latency.
    let json = serde_json::to_string_pretty(&report).expect("json");
    assert!(report.synced, "{json}");
    assert_eq!(report.counts.disagreements(), 0, "{json}");
    for (kind, nodes) in [
        (DecisionKind::Unknown, 6),
        (DecisionKind::NoScheduleUnreachable, 6),
        (DecisionKind::NoExecuteUnreachable, 6),
        (DecisionKind::PodsNotReady, 6),
    ] {
        let k = report.kinds.iter().find(|k| k.kind == kind).expect("every kind is listed");
        assert_eq!(k.counts.agree, nodes, "{kind:?}: {json}");
    }
    served.stop();
}

/// Waits until the leader has tainted the zone's six nodes NoExecute.
async fn zone_tainted(served: &Served) {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client(served, "test").await);
    let until = std::time::Instant::now() + Duration::from_secs(40);
    while std::time::Instant::now() < until {
        let list = nodes.list(&Default::default()).await.expect("list nodes");
        let tainted = list
            .items
            .iter()
            .filter(|n| {
                n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
                    ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
                })
            })
            .count();
        if tainted >= 6 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the leader did not taint the zone within 40 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_started_after_the_outage_counts_none_of_it() {
    // A shadow restarted in the middle of an incident: what the leader did
    // before it watched is nobody's disagreement.
    let served = serve().await;
    let leader = start(client(&served, "leader").await, RunOptions { config: config(), ..RunOptions::default() })
        .expect("config");
    zone_tainted(&served).await;
    let shadow =
        start(client(&served, "shadow").await, RunOptions { config: config(), dry_run: true, ..RunOptions::default() })
            .expect("config");
    // Long enough for the shadow to judge the zone's silent nodes (grace
    // 2 s from its first sight) and publish a summary.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let board = shadow.shadow.clone().expect("a dry-run replica has a shadow");
    let report = board.lock().expect("board").clone().expect("a summary once synced");
    shadow.stop();
    leader.stop();
    let json = serde_json::to_string_pretty(&report).expect("json");
    assert!(report.synced, "{json}");
    assert_eq!((report.decisions, report.pending_nodewarden, report.pending_upstream), (0, 0, 0), "{json}");
    assert!(report.excused >= 6, "the zone's nodes, Unknown at first sight, are excused: {json}");
    served.stop();
}
