//! nodewarden's engine: the node lifecycle controller's decisions, as a
//! deterministic function of observations and virtual time.
//!
//! Nodes, pods and zones are bevy_ecs entities; one system per upstream
//! concern runs in a fixed order each [`Engine::tick`]. The engine does no
//! I/O, reads no clock and spawns no thread: [`Observation`]s are handed in
//! with [`Engine::observe`], [`Action`]s come back from [`Engine::tick`], and
//! `now` is an argument. Channels and threads belong to the driver. The same
//! inputs at the same times give the same actions, which is what replay,
//! fuzzing and the load tests rely on.
//!
//! # Public surface
//!
//! Only the boundary is public: the [`Engine`] facade, what goes in
//! ([`Observation`] and its snapshot types), what comes out ([`Action`] and
//! the types it carries, [`Explanation`] and the [`explain`] types it
//! exposes), why a write did not go out ([`Withdrawal`]), what it
//! concluded when a shadow asks ([`Judgement`]), and what the engine
//! reports about itself ([`ZoneReport`], the [`PhaseTiming`] of each
//! [`TickPhase`]). Components, resources, systems and ingest are the
//! engine's own business and may change shape at any time.
//!
//! The cargo feature `internals` additionally exposes `internals`: not a
//! stable API; for benches and fuzzing.

mod action;
mod components;
mod engine;
pub mod explain;
mod ingest;
mod judgement;
mod metric_names;
mod monitor;
mod observation;
mod queue;
mod reschedule;
mod resources;
mod send_check;
mod systems;
mod withdrawal;

pub use action::{Action, ActionId, ActionKind, DISRUPTION_TARGET_TAKEN_BACK, Event, EventType, ObjectRef, WriteSlot};
pub use engine::{Engine, PhaseTiming, TickPhase, ZoneReport};
pub use explain::{AddonEviction, Explanation, PreparationTier};
pub use judgement::{Judged, Judgement};
pub use observation::{BudgetSnapshot, NodeSnapshot, ObjectKind, Observation, PodSnapshot, WriteOutcome};
pub use withdrawal::{Changed, Withdrawal};
// Defined in nodewarden_model (shared with the simulator and the reference
// model); re-exported so `nodewarden_engine::{PodKey, ZoneState}` keep working.
pub use nodewarden_model::{PodKey, ZoneState};

/// Not a stable API; for benches and fuzzing. Pieces of the engine that
/// have their own properties worth hammering on in isolation (the fuzz
/// target `rate_queue` checks the queue against the reference model). Only
/// built with the cargo feature `internals`; nothing outside `fuzz/` and the
/// engine's own benches should turn it on.
#[cfg(feature = "internals")]
pub mod internals {
    pub use crate::queue::{Attempt, RateLimitedTimedQueue};
}
