//! `--from-cluster`: the same objects a snapshot file holds, listed from a
//! live API server, read-only.
//!
//! `GET /version` first (its version picks the defaults played, see
//! [`crate::Defaults`]), then only paged `GET` list requests (`limit=500`
//! with `continue`), one resource after another; no watch is opened and
//! nothing is written, so the permissions needed are `list` on nodes, pods, node Leases,
//! DaemonSets, ReplicaSets and PodDisruptionBudgets. Nodes and pods are
//! required; a resource the server does not serve or the user may not
//! list (404, 403) is noted and left out, as a snapshot without it would
//! be.

use http::Request;
use nodewarden_model::KubeVersion;

use crate::snapshot::{Snapshot, SnapshotError};

/// Items per list page (kubectl's default chunk size).
pub const PAGE: usize = 500;

/// The resources listed: (kind, path, required).
pub const RESOURCES: [(&str, &str, bool); 6] = [
    ("Node", "/api/v1/nodes", true),
    ("Pod", "/api/v1/pods", true),
    ("Lease", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", false),
    ("DaemonSet", "/apis/apps/v1/daemonsets", false),
    ("ReplicaSet", "/apis/apps/v1/replicasets", false),
    ("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", false),
];

/// A listing the API server refused or answered with something else.
fn failed(server: &str, what: &str, message: String) -> SnapshotError {
    SnapshotError::Listing { origin: format!("cluster {server} ({what}s)"), message }
}

/// Why a request failed: the server could not be reached at all, or its
/// answer (the status it sent, without kube-rs's debug dump of it).
fn request_failed(server: &str, what: &str, uri: &str, e: kube::Error) -> SnapshotError {
    if let Some(cause) = nodewarden_kube::unreachable_cause(&e) {
        return SnapshotError::Unreachable { server: server.to_string(), cause };
    }
    let answer = match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        e => e.to_string(),
    };
    failed(server, what, format!("GET {uri}: {answer}"))
}

/// Lists every resource of [`RESOURCES`] into a snapshot, from the API
/// server at `server` (its URL, which names it in messages; the snapshot's
/// source is `cluster <server>`).
pub async fn list_cluster(client: &kube::Client, server: &str) -> Result<Snapshot, SnapshotError> {
    let mut snap = Snapshot::new(format!("cluster {server}"));
    // The version picks the defaults played; without it the what-if says
    // it played the newest ones, so a failure here is noted, not fatal.
    match client.apiserver_version().await {
        Ok(info) => match KubeVersion::from_info(&info.major, &info.minor).or_else(|_| info.git_version.parse()) {
            Ok(v) => snap.kube_version = Some(v),
            Err(e) => snap.problems.push(format!("GET /version: {e}")),
        },
        Err(e) => {
            if let Some(cause) = nodewarden_kube::unreachable_cause(&e) {
                return Err(SnapshotError::Unreachable { server: server.to_string(), cause });
            }
            snap.problems.push(format!("GET /version failed ({e}); the Kubernetes version is not known"));
        }
    }
    for (kind, path, required) in RESOURCES {
        let mut cont: Option<String> = None;
        loop {
            let mut uri = format!("{path}?limit={PAGE}");
            if let Some(c) = &cont {
                uri.push_str("&continue=");
                uri.push_str(&percent_encode(c));
            }
            let req = Request::get(&uri).body(Vec::new()).map_err(|e| failed(server, kind, e.to_string()))?;
            let text = match client.request_text(req).await {
                Ok(t) => t,
                Err(kube::Error::Api(s)) if !required && (s.code == 404 || s.code == 403) => {
                    snap.problems.push(format!("{kind}s not listed ({} {}); left out", s.code, s.reason));
                    break;
                }
                Err(e) => return Err(request_failed(server, kind, &uri, e)),
            };
            let page: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| failed(server, kind, format!("GET {uri}: not JSON: {e}")))?;
            for item in page.get("items").and_then(serde_json::Value::as_array).into_iter().flatten() {
                // Items of an API list carry no kind of their own.
                snap.add(item, Some(kind));
            }
            cont = page
                .pointer("/metadata/continue")
                .and_then(serde_json::Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cont.is_none() {
                break;
            }
        }
    }
    Ok(snap)
}

/// Percent-encodes a continue token for a query string.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
