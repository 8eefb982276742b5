//! The phases of a tick, by name: what a driver's timings and reports are
//! keyed by.
//!
//! A driver that reports where a tick's time goes (the simulator's
//! statistics, the load tests, the benches) picks phases out of
//! [`Engine::last_tick_timings`](crate::engine::Engine::last_tick_timings).
//! Named by strings, a misspelt or renamed phase was silently never
//! found; named by this enum, the compiler finds it. The snake_case names
//! stay what reports and JSON keys (`sim --json`'s `phase_ms`) show.

use std::fmt::{self, Display};

/// One phase of a tick, in the order a tick runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TickPhase {
    /// Taking in the observations handed in since the last tick; a driver
    /// that has the engine take some in beforehand
    /// ([`Engine::absorb`](crate::engine::Engine::absorb)) adds that time
    /// to it.
    Ingest,
    /// Pods newly bound to nodes already judged (upstream's
    /// `processPod`): marked not ready, or deleted at once in legacy mode.
    PodAssignment,
    /// The health monitor's pass: node health, the verdicts and what the
    /// eviction mode makes of them, the zones' disruption states.
    HealthMonitor,
    /// The NoSchedule taints and labels that follow a node's conditions.
    NodeHandlers,
    /// The tainting pass (taint-based eviction): NoExecute taints through
    /// the zones' rate limiters.
    TaintingPass,
    /// The legacy eviction pass: nodes' pods deleted through the zones'
    /// rate limiters.
    LegacyEvictionPass,
    /// The taint manager: pod deletions for untolerated NoExecute taints.
    TaintManager,
    /// The critical-addon rescheduler.
    Rescheduler,
}

impl TickPhase {
    /// The phase's snake_case name, as reports and JSON keys show it.
    pub fn name(self) -> &'static str {
        match self {
            TickPhase::Ingest => "ingest",
            TickPhase::PodAssignment => "pod_assignment",
            TickPhase::HealthMonitor => "health_monitor",
            TickPhase::NodeHandlers => "node_handlers",
            TickPhase::TaintingPass => "tainting_pass",
            TickPhase::LegacyEvictionPass => "legacy_eviction_pass",
            TickPhase::TaintManager => "taint_manager",
            TickPhase::Rescheduler => "rescheduler",
        }
    }
}

impl Display for TickPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How long one phase of a tick took, as measured with the clock lent by
/// [`Engine::measure_with`](crate::engine::Engine::measure_with). Public
/// so a driver can report where a tick's time goes (the load tests'
/// per-phase figures) without reaching inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseTiming {
    /// The phase.
    pub phase: TickPhase,
    /// Wall time it took.
    pub took: std::time::Duration,
}
