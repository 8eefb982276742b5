//! The served cluster (`nodewarden sim --serve`) as the end-to-end tests
//! use it: started in-process on a loopback port with kubelets on short
//! periods, and reached through kube-rs with the kubeconfig it writes, as
//! any client reaches it (HTTPS, its CA, its bearer token).
//!
//! Each test tunes its own `ServeOptions`; what every one of them had
//! copied (the port, the kubelet periods, the client's configuration) is
//! here.

use std::time::Duration;

use nodewarden_apiserver::{ServeOptions, Served};
use nodewarden_cluster::KubeletTiming;
use nodewarden_model::Span;

/// Kubelets that renew their Lease and compute their status every 200 ms
/// and report it every 2 s: a node's death shows within a second, and
/// tests with a controller's grace shortened to 2 s stay well inside it.
pub fn fast_kubelets() -> KubeletTiming {
    KubeletTiming {
        lease_every: Span::from_millis(200),
        update_every: Span::from_millis(200),
        report_every: Span::from_secs(2),
    }
}

/// Serves `opts` on an ephemeral port of 127.0.0.1 (loopback only: tests
/// never listen beyond the machine).
pub async fn serve(opts: ServeOptions) -> Served {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind a loopback port: {e}"),
    };
    match Served::start(opts, listener).await {
        Ok(s) => s,
        Err(e) => panic!("start the served cluster: {e}"),
    }
}

/// The kube configuration `served`'s kubeconfig gives, read as
/// `nodewarden run` reads one.
pub async fn kube_config(served: &Served) -> kube::Config {
    let kc = match kube::config::Kubeconfig::from_yaml(&served.kubeconfig()) {
        Ok(kc) => kc,
        Err(e) => panic!("the served kubeconfig: {e}"),
    };
    match kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await {
        Ok(c) => c,
        Err(e) => panic!("a configuration from the served kubeconfig: {e}"),
    }
}

/// A client of `served` that names itself `agent` (the served request
/// log and the journal show it), gives up on a request after 10 s, and
/// leaves kube-rs's own retry of 429/503/504 as it is by default, unless
/// `retry` is false: a test of refusals must see each answer itself.
pub async fn client(served: &Served, agent: &str, retry: bool) -> kube::Client {
    let mut config = kube_config(served).await;
    config.read_timeout = Some(Duration::from_secs(10));
    config.connect_timeout = Some(Duration::from_secs(2));
    config.default_retry = retry;
    match agent.parse() {
        Ok(v) => config.headers.push((http::header::USER_AGENT, v)),
        Err(e) => panic!("user agent {agent:?}: {e}"),
    }
    match kube::Client::try_from(config) {
        Ok(c) => c,
        Err(e) => panic!("a client of the served cluster: {e}"),
    }
}

/// The node [`node_crash_fleet`] crashes, about 1 s after the start.
pub const CRASHED: &str = "node-000005";

/// Ten nodes in two zones, two pods each, with [`fast_kubelets`] and
/// 1 s Leases; the built-in node-crash scenario stops [`CRASHED`] at 1m
/// of scenario time, which at 60x is about 1 s after the start. Watches
/// get a bookmark every 300 ms, and the cluster moves every 50 ms.
pub fn node_crash_fleet() -> ServeOptions {
    use nodewarden_apiserver::{ServeSource, ServerConfig, StoreLimits};
    use nodewarden_cluster::Builtin;
    use nodewarden_cluster::fleet::FleetSpec;
    ServeOptions {
        source: ServeSource::Fleet(
            FleetSpec { nodes: 10, zones: 2, pods_per_node: 2, seed: 3 },
            Some(Builtin::NodeCrash),
        ),
        timing: fast_kubelets(),
        lease_duration_secs: 1,
        scenario_speed: 60.0,
        server: ServerConfig { bookmark_every: Duration::from_millis(300), ..ServerConfig::default() },
        limits: StoreLimits::default(),
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    }
}
