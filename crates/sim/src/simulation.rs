//! The live simulation behind `nodewarden sim` and `cargo xtask load`: the
//! real engine on a virtual clock against a [`Cluster`] of generated nodes
//! (or a scenario file's), with heartbeating kubelets and a fault plan.
//!
//! Time moves in steps on the engine's 100 ms tainting grid: each step
//! goes to the earliest of the next kubelet renewal or post, the next
//! fault and the engine's [`Engine::next_due`], rounded up to the grid (the
//! engine's own deadlines are kept exactly). At each step `t`:
//!
//! 1. faults due by `t` are applied;
//! 2. every kubelet renewal and post due by `t` lands in the cluster, each
//!    at its own instant (so Lease renew times keep their jitter);
//! 3. what the watches deliver is sent to the engine, unless the control
//!    plane is unreachable (then nothing is; once it is back, the engine
//!    gets the whole cluster again, as a relist);
//! 4. `engine.tick(t)`, timed per phase;
//! 5. each action is checked by the [`InvariantChecker`] before it is
//!    applied to the cluster (or, while the control plane is unreachable,
//!    fails with no echo), and its feedback is sent back; a refused write
//!    makes the engine tick again at `t`, as in replay.
//!
//! The run is deterministic for a given seed: nothing here reads the wall
//! clock except to time the engine's ticks.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use nodewarden_engine::explain::Verdict;
use nodewarden_engine::{Action, ActionKind, Engine, Observation, WriteOutcome, ZoneReport, ZoneState};
use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, Span, TaintEffect, Timestamp, ZoneKey};

use crate::admission::AdmissionDefaults;
use crate::builtin::Builtin;
use crate::cluster::Cluster;
use crate::faults::{Fault, FaultPlan, apply_event};
use crate::fleet::{self, FleetSpec, LEASE_JITTER, Layout};
use crate::invariants::{Invariant, InvariantChecker};
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::scenario::{EventAction, Scenario};

/// The engine's tainting grid: steps land on it.
pub const STEP: Span = Span::from_millis(100);

/// How many times the engine ticks again within one instant to see its
/// refused writes (as in replay).
const MAX_REFUSAL_ROUNDS: usize = 8;

/// The reason a write fails while the control plane is unreachable.
pub const UNREACHABLE: &str = "the API server cannot be reached";

/// What to simulate.
#[derive(Clone, Debug)]
pub enum Source {
    /// A built-in scenario over a generated fleet.
    Builtin(Builtin, FleetSpec),
    /// A scenario file: its nodes, pods, configuration and events.
    File(Box<Scenario>),
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
}

/// Why a simulation could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The fleet's shape cannot work.
    #[error("{0}")]
    Fleet(String),
    /// The configuration text cannot be read.
    #[error("{0}")]
    BadConfig(String),
    /// The engine refused the configuration.
    #[error("the engine refused the configuration: {0}")]
    Config(#[from] nodewarden_model::ConfigError),
    /// The scenario file is not valid.
    #[error("invalid scenario: {0}")]
    Scenario(#[from] crate::error::ScenarioError),
}

/// Reads controller flags from a YAML (or JSON) mapping with upstream's
/// names (`node-monitor-grace-period: 50s`); unknown flags are refused.
pub fn parse_config(text: &str) -> Result<ControllerConfig, SimError> {
    let config: ControllerConfig = if text.trim().is_empty() {
        ControllerConfig::default()
    } else {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| SimError::BadConfig(e.to_string()))?
    };
    config.validate()?;
    Ok(config)
}

/// One node's story, for latencies and per-zone figures.
#[derive(Clone, Debug, Default)]
struct NodeTrack {
    zone: usize,
    /// Down (crashed or partitioned) since.
    down_since: Option<Timestamp>,
    /// The controller set Ready to Unknown during the current episode.
    seen_dead: Option<Timestamp>,
    /// A NoExecute taint went on during the current episode.
    tainted: Option<Timestamp>,
}

