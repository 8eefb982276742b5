//! The fields the readings look at, per kind and detail: what a watch
//! decodes of an object ([`super::prune`]). Everything else (managed
//! fields, container statuses, images, volumes) is skipped as it is
//! parsed. A reading that starts looking at another field names it here.

use super::prune::Keep;

const fn only(fields: &'static [(&'static str, Keep)]) -> Keep {
    Keep::Only(fields)
}

// Every kind keeps its identity (name, namespace, uid,
// resourceVersion): the readings and the watcher itself read it.

const NODE_METADATA: Keep =
    Keep::Fields(&["name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels"]);
const NODE_SPEC: Keep = Keep::Fields(&["taints", "unschedulable"]);

/// A Node for node lifecycle.
pub const NODE: Keep =
    only(&[("metadata", NODE_METADATA), ("spec", NODE_SPEC), ("status", Keep::Fields(&["conditions"]))]);

/// A Node for the rescheduler too: its allocatable as well.
pub const SCHEDULED_NODE: Keep =
    only(&[("metadata", NODE_METADATA), ("spec", NODE_SPEC), ("status", Keep::Fields(&["conditions", "allocatable"]))]);

// A Pod for node lifecycle, part by part: the typed reading's shapes
// (`super::typed`) keep what these name.
pub(super) const OWNER: Keep = Keep::Fields(&["kind", "controller"]);
pub(super) const POD_METADATA: Keep = only(&[
    ("name", Keep::All),
    ("namespace", Keep::All),
    ("uid", Keep::All),
    ("resourceVersion", Keep::All),
    ("ownerReferences", Keep::Each(&OWNER)),
    ("deletionTimestamp", Keep::All),
]);
pub(super) const POD_SPEC: Keep = Keep::Fields(&["nodeName", "tolerations"]);
pub(super) const CONDITION: Keep = Keep::Fields(&["type", "status"]);
pub(super) const POD_STATUS: Keep = only(&[("conditions", Keep::Each(&CONDITION)), ("reason", Keep::All)]);

/// A Pod for node lifecycle and taint eviction: of its owners and
/// conditions, only what tells a DaemonSet's pod and a Ready one.
pub const POD: Keep = only(&[("metadata", POD_METADATA), ("spec", POD_SPEC), ("status", POD_STATUS)]);

/// A Pod for the rescheduler too: its whole spec and metadata (requests,
/// placement, priority, labels, annotations), less what no reading
/// needs.
pub const SCHEDULED_POD: Keep = only(&[
    ("metadata", Keep::AllBut(&["managedFields"])),
    ("spec", Keep::AllBut(&["volumes"])),
    ("status", Keep::Fields(&["conditions", "reason", "phase"])),
]);

pub(super) const LEASE_METADATA: Keep = Keep::Fields(&["name", "namespace", "uid", "resourceVersion"]);
pub(super) const LEASE_SPEC: Keep = Keep::Fields(&["renewTime"]);

/// A node Lease.
pub const LEASE: Keep = only(&[("metadata", LEASE_METADATA), ("spec", LEASE_SPEC)]);

/// A PodDisruptionBudget.
pub const BUDGET: Keep = only(&[
    ("metadata", Keep::Fields(&["name", "namespace", "uid", "resourceVersion", "generation"])),
    ("spec", Keep::Fields(&["selector"])),
    ("status", Keep::Fields(&["disruptionsAllowed", "observedGeneration"])),
]);
