//! The live simulation behind `nodewarden sim` and `cargo xtask load`: the
//! real engine on a virtual clock against a [`Cluster`] of generated nodes
//! (or a scenario file's), with heartbeating kubelets and a fault plan.
//!
//! Time moves in steps on the engine's 100 ms tainting grid: each step
//! goes to the earliest of the next kubelet renewal or post, the next
//! fault and the engine's next due time, rounded up to the grid (the
//! engine's own deadlines are kept exactly). At each step `t`:
//!
//! 1. faults due by `t` are applied;
//! 2. every kubelet renewal and post due by `t` lands in the cluster, each
//!    at its own instant (so Lease renew times keep their jitter); then
//!    the cluster's housekeeping (graceful deletions ending, the simulated
//!    scheduler, budget status), which does nothing unless the scenario
//!    runs the scheduler or the rescheduler, or has budgets;
//! 3. what the watches deliver is sent to the engine, unless the control
//!    plane is unreachable (then nothing is; once it is back, the engine
//!    gets the whole cluster again, as a relist);
//! 4. one step of the [`Controller`] loop at `t`, as in replay: the engine
//!    ticks (timed per phase when measuring), the safety interlock judges
//!    each action, the rest land on the cluster (or, while the control
//!    plane is unreachable, fail with no echo) and their feedback goes back;
//!    a refused write makes the engine tick again at `t`; then
//!    housekeeping again, so room the controller made is used at once.
//!
//! With API latency ([`SimOptions::api`]; the built-in scenarios default
//! to [`ApiLatency::REALISTIC`]) the controller and the cluster talk
//! through a [`Wire`]: what steps 1 and 2 change goes on the watch, and
//! before step 4 the writes due land (their answers reach the controller)
//! and the watch events due are delivered; the steps also stop, on the
//! grid, where something lands or arrives. The kubelets then run on the
//! step's own thread.
//!
//! The figures are gathered by [`crate::statistics`]. The run is
//! deterministic for a given seed: nothing here reads the wall clock except
//! to time the engine's ticks.

use std::collections::BTreeMap;
use std::time::Instant;

use nodewarden_controller::{Applied, ClusterApi, Controller, Invariant, StepEvent};
use nodewarden_engine::{Action, ActionKind, INGEST_PHASE, Observation, WriteOutcome, ZoneReport};
use nodewarden_model::{ControllerConfig, Span, Timestamp};

use crate::addons::{self, AddonTracker};
use crate::admission::AdmissionDefaults;
use crate::builtin::Builtin;
use crate::cluster::Cluster;
use crate::faults::{Fault, FaultPlan, apply_event};
use crate::fleet::{self, FleetSpec, LEASE_JITTER};
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::scenario::{EventAction, Scenario};
use crate::statistics::Statistics;
pub use crate::statistics::{Latencies, Outcome, Progress, SlowPass, TickCosts, ZoneSample, ZoneTally};
use crate::wire::{ApiLatency, Wire, Wired};

/// The engine's tainting grid: steps land on it.
pub const STEP: Span = Span::from_millis(100);

/// The reason a write fails while the control plane is unreachable.
pub const UNREACHABLE: &str = "the API server cannot be reached";

/// What to simulate.
#[derive(Clone, Debug)]
pub enum Source {
    /// A built-in scenario over a generated fleet.
    Builtin(Builtin, FleetSpec),
    /// A scenario file: its nodes, pods, configuration and events.
    File(Box<Scenario>),
    /// A cluster and fault plan built by the caller (a real cluster's
    /// snapshot); the options' configuration applies.
    Prepared(Box<crate::prepared::Prepared>),
}

/// A simulation's settings.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// What to simulate.
    pub source: Source,
    /// The controller's flags (a scenario file brings its own).
    pub config: ControllerConfig,
    /// Simulated time; `None` = the scenario's own.
    pub duration: Option<Span>,
    /// Seed for phases, pod mix and node choice.
    pub seed: u64,
    /// Time each engine tick and phase (reads the wall clock, for figures
    /// only; the outcome does not change).
    pub measure: bool,
    /// The API's latency; `None`: the source's own (a scenario file's
    /// `cluster.api`, realistic for the built-in scenarios and what-if).
    pub api: Option<ApiLatency>,
}

