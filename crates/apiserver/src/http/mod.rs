//! The HTTP layer: the Kubernetes REST and watch protocol over HTTP/1.1
//! (TLS and a bearer token by default), on top of the served cluster.
//!
//! Its concern is the wire: listening, authentication, routing, media
//! types, request bodies and query parameters, `Status` answers, tables,
//! discovery and OpenAPI documents. What a request does to the cluster is
//! the domain's (`crate::cluster`, `crate::store`, `crate::pdb`,
//! `crate::binding`, `crate::admission`).
//!
//! Invariant: this layer depends on the domain and never the reverse: no
//! module outside `http` names anything in it but the composition root
//! (`crate::served`, which starts it) and the crate's facade. A refusal
//! from the domain is answered here, with the code and body upstream
//! gives it.

mod events;
mod objects;
mod openapi;
mod openapi_v2;
mod patch;
mod protobuf;
mod reads;
mod request;
mod request_log;
mod response;
mod route;
mod server;
mod state;
mod subresources;
mod table;
pub(crate) mod tls;
mod watch;
mod writes;

pub use request_log::RequestRecord;
pub(crate) use server::serve;
pub(crate) use state::HttpState;
pub use state::{ServerConfig, WriteRecord};
pub(crate) use tls::Credentials;
pub use tls::{Security, TlsError, check_san};
