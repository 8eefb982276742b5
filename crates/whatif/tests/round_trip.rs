//! The round trip, on loopback: a generated fleet served by `sim --serve`,
//! snapshotted with kubectl (skipped, with the reason, when kubectl is not
//! installed) and listed live with `--from-cluster`'s code, then played
//! with zone-a cut off from 1m to 50m, gives the same per-zone outcome as
//! the same fleet simulated directly (the built-in zone-outage scenario),
//! and the live listing neither writes nor watches (it reads `/version`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig};
use nodewarden_cluster::Builtin;
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_sim::{Outcome, SimOptions, Simulation, Source};
use nodewarden_whatif::{Faults, Played, play};
use nodewarden_whatif::{Snapshot, read_bytes};

const FLEET: FleetSpec = FleetSpec { nodes: 30, zones: 3, pods_per_node: 10, seed: 1 };

fn kubectl_path() -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join("kubectl")).find(|p| p.is_file())
}

/// What must agree per zone: sizes and counts (exact times depend on the
/// kubelets' phases, which differ between a generated fleet and a served
/// one).
fn per_zone(o: &Outcome) -> Vec<(String, [usize; 9])> {
    o.zones
        .iter()
        .map(|z| {
            let figures = [
                z.nodes,
                z.pods,
                z.nodes_failed,
                z.recoveries,
                z.seen_dead.0,
                z.tainted.0,
                z.untainted,
                z.evicted.0,
                z.daemonset_evicted,
            ];
            (z.key.clone(), figures)
        })
        .collect()
}

/// What must agree per workload between two snapshots of one cluster.
fn per_workload(p: &Played) -> Vec<(String, usize, usize, bool)> {
    p.report.workloads.iter().map(|w| (w.id.to_string(), w.replicas, w.evicted.len(), w.lost_all())).collect()
}

fn zone_outage() -> Faults {
    Faults {
        zones: vec!["zone-a".into()],
        at: Span::from_secs(60),
        recover_after: Some(Span::from_secs(49 * 60)),
        duration: Some(Span::from_secs(3600)),
        ..Faults::default()
    }
}

async fn start() -> Served {
    let opts = ServeOptions {
        source: ServeSource::Fleet(FLEET, None),
        server: ServerConfig { record_writes: true, record_requests: true, ..ServerConfig::default() },
        ..ServeOptions::default()
    };
    nodewarden_testkit::served::serve(opts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_of_a_served_fleet_plays_like_the_fleet_itself() {
    let served = start().await;
    // Let every kubelet renew once on the wall clock.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // --from-cluster's listing.
    let client = nodewarden_testkit::served::client(&served, "whatif-test", true).await;
    let live = nodewarden_whatif::list_cluster(&client, "served").await.expect("list");
    assert_eq!((live.nodes.len(), live.pods.len(), live.leases.len()), (30, 300, 30), "{}", live.summary());
    assert!(served.writes().is_empty(), "the listing wrote: {:?}", served.writes());
    let requests = served.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let version = r.verb == "get" && r.non_resource_path == "/version";
        assert!(r.verb == "list" || version, "only list calls and GET /version: {r:?}");
    }
    assert_eq!(live.kube_version, Some(nodewarden_model::KubeVersion::new(1, 33)), "the served /version");

    // kubectl's snapshot of the same cluster.
    let file = match kubectl_path() {
        None => {
            println!("skipped the kubectl half: kubectl is not on PATH");
            None
        }
        Some(bin) => {
            let kubeconfig = std::env::temp_dir().join(format!("nodewarden-whatif-{}.kubeconfig", served.addr.port()));
            std::fs::write(&kubeconfig, served.kubeconfig()).expect("kubeconfig");
            let out = tokio::task::spawn_blocking(move || {
                Command::new(bin)
                    .env("KUBECONFIG", &kubeconfig)
                    .args(["get", "nodes,pods,leases,daemonsets,poddisruptionbudgets", "-A", "-o", "json"])
                    .args(["--request-timeout", "20s"])
                    .output()
            })
            .await
            .expect("join")
            .expect("run kubectl");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let mut snap = Snapshot::new("kubectl");
            read_bytes(&out.stdout, "kubectl", &mut snap).expect("kubectl's List reads");
            assert!(snap.problems.is_empty(), "{:?}", snap.problems);
            Some(snap)
        }
    };
    drop(served);

    let results = tokio::task::spawn_blocking(move || {
        let direct = Simulation::new(SimOptions {
            source: Source::Builtin(Builtin::ZoneOutage, FLEET),
            config: ControllerConfig::default(),
            duration: Some(Span::from_secs(3600)),
            seed: 1,
            measure: false,
            api: None,
        })
        .and_then(Simulation::run)
        .expect("direct");
        let live = play(&live, &zone_outage(), ControllerConfig::default(), 1).expect("live");
        let file = file.map(|s| play(&s, &zone_outage(), ControllerConfig::default(), 1).expect("file"));
        (direct, live, file)
    })
    .await
    .expect("join");
    let (direct, live, file) = results;
    assert!(direct.safe() && live.outcome.safe());
    let (_, zone_a) = &per_zone(&direct)[0];
    assert_eq!((zone_a[2], zone_a[5]), (10, 10), "zone-a failed and was tainted: {zone_a:?}");
    assert!(zone_a[7] > 0, "pods were evicted");
    assert_eq!(per_zone(&live.outcome), per_zone(&direct), "the live listing plays like the fleet");
    if let Some(file) = file {
        assert!(file.outcome.safe());
        assert_eq!(per_zone(&file.outcome), per_zone(&direct), "kubectl's snapshot plays like the fleet");
        assert_eq!(per_workload(&file), per_workload(&live), "the file and the live listing agree per workload");
        assert_eq!(file.report.pdbs, live.report.pdbs);
    }
}