/// Why a simulation could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The fleet's shape cannot work.
    #[error("{0}")]
    Fleet(String),
    /// The engine refused the configuration.
    #[error("the engine refused the configuration: {0}")]
    Config(#[from] nodewarden_model::ConfigError),
    /// The scenario file is not valid.
    #[error("invalid scenario: {0}")]
    Scenario(#[from] crate::error::ScenarioError),
}

/// A running simulation. Drive it with [`Simulation::step`] until it
/// returns false, then take the [`Outcome`] with [`Simulation::finish`].
pub struct Simulation {
    name: String,
    description: String,
    config: ControllerConfig,
    admission: AdmissionDefaults,
    timing: KubeletTiming,
    measure: bool,
    cluster: Cluster,
    kubelets: Kubelets,
    /// The engine behind its safety interlock, from the first step.
    controller: Option<Controller>,
    plan: FaultPlan,
    next_fault: usize,
    now: Timestamp,
    end: Timestamp,
    started: bool,
    control_plane_down: bool,
    relist: bool,
    /// The figures gathered so far.
    stats: Statistics,
    /// The controller's pod writes that took effect, when asked for
    /// ([`Simulation::record_pod_changes`]).
    pod_log: Option<Vec<crate::prepared::PodChange>>,
    /// The critical addons followed (none unless the cluster keeps
    /// scheduling data).
    addons: AddonTracker,
    /// What the kubelets and housekeeping deliver in a step (kept for its
    /// buffer: a thousand observations a step at 100k nodes).
    delivered: Vec<Observation>,
    /// Kubelet count from which steps are pipelined ([`PIPELINE_FROM`];
    /// tests lower it to compare both ways).
    pipeline_from: usize,
    /// Wall time the engine spent taking in observations beside the
    /// kubelets this step, when measured; counted in the step's first
    /// tick.
    absorbed: std::time::Duration,
    /// The API between the controller and the cluster (bypassed when
    /// instant).
    wire: Wire,
}

/// From this many kubelets on, a step runs them on a second thread beside
/// the controller's ingest ([`Simulation::kubelets_beside_controller`]):
/// below it a step's renewals are too few to pay for starting the thread.
const PIPELINE_FROM: usize = 2_000;

/// How many observations the kubelets' thread gathers before handing them
/// over: small enough that the engine starts early in the step, large
/// enough that the hand-over costs nothing next to the work.
const CHUNK: usize = 128;

/// The smallest grid instant at or after `t`.
fn ceil_step(t: Timestamp) -> Timestamp {
    let step = STEP.as_nanos();
    let n = t.as_nanos();
    Timestamp::from_nanos(n.div_euclid(step) * step + if n.rem_euclid(step) == 0 { 0 } else { step })
}

/// What one engine tick of a step showed, kept until the step is over
/// (the statistics are lent to the API side meanwhile).
struct TickFigures {
    /// Wall time of the tick, when measured, in nanoseconds.
    took: Option<u64>,
    /// Wall time of each phase that ran, in nanoseconds.
    phases: Vec<(&'static str, u64)>,
    /// The zones right after the tick.
    zones: Vec<ZoneReport>,
    /// Actions the tick issued.
    actions: usize,
}

/// The simulated API server as the controller sees it: the cluster, with
/// the run's figures taken as each action lands, and no answer at all
/// while the control plane is unreachable.
struct SimApi<'a> {
    cluster: &'a mut Cluster,
    stats: &'a mut Statistics,
    addons: &'a mut AddonTracker,
    control_plane_down: bool,
    pod_log: Option<&'a mut Vec<crate::prepared::PodChange>>,
}

impl ClusterApi for SimApi<'_> {
    fn read(&mut self, object: &nodewarden_engine::ObjectRef) -> Vec<Observation> {
        if self.control_plane_down { Vec::new() } else { self.cluster.read(object) }
    }

    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        if self.control_plane_down {
            // Events are lost; a write fails on the controller's own
            // client, with no object to re-send.
            if action.kind.slot().is_none() {
                return Applied::default();
            }
            self.stats.writes_failed += 1;
            let failed = WriteOutcome::Failed(UNREACHABLE.to_string());
            return Applied {
                observations: vec![Observation::WriteFinished { id: action.id, outcome: failed.clone() }],
                outcome: Some(failed),
                violation: None,
            };
        }
        self.stats.track_before(now, action, self.cluster);
        let applied = self.cluster.apply_action(now, action);
        if let nodewarden_engine::ActionKind::EvictForAddon { why, .. } = &action.kind {
            self.addons.evicted(&why.addon, applied.outcome == Some(WriteOutcome::Done));
        }
        if let Some(WriteOutcome::Failed(_)) = &applied.outcome {
            self.stats.writes_failed += 1;
        } else {
            self.stats.track_after(now, action, self.cluster);
            if let Some(log) = &mut self.pod_log {
                use crate::prepared::{PodChange, PodChangeKind};
                let change = match &action.kind {
                    ActionKind::MarkPodNotReady { pod, .. } => Some((pod, PodChangeKind::NotReady)),
                    ActionKind::DeletePod { pod, .. } => Some((pod, PodChangeKind::Deleted)),
                    _ => None,
                };
                if let Some((pod, kind)) = change {
                    log.push(PodChange { at: now, pod: pod.clone(), kind });
                }
            }
        }
        applied
    }
}

