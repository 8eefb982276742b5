//! What the adapter's end-to-end tests share: the in-process API server on
//! loopback (`nodewarden sim --serve`), a client for it, short periods, and
//! a way to store objects the API would refuse.

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use nodewarden_apiserver::resource::Kind;
use nodewarden_apiserver::store::key_of;
use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig, StoreLimits};
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_sim::KubeletTiming;
use nodewarden_sim::builtin::Builtin;
use nodewarden_sim::fleet::FleetSpec;
use serde_json::{Value, json};

/// The node the node-crash scenario crashes (at 1 s, with [`options`]).
pub const CRASHED: &str = "node-000005";

/// Ten nodes in two zones; node-crash crashes [`CRASHED`] at 1m of scenario
/// time, which at 60x is about 1 s after the start.
pub fn options() -> ServeOptions {
    ServeOptions {
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
        server: ServerConfig { bookmark_every: Duration::from_millis(300), ..ServerConfig::default() },
        limits: StoreLimits::default(),
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    }
}

/// The controller's periods, shortened about twenty times.
pub fn fast_config() -> ControllerConfig {
    ControllerConfig {
        node_monitor_period: Span::from_millis(200),
        node_monitor_grace_period: Span::from_secs(2),
        node_startup_grace_period: Span::from_secs(2),
        ..ControllerConfig::default()
    }
}

/// Serves `opts` on a loopback port.
pub async fn serve(opts: ServeOptions) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    Served::start(opts, listener).await.expect("start")
}

/// A client of `served`.
pub fn client(served: &Served) -> kube::Client {
    let mut config = kube::Config::new(served.url().parse().expect("url"));
    config.read_timeout = Some(Duration::from_secs(10));
    config.connect_timeout = Some(Duration::from_secs(2));
    kube::Client::try_from(config).expect("client")
}

/// Stores `v` as given, bypassing decoding and validation, as a
/// hand-edited etcd or an older API server could have left it.
pub fn store_raw(served: &Served, kind: Kind, namespace: &str, v: Value) {
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut s = served.shared.store.lock();
    s.commit(kind, &key_of(namespace, &name), v, false);
}

/// (Ready is Unknown, carries the unreachable NoExecute taint).
pub fn unknown_and_tainted(n: &Node) -> (bool, bool) {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"));
    (ready.as_deref() == Some("Unknown"), tainted)
}

/// Creates `default/NAME` on `node`, tolerating the unreachable and
/// not-ready NoExecute taints for `seconds`.
pub async fn create_pod(c: &kube::Client, name: &str, node: &str, seconds: i64) -> Pod {
    let tol =
        |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds});
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}],
                 "tolerations": [tol("node.kubernetes.io/unreachable"), tol("node.kubernetes.io/not-ready")]},
    }))
    .expect("a Pod");
    Api::<Pod>::namespaced(c.clone(), "default").create(&PostParams::default(), &pod).await.expect("create pod")
}

/// Polls `check` every 100 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
