//! The cluster's rules, as plain functions over plain values: what the API
//! server and the controllers around the node lifecycle controller do to an
//! object, apart from where the object is kept.
//!
//! The simulated [`Cluster`](crate::cluster::Cluster) keeps typed maps and
//! the served cluster (`nodewarden-apiserver`) keeps JSON objects; both
//! must answer the controller alike, or a scenario that passes in replay
//! could fail over the wire. So each rule here takes the values it needs
//! and returns the result or the change, and the storage only finds the
//! values, calls the rule and stores what comes back.
//!
//! - [`node`]: a node's conditions, taints and labels under the
//!   controller's and the kubelet's writes;
//! - [`pod`]: the checks a controller write to a pod passes and what the
//!   status writes and deletions do;
//! - [`pod_conditions`]: a pod's conditions by type, in little room;
//! - [`budget`]: the disruption controller's budget status and the
//!   Eviction API's verdict;
//! - [`recreate`]: which pods a workload controller replaces, and how.
//!
//! Invariant: no function here reads or changes storage, the clock or
//! anything but its arguments; the same arguments always give the same
//! answer. This module depends on nothing in the crate but the scenario's
//! value types.

pub mod budget;
pub mod node;
pub mod pod;
pub mod pod_conditions;
pub mod recreate;
