//! nodewarden's engine: the node lifecycle controller's decisions, as a
//! deterministic function of observations and virtual time.
//!
//! Nodes, pods and zones are bevy_ecs entities; one system per upstream
//! concern runs in a fixed order each [`Engine::tick`]. The engine does no
//! I/O, reads no clock and spawns no thread: [`Observation`]s come in on one
//! crossbeam channel, [`Action`]s go out on another, and `now` is an
//! argument. The same inputs at the same times give the same actions, which
//! is what replay, fuzzing and the load tests rely on.

pub mod action;
pub mod components;
mod engine;
pub mod explain;
mod ingest;
pub mod observation;
pub mod queue;
pub mod resources;
pub mod systems;

pub use action::{Action, ActionId, ActionKind, Event, EventType, ObjectRef, WriteSlot};
pub use engine::{Engine, PhaseTiming, ZoneReport, ZoneState};
pub use explain::Explanation;
pub use observation::{NodeSnapshot, Observation, PodKey, PodSnapshot, WriteOutcome};
