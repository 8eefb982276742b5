//! A node Lease's reading: the node it renews for, and when.

use nodewarden_engine::Observation;
use nodewarden_model::Timestamp;
use serde_json::Value;

use super::{NODE_LEASE_NAMESPACE, Reading, at, name_of};
use crate::time::TimeBase;

/// The observation a node Lease's JSON gives: its name and
/// `spec.renewTime`. `None` for Leases outside `kube-node-lease` or
/// without a name.
pub fn lease_reading(v: &Value, seen_at: Timestamp) -> Option<Observation> {
    read(v, seen_at, TimeBase::UNIX)
}

pub(super) fn read(v: &Value, seen_at: Timestamp, clock: TimeBase) -> Option<Observation> {
    if at(v, &["metadata", "namespace"]).and_then(Value::as_str) != Some(NODE_LEASE_NAMESPACE) {
        return None;
    }
    let Some(node) = name_of(v) else {
        tracing::warn!(kind = "Lease", "ignoring a node Lease without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Lease", name: node, seen_at, clock };
    let renew = r.time(v, &["spec", "renewTime"], "spec.renewTime");
    Some(Observation::LeaseUpserted { node: node.to_string(), renew })
}
