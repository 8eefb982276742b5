//! A simulated Kubernetes API server over nodewarden's simulated cluster.
//!
//! `nodewarden sim --serve` runs this: a generated fleet (or a scenario
//! file's cluster) whose kubelets heartbeat on the wall clock, its fault
//! plan played out in real time, served over the Kubernetes REST and watch
//! protocol (JSON) on loopback, over HTTPS with a bearer token by default
//! ([`Security`]), so kubectl, kube-rs and client-go programs work against
//! it unchanged with the kubeconfig it writes. It makes no lifecycle
//! decision of its own: with `--controller`, nodewarden's engine runs
//! in-process through the same [`nodewarden_controller::Controller`] loop
//! as everywhere else, its actions landing on the store as a client's
//! writes would.
//!
//! Layers, each depending only on those before it:
//! - foundations: `error` (the API's refusals), `resource` (the served
//!   kinds), `selector`, [`journal`], [`store`], `faults`; objects are
//!   read and written with `nodewarden_objects`;
//! - the domain: `cluster` ([`ServedCluster`]: store, clock, faults,
//!   admission settings), `admission`, `kubelets`, `pdb`, `binding`,
//!   `scheduler`, `recreate`, `populate`, `served_api` (the in-process
//!   controller's side), `driver` (the cluster in motion);
//! - `http`: the wire protocol over the domain;
//! - `served`: the composition root ([`Served`]).
//!
//! The public surface is what `nodewarden sim --serve` and the tests of
//! other crates use: start and stop a cluster, reach its store, clock and
//! faults (objects are written as the served cluster writes them with
//! `nodewarden_objects::write`).

mod admission;
mod binding;
mod cluster;
mod driver;
mod error;
mod faults;
mod http;
pub mod journal;
mod kubelets;
mod pdb;
mod populate;
mod recreate;
mod resource;
mod scheduler;
mod selector;
mod served;
mod served_api;
pub mod store;

pub use cluster::ServedCluster;
pub use driver::StatusLine;
pub use error::ApiError;
pub use faults::{ApiFault, ApiFaults, FaultTarget, PlannedApiFault};
pub use http::{RequestRecord, Security, ServerConfig, TlsError, WriteRecord, check_san};
pub use nodewarden_objects::TimeBase;
pub use populate::ServeSource;
pub use resource::Kind;
pub use served::{ServeError, ServeOptions, Served, kubeconfig, secure_kubeconfig};
pub use store::StoreLimits;

/// What tests need beyond the public surface.
pub mod testing {
    /// A CA of its own, for a test that checks a client trusting another
    /// CA is refused at the handshake.
    pub use crate::http::tls::new_ca;
}
