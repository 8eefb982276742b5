//! A simulated Kubernetes cluster, and the scenario format that describes
//! one.
//!
//! A scenario (`docs/scenarios.md`, a public contract) describes a cluster,
//! a timeline of what happens to it and what the controller must have done
//! by given times; [`parse_scenario`] reads and validates one. This crate
//! is the world such a file describes, without the controller: a
//! [`Cluster`] that stores Nodes, Leases, pods and budgets and applies the
//! engine's [`Action`](nodewarden_engine::Action)s by the cluster's own
//! rules ([`rules`]), simulated kubelets ([`Kubelets`]), the admission
//! defaults, a simulated kube-scheduler ([`scheduler`]), a generated
//! fleet ([`fleet`]), the faults that befall it ([`FaultPlan`],
//! [`builtin`]) and an API server with latency between the controller and
//! the cluster ([`latency`]).
//!
//! It is its own crate so that what only needs a cluster (the served
//! cluster of `nodewarden-apiserver`, the reference model, the wire and
//! chaos harnesses) does not depend on the simulation of the controller on
//! it (`nodewarden-sim`: replay, the live simulation, its figures and
//! reports).

// Public modules: each is a surface that the simulation or another crate
// names by path. The seeded generator and the timing wheel are this
// crate's own.
pub mod addons;
pub mod admission;
pub mod builtin;
pub mod cluster;
pub mod error;
pub mod faults;
pub mod fleet;
pub mod kubelet;
pub mod latency;
pub mod rules;
pub mod scenario;
pub mod scheduler;
pub mod validate;

mod due;
mod rng;

pub use admission::AdmissionDefaults;
pub use builtin::{Builtin, UnknownScenario};
pub use cluster::{Applied, Cluster, RecordedEvent, SimPod};
pub use error::{Location, ScenarioError};
pub use faults::{Fault, FaultPlan};
pub use kubelet::{KubeletApi, KubeletTiming, Kubelets, NodeHandle};
pub use latency::{ApiLatency, SlowApi, SpanRange};
pub use scenario::{EventAction, EventEntry, Expectation, NodeSpec, PodSpec, Scenario, Subject};
pub use validate::{load_scenario, parse_scenario, validate};

/// What a second back end needs beyond the facade: the served cluster
/// (`nodewarden-apiserver`) builds a scenario's addons, and the nodes and
/// pods a scenario event adds, with the simulated cluster's own
/// constructors, so both back ends start from the same objects and add
/// them alike.
pub mod served {
    pub use crate::addons::build as build_addons;
    pub use crate::cluster::{node_from_spec, pod_from_spec};
}
