//! Shared by the end-to-end tests: a served cluster on an ephemeral
//! loopback port, with short kubelet periods.

#![allow(dead_code)]

use std::time::Duration;

use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig, StoreLimits};
use nodewarden_cluster::fleet::FleetSpec;

#[allow(unused_imports)] // each test binary uses its own part of this module
pub use nodewarden_testkit::served::{fast_kubelets, kube_config as config};

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
    nodewarden_testkit::served::serve(opts).await
}

/// A kube client for it, configured from its kubeconfig as any client
/// is (HTTPS, its CA, its bearer token); `retry` = kube's default retry
/// on 429/503/504.
pub async fn client(served: &Served, retry: bool) -> kube::Client {
    nodewarden_testkit::served::client(served, "nodewarden-apiserver-test", retry).await
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
