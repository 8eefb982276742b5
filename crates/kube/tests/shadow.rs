//! `--dry-run` beside a writing replica during a zone outage: the shadow
//! sends nothing (the server's write log has no request of its), and what
//! it would have done is what the writing replica did.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use nodewarden_apiserver::{ServeSource, Served, ServerConfig};
use nodewarden_engine::{Action, ActionKind};
use nodewarden_kube::{RunOptions, start};
use nodewarden_model::ControllerConfig;
use nodewarden_sim::builtin::Builtin;
use nodewarden_sim::fleet::FleetSpec;

async fn serve() -> Served {
    // zone-outage cuts the first zone off at 1m: at 60x, after 1 s.
    let mut opts = common::options();
    opts.source =
        ServeSource::Fleet(FleetSpec { nodes: 12, zones: 2, pods_per_node: 2, seed: 5 }, Some(Builtin::ZoneOutage));
    opts.server = ServerConfig { record_writes: true, ..opts.server };
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
    // an idle machine; wait for the leader's sixth taint write (at most
    // 40 s), then a moment for the shadow's last decisions.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client(&served, "test").await);
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
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let would = shadow.stop();
    leader.stop();
    let writes = served.writes();
    assert!(writes.iter().all(|w| w.user_agent != "shadow"), "the shadow wrote: {writes:#?}");
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
    served.stop();
}