impl Simulation {
    /// Builds the cluster and the fault plan; the engine starts at the
    /// first step (t=0).
    pub fn new(opts: SimOptions) -> Result<Simulation, SimError> {
        let latency = opts.api.unwrap_or(match &opts.source {
            Source::File(scenario) => scenario.cluster.api,
            Source::Builtin(..) | Source::Prepared(_) => ApiLatency::REALISTIC,
        });
        let (name, description, config, admission, timing, cluster, kubelets, plan, layout, end) = match opts.source {
            Source::Builtin(builtin, fleet) => {
                if fleet.nodes == 0 {
                    return Err(SimError::Fleet("--nodes must be at least 1".into()));
                }
                if fleet.zones == 0 || fleet.zones > fleet.nodes {
                    return Err(SimError::Fleet(format!(
                        "--zones must be between 1 and the number of nodes ({}), got {}",
                        fleet.nodes, fleet.zones
                    )));
                }
                opts.config.validate()?;
                let admission = AdmissionDefaults::default();
                let timing = KubeletTiming::default();
                let mut cluster = Cluster::new(admission);
                let mut kubelets = Kubelets::new(timing).with_jitter(LEASE_JITTER, opts.seed);
                let mut config = opts.config;
                let fleet = FleetSpec { seed: opts.seed, ..fleet };
                let layout = if builtin == Builtin::CriticalAddon {
                    // The scenario is about the rescheduler: it runs, and
                    // the cluster runs a scheduler.
                    config.enable_rescheduler = true;
                    cluster = cluster.with_scheduling(true, true);
                    addons::build(&fleet, &timing, &mut cluster, &mut kubelets)
                } else {
                    fleet::build(&fleet, &timing, &mut cluster, &mut kubelets)
                };
                let plan = builtin.plan(&layout, opts.seed);
                let duration = opts.duration.unwrap_or_else(|| builtin.default_duration(&layout));
                (
                    builtin.name().to_string(),
                    builtin.describe().to_string(),
                    config,
                    admission,
                    timing,
                    cluster,
                    kubelets,
                    plan,
                    Some(layout),
                    Timestamp::EPOCH + duration,
                )
            }
            Source::File(scenario) => {
                crate::validate::validate(&scenario)?;
                scenario.config.validate()?;
                let (cluster, kubelets) = Cluster::from_scenario(&scenario);
                let mut plan = FaultPlan::new();
                for e in &scenario.events {
                    let what = match &e.action {
                        EventAction::RestartController => "the controller restarts".to_string(),
                        EventAction::KubeletStop(n) => format!("kubelet-stop {}", n.join(", ")),
                        EventAction::KubeletStart(n) => format!("kubelet-start {}", n.join(", ")),
                        _ => String::new(),
                    };
                    let fault = match &e.action {
                        EventAction::RestartController => Fault::RestartController,
                        other => Fault::Event(other.clone()),
                    };
                    plan.add(Timestamp::EPOCH + e.at, fault, what);
                }
                let end = opts.duration.map_or_else(|| scenario.end(), |d| Timestamp::EPOCH + d);
                (
                    scenario.name.clone().unwrap_or_else(|| "scenario file".to_string()),
                    "a scenario file's cluster and events".to_string(),
                    scenario.config.clone(),
                    AdmissionDefaults::from(&scenario.cluster),
                    KubeletTiming::from(&scenario.cluster.kubelet),
                    cluster,
                    kubelets,
                    plan,
                    None,
                    end,
                )
            }
            Source::Prepared(p) => {
                opts.config.validate()?;
                let p = *p;
                let end = Timestamp::EPOCH + opts.duration.unwrap_or(p.duration);
                (p.name, p.description, opts.config, p.admission, p.timing, p.cluster, p.kubelets, p.plan, None, end)
            }
        };
        let mut sim = Simulation {
            name,
            description,
            config,
            admission,
            timing,
            measure: opts.measure,
            cluster,
            kubelets,
            controller: None,
            plan,
            next_fault: 0,
            now: Timestamp::EPOCH,
            end,
            started: false,
            control_plane_down: false,
            relist: false,
            stats: Statistics::default(),
            pod_log: None,
            addons: AddonTracker::default(),
            delivered: Vec::new(),
            pipeline_from: PIPELINE_FROM,
            absorbed: std::time::Duration::ZERO,
            wire: Wire::new(latency, opts.seed),
        };
        sim.addons = AddonTracker::new(&sim.cluster);
        sim.stats.index_nodes(layout.as_ref(), &sim.cluster);
        // A timeline of at most ~600 points, on whole multiples of 5 s.
        let total = (end - Timestamp::EPOCH).as_nanos().max(0);
        let every = (total / 600).div_euclid(5_000_000_000).saturating_add(1).saturating_mul(5_000_000_000);
        sim.stats.sample_every = Span::from_nanos(every);
        // Scenario events before t=0 shape the cluster before the start.
        while let Some(f) = sim.plan.faults().get(sim.next_fault).filter(|f| f.at < Timestamp::EPOCH).cloned() {
            sim.apply_fault(f.at, &f.fault);
            sim.next_fault += 1;
        }
        Ok(sim)
    }

    /// Keeps a log of the controller's pod writes that take effect (Ready
    /// set to False, deletions), for a per-workload report; off by default
    /// (it grows with every eviction).
    pub fn record_pod_changes(&mut self) {
        self.pod_log.get_or_insert_with(Vec::new);
    }