/// Figures for one zone, gathered while the simulation runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneTally {
    /// `region/zone`.
    pub key: String,
    /// Nodes in the zone at the start.
    pub nodes: usize,
    /// Pods bound to its nodes at the start.
    pub pods: usize,
    /// Failure episodes (a flapping node counts once per time down).
    pub failures: usize,
    /// Distinct nodes that failed.
    pub nodes_failed: usize,
    /// Failed nodes that came back.
    pub recoveries: usize,
    /// First and last failure.
    pub failed: Option<(Timestamp, Timestamp)>,
    /// Ready set to Unknown for a down node: count, first, last.
    pub seen_dead: (usize, Option<(Timestamp, Timestamp)>),
    /// Ready set to Unknown for a node whose kubelet was fine.
    pub false_alarms: usize,
    /// NoExecute taints added: count, first, last.
    pub tainted: (usize, Option<(Timestamp, Timestamp)>),
    /// NoExecute taints removed.
    pub untainted: usize,
    /// Pods deleted: count, first, last.
    pub evicted: (usize, Option<(Timestamp, Timestamp)>),
    /// Deleted pods that belonged to a DaemonSet.
    pub daemonset_evicted: usize,
    /// Every (state, rate) the zone went through, with when it started.
    pub states: Vec<(Timestamp, Option<ZoneState>, f64)>,
}

fn widen(span: &mut Option<(Timestamp, Timestamp)>, t: Timestamp) {
    *span = Some(match *span {
        Some((a, b)) => (a.min(t), b.max(t)),
        None => (t, t),
    });
}

/// One point of the timeline, per zone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneSample {
    /// Nodes whose Ready is True.
    pub ready: usize,
    /// Ready False.
    pub not_ready: usize,
    /// Ready Unknown (the controller stopped hearing from them).
    pub unknown: usize,
    /// Nodes with a not-ready or unreachable NoExecute taint.
    pub tainted: usize,
    /// Pods deleted so far.
    pub evicted: usize,
}

/// Latencies in seconds, each with what the configuration predicts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latencies {
    /// Failure to Ready=Unknown.
    pub detection: Vec<f64>,
    /// Ready=Unknown to NoExecute taint.
    pub tainting: Vec<f64>,
    /// Taint to deletion, minus what the pod's toleration allowed (0 =
    /// exactly on time; never negative when the controller is right).
    pub eviction_vs_toleration: Vec<f64>,
    /// Taint to deletion.
    pub eviction: Vec<f64>,
}

/// Wall-clock cost of the engine's ticks, in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickCosts {
    /// Whole ticks (ingest included).
    pub tick: Vec<u64>,
    /// Per phase, in the engine's order.
    pub phases: Vec<(&'static str, Vec<u64>)>,
}

/// Counts for the progress line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Virtual time now.
    pub now: Timestamp,
    /// Where the run ends.
    pub end: Timestamp,
    /// Nodes now not Ready (False or Unknown).
    pub not_ready: usize,
    /// Nodes now carrying a NoExecute taint.
    pub tainted: usize,
    /// Pods deleted so far.
    pub evicted: usize,
    /// Safety violations so far.
    pub violations: usize,
}

/// Everything a finished simulation gathered.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: String,
    /// What it does.
    pub description: String,
    /// The controller's flags.
    pub config: ControllerConfig,
    /// Admission's default toleration seconds.
    pub admission: AdmissionDefaults,
    /// Kubelet cadence.
    pub kubelet: KubeletTiming,
    /// Nodes at the start.
    pub nodes: usize,
    /// Pods at the start.
    pub pods: usize,
    /// Simulated span.
    pub simulated: Span,
    /// Steps taken (engine ticks, refusal rounds not counted).
    pub steps: u64,
    /// Observations sent to the engine.
    pub observations: u64,
    /// Actions the engine emitted.
    pub actions: u64,
    /// Writes that failed.
    pub writes_failed: u64,
    /// Controller restarts.
    pub restarts: usize,
    /// The faults, with their times, for people.
    pub faults: Vec<(Timestamp, String)>,
    /// Per zone, in zone order.
    pub zones: Vec<ZoneTally>,
    /// Latencies.
    pub latencies: Latencies,
    /// Tick costs (empty unless measured).
    pub costs: TickCosts,
    /// Timeline: (time, per-zone sample).
    pub timeline: Vec<(Timestamp, Vec<ZoneSample>)>,
    /// Each invariant with whether it held.
    pub safety: Vec<(Invariant, bool)>,
    /// Writes the cluster refused as contract breaks (to a deleted or
    /// terminating pod).
    pub contract_violations: usize,
    /// The first violations, for people.
    pub violations: Vec<String>,
}

