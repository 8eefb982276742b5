//! The simulation of nodewarden's controller on a simulated cluster
//! (`nodewarden-cluster`), on a virtual clock.
//!
//! A scenario (`docs/scenarios.md`, a public contract) describes a cluster, a
//! timeline of what happens to it and what the controller must have done by
//! given times; `nodewarden_cluster::parse_scenario` reads and validates
//! one. [`replay`] runs the real engine against the scenario's
//! [`Cluster`](nodewarden_cluster::Cluster) with simulated kubelets and
//! admission defaults, and reports every controller write, every zone change
//! and every expectation's result as JSON lines ([`Record`]).
//!
//! [`Simulation`] is the live counterpart behind `nodewarden sim` and
//! `cargo xtask load`: a generated fleet (`nodewarden_cluster::fleet`) or a
//! scenario file's cluster, kubelets heartbeating with jitter, a fault plan
//! (`nodewarden_cluster::FaultPlan`, the built-in scenarios), the engine
//! stepped on its 100 ms grid through the same
//! [`Controller`](nodewarden_controller::Controller) loop and safety
//! interlock, and the figures rendered by [`report`].
//!
//! The simulator knows the engine only through its boundary: it sends
//! [`Observation`](nodewarden_engine::Observation)s and applies
//! [`Action`](nodewarden_engine::Action)s as an API server would.

// Public modules: each is a surface of its own that other crates name by
// path. Everything else is private behind the re-exports below, so an item
// no crate uses warns as dead.
pub mod report;

mod expect;
mod output;
mod prepared;
mod runner;
mod simulation;
mod statistics;

pub use expect::{Observed, evaluate};
pub use output::{ActionRecord, ExpectRecord, Record, Summary, ViolationRecord, ZoneRecord};
pub use prepared::{PodChange, PodChangeKind, Prepared};
pub use runner::{ReplayError, ReplayOptions, ReplayOutcome, replay, replay_to_writer, replay_with};
pub use simulation::{Outcome, SimError, SimOptions, Simulation, Source};
