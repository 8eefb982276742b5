//! Kubernetes objects, read and written in one place.
//!
//! Every part of nodewarden that meets a Kubernetes object as JSON goes
//! through this crate: `nodewarden run`'s watches ([`read`], through the
//! kube adapter), the served cluster of `nodewarden sim --serve` (which
//! writes its objects with [`write`] and reads its clients' objects with
//! [`read`]), and what-if's snapshots. One reading means that the
//! controller, the cluster it is tested against and the snapshot it is
//! judged on cannot disagree about what an object says.
//!
//! - [`read`]: JSON to the engine's snapshots and observations, total and
//!   lenient, each odd field read the way that cannot make an eviction
//!   come sooner (the list is in that module's documentation); with the
//!   trimmed decoding the watches use ([`Keep`], [`keep`]) and a fast path
//!   for well-formed pods and Leases.
//! - [`write`]: the engine's snapshots to whole objects as a real cluster
//!   holds them.
//! - [`time`]: RFC 3339 text to the engine's clock and back.
//!
//! Invariant: no reading panics or fails on any JSON; a written object
//! reads back as what it was written from. This crate does no I/O and
//! keeps no state; it reads the wall clock only in [`wall_clock_now`].

mod read;
mod time;
pub mod write;

pub use read::keep;
pub use read::prune::{Keep, Pruned};
pub use read::typed;
pub use read::{
    ControllerOwner, Detail, MANY_TAINTS, NODE_LEASE_NAMESPACE, Reader, budget_amounts, budget_reading,
    controller_owner, label_selector_reading, lease_reading, node_reading, pod_priority, pod_reading, pod_tolerations,
};
pub use time::{TimeBase, format_rfc3339, parse_rfc3339, wall_clock_now};