impl Outcome {
    /// True when every invariant held and no contract was broken.
    pub fn safe(&self) -> bool {
        self.safety.iter().all(|(_, ok)| *ok) && self.contract_violations == 0
    }
}

struct Controller {
    engine: Engine,
    observations: Sender<Observation>,
    actions: Receiver<Action>,
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
    controller: Option<Controller>,
    checker: InvariantChecker,
    plan: FaultPlan,
    next_fault: usize,
    now: Timestamp,
    end: Timestamp,
    started: bool,
    control_plane_down: bool,
    relist: bool,
    zone_keys: Vec<String>,
    zone_index: HashMap<String, usize>,
    node_index: HashMap<String, usize>,
    nodes: Vec<NodeTrack>,
    tally: Vec<ZoneTally>,
    latencies: Latencies,
    costs: TickCosts,
    timeline: Vec<(Timestamp, Vec<ZoneSample>)>,
    sample_every: Span,
    next_sample: Timestamp,
    node_count: usize,
    pod_count: usize,
    steps: u64,
    observations: u64,
    actions: u64,
    writes_failed: u64,
    contract_violations: usize,
    violations: Vec<String>,
    violation_count: usize,
}

/// The smallest grid instant at or after `t`.
fn ceil_step(t: Timestamp) -> Timestamp {
    let step = STEP.as_nanos();
    let n = t.as_nanos();
    Timestamp::from_nanos(n.div_euclid(step) * step + if n.rem_euclid(step) == 0 { 0 } else { step })
}

fn is_noexecute(t: &nodewarden_model::Taint) -> bool {
    t.effect == TaintEffect::NoExecute && (t.key == TAINT_NOT_READY || t.key == TAINT_UNREACHABLE)
}

impl Simulation {
    /// Builds the cluster and the fault plan; the engine starts at the
    /// first step (t=0).
    pub fn new(opts: SimOptions) -> Result<Simulation, SimError> {
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
                let layout =
                    fleet::build(&FleetSpec { seed: opts.seed, ..fleet }, &timing, &mut cluster, &mut kubelets);
                let plan = builtin.plan(&layout, opts.seed);
                let duration = opts.duration.unwrap_or_else(|| builtin.default_duration(&layout));
                (
                    builtin.name().to_string(),
                    builtin.describe().to_string(),
                    opts.config,
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
                let (cluster, kubelets) = scenario.initial_cluster();
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
        };
        let mut sim = Simulation {
            name,
            description,
            checker: InvariantChecker::new(&config),
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
            zone_keys: Vec::new(),
            zone_index: HashMap::new(),
            node_index: HashMap::new(),
            nodes: Vec::new(),
            tally: Vec::new(),
            latencies: Latencies::default(),
            costs: TickCosts::default(),
            timeline: Vec::new(),
            sample_every: Span::from_secs(5),
            next_sample: Timestamp::EPOCH,
            node_count: 0,
            pod_count: 0,
            steps: 0,
            observations: 0,
            actions: 0,
            writes_failed: 0,
            contract_violations: 0,
            violations: Vec::new(),
            violation_count: 0,
        };
        sim.index_nodes(layout.as_ref());
        // A timeline of at most ~600 points, on whole multiples of 5 s.
        let total = (end - Timestamp::EPOCH).as_nanos().max(0);
        let every = (total / 600).div_euclid(5_000_000_000).saturating_add(1).saturating_mul(5_000_000_000);
        sim.sample_every = Span::from_nanos(every);
        // Scenario events before t=0 shape the cluster before the start.
        while let Some(f) = sim.plan.faults().get(sim.next_fault).filter(|f| f.at < Timestamp::EPOCH).cloned() {
            sim.apply_fault(f.at, &f.fault);
            sim.next_fault += 1;
        }
        Ok(sim)
    }

    fn zone_slot(&mut self, key: String) -> usize {
        if let Some(&z) = self.zone_index.get(&key) {
            return z;
        }
        let z = self.zone_keys.len();
        self.zone_index.insert(key.clone(), z);
        self.zone_keys.push(key.clone());
        self.tally.push(ZoneTally { key, ..ZoneTally::default() });
        z
    }

