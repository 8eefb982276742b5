//! The engine facade: owns the World, the Schedule and the two channels.

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{IntoScheduleConfigs, Schedule};
use crossbeam_channel::{Receiver, Sender};
use nodewarden_model::{ConfigError, ControllerConfig, Timestamp, ZoneKey};

use crate::components::Zone;
use crate::resources::*;
use crate::systems::{disruption, eviction, health, legacy, node_handlers, pods, tainting};
use crate::{Action, Observation, ingest};

/// A zone's disruption state (`ComputeZoneState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneState {
    /// Seen for the first time in this pass.
    Initial,
    /// Healthy enough: tainted at `node-eviction-rate`.
    Normal,
    /// Many nodes down: secondary rate, or 0 in small zones.
    PartialDisruption,
    /// No ready node at all.
    FullDisruption,
}

impl ZoneState {
    /// The spelling used in scenario files, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::PartialDisruption => "PartialDisruption",
            ZoneState::FullDisruption => "FullDisruption",
        }
    }
}

/// A zone as the engine sees it, for replay expectations and status output.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneReport {
    /// The zone.
    pub key: ZoneKey,
    /// Its state after the last monitor pass; `None` when it has none (a
    /// zone made only of excluded nodes, or one whose nodes all left).
    pub state: Option<ZoneState>,
    /// QPS of its current limiter (tainting queue, or eviction queue in
    /// legacy mode); 0 while paused.
    pub rate: f64,
    /// Nodes counted in the zone at the last pass (excluded nodes are not).
    pub size: usize,
    /// Counted nodes whose Ready condition was not True at the last pass.
    pub not_ready: usize,
    /// Nodes waiting in the zone's queue.
    pub queued: usize,
}

/// One phase of a tick: a schedule and when it is due.
struct Phase {
    name: &'static str,
    due: fn(&LoopTimers, &ControllerConfig) -> bool,
    schedule: Schedule,
}

/// How long one phase of a tick took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseTiming {
    /// The phase: `ingest`, `pod_assignment`, `health_monitor`,
    /// `node_handlers`, `tainting_pass`, `legacy_eviction_pass` or
    /// `taint_manager`.
    pub phase: &'static str,
    /// Wall time it took.
    pub took: std::time::Duration,
}

/// The node lifecycle controller's core. Single-threaded and
/// deterministic: the driver calls [`Engine::tick`] with the time, the
/// engine reads its observations, runs the loops that are due and sends
/// its actions.
pub struct Engine {
    world: World,
    /// The tick's phases, in order, each its own schedule so it can be timed.
    phases: Vec<Phase>,
    /// Reads a clock for duration metrics only; decisions never see it.
    stopwatch: Option<fn() -> std::time::Instant>,
    /// How long each phase took in the last tick (when a clock was lent).
    timings: Vec<PhaseTiming>,
    observations: Receiver<Observation>,
    actions: Sender<Action>,
    last_tick: Option<Timestamp>,
}

