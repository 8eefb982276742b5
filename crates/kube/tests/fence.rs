//! The writer asks the leader-election fence before every request: with a
//! closed fence the controller decides (the crashed node's Unknown status
//! and taints are due) but nothing reaches the API server.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig};
use nodewarden_kube::{Fence, RunOptions, start};
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_sim::KubeletTiming;
use nodewarden_sim::builtin::Builtin;
use nodewarden_sim::fleet::FleetSpec;

async fn serve() -> Served {
    let opts = ServeOptions {
        // node-crash stops one node of ten at 1m: at 60x, after 1 s.
        source: ServeSource::Fleet(
            FleetSpec { nodes: 10, zones: 2, pods_per_node: 2, seed: 3 },
            Some(Builtin::NodeCrash),
        ),
        timing: KubeletTiming {
            lease_every: Span::from_millis(200),
            update_every: Span::from_millis(200),
            report_every: Span::from_secs(2),
        },
        lease_duration_secs: 1,
        scenario_speed: 60.0,
        server: ServerConfig {
            bookmark_every: Duration::from_millis(300),
            record_writes: true,
            ..ServerConfig::default()
        },
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    Served::start(opts, listener).await.expect("start")
}

fn config() -> ControllerConfig {
    ControllerConfig {
        node_monitor_period: Span::from_millis(200),
        node_monitor_grace_period: Span::from_secs(2),
        node_startup_grace_period: Span::from_secs(2),
        ..ControllerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_fence_sends_nothing_and_an_open_one_sends() {
    let served = serve().await;
    let client = kube::Client::try_from(kube::Config::new(served.url().parse().expect("url"))).expect("client");
    let fence = Fence::closed();
    let running =
        start(client.clone(), RunOptions { config: config(), fence: Some(fence.clone()), ..RunOptions::default() })
            .expect("config");
    // Crash at ~1 s, grace 2 s: by 6 s the engine has wanted to write.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(running.health.synced.load(Ordering::Relaxed));
    assert_eq!(served.writes(), Vec::new(), "a fenced replica wrote");
    let fenced = running.stop();
    assert!(fenced.is_empty());

    // The same, unfenced: the writes go out.
    let running = start(client, RunOptions { config: config(), fence: None, ..RunOptions::default() }).expect("config");
    tokio::time::sleep(Duration::from_secs(5)).await;
    running.stop();
    assert!(served.writes().iter().any(|w| w.path.ends_with("/nodes/node-000005")), "{:#?}", served.writes());
    served.stop();
}