    fn index_nodes(&mut self, layout: Option<&Layout>) {
        if let Some(l) = layout {
            for z in &l.zones {
                self.zone_slot(format!("region-1/{z}"));
            }
        }
        let nodes: Vec<(String, String)> =
            self.cluster.nodes().map(|n| (n.name.clone(), ZoneKey::from_labels(&n.labels).to_string())).collect();
        for (name, zone) in nodes {
            self.track_node(&name, zone);
        }
        for p in self.cluster.pods() {
            if let Some(&i) = p.node.as_ref().and_then(|n| self.node_index.get(n))
                && let Some(tally) = self.tally.get_mut(self.nodes[i].zone)
            {
                tally.pods += 1;
            }
        }
        self.node_count = self.nodes.len();
        self.pod_count = self.cluster.pods().count();
    }

    fn track_node(&mut self, name: &str, zone: String) -> usize {
        if let Some(&i) = self.node_index.get(name) {
            return i;
        }
        let z = self.zone_slot(zone);
        self.tally[z].nodes += 1;
        let i = self.nodes.len();
        self.nodes.push(NodeTrack { zone: z, ..NodeTrack::default() });
        self.node_index.insert(name.to_string(), i);
        i
    }

    fn node_slot(&mut self, name: &str) -> usize {
        if let Some(&i) = self.node_index.get(name) {
            return i;
        }
        let zone = self.cluster.node(name).map(|n| ZoneKey::from_labels(&n.labels).to_string()).unwrap_or_default();
        self.track_node(name, zone)
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
        (self.node_count, self.pod_count)
    }

    /// The simulated cluster as it is now.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The engine's zones now (empty before the start).
    pub fn zones(&self) -> Vec<ZoneReport> {
        self.controller.as_ref().map(|c| c.engine.zones()).unwrap_or_default()
    }

    /// Counts for a progress line (the latest timeline sample's).
    pub fn progress(&self) -> Progress {
        let mut p = Progress { now: self.now, end: self.end, violations: self.violation_count, ..Progress::default() };
        if let Some((_, zones)) = self.timeline.last() {
            for z in zones {
                p.not_ready += z.not_ready + z.unknown;
                p.tainted += z.tainted;
                p.evicted += z.evicted;
            }
        }
        p
    }

    fn start_controller(&mut self, t: Timestamp) -> Result<(), SimError> {
        self.controller = None;
        self.checker.controller_restarted();
        let (mut engine, tx, rx) = Engine::with_channels(self.config.clone(), t)?;
        if self.measure {
            engine.measure_with(Instant::now);
            if self.costs.phases.is_empty() {
                self.costs.phases = engine.phase_names().into_iter().map(|n| (n, Vec::new())).collect();
            }
        }
        self.controller = Some(Controller { engine, observations: tx, actions: rx });
        if self.control_plane_down {
            self.relist = true;
        } else {
            let state = self.cluster.state();
            self.send(t, state);
        }
        Ok(())
    }

    fn send(&mut self, t: Timestamp, observations: Vec<Observation>) {
        let Some(c) = &self.controller else { return };
        if self.control_plane_down {
            return;
        }
        for o in observations {
            self.checker.observe(t, &o);
            self.observations += 1;
            if c.observations.send(o).is_err() {
                return;
            }
        }
    }

