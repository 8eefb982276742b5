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
//! through a [`SlowApi`]: what steps 1 and 2 change goes on the watch, and
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

use nodewarden_cluster::addons::AddonTracker;
use nodewarden_cluster::admission::AdmissionDefaults;
use nodewarden_cluster::builtin::Builtin;
use nodewarden_cluster::cluster::Cluster;
use nodewarden_cluster::faults::{Fault, FaultPlan, apply_event};
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_cluster::kubelet::{KubeletTiming, Kubelets};
use nodewarden_cluster::latency::{ApiLatency, Delayed, SlowApi};
use nodewarden_cluster::scenario::Scenario;
use nodewarden_controller::{Applied, ClusterApi, Controller, Invariant, StepEvent};
use nodewarden_engine::{Action, ActionKind, Observation, TickPhase, WriteOutcome, ZoneReport};
use nodewarden_model::{ControllerConfig, Span, Timestamp};

use setup::World;

use crate::statistics::Statistics;
pub use crate::statistics::{Outcome, Progress, SlowPass};
use nodewarden_controller::write_order::EvictionClient;

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
    Scenario(#[from] nodewarden_cluster::error::ScenarioError),
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
    wire: SlowApi,
}

/// From this many kubelets on, a step runs them on a second thread beside
/// the controller's ingest ([`Simulation::kubelets_beside_controller`]):
/// below it a step's renewals are too few to pay for starting the thread.
const PIPELINE_FROM: usize = 2_000;

/// How many observations the kubelets' thread gathers before handing them
/// over: small enough that the engine starts early in the step, large
/// enough that the hand-over costs nothing next to the work.
const CHUNK: usize = 128;

/// How many objects of a list the engine is handed before it takes them in
/// ([`Simulation::list`]).
const LIST_CHUNK: usize = 4096;

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
    phases: Vec<(TickPhase, u64)>,
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
        let latency = match (&opts.source, opts.api) {
            (Source::File(scenario), Some(flag)) => flag.over(scenario.cluster.api),
            (Source::File(scenario), None) => scenario.cluster.api,
            (Source::Builtin(..) | Source::Prepared(_), flag) => flag.unwrap_or(ApiLatency::REALISTIC),
        };
        let World { name, description, config, admission, timing, cluster, kubelets, plan, layout, end } = match opts
            .source
        {
            Source::Builtin(builtin, fleet) => World::builtin(builtin, fleet, opts.config, opts.seed, opts.duration)?,
            Source::File(scenario) => World::file(&scenario, opts.duration)?,
            Source::Prepared(p) => World::prepared(*p, opts.config, opts.duration)?,
        };
        let eviction = EvictionClient::for_mode(config.enable_taint_manager);
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
            wire: SlowApi::new(latency, opts.seed).with_eviction_client(eviction),
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
                    self.stats.costs.phases = c.engine().tick_phases().into_iter().map(|p| (p, Vec::new())).collect();
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
            // The engine takes the list in as it is handed over, a chunk at
            // a time, as the first tick would have: at 100k nodes a million
            // pod snapshots otherwise wait whole in its queue until then,
            // beside the cluster and the list itself (the run's peak). The
            // time it takes counts in the next tick's ingest.
            let started = self.measure.then(Instant::now);
            let mut state = state.into_iter();
            loop {
                let chunk: Vec<Observation> = state.by_ref().take(LIST_CHUNK).collect();
                if chunk.is_empty() {
                    break;
                }
                c.observe_all(t, chunk);
                c.absorb(t);
            }
            if let Some(s) = started {
                self.absorbed += s.elapsed();
            }
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
            None => Err(nodewarden_engine::Withdrawal::ControllerDown),
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
        // What the tick handed over and may go now goes now (a client
        // rate's token at hand; a write with no latency lands now).
        if self.wire.busy_at(t) {
            self.arrive(t);
        }
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
        let mut api = Delayed { wire: &mut self.wire, cluster: &mut sim_api };
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
                let withdrawn = h.applied.is_some_and(|a| matches!(a.outcome, Some(WriteOutcome::Withdrawn(_))));
                if let (ActionKind::DeletePod { pod, .. }, Some(_), false, false) =
                    (&h.action.kind, h.applied, instant, withdrawn)
                {
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
                if let Some((_, nanos)) = phases.iter_mut().find(|(p, _)| *p == TickPhase::Ingest) {
                    *nanos += absorbed;
                }
                self.stats.costs.tick.push(took + std::mem::take(&mut absorbed));
                for (phase, nanos) in phases {
                    if phase == TickPhase::HealthMonitor {
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

mod setup;
#[cfg(test)]
mod tests;
