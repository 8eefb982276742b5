//! Shared by the end-to-end tests: a served cluster on an ephemeral
//! loopback port, with short kubelet periods.

#![allow(dead_code)]

use std::time::Duration;

use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig, StoreLimits};
use nodewarden_model::Span;
use nodewarden_sim::KubeletTiming;
use nodewarden_sim::fleet::FleetSpec;

/// Kubelets that renew every 200 ms, compute status every 200 ms and
/// report every 2 s.
pub fn fast_kubelets() -> KubeletTiming {
    KubeletTiming {
        lease_every: Span::from_millis(200),
        update_every: Span::from_millis(200),
        report_every: Span::from_secs(2),
    }
}

/// Options for a small fleet with fast kubelets.
pub fn options(nodes: usize, pods_per_node: usize) -> ServeOptions {
    ServeOptions {
        source: ServeSource::Fleet(FleetSpec { nodes, zones: 1, pods_per_node, seed: 3 }, None),
        timing: fast_kubelets(),
        lease_duration_secs: 1,
        server: ServerConfig { bookmark_every: Duration::from_millis(300), ..ServerConfig::default() },
        limits: StoreLimits::default(),
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    }
}

/// Starts it on 127.0.0.1:0.
pub async fn start(opts: ServeOptions) -> Served {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind: {e}"),
    };
    match Served::start(opts, listener).await {
        Ok(s) => s,
        Err(e) => panic!("start: {e}"),
    }
}

/// A kube client for it, configured from its kubeconfig as any client
/// is (HTTPS, its CA, its bearer token); `retry` = kube's default retry
/// on 429/503/504.
pub async fn client(served: &Served, retry: bool) -> kube::Client {
    let mut config = config(served).await;
    config.default_retry = retry;
    config.read_timeout = Some(Duration::from_secs(10));
    match kube::Client::try_from(config) {
        Ok(c) => c,
        Err(e) => panic!("client: {e}"),
    }
}

/// The kube config its kubeconfig gives.
pub async fn config(served: &Served) -> kube::Config {
    let kc = kube::config::Kubeconfig::from_yaml(&served.kubeconfig()).or_fail("kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.or_fail("config")
}

/// Fails the test with the error.
pub trait OrFail<T> {
    /// The value, or a panic naming what failed.
    fn or_fail(self, what: &str) -> T;
}

impl<T, E: std::fmt::Debug> OrFail<T> for Result<T, E> {
    fn or_fail(self, what: &str) -> T {
        match self {
            Ok(v) => v,
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
}

/// The HTTP status code of a kube error, if the API answered.
pub fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}
