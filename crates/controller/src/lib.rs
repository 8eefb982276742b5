//! The one loop that drives nodewarden's engine, whatever is on the other
//! side: the in-memory cluster of replay and `nodewarden sim`, the
//! reference harness of the fuzzers, and (next) a real API server.
//!
//! A [`Controller`] owns an [`Engine`](nodewarden_engine::Engine) and an
//! [`InvariantChecker`]. Each [`Controller::step`] ticks the engine, judges
//! every action it issued against the safety invariants, holds back any
//! action that would break one (the **safety interlock**: logged with its
//! explanation, counted in a metric, reported to the engine as a refused
//! write), hands the rest to a [`ClusterApi`], feeds what the API answered
//! back, and ticks again within the same instant when a write was refused
//! with fresh state, a bounded number of times. Every write is judged
//! again when it is sent ([`Controller::still_true`]): by a back end that
//! sends it later, as it goes out; by the step, for one that sends it at
//! once ([`ClusterApi::sends_at_once`]).
//!
//! The order writes go out in is here too ([`write_order`]): the queue
//! and the client's token buckets, shared by every back end that sends
//! under a client rate.
//!
//! This crate knows neither the scenario format nor Kubernetes types: the
//! back end turns actions into writes and answers in
//! [`Observation`](nodewarden_engine::Observation)s.

mod api;
mod control_loop;
#[cfg(test)]
mod fixtures;
pub mod invariants;
pub mod write_order;

pub use api::{Applied, ClusterApi};
pub use control_loop::{
    CheckerFeed, Controller, EngineFeed, Handled, INTERLOCK_METRIC, MAX_ANSWER_ROUNDS, StepEvent, StepSummary,
    WAKE_LAG, WITHDRAWN_METRIC, late_pass,
};
pub use invariants::{Invariant, InvariantChecker, Violation};