    fn apply_fault(&mut self, t: Timestamp, fault: &Fault) -> Vec<Observation> {
        for n in fault.nodes_down() {
            let i = self.node_slot(n);
            let track = &mut self.nodes[i];
            if track.down_since.is_none() {
                track.down_since = Some(t);
                track.seen_dead = None;
                track.tainted = None;
                let tally = &mut self.tally[track.zone];
                tally.failures += 1;
                widen(&mut tally.failed, t);
            }
        }
        for n in fault.nodes_up() {
            let i = self.node_slot(n);
            let track = &mut self.nodes[i];
            if track.down_since.take().is_some() {
                self.tally[track.zone].recoveries += 1;
            }
        }
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
        if let Some(c) = &self.controller {
            next = next.min(c.engine.next_due().max(after));
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
        self.steps += 1;
        if !self.started {
            self.started = true;
            self.start_controller(t)?;
        }
        while let Some(f) = self.plan.faults().get(self.next_fault).filter(|f| f.at <= t).cloned() {
            let obs = self.apply_fault(t, &f.fault);
            self.send(t, obs);
            self.next_fault += 1;
        }
        let obs = self.kubelets.run_until(t, &mut self.cluster);
        if self.relist && !self.control_plane_down {
            self.relist = false;
            let state = self.cluster.state();
            self.send(t, state);
        }
        self.send(t, obs);
        self.tick(t);
        if t >= self.next_sample || t >= self.end {
            self.sample(t);
            while self.next_sample <= t {
                self.next_sample += self.sample_every;
            }
        }
        Ok(true)
    }

    fn tick(&mut self, t: Timestamp) {
        for _ in 0..MAX_REFUSAL_ROUNDS {
            let Some(c) = &mut self.controller else { return };
            let started = self.measure.then(Instant::now);
            c.engine.tick(t);
            if let Some(s) = started {
                self.costs.tick.push(u64::try_from(s.elapsed().as_nanos()).unwrap_or(u64::MAX));
                for timing in c.engine.last_tick_timings() {
                    if let Some((_, v)) = self.costs.phases.iter_mut().find(|(n, _)| *n == timing.phase) {
                        v.push(u64::try_from(timing.took.as_nanos()).unwrap_or(u64::MAX));
                    }
                }
            }
            let actions: Vec<Action> = c.actions.try_iter().collect();
            let zones = c.engine.zones();
            let all_down = c.engine.all_zones_down();
            self.track_zones(t, &zones);
            let mut refused = false;
            for action in actions {
                self.actions += 1;
                for v in self.checker.check_action(t, &action, &zones, all_down) {
                    self.note_violation(v.to_string());
                }
                if self.control_plane_down {
                    if action.kind.slot().is_some() {
                        self.writes_failed += 1;
                        let failed = Observation::WriteFinished {
                            id: action.id,
                            outcome: WriteOutcome::Failed(UNREACHABLE.to_string()),
                        };
                        // Not through `send`: the answer comes from the
                        // controller's own client, not from a watch.
                        if let Some(c) = &self.controller {
                            let _ = c.observations.send(failed);
                        }
                    }
                    continue;
                }
                self.track_before(t, &action);
                let applied = self.cluster.apply_action(t, &action);
                if let Some(WriteOutcome::Failed(_)) = &applied.outcome {
                    self.writes_failed += 1;
                    refused = true;
                } else {
                    self.track_after(t, &action);
                }
                if let Some(v) = applied.violation {
                    self.contract_violations += 1;
                    self.note_violation(format!("contract at {t}: {v}"));
                }
                self.send(t, applied.observations);
            }
            self.checker.end_step(all_down);
            if !refused || self.control_plane_down {
                break;
            }
        }
    }

    fn note_violation(&mut self, v: String) {
        self.violation_count += 1;
        if self.violations.len() < 20 {
            tracing::warn!("{v}");
            self.violations.push(v);
        }
    }

    fn track_zones(&mut self, t: Timestamp, zones: &[ZoneReport]) {
        for z in zones {
            let slot = self.zone_slot(z.key.to_string());
            let states = &mut self.tally[slot].states;
            if states.last().is_none_or(|&(_, s, r)| s != z.state || r != z.rate) {
                states.push((t, z.state, z.rate));
            }
        }
    }

    /// Facts only known before the write lands: the deleted pod's node.
    fn track_before(&mut self, t: Timestamp, action: &Action) {
        let ActionKind::DeletePod { pod, why, .. } = &action.kind else { return };
        let Some(p) = self.cluster.pod(pod).filter(|p| !p.deleted) else { return };
        let daemonset = p.daemonset;
        let Some(node) = p.node.clone() else { return };
        let i = self.node_slot(&node);
        let tally = &mut self.tally[self.nodes[i].zone];
        tally.evicted.0 += 1;
        widen(&mut tally.evicted.1, t);
        if daemonset {
            tally.daemonset_evicted += 1;
        }
        let tainted_at = self
            .cluster
            .node(&node)
            .and_then(|n| n.taints.iter().filter(|t| is_noexecute(t)).filter_map(|t| t.time_added).min());
        let allowed = match &why.verdict {
            Verdict::NotTolerated { .. } => Some(Span::ZERO),
            Verdict::TolerationExpired { seconds, .. } => Some(Span::from_secs((*seconds).max(0))),
            Verdict::EvictionTimeout { .. } => None,
        };
        if let Some(at) = tainted_at {
            let took = (t - at).as_secs_f64();
            self.latencies.eviction.push(took);
            if let Some(allowed) = allowed {
                self.latencies.eviction_vs_toleration.push(took - allowed.as_secs_f64());
            }
        }
    }

    fn track_after(&mut self, t: Timestamp, action: &Action) {
        match &action.kind {
            ActionKind::UpdateNodeConditions { node, conditions } => {
                let unknown =
                    conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::Unknown);
                if !unknown {
                    return;
                }
                let i = self.node_slot(node);
                let track = &mut self.nodes[i];
                let tally = &mut self.tally[track.zone];
                match track.down_since {
                    Some(since) if track.seen_dead.is_none() => {
                        track.seen_dead = Some(t);
                        tally.seen_dead.0 += 1;
                        widen(&mut tally.seen_dead.1, t);
                        self.latencies.detection.push((t - since).as_secs_f64());
                    }
                    Some(_) => {}
                    None => tally.false_alarms += 1,
                }
            }
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                let i = self.node_slot(node);
                let track = &mut self.nodes[i];
                let tally = &mut self.tally[track.zone];
                if add.iter().any(is_noexecute) {
                    if track.tainted.is_none() {
                        track.tainted = Some(t);
                        tally.tainted.0 += 1;
                        widen(&mut tally.tainted.1, t);
                        if let Some(seen) = track.seen_dead {
                            self.latencies.tainting.push((t - seen).as_secs_f64());
                        }
                    }
                } else if remove.iter().any(is_noexecute) {
                    tally.untainted += 1;
                    track.tainted = None;
                }
            }
            _ => {}
        }
    }

    fn sample(&mut self, t: Timestamp) {
        let mut zones = vec![ZoneSample::default(); self.zone_keys.len()];
        for n in self.cluster.nodes() {
            let Some(&i) = self.node_index.get(&n.name) else { continue };
            let Some(s) = zones.get_mut(self.nodes[i].zone) else { continue };
            match n.conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status) {
                Some(ConditionStatus::True) => s.ready += 1,
                Some(ConditionStatus::False) => s.not_ready += 1,
                _ => s.unknown += 1,
            }
            if n.taints.iter().any(is_noexecute) {
                s.tainted += 1;
            }
        }
        for (s, tally) in zones.iter_mut().zip(&self.tally) {
            s.evicted = tally.evicted.0;
        }
        self.timeline.push((t, zones));
    }

    /// Ends the run and hands over what it gathered.
    pub fn finish(mut self) -> Outcome {
        let mut seen_failed: BTreeMap<usize, usize> = BTreeMap::new();
        let applied = self.plan.faults().get(..self.next_fault).unwrap_or_default().to_vec();
        for f in &applied {
            for n in f.fault.nodes_down() {
                if let Some(&i) = self.node_index.get(n) {
                    seen_failed.insert(i, self.nodes[i].zone);
                }
            }
        }
        for (_, z) in seen_failed {
            self.tally[z].nodes_failed += 1;
        }
        Outcome {
            scenario: self.name,
            description: self.description,
            config: self.config,
            admission: self.admission,
            kubelet: self.timing,
            nodes: self.node_count,
            pods: self.pod_count,
            simulated: self.now - Timestamp::EPOCH,
            steps: self.steps,
            observations: self.observations,
            actions: self.actions,
            writes_failed: self.writes_failed,
            restarts: applied.iter().filter(|f| matches!(f.fault, Fault::RestartController)).count(),
            faults: applied.iter().filter(|f| !f.what.is_empty()).map(|f| (f.at, f.what.clone())).collect(),
            zones: self.tally,
            latencies: self.latencies,
            costs: self.costs,
            timeline: self.timeline,
            safety: self.checker.verdicts(),
            contract_violations: self.contract_violations,
            violations: self.violations,
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
        let opts = SimOptions { source: Source::Builtin(builtin, fleet), config, duration, seed: 7, measure: false };
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
            };
            assert!(matches!(Simulation::new(opts), Err(SimError::Fleet(_))));
        }
    }

    #[test]
    fn config_text_is_checked() {
        assert!(
            parse_config("node-monitor-grace-period: 50s")
                .is_ok_and(|c| c.node_monitor_grace_period == Span::from_secs(50))
        );
        assert!(matches!(parse_config("node-monitor-grace: 50s"), Err(SimError::BadConfig(_))));
        assert!(matches!(parse_config("node-eviction-rate: -1"), Err(SimError::Config(_))));
    }
}
