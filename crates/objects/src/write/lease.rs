//! Node Leases as a kubelet keeps them.

use nodewarden_model::Timestamp;
use serde_json::{Value, json};

use crate::read::NODE_LEASE_NAMESPACE;
use crate::time::TimeBase;

/// A node's Lease, as its kubelet keeps it.
pub fn lease_json(
    node: &str,
    node_uid: &str,
    uid: &str,
    renew: Timestamp,
    duration_secs: i64,
    time: &TimeBase,
) -> Value {
    lease_json_created(node, node_uid, uid, renew, renew, duration_secs, time)
}

/// A node's Lease created at `created`.
pub fn lease_json_created(
    node: &str,
    node_uid: &str,
    uid: &str,
    created: Timestamp,
    renew: Timestamp,
    duration_secs: i64,
    time: &TimeBase,
) -> Value {
    json!({
        "kind": "Lease",
        "apiVersion": "coordination.k8s.io/v1",
        "metadata": {
            "name": node,
            "namespace": NODE_LEASE_NAMESPACE,
            "uid": uid,
            "creationTimestamp": time.time(created),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": duration_secs,
            "renewTime": time.micro_time(renew),
        },
    })
}
