//! A reference model of nodewarden's controller rules and the harness that
//! runs it side by side with the real engine.
//!
//! - [`model`]: the upstream rules as one plain struct, no ECS, no
//!   performance concern, written from `docs/upstream.md` and
//!   `docs/semantics.md`.
//! - [`tolerations`] and [`model::queue`]: plain toleration matching and
//!   rate-limited queue, the references for the `tolerations` and
//!   `rate_queue` fuzz targets.
//! - [`driver`]: `Arbitrary` steps applied to two simulated clusters, one
//!   driven by the engine (checked by the shared invariants), one by the
//!   model, compared after every instant ([`compare`]).
//!
//! The `engine_steps` fuzz target and this crate's property tests both run
//! [`driver::Harness`]. See `docs/fuzzing.md`.

mod compare;
pub mod driver;
pub mod model;
mod sched;
pub mod tolerations;

pub use driver::{Checks, Failure, Harness, Plan, Setup, Stats, Step};
pub use model::ReferenceModel;