impl Engine {
    /// An engine that starts at `start` (its first monitor pass runs at the
    /// first tick at or after `start`), reading `observations` and sending
    /// to `actions`. Refuses a configuration that cannot work.
    pub fn new(
        config: ControllerConfig,
        start: Timestamp,
        observations: Receiver<Observation>,
        actions: Sender<Action>,
    ) -> Result<Engine, ConfigError> {
        config.validate()?;
        let mut world = World::new();
        world.insert_resource(Settings(config));
        world.insert_resource(Now(start));
        world.insert_resource(LoopTimers {
            start,
            next_monitor: start,
            next_tainting: start,
            monitor_now: false,
            tainting_now: false,
        });
        world.init_resource::<NodeIndex>();
        world.init_resource::<PodIndex>();
        world.init_resource::<ZoneIndex>();
        world.init_resource::<OrphanLeases>();
        world.init_resource::<PassScratch>();
        world.init_resource::<ChangedNodes>();
        world.init_resource::<TaintManagerInbox>();
        world.init_resource::<AssignedPods>();
        world.init_resource::<DeletionTimers>();
        world.init_resource::<DisruptionMode>();
        world.init_resource::<Outbox>();

        let phase = |name, due: fn(&LoopTimers, &ControllerConfig) -> bool, schedule| Phase { name, due, schedule };
        let single = |system: bevy_ecs::schedule::ScheduleConfigs<bevy_ecs::system::ScheduleSystem>| {
            let mut s = Schedule::default();
            s.add_systems(system);
            s
        };
        let always = |_: &LoopTimers, _: &ControllerConfig| true;
        let phases = vec![
            phase("pod_assignment", always, single(pods::pod_assignment.into_configs())),
            phase(
                "health_monitor",
                |t, _| t.monitor_now,
                single((health::update_node_health, health::decide, disruption::handle_disruption).chain()),
            ),
            phase("node_handlers", always, single(node_handlers::noschedule_and_labels.into_configs())),
            phase(
                "tainting_pass",
                |t, c| t.tainting_now && c.enable_taint_manager,
                single(tainting::tainting_pass.into_configs()),
            ),
            phase(
                "legacy_eviction_pass",
                |t, c| t.tainting_now && !c.enable_taint_manager,
                single(legacy::eviction_pass.into_configs()),
            ),
            phase("taint_manager", |_, c| c.enable_taint_manager, single(eviction::taint_manager.into_configs())),
        ];
        Ok(Engine { world, phases, stopwatch: None, timings: Vec::new(), observations, actions, last_tick: None })
    }

    /// A new engine with its own channels: send observations on the first,
    /// receive actions on the second.
    pub fn with_channels(
        config: ControllerConfig,
        start: Timestamp,
    ) -> Result<(Engine, Sender<Observation>, crossbeam_channel::Receiver<Action>), ConfigError> {
        let (obs_tx, obs_rx) = crossbeam_channel::unbounded();
        let (act_tx, act_rx) = crossbeam_channel::unbounded();
        Ok((Engine::new(config, start, obs_rx, act_tx)?, obs_tx, act_rx))
    }

    /// Drains the pending observations, then runs every loop due at `now`,
    /// in a fixed order: pod assignment (event handlers see events before
    /// the periodic loops do), health monitor (with zone disruption
    /// handling), NoSchedule taints and labels, the NoExecute tainting
    /// (or legacy eviction) pass, and the taint manager. A loop that missed
    /// several periods runs once. `now` earlier than the previous tick is
    /// treated as the previous tick's time.
    pub fn tick(&mut self, now: Timestamp) {
        let now = match self.last_tick {
            Some(last) if now < last => {
                tracing::warn!(%now, %last, "clock went backwards; holding it at the last tick");
                last
            }
            _ => now,
        };
        self.last_tick = Some(now);
        self.world.resource_mut::<Now>().0 = now;
        self.timings.clear();
        let started = self.stopwatch.map(|now| now());
        while let Ok(obs) = self.observations.try_recv() {
            ingest::apply(&mut self.world, obs);
        }
        if let (Some(clock), Some(started)) = (self.stopwatch, started) {
            self.timings.push(PhaseTiming { phase: "ingest", took: clock().duration_since(started) });
        }
        let period = self.world.resource::<Settings>().0.node_monitor_period;
        {
            let mut t = self.world.resource_mut::<LoopTimers>();
            t.monitor_now = now >= t.next_monitor;
            t.tainting_now = now >= t.next_tainting;
        }
        let timers = *self.world.resource::<LoopTimers>();
        let config = self.world.resource::<Settings>().0.clone();
        for phase in &mut self.phases {
            if !(phase.due)(&timers, &config) {
                continue;
            }
            let started = self.stopwatch.map(|now| now());
            phase.schedule.run(&mut self.world);
            if let (Some(clock), Some(started)) = (self.stopwatch, started) {
                let took = clock().duration_since(started);
                if phase.name == "health_monitor" {
                    metrics::histogram!("node_collector_update_all_nodes_health_duration_seconds")
                        .record(took.as_secs_f64());
                }
                self.timings.push(PhaseTiming { phase: phase.name, took });
            }
        }
        {
            let mut t = self.world.resource_mut::<LoopTimers>();
            let start = t.start;
            if t.monitor_now {
                t.next_monitor =
                    LoopTimers::grid_at_or_after(start, period, now + nodewarden_model::Span::from_nanos(1));
            }
            if t.tainting_now {
                t.next_tainting =
                    LoopTimers::grid_at_or_after(start, TAINTING_PERIOD, now + nodewarden_model::Span::from_nanos(1));
            }
            t.monitor_now = false;
            t.tainting_now = false;
        }
        self.world.clear_trackers();
        let ready = std::mem::take(&mut self.world.resource_mut::<Outbox>().ready);
        for action in ready {
            if self.actions.send(action).is_err() {
                tracing::error!("action receiver dropped; actions are being lost");
                break;
            }
        }
    }

