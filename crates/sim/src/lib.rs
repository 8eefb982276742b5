//! A simulated Kubernetes cluster and the scenario format that drives
//! nodewarden's engine on a virtual clock.
//!
//! A scenario (`docs/scenarios.md`, a public contract) describes a cluster, a
//! timeline of what happens to it and what the controller must have done by
//! given times. [`parse_scenario`] reads and validates one; [`replay`]
//! runs the real engine against a [`Cluster`] with simulated kubelets and
//! admission defaults, and reports every controller write, every zone change
//! and every expectation's result as JSON lines ([`Record`]).
//!
//! [`Simulation`] is the live counterpart behind `nodewarden sim` and
//! `cargo xtask load`: a generated fleet ([`fleet`]) or a scenario file's
//! cluster, kubelets heartbeating with jitter, a fault plan ([`FaultPlan`],
//! [`builtin`]), the engine stepped on its 100 ms grid through the same
//! [`Controller`](nodewarden_controller::Controller) loop and safety
//! interlock, and the figures rendered by [`report`].
//!
//! The simulator knows the engine only through its boundary: it sends
//! [`Observation`](nodewarden_engine::Observation)s and applies
//! [`Action`](nodewarden_engine::Action)s as an API server would.

// Public modules: each is a surface of its own that other crates name by
// path. Everything else is private behind the re-exports below, so an item
// no crate uses warns as dead.
pub mod builtin;
pub mod cluster;
pub mod fleet;
pub mod report;
pub mod rules;
pub mod scenario;
pub mod scheduler;
pub mod wire;

mod addons;
mod admission;
mod due;
mod error;
mod expect;
mod faults;
mod kubelet;
mod output;
mod prepared;
mod rng;
mod runner;
mod simulation;
mod statistics;
mod validate;

pub use admission::AdmissionDefaults;
pub use builtin::{Builtin, UnknownScenario};
pub use cluster::{Applied, Cluster, RecordedEvent, SimPod};
pub use error::{Location, ScenarioError};
pub use expect::{Observed, evaluate};
pub use faults::{Fault, FaultPlan};
pub use kubelet::{KubeletApi, KubeletTiming, Kubelets, NodeHandle};
pub use output::{ActionRecord, ExpectRecord, Record, Summary, ViolationRecord, ZoneRecord};
pub use prepared::{PodChange, PodChangeKind, Prepared};
pub use runner::{ReplayError, ReplayOptions, ReplayOutcome, replay, replay_to_writer, replay_with};
pub use scenario::{EventAction, EventEntry, Expectation, NodeSpec, PodSpec, Scenario, Subject};
pub use simulation::{Outcome, SimError, SimOptions, Simulation, Source};
pub use validate::{load_scenario, parse_scenario, validate};
pub use wire::{ApiLatency, SpanRange, Wire};

/// What a second back end needs beyond the facade: the served cluster
/// (`nodewarden-apiserver`) builds a scenario's addons, and the nodes and
/// pods a scenario event adds, with the simulated cluster's own
/// constructors, so both back ends start from the same objects and add
/// them alike.
pub mod served {
    pub use crate::addons::build as build_addons;
    pub use crate::cluster::{node_from_spec, pod_from_spec};
}
