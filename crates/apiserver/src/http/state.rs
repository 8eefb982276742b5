//! What the HTTP side holds beside the cluster: its settings, its address
//! and the logs tests read (accepted writes, every request).
//!
//! Invariant: nothing here changes what the cluster holds; the logs are
//! written only when their setting is on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::request_log::RequestRecord;
use super::tls::Security;
use crate::cluster::ServedCluster;

/// Upstream's request body limit (3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// How the server behaves: the knobs tests turn to make timeouts,
/// bookmarks and logs happen when they want them.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// A watch without `timeoutSeconds` ends after a random time between
    /// this and twice this (upstream's `--min-request-timeout`, 1800 s).
    pub min_request_timeout: Duration,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_every: Duration,
    /// Largest request body.
    pub max_body: usize,
    /// Keep a [`WriteRecord`] of every accepted write (off by default: the
    /// log grows with every write; tests that check who wrote when turn it
    /// on).
    pub record_writes: bool,
    /// Keep a [`RequestRecord`] of every request,
    /// whatever its answer (off by default; tests that check a client's
    /// RBAC needs turn it on).
    pub record_requests: bool,
    /// Serve `events.k8s.io/v1` (on by default). Off, its paths answer 404
    /// as on a server without that group, so clients fall back to core/v1
    /// Events.
    pub events_v1: bool,
    /// HTTPS with a bearer token (the default), or plain HTTP without
    /// authentication ([`Security`]).
    pub security: Security,
    /// More names (DNS names or IP addresses) the serving certificate is
    /// valid for, beyond loopback and the bound address
    /// (`sim --serve --tls-san`): a client on another machine reaches the
    /// server by a name of its own. The first is the kubeconfig's host.
    pub tls_sans: Vec<String>,
}

/// One write the server accepted: when, by which client, what, so a test
/// can tell which replica of a controller wrote, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// When the answer was ready (the write had taken effect).
    pub at: std::time::Instant,
    /// The client's `User-Agent` (kube-rs clients send none unless told).
    pub user_agent: String,
    /// POST, PUT, PATCH or DELETE.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The answer's status code (2xx).
    pub code: u16,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            min_request_timeout: Duration::from_secs(1800),
            bookmark_every: Duration::from_secs(60),
            max_body: MAX_BODY,
            record_writes: false,
            record_requests: false,
            events_v1: true,
            security: Security::Https,
            tls_sans: Vec::new(),
        }
    }
}

/// What every request handler shares: the served cluster, and what only
/// the HTTP side keeps (its settings, address and logs).
pub struct HttpState {
    /// The cluster the requests read and change.
    pub cluster: Arc<ServedCluster>,
    /// Settings.
    pub config: ServerConfig,
    /// Where the server listens (for `/api`).
    pub addr: OnceLock<SocketAddr>,
    /// Accepted writes, when [`ServerConfig::record_writes`] is on.
    pub writes: Mutex<Vec<WriteRecord>>,
    /// Every request, when [`ServerConfig::record_requests`] is on.
    pub requests: Mutex<Vec<RequestRecord>>,
    /// The request journal, when one is kept ([`crate::journal`]).
    pub request_journal: OnceLock<crate::journal::Journal>,
}

impl HttpState {
    /// The HTTP side of `cluster`, with empty logs.
    pub fn new(cluster: Arc<ServedCluster>, config: ServerConfig) -> HttpState {
        HttpState {
            cluster,
            config,
            addr: OnceLock::new(),
            writes: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            request_journal: OnceLock::new(),
        }
    }
}
