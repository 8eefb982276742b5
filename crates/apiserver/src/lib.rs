//! A simulated Kubernetes API server over nodewarden's simulated cluster.
//!
//! `nodewarden sim --serve` runs this: a generated fleet (or a scenario
//! file's cluster) whose kubelets heartbeat on the wall clock, its fault
//! plan played out in real time, served over the Kubernetes REST and watch
//! protocol (JSON) on loopback, over HTTPS with a bearer token by default
//! ([`tls`]), so kubectl, kube-rs and client-go programs work against it
//! unchanged with the kubeconfig it writes. It makes no lifecycle decision of its own:
//! with `--controller`, nodewarden's engine runs in-process through the same
//! [`nodewarden_controller::Controller`] loop as everywhere else, and its
//! actions land through [`ServedApi`], an implementation of
//! [`nodewarden_controller::ClusterApi`] over the store.

pub mod binding;
pub mod clock;
pub mod convert;
pub mod error;
pub mod events;
pub mod faults;
pub mod http;
pub mod journal;
pub mod objects;
pub mod openapi;
pub mod openapi_v2;
pub mod patch;
pub mod pdb;
pub mod protobuf;
pub mod recreate;
pub mod request_log;
pub mod resource;
pub mod scheduler;
pub mod selector;
pub mod served_api;
pub mod server;
pub mod store;
pub mod table;
pub mod tls;
pub mod world;

pub use clock::TimeBase;
pub use error::ApiError;
pub use faults::{ApiFault, ApiFaults, FaultTarget, PlannedApiFault};
pub use request_log::RequestRecord;
pub use served_api::ServedApi;
pub use server::{ServerConfig, WriteRecord};
pub use store::StoreLimits;
pub use tls::{Credentials, Security};
pub use world::{ServeError, ServeOptions, ServeSource, Served, StatusLine, kubeconfig, secure_kubeconfig};