    /// Lets the engine time its phases with `clock`: it records
    /// `node_collector_update_all_nodes_health_duration_seconds` and keeps
    /// each phase's duration for [`Engine::last_tick_timings`]. The clock is
    /// read for those figures only, never for a decision, so replay stays
    /// deterministic with or without it.
    pub fn measure_with(&mut self, clock: fn() -> std::time::Instant) {
        self.stopwatch = Some(clock);
    }

    /// How long each phase that ran in the last tick took, in order (empty
    /// unless [`Engine::measure_with`] lent a clock).
    pub fn last_tick_timings(&self) -> &[PhaseTiming] {
        &self.timings
    }

    /// The phase names, in the order a tick runs them.
    pub fn phase_names(&self) -> Vec<&'static str> {
        std::iter::once("ingest").chain(self.phases.iter().map(|p| p.name)).collect()
    }

    /// Entities in the World: nodes, pods and zones (for load reports).
    pub fn entities(&self) -> usize {
        self.world.entities().len() as usize
    }

    /// The earliest time at which some loop has work: the next monitor
    /// pass, the next tainting pass if a queue holds nodes, the next
    /// deletion deadline. Drivers on a virtual clock tick at least then (and
    /// whenever observations arrive); it may be early, never late.
    pub fn next_due(&self) -> Timestamp {
        let t = self.world.resource::<LoopTimers>();
        let mut due = t.next_monitor;
        let index = self.world.resource::<ZoneIndex>();
        for &z in &index.by_slot {
            if let Some(zone) = self.world.get::<Zone>(z)
                && let Some(q) = zone.queue.next_due()
            {
                let at = LoopTimers::grid_at_or_after(t.start, TAINTING_PERIOD, q.max(t.next_tainting));
                due = due.min(at);
            }
        }
        if let Some(d) = self.world.resource::<DeletionTimers>().next_due() {
            due = due.min(d.max(self.last_tick.unwrap_or(t.start)));
        }
        due
    }

    /// Every zone the engine knows, sorted by key.
    pub fn zones(&self) -> Vec<ZoneReport> {
        let index = self.world.resource::<ZoneIndex>();
        let mut out: Vec<ZoneReport> = index
            .by_slot
            .iter()
            .filter_map(|&z| self.world.get::<Zone>(z))
            .map(|z| ZoneReport {
                key: z.key.clone(),
                state: z.state,
                rate: z.queue.qps(),
                size: z.size,
                not_ready: z.not_ready,
                queued: z.queue.len(),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Whether every zone was fully disrupted at the last monitor pass
    /// (no tainting, no eviction).
    pub fn all_zones_down(&self) -> bool {
        self.world.resource::<DisruptionMode>().all_zones_down
    }

    /// Writes issued and not yet reported finished.
    pub fn writes_in_flight(&self) -> usize {
        self.world.resource::<Outbox>().in_flight()
    }
}