    /// The pod writes logged so far (see [`Simulation::record_pod_changes`]).
    pub fn take_pod_changes(&mut self) -> Vec<crate::prepared::PodChange> {
        self.pod_log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Virtual time now (the last step's).
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Where the run ends.
    pub fn end(&self) -> Timestamp {
        self.end
    }

    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Nodes and pods at the start.
    pub fn size(&self) -> (usize, usize) {
        (self.stats.node_count, self.stats.pod_count)
    }

    /// The simulated cluster as it is now.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The engine's zones now (empty before the start).
    pub fn zones(&self) -> Vec<ZoneReport> {
        self.controller.as_ref().map(|c| c.engine().zones()).unwrap_or_default()
    }

    /// Counts for a progress line (the latest timeline sample's).
    pub fn progress(&self) -> Progress {
        let mut p =
            Progress { now: self.now, end: self.end, violations: self.stats.violation_count, ..Progress::default() };
        if let Some((_, zones)) = self.stats.timeline.last() {
            for z in zones {
                p.not_ready += z.not_ready + z.unknown;
                p.tainted += z.tainted;
                p.evicted += z.evicted;
            }
        }
        p
    }

    /// Starts the controller at `t`, or restarts it (a fresh engine that
    /// keeps nothing), and sends it the cluster (after the outage, if the
    /// control plane is down).
    fn start_controller(&mut self, t: Timestamp) -> Result<(), SimError> {
        match &mut self.controller {
            Some(c) => c.restart(t)?,
            None => {
                let mut c = Controller::new(self.config.clone(), t)?;
                if self.measure {
                    c.measure_with(Instant::now);
                    self.stats.costs.phases = c.engine().phase_names().into_iter().map(|n| (n, Vec::new())).collect();
                }
                self.controller = Some(c);
            }
        }
        // A new process: nothing its previous life sent is answered.
        self.wire.restart();
        if self.control_plane_down {
            self.relist = true;
        } else {
            self.list(t);
        }
        Ok(())
    }

    /// The controller's watches list the cluster afresh (at the start, a
    /// restart, once the control plane is back): the whole cluster, which
    /// replaces what was on its way to the old watches.
    fn list(&mut self, t: Timestamp) {
        let mut state = self.cluster.state();
        if !self.wire.is_instant() {
            state = self.wire.list(t, state);
        }
        if let Some(c) = self.controller.as_mut() {
            self.stats.observations += state.len() as u64;
            c.observe_all(t, state);
        }
    }

    /// What the cluster's changes at `t` become: the watches' delivery at
    /// once, or, with latency, events on the wire. Nothing while the
    /// control plane is down (its watches are broken; a list follows).
    fn send(&mut self, t: Timestamp, mut observations: Vec<Observation>) {
        self.send_from(t, &mut observations);
    }

    /// [`Simulation::send`], draining a buffer the caller keeps.
    fn send_from(&mut self, t: Timestamp, observations: &mut Vec<Observation>) {
        if self.control_plane_down || self.controller.is_none() {
            observations.clear();
            return;
        }
        if !self.wire.is_instant() {
            self.wire.publish(t, observations.drain(..));
            return;
        }
        let Some(c) = self.controller.as_mut() else { return };
        self.stats.observations += observations.len() as u64;
        c.observe_all(t, observations.drain(..));
    }

    /// With latency: the writes due by `t` land (through [`SimApi`], so the
    /// figures are taken as they land) and their answers reach the
    /// controller; then the watch events due by `t` (none while the control
    /// plane is down: those watches are gone).
    fn arrive(&mut self, t: Timestamp) {
        if self.wire.is_instant() {
            return;
        }
        let mut api = SimApi {
            cluster: &mut self.cluster,
            stats: &mut self.stats,
            pod_log: self.pod_log.as_mut(),
            addons: &mut self.addons,
            control_plane_down: self.control_plane_down,
        };
        let mut answers = Vec::new();
        let controller = &mut self.controller;
        let mut judge = |at: Timestamp, action: &Action| match controller.as_mut() {
            Some(c) => c.still_true(at, action),
            None => Err("the controller is not running".to_string()),
        };
        for landed in self.wire.land(t, &mut api, &mut answers, &mut judge) {
            if let Some(v) = landed.applied.violation {
                self.stats.contract_violations += 1;
                self.stats.note_violation(format!("contract at {}: {v}", landed.at));
            }
        }
        let mut events = Vec::new();
        if self.control_plane_down {
            self.wire.drop_events();
        } else {
            self.wire.deliver(t, &mut events);
        }
        if let Some(c) = self.controller.as_mut() {
            self.stats.observations += (answers.len() + events.len()) as u64;
            c.observe_all(t, answers);
            c.observe_all(t, events);
        }
    }

    fn apply_fault(&mut self, t: Timestamp, fault: &Fault) -> Vec<Observation> {
        self.stats.track_fault(t, fault, &self.cluster);
        match fault {
            Fault::Crash(nodes) => {
                for n in nodes {
                    self.kubelets.stop(n);
                }
                Vec::new()
            }
            Fault::Recover(nodes) => {
                let mut out = Vec::new();
                for n in nodes {
                    out.extend(self.kubelets.start(n, t, &mut self.cluster));
                }
                out
            }
            Fault::Partition(nodes) | Fault::Heal(nodes) => {
                let cut = matches!(fault, Fault::Partition(_));
                for n in nodes {
                    self.kubelets.set_partitioned(n, cut);
                }
                Vec::new()
            }
            Fault::ControlPlaneDown => {
                self.control_plane_down = true;
                Vec::new()
            }
            Fault::ControlPlaneUp => {
                self.control_plane_down = false;
                self.relist = true;
                Vec::new()
            }
            Fault::RestartController => {
                if let Err(e) = self.start_controller(t) {
                    tracing::error!("controller restart failed: {e}");
                }
                Vec::new()
            }
            Fault::Event(action) => apply_event(&mut self.cluster, &mut self.kubelets, t, action),
        }
    }

    fn next_step(&self) -> Timestamp {
        if !self.started {
            return Timestamp::EPOCH;
        }
        let after = self.now + Span::from_nanos(1);
        let mut next = self.end.max(after);
        if let Some(k) = self.kubelets.next_due() {
            next = next.min(ceil_step(k.max(after)));
        }
        if let Some(f) = self.plan.faults().get(self.next_fault) {
            next = next.min(ceil_step(f.at.max(after)));
        }
        if let Some(g) = self.cluster.next_due() {
            next = next.min(ceil_step(g.max(after)));
        }
        if let Some(w) = self.wire.next_due() {
            next = next.min(ceil_step(w.max(after)));
        }
        if let Some(c) = &self.controller {
            next = next.min(c.next_due().max(after));
        }
        next
    }

    /// Takes one step; false once the end is passed (nothing was done).
    pub fn step(&mut self) -> Result<bool, SimError> {
        let t = self.next_step();
        if self.started && (t > self.end || self.now >= self.end) {
            return Ok(false);
        }
        self.now = t;
        self.stats.steps += 1;
        if !self.started {
            self.started = true;
            self.start_controller(t)?;
        }
        while let Some(f) = self.plan.faults().get(self.next_fault).filter(|f| f.at <= t).cloned() {
            let obs = self.apply_fault(t, &f.fault);
            self.send(t, obs);
            self.next_fault += 1;
        }
        let mut obs = std::mem::take(&mut self.delivered);
        // A re-list goes out before what the kubelets did this step, so
        // the kubelets only run beside the controller when there is none.
        let pipelined = self.kubelets.len() >= self.pipeline_from
            && self.controller.is_some()
            && !self.control_plane_down
            && !self.relist
            && self.wire.is_instant();
        if !(pipelined && self.kubelets_beside_controller(t)) {
            self.kubelets.run_until_into(t, &mut self.cluster, &mut obs);
        }
        obs.extend(self.cluster.housekeeping(t));
        if self.relist && !self.control_plane_down {
            self.relist = false;
            self.list(t);
        }
        self.send_from(t, &mut obs);
        self.delivered = obs;
        self.arrive(t);
        self.tick(t);
        let obs = self.cluster.housekeeping(t);
        self.send(t, obs);
        if !self.addons.is_empty() {
            self.addons.observe(t, &self.cluster);
        }
        if t >= self.stats.next_sample || t >= self.end {
            self.stats.sample(t, &self.cluster);
            while self.stats.next_sample <= t {
                self.stats.next_sample += self.stats.sample_every;
            }
        }
        Ok(true)
    }

    /// Runs the kubelets due by `t` on a second thread while this one
    /// hands what they deliver to the controller as it comes: the kubelets'
    /// thread also has the safety interlock's checker mirror each batch
    /// ([`Controller::feeds`]), then passes it on for the engine to take
    /// in ([`EngineFeed::absorb`](nodewarden_controller::EngineFeed::absorb)).
    /// The controller sees the same observations in the same order as
    /// when the kubelets run first, so the run's outcome is the same; only
    /// the work overlaps. When the run is measured, the engine's ingest
    /// time here is counted in the step's first tick, as if the tick had
    /// taken it in.
    ///
    /// False when the thread could not be started (nothing was run then).
    fn kubelets_beside_controller(&mut self, t: Timestamp) -> bool {
        let Some(controller) = self.controller.as_mut() else { return false };
        let (mut checker, mut engine) = controller.feeds();
        let (kubelets, cluster) = (&mut self.kubelets, &mut self.cluster);
        let (full_tx, full_rx) = std::sync::mpsc::channel::<Vec<Observation>>();
        let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<Observation>>();
        let mut handed = 0u64;
        let mut absorbing = std::time::Duration::ZERO;
        let clock = self.measure;
        let ran = std::thread::scope(|s| {
            let kubelets_thread = std::thread::Builder::new().name("sim-kubelets".into());
            let spawned = kubelets_thread.spawn_scoped(s, move || {
                let mut hand_over = |batch: &mut Vec<Observation>| {
                    checker.observe_batch(t, batch);
                    let next = spare_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                    // The receiving loop below ends only once this
                    // thread hangs up, unless it panicked: a failed send
                    // can only follow that panic, which the scope raises.
                    let _ = full_tx.send(std::mem::replace(batch, next));
                };
                let mut batch = Vec::with_capacity(CHUNK);
                kubelets.run_until_chunked(t, cluster, &mut batch, CHUNK, &mut hand_over);
                if !batch.is_empty() {
                    hand_over(&mut batch);
                }
            });
            if let Err(e) = spawned {
                // The closure (and the kubelets' borrow) is gone with the
                // error; the caller runs them on this thread instead.
                tracing::warn!("could not start the kubelets' thread, running them in turn: {e}");
                return false;
            }
            for mut batch in full_rx {
                let started = clock.then(Instant::now);
                handed += batch.len() as u64;
                engine.observe_batch(&mut batch);
                engine.absorb(t);
                if let Some(s) = started {
                    absorbing += s.elapsed();
                }
                let _ = spare_tx.send(batch);
            }
            true
        });
        self.stats.observations += handed;
        self.absorbed = absorbing;
        ran
    }

    fn tick(&mut self, t: Timestamp) {
        let Some(controller) = &mut self.controller else { return };
        let down = self.control_plane_down;
        let mut sim_api = SimApi {
            cluster: &mut self.cluster,
            stats: &mut self.stats,
            pod_log: self.pod_log.as_mut(),
            addons: &mut self.addons,
            control_plane_down: down,
        };
        let mut api = Wired { wire: &mut self.wire, cluster: &mut sim_api };
        let mut notes: Vec<String> = Vec::new();
        let mut sent: Vec<String> = Vec::new();
        let instant = api.wire.is_instant();
        let mut ticks: Vec<TickFigures> = Vec::new();
        let mut fed_back = 0u64;
        let summary = controller.step(t, &mut api, &mut |event| match event {
            StepEvent::Ticked { engine, actions, took } => {
                let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                let phases = engine.last_tick_timings().iter().map(|p| (p.phase, nanos(p.took))).collect();
                ticks.push(TickFigures {
                    took: took.map(nanos),
                    phases,
                    zones: engine.zones(),
                    actions: actions.len(),
                });
            }
            StepEvent::Handled(h) => {
                notes.extend(h.violations.iter().map(ToString::to_string));
                if let (ActionKind::DeletePod { pod, .. }, Some(_), false) = (&h.action.kind, h.applied, instant) {
                    sent.push(pod.clone());
                }
                if let Some(applied) = h.applied {
                    if let Some(v) = &applied.violation {
                        notes.push(format!("contract at {t}: {v}"));
                    }
                    if !down {
                        fed_back += applied.observations.len() as u64;
                    }
                }
            }
        });
        self.stats.observations += fed_back;
        self.stats.held_back += summary.held_back;
        for pod in sent {
            self.stats.deletions_sent.insert(pod, t);
        }
        let mut absorbed = u64::try_from(std::mem::take(&mut self.absorbed).as_nanos()).unwrap_or(u64::MAX);
        for TickFigures { took, mut phases, zones, actions } in ticks {
            if let Some(took) = took {
                // The ingest done beside the kubelets belongs to this tick.
                if let Some((_, nanos)) = phases.iter_mut().find(|(p, _)| *p == INGEST_PHASE) {
                    *nanos += absorbed;
                }
                self.stats.costs.tick.push(took + std::mem::take(&mut absorbed));
                for (phase, nanos) in phases {
                    if phase == "health_monitor" {
                        self.stats.costs.note_health_pass(SlowPass { at: t, nanos, actions });
                    }
                    if let Some((_, v)) = self.stats.costs.phases.iter_mut().find(|(n, _)| *n == phase) {
                        v.push(nanos);
                    }
                }
            }
            self.stats.track_zones(t, &zones);
            self.stats.actions += actions as u64;
        }
        for note in notes {
            if note.starts_with("contract at ") {
                self.stats.contract_violations += 1;
            }
            self.stats.note_violation(note);
        }
    }

    /// Ends the run and hands over what it gathered.
    pub fn finish(mut self) -> Outcome {
        self.take_outcome()
    }

    /// Ends the run as [`Simulation::finish`] does, for a process about to
    /// exit: the cluster, the kubelets and the controller are left for the
    /// exit to reclaim instead of being freed one allocation at a time
    /// (at 100k nodes and 1M pods that took about 10 s, most of it in the
    /// allocator merging free blocks).
    pub fn finish_before_exit(mut self) -> Outcome {
        let outcome = self.take_outcome();
        std::mem::forget(self);
        outcome
    }

    fn take_outcome(&mut self) -> Outcome {
        let mut seen_failed: BTreeMap<usize, usize> = BTreeMap::new();
        let applied = self.plan.faults().get(..self.next_fault).unwrap_or_default().to_vec();
        let stats = &mut self.stats;
        for f in &applied {
            for n in f.fault.nodes_down() {
                if let Some(&i) = stats.node_index.get(n) {
                    seen_failed.insert(i, stats.nodes[i].zone);
                }
            }
        }
        for (_, z) in seen_failed {
            stats.tally[z].nodes_failed += 1;
        }
        let safety = match &self.controller {
            Some(c) => c.checker().verdicts(),
            None => Invariant::ALL.iter().map(|&i| (i, true)).collect(),
        };
        let stats = std::mem::take(&mut self.stats);
        Outcome {
            scenario: std::mem::take(&mut self.name),
            description: std::mem::take(&mut self.description),
            config: self.config.clone(),
            admission: self.admission,
            kubelet: self.timing,
            nodes: stats.node_count,
            pods: stats.pod_count,
            simulated: self.now - Timestamp::EPOCH,
            steps: stats.steps,
            observations: stats.observations,
            actions: stats.actions,
            writes_failed: stats.writes_failed,
            restarts: applied.iter().filter(|f| matches!(f.fault, Fault::RestartController)).count(),
            faults: applied.iter().filter(|f| !f.what.is_empty()).map(|f| (f.at, f.what.clone())).collect(),
            zones: stats.tally,
            latencies: stats.latencies,
            costs: stats.costs,
            timeline: stats.timeline,
            safety,
            held_back: stats.held_back,
            api_latency: self.wire.latency(),
            contract_violations: stats.contract_violations,
            violations: stats.violations,
            addons: self.addons.outcomes(),
        }
    }

    /// Runs to the end without pacing or progress.
    pub fn run(mut self) -> Result<Outcome, SimError> {
        while self.step()? {}
        Ok(self.finish())
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::ZoneState;

    use super::*;

    #[test]
    fn ceil_step_rounds_up_to_the_grid() {
        let ms = |n| Timestamp::EPOCH + Span::from_millis(n);
        assert_eq!(ceil_step(ms(0)), ms(0));
        assert_eq!(ceil_step(ms(1)), ms(100));
        assert_eq!(ceil_step(ms(100)), ms(100));
        assert_eq!(ceil_step(ms(-150)), ms(-100));
    }

    fn run_with(builtin: Builtin, nodes: usize, config: ControllerConfig, duration: Option<Span>) -> Outcome {
        let fleet = FleetSpec { nodes, zones: 3, pods_per_node: 10, seed: 7 };
        let opts = SimOptions {
            source: Source::Builtin(builtin, fleet),
            config,
            duration,
            seed: 7,
            measure: false,
            api: None,
        };
        match Simulation::new(opts).and_then(Simulation::run) {
            Ok(o) => o,
            Err(e) => panic!("{builtin}: {e}"),
        }
    }

    fn run(builtin: Builtin, nodes: usize) -> Outcome {
        run_with(builtin, nodes, ControllerConfig::default(), None)
    }

    /// Every run must be safe, and every deletion at or after its
    /// toleration's end (to the 100 ms grid).
    fn assert_safe(o: &Outcome) {
        assert!(o.safe(), "{}: {:?} {:?}", o.scenario, o.safety, o.violations);
        for late in &o.latencies.eviction_vs_toleration {
            assert!((0.0..0.15).contains(late), "{}: deletion {late}s after its toleration ended", o.scenario);
        }
    }

    #[test]
    fn critical_addon_loses_its_addons_and_reports_each() {
        let o = run(Builtin::CriticalAddon, 30);
        assert_safe(&o);
        assert!(o.config.enable_rescheduler, "the scenario turns the rescheduler on");
        let names: Vec<&str> = o.addons.iter().map(|a| a.addon.as_str()).collect();
        assert_eq!(names, ["kube-system/coredns-a", "kube-system/coredns-b", "kube-system/metrics-server"]);
        // Lost with their node: deleted when their tolerations ran out
        // (1m crash, 30 to 50s to notice, 300s), and nothing has room for
        // them; all three at once.
        let lost = o.addons[0].unschedulable_since.map(|t| t - Timestamp::EPOCH);
        assert!(lost.is_some_and(|l| l >= Span::from_secs(390) && l <= Span::from_secs(410)), "{lost:?}");
        for a in &o.addons {
            assert_eq!(a.unschedulable_since, o.addons[0].unschedulable_since, "{a:?}");
            assert!(a.minimum.is_some_and(|m| m >= 1), "{a:?}");
        }
        let run = crate::report::RunInfo {
            wall_seconds: 1.0,
            seed: 7,
            peak_rss_bytes: None,
            rss_before_controller_bytes: None,
            cpu_seconds: None,
        };
        let json = crate::report::to_json(&o, &run, false);
        let lost = lost.map_or(0.0, |l| l.as_secs_f64());
        assert_eq!(json["addons"][2]["unschedulable_seconds"], lost);
        let text = crate::report::render_text(&o, &run);
        assert!(text.contains("Critical addons (rescheduler on)"), "{text}");
        // As the report reads with one addon bound and two not (whatever
        // this run's controller did).
        let mut done = o.clone();
        for a in &mut done.addons {
            a.bound = None;
            a.evicted = 0;
        }
        let since = done.addons[0].unschedulable_since.unwrap_or(Timestamp::EPOCH);
        done.addons[0].bound = Some((since + Span::from_secs(25), "node-000007".into()));
        done.addons[0].evicted = 2;
        let text = crate::report::render_text(&done, &run);
        assert!(text.contains("bound to node-000007 at"), "{text}");
        assert!(text.contains("1 of 3 lost addon(s) scheduled again (the slowest 25s after"), "{text}");
        assert!(text.contains("2 pod(s) evicted against a minimum of"), "{text}");
        // The other scenarios' reports do not change.
        let other = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(120)));
        assert!(other.addons.is_empty());
        assert!(crate::report::to_json(&other, &run, false).get("addons").is_none());
    }

    fn zone<'a>(o: &'a Outcome, name: &str) -> &'a ZoneTally {
        match o.zones.iter().find(|z| z.key.ends_with(name)) {
            Some(z) => z,
            None => panic!("no zone {name}"),
        }
    }

    fn quiet(z: &ZoneTally) -> bool {
        z.failures == 0 && z.seen_dead.0 == 0 && z.tainted.0 == 0 && z.evicted.0 == 0 && z.false_alarms == 0
    }

    #[test]
    fn node_crash_detects_taints_and_evicts_only_the_crashed_node() {
        let o = run(Builtin::NodeCrash, 60);
        assert_safe(&o);
        let failed: Vec<&ZoneTally> = o.zones.iter().filter(|z| z.failures > 0).collect();
        assert_eq!(failed.len(), 1, "{:?}", o.zones);
        let z = failed[0];
        assert_eq!((z.nodes_failed, z.seen_dead.0, z.tainted.0), (1, 1, 1));
        assert!(z.evicted.0 > 0 && z.daemonset_evicted == 0, "{z:?}");
        // The node's 2 DaemonSet pods and any pod tolerating forever stay.
        assert!(z.evicted.0 <= 8, "{z:?}");
        assert!(o.zones.iter().filter(|x| x.key != z.key).all(quiet));
        // Detection within grace -/+ what heartbeats and passes allow.
        for d in &o.latencies.detection {
            assert!((30.0..=50.0).contains(d), "detected after {d}s");
        }
    }

    #[test]
    fn zone_outage_taints_the_dead_zone_at_its_rate_and_recovers() {
        let o = run_with(Builtin::ZoneOutage, 60, ControllerConfig::default(), Some(Span::from_secs(55 * 60)));
        assert_safe(&o);
        let a = zone(&o, "zone-a");
        assert_eq!((a.nodes, a.nodes_failed, a.seen_dead.0, a.tainted.0), (20, 20, 20, 20));
        // One node per 10 s at the primary rate: 20 nodes take 190 s.
        let (first, last) = a.tainted.1.unwrap_or((Timestamp::MAX, Timestamp::MIN));
        assert!(last - first >= Span::from_secs(190), "{first} .. {last}");
        assert!(a.evicted.0 > 100 && a.daemonset_evicted == 0, "{a:?}");
        // Reconnected at 50m: every taint removed, every node Ready again.
        assert_eq!(a.untainted, 20);
        let (_, end) = o.timeline.last().cloned().unwrap_or_default();
        assert_eq!(end[0].ready, 20);
        assert!(quiet(zone(&o, "zone-b")) && quiet(zone(&o, "zone-c")));
        // Each pod went exactly when its toleration ran out.
        assert!(o.latencies.eviction.iter().all(|&l| l >= 30.0));
    }

    #[test]
    fn partial_zone_stops_tainting_a_small_zone() {
        let o = run(Builtin::PartialZone, 60);
        assert_safe(&o);
        let a = zone(&o, "zone-a");
        assert_eq!(a.nodes_failed, 12);
        assert_eq!(a.seen_dead.0, 12);
        // Once the zone is PartialDisruption and small (<= 50 nodes), its
        // rate is 0: the nodes seen dead before that may be tainted, no
        // more after.
        let partial = a.states.iter().find(|(_, s, _)| *s == Some(ZoneState::PartialDisruption));
        let Some(&(since, _, rate)) = partial else { panic!("zone-a never PartialDisruption: {:?}", a.states) };
        assert_eq!(rate, 0.0);
        assert!(a.tainted.0 < 12, "{a:?}");
        assert!(a.tainted.1.is_none_or(|(_, last)| last <= since), "{a:?}");
    }

    #[test]
    fn partial_zone_uses_the_secondary_rate_in_a_large_zone() {
        let o = run_with(Builtin::PartialZone, 180, ControllerConfig::default(), Some(Span::from_secs(20 * 60)));
        assert_safe(&o);
        let a = zone(&o, "zone-a");
        assert_eq!(a.nodes_failed, 36);
        assert!(
            a.states.iter().any(|(_, s, r)| *s == Some(ZoneState::PartialDisruption) && *r == 0.01),
            "{:?}",
            a.states
        );
        // At 0.01/s, far fewer than the 36 dead nodes in 18 minutes.
        assert!(a.tainted.0 < 36 && a.tainted.0 > 0, "{a:?}");
    }

    #[test]
    fn flapping_nodes_are_untainted_and_keep_their_default_pods() {
        let o = run(Builtin::Flapping, 60);
        assert_safe(&o);
        let failures: usize = o.zones.iter().map(|z| z.failures).sum();
        let seen: usize = o.zones.iter().map(|z| z.seen_dead.0).sum();
        let untainted: usize = o.zones.iter().map(|z| z.untainted).sum();
        assert!(failures >= 6, "{failures}");
        assert_eq!(seen, failures, "every 90 s outage is longer than the grace period");
        assert!(untainted >= failures - 1, "{untainted}");
        // Down 90 s at a time: only pods tolerating less than that can go;
        // the default 300 s ones never do.
        assert!(o.latencies.eviction.iter().all(|&l| l < 90.0), "{:?}", o.latencies.eviction);
    }

    #[test]
    fn control_plane_outage_taints_and_evicts_nothing() {
        let o = run(Builtin::ControlPlaneOutage, 60);
        assert_safe(&o);
        for z in &o.zones {
            assert_eq!((z.tainted.0, z.evicted.0, z.false_alarms), (0, 0, 0), "{z:?}");
        }
        assert!(o.writes_failed > 0, "the controller tried to write and could not");
        let (_, end) = o.timeline.last().cloned().unwrap_or_default();
        assert!(end.iter().all(|s| s.unknown == 0 && s.tainted == 0), "{end:?}");
    }

    #[test]
    fn controller_restart_resumes_without_double_or_early_deletions() {
        let o = run(Builtin::ControllerRestart, 60);
        assert_safe(&o);
        assert_eq!(o.contract_violations, 0, "no pod deleted twice");
        let a = zone(&o, "zone-a");
        // The restarted controller starts from a clean slate, as upstream
        // does: it removes the NoExecute taints it finds and adds them back
        // through the zone's rate limiter, so each node is tainted twice.
        assert_eq!((a.tainted.0, a.untainted), (40, 20));
        let (_, last) = a.evicted.1.unwrap_or_default();
        assert!(last > Timestamp::EPOCH + Span::from_secs(6 * 60), "evictions go on after the restart");
        assert!(quiet(zone(&o, "zone-b")));
    }

    #[test]
    fn rolling_failure_evicts_after_tolerations_and_recovers_each_node() {
        let o = run(Builtin::RollingFailure, 60);
        assert_safe(&o);
        let total = |f: fn(&ZoneTally) -> usize| o.zones.iter().map(f).sum::<usize>();
        assert_eq!(total(|z| z.failures), 3);
        assert_eq!(total(|z| z.seen_dead.0), 3);
        assert_eq!(total(|z| z.tainted.0), 3);
        assert_eq!(total(|z| z.untainted), 3);
        assert!(total(|z| z.evicted.0) > 0);
        assert_eq!(total(|z| z.daemonset_evicted), 0);
    }

    #[test]
    fn legacy_mode_never_deletes_daemonset_pods() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let o = run_with(Builtin::ZoneOutage, 60, config, Some(Span::from_secs(15 * 60)));
        assert!(o.safe(), "{:?}", o.violations);
        let a = zone(&o, "zone-a");
        assert!(a.evicted.0 > 0, "{a:?}");
        assert_eq!(a.daemonset_evicted, 0);
        assert_eq!(a.tainted.0, 0, "legacy mode does not taint NoExecute");
    }

    #[test]
    fn same_seed_same_outcome() {
        let a = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(8 * 60)));
        let b = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(8 * 60)));
        assert_eq!(a.zones, b.zones);
        assert_eq!(a.latencies, b.latencies);
        assert_eq!((a.observations, a.actions), (b.observations, b.actions));
    }

    /// Running the kubelets beside the controller changes nothing the
    /// controller sees, so nothing it does: every builtin gives the same
    /// outcome with every step pipelined and with none.
    #[test]
    fn pipelined_steps_give_the_same_outcome() {
        for builtin in Builtin::ALL {
            let run = |pipeline_from: usize| {
                let fleet = FleetSpec { nodes: 60, zones: 3, pods_per_node: 10, seed: 3 };
                let opts = SimOptions {
                    source: Source::Builtin(builtin, fleet),
                    config: ControllerConfig::default(),
                    duration: Some(Span::from_secs(12 * 60)),
                    seed: 3,
                    measure: true,
                    // The kubelets run beside the controller only when
                    // the API answers at once.
                    api: Some(ApiLatency::NONE),
                };
                let mut sim = match Simulation::new(opts) {
                    Ok(s) => s,
                    Err(e) => panic!("{builtin}: {e}"),
                };
                sim.pipeline_from = pipeline_from;
                match sim.run() {
                    Ok(o) => o,
                    Err(e) => panic!("{builtin}: {e}"),
                }
            };
            let (a, b) = (run(usize::MAX), run(0));
            assert_eq!(a.zones, b.zones, "{builtin}");
            assert_eq!(a.latencies, b.latencies, "{builtin}");
            assert_eq!(a.timeline, b.timeline, "{builtin}");
            assert_eq!(a.safety, b.safety, "{builtin}");
            assert_eq!(a.violations, b.violations, "{builtin}");
            assert_eq!(a.addons, b.addons, "{builtin}");
            assert_eq!(
                (a.steps, a.observations, a.actions, a.writes_failed),
                (b.steps, b.observations, b.actions, b.writes_failed),
                "{builtin}"
            );
            // The ingest done beside the kubelets is counted in the ticks.
            assert_eq!(a.costs.tick.len(), b.costs.tick.len(), "{builtin}");
            assert!(a.observations > 0 && a.actions > 0, "{builtin}: {} {}", a.observations, a.actions);
        }
    }

    #[test]
    fn a_scenario_file_runs_with_its_own_cluster_and_events() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/zone-outage.yaml");
        let scenario = match crate::validate::load_scenario(std::path::Path::new(path)) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let opts = SimOptions {
            source: Source::File(Box::new(scenario)),
            config: ControllerConfig::default(),
            duration: None,
            seed: 1,
            measure: true,
            api: None,
        };
        let o = match Simulation::new(opts).and_then(Simulation::run) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        assert_safe(&o);
        assert!(o.zones.iter().map(|z| z.evicted.0).sum::<usize>() > 0, "{:?}", o.zones);
        assert!(!o.costs.tick.is_empty());
    }

    #[test]
    fn bad_fleets_are_refused() {
        for (nodes, zones) in [(0, 1), (10, 0), (2, 3)] {
            let fleet = FleetSpec { nodes, zones, pods_per_node: 1, seed: 1 };
            let opts = SimOptions {
                source: Source::Builtin(Builtin::NodeCrash, fleet),
                config: ControllerConfig::default(),
                duration: None,
                seed: 1,
                measure: false,
                api: None,
            };
            assert!(matches!(Simulation::new(opts), Err(SimError::Fleet(_))));
        }
    }
}
