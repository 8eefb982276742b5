//! The deterministic harness shared by the `engine_steps` fuzz target and
//! the property tests.
//!
//! A [`Plan`] is a controller [`Setup`] and a list of [`Step`]s (both
//! `Arbitrary`, so a fuzzer's bytes or proptest's become one). The
//! [`Harness`] keeps two copies of a simulated cluster that receive the
//! same external steps: one is driven by the real engine through the same
//! [`Controller`] loop as production (each action judged by the safety
//! interlock before it is applied, the echoes fed back), the other by the
//! [`ReferenceModel`]. After every instant the two clusters are compared
//! ([`crate::compare`]). The harness ticks after every external step, and
//! at every instant either side has something due in between, so both see
//! each change on its own.
//!
//! A plan may put an API with latency between the engine and its cluster
//! ([`Setup::latency`]): writes land late, watch events arrive late and in
//! each object's order only ([`nodewarden_cluster::SlowApi`]). The reference model
//! is an oracle of the instant world (it reads its cluster directly, and
//! its deadlines run from its own writes), so with latency the two are not
//! compared; every invariant, the interlock's silence (an action held back
//! is an invariant failure) and the API's contract are checked as always.
//!
//! By concern: `plan` is the input vocabulary (what a fuzzer's bytes
//! become), `apply` turns one step into writes to a simulated cluster, and
//! this file runs the two sides and judges each instant.

mod apply;
mod plan;

pub use plan::{
    MAX_STEPS, NODES, OtherCondition, PODS, Plan, SchedPick, Setup, Status, Step, TaintPick, TolerationPick, ZONES,
};

use nodewarden_cluster::latency::Delayed;
use nodewarden_cluster::{Cluster, KubeletTiming, Kubelets, SlowApi};
use nodewarden_controller::{Controller, StepEvent, Violation};
use nodewarden_engine::{ActionKind, Observation};
use nodewarden_model::{ControllerConfig, Span, Timestamp};

use crate::compare::{Difference, compare};
use crate::model::ReferenceModel;
use crate::sched::{SchedSide, SideApi};
use apply::apply_step;

/// Instants one plan may run, so a plan cannot take unbounded time.
pub const MAX_INSTANTS: u64 = 20_000;

/// Why a plan failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// An invariant broke.
    #[error("invariant broken after step {step}: {violation}")]
    Invariant {
        /// Index of the step being run.
        step: usize,
        /// What broke.
        violation: Violation,
    },
    /// The simulated API server saw a write the controller must never make.
    #[error("contract violation at {at} after step {step}: {what}")]
    Contract {
        /// Index of the step being run.
        step: usize,
        /// When.
        at: Timestamp,
        /// What.
        what: String,
    },
    /// The engine and the reference model disagree.
    #[error("engine and reference model disagree at {at} after step {step}: {difference}")]
    Divergence {
        /// Index of the step being run.
        step: usize,
        /// When.
        at: Timestamp,
        /// The first difference.
        difference: Difference,
    },
}

/// What a run did, for statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Steps run.
    pub steps: usize,
    /// Instants ticked.
    pub instants: u64,
    /// Engine actions applied.
    pub actions: u64,
}

/// What to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checks {
    /// Fail the run on a broken invariant. (The checker runs either way:
    /// it is the controller's safety interlock, which holds such an action
    /// back.)
    pub invariants: bool,
    /// Run the reference model and compare.
    pub reference: bool,
}

impl Default for Checks {
    fn default() -> Self {
        Checks { invariants: true, reference: true }
    }
}

/// A cluster, its kubelets, and what the rescheduler reads beyond it.
struct World {
    cluster: Cluster,
    kubelets: Kubelets,
    side: SchedSide,
}

/// Runs plans.
pub struct Harness {
    config: ControllerConfig,
    checks: Checks,
    now: Timestamp,
    step: usize,
    stats: Stats,
    /// The engine behind its safety interlock, as in production.
    controller: Controller,
    engine_world: World,
    model: ReferenceModel,
    model_world: World,
    trace: Option<Vec<String>>,
    /// The API between the engine and its cluster (bypassed when instant).
    wire: SlowApi,
    /// The reference model runs and is compared: asked for, and the API
    /// answers at once.
    compare: bool,
}

/// An action without its explanation, for traces.
fn short(kind: &ActionKind) -> String {
    match kind {
        ActionKind::DeletePod { pod, uid, .. } => format!("DeletePod {pod} {uid}"),
        ActionKind::RecordEvent(e) => format!("Event {} {}: {}", e.object, e.reason, e.message),
        other => format!("{other:?}"),
    }
}

impl Harness {
    /// A harness at time 0 with an empty cluster, for `setup`.
    pub fn new(setup: &Setup, checks: Checks) -> Harness {
        let config = setup.config();
        let world = || World {
            cluster: Cluster::new(setup.admission()),
            kubelets: Kubelets::new(KubeletTiming::default()),
            side: SchedSide::default(),
        };
        Harness {
            controller: Controller::new(config.clone(), Timestamp::EPOCH)
                .expect("every Setup gives a valid configuration"),
            model: ReferenceModel::new(config.clone(), Timestamp::EPOCH),
            config,
            checks,
            now: Timestamp::EPOCH,
            step: 0,
            stats: Stats::default(),
            engine_world: world(),
            model_world: world(),
            trace: None,
            wire: SlowApi::new(setup.api_latency(), u64::from(setup.latency)),
            compare: checks.reference && setup.api_latency().is_instant(),
        }
    }

    /// Runs a whole plan, step by step, stopping at the first failure.
    pub fn run(plan: &Plan, checks: Checks) -> Result<Stats, Failure> {
        Harness::new(&plan.setup, checks).run_plan(plan)
    }

    /// Runs a whole plan like [`Harness::run`], on `harness` if there is
    /// one, made new for the plan's setup ([`Harness::reset`]); the harness
    /// is left there for the next plan. Building the engine's schedules is
    /// most of what a short plan costs, and a reset keeps them: the fuzzer
    /// runs plans this way.
    pub fn run_reusing(harness: &mut Option<Harness>, plan: &Plan, checks: Checks) -> Result<Stats, Failure> {
        match harness {
            Some(h) => h.reset(&plan.setup, checks),
            None => *harness = Some(Harness::new(&plan.setup, checks)),
        }
        harness.as_mut().map_or(Ok(Stats::default()), |h| h.run_plan(plan))
    }

    fn run_plan(&mut self, plan: &Plan) -> Result<Stats, Failure> {
        for step in &plan.steps {
            self.step(step)?;
        }
        Ok(self.stats)
    }

    /// Makes this harness what [`Harness::new`] with `setup` and `checks`
    /// would make, keeping the engine's schedules when it can.
    pub fn reset(&mut self, setup: &Setup, checks: Checks) {
        let config = setup.config();
        self.controller.reset(config.clone(), Timestamp::EPOCH).expect("every Setup gives a valid configuration");
        let world = || World {
            cluster: Cluster::new(setup.admission()),
            kubelets: Kubelets::new(KubeletTiming::default()),
            side: SchedSide::default(),
        };
        self.model = ReferenceModel::new(config.clone(), Timestamp::EPOCH);
        self.config = config;
        self.checks = checks;
        self.now = Timestamp::EPOCH;
        self.step = 0;
        self.stats = Stats::default();
        self.engine_world = world();
        self.model_world = world();
        self.trace = None;
        self.wire = SlowApi::new(setup.api_latency(), u64::from(setup.latency));
        self.compare = checks.reference && setup.api_latency().is_instant();
    }

    /// Records, from now on, every step and every write of both sides
    /// (for reading a failure); [`Harness::trace`] returns it.
    pub fn record_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// What was recorded since [`Harness::record_trace`].
    pub fn trace(&self) -> &[String] {
        self.trace.as_deref().unwrap_or_default()
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            t.push(line());
        }
    }

    /// What has run so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The engine's cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.engine_world.cluster
    }

    /// What the engine's cluster changed: handed over at once, or put on
    /// the wire.
    fn send(&mut self, observations: Vec<Observation>) {
        if self.wire.is_instant() {
            self.controller.observe_all(self.now, observations);
        } else {
            self.wire.publish(self.now, observations);
        }
    }

    /// Runs one step.
    pub fn step(&mut self, step: &Step) -> Result<(), Failure> {
        self.stats.steps += 1;
        let now = self.now;
        self.note(|| format!("{now} step {step:?}"));
        match step {
            Step::Advance { ms } => self.advance(Span::from_millis(i64::from(*ms))),
            Step::AdvanceSecs { secs } => self.advance(Span::from_secs(i64::from(*secs))),
            Step::RestartController => {
                // A new controller keeps nothing (its token buckets start
                // full, C2); the checker keeps what it knows of the cluster.
                self.controller.restart(self.now).expect("the configuration was valid at the start");
                let world = &self.engine_world;
                let mut state: Vec<Observation> =
                    world.cluster.state().into_iter().map(|o| world.side.decorate(o)).collect();
                state.extend(world.side.budgets.values().cloned().map(Observation::BudgetUpserted));
                if !self.wire.is_instant() {
                    // A new process: it lists the cluster, and nothing its
                    // previous life sent is answered.
                    self.wire.restart();
                    state = self.wire.list(self.now, state);
                }
                self.controller.observe_all(self.now, state);
                self.model = ReferenceModel::new(self.config.clone(), self.now);
                self.instant()
            }
            other => {
                let on = self.config.enable_rescheduler;
                let observations = apply_step(&mut self.engine_world, other, self.now, on);
                if self.compare {
                    apply_step(&mut self.model_world, other, self.now, on);
                }
                self.send(observations);
                self.instant()
            }
        }
        .inspect(|_| self.step += 1)
    }

    /// Moves the clock on by `by`, stopping at every instant either side
    /// or a kubelet has something due.
    fn advance(&mut self, by: Span) -> Result<(), Failure> {
        let target = self.now + by;
        loop {
            if self.stats.instants >= MAX_INSTANTS {
                return Ok(());
            }
            let now = self.now;
            let mut candidates = vec![self.controller.next_due()];
            if self.compare {
                candidates.push(self.model.next_due());
            }
            candidates.extend(self.engine_world.kubelets.next_due());
            candidates.extend(self.wire.next_due());
            let Some(next) = candidates.into_iter().filter(|&t| t > now).min().filter(|&t| t < target) else {
                break;
            };
            self.now = next;
            self.instant()?;
        }
        self.now = target;
        self.instant()
    }

    /// With latency or a client rate: what lands and arrives by `now` (the
    /// answers, then the watch events) reaches the engine; the first
    /// contract violation a landing write showed, if any.
    fn arrive(&mut self, now: Timestamp) -> Option<Failure> {
        if self.wire.is_instant() {
            return None;
        }
        let mut failure = None;
        let mut answers = Vec::new();
        let mut api = SideApi { cluster: &mut self.engine_world.cluster, side: &mut self.engine_world.side };
        let controller = &mut self.controller;
        let mut judge = |at: Timestamp, action: &nodewarden_engine::Action| controller.still_true(at, action);
        for landed in self.wire.land(now, &mut api, &mut answers, &mut judge) {
            if let Some(what) = landed.applied.violation {
                failure.get_or_insert(Failure::Contract { step: self.step, at: landed.at, what });
            }
        }
        let mut events = Vec::new();
        self.wire.deliver(now, &mut events);
        self.controller.observe_all(now, answers);
        self.controller.observe_all(now, events);
        failure
    }

    /// One instant: kubelets, then the engine (and its actions), then the
    /// model, then the comparison.
    fn instant(&mut self) -> Result<(), Failure> {
        self.stats.instants += 1;
        let now = self.now;
        let observations = self.engine_world.kubelets.run_due(now, &mut self.engine_world.cluster);
        self.send(observations);
        if self.compare {
            self.model_world.kubelets.run_due(now, &mut self.model_world.cluster);
        }
        // What lands and arrives by now reaches the engine first.
        let mut failure = self.arrive(now);
        let mut trace = Vec::new();
        let tracing = self.trace.is_some();
        let (step, invariants) = (self.step, self.checks.invariants);
        let stats = &mut self.stats;
        let mut side = SideApi { cluster: &mut self.engine_world.cluster, side: &mut self.engine_world.side };
        let mut api = Delayed { wire: &mut self.wire, cluster: &mut side };
        self.controller.step(now, &mut api, &mut |event| {
            let StepEvent::Handled(h) = event else { return };
            stats.actions += 1;
            if tracing {
                trace.push(format!("{now}   engine: {:?}", short(&h.action.kind)));
            }
            if failure.is_some() {
                return;
            }
            if let Some(violation) = h.violations.first().filter(|_| invariants) {
                failure = Some(Failure::Invariant { step, violation: violation.clone() });
            } else if let Some(what) = h.applied.and_then(|a| a.violation.clone()) {
                failure = Some(Failure::Contract { step, at: now, what });
            }
        });
        if let Some(t) = &mut self.trace {
            t.extend(trace);
        }
        // What the step handed over and may go now goes now.
        if let Some(f) = self.wire.busy_at(now).then(|| self.arrive(now)).flatten() {
            failure.get_or_insert(f);
        }
        if failure.is_none()
            && invariants
            && let Some(violation) = self.controller.checker().step_violations().first()
        {
            failure = Some(Failure::Invariant { step, violation: violation.clone() });
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        if self.compare {
            let writes = self.model.tick(now, &mut self.model_world.cluster, &mut self.model_world.side);
            for w in writes {
                self.note(|| format!("{now}   model:  {:?}", short(&w)));
            }
            let flags = (self.controller.engine().all_zones_down(), self.model.all_zones_down());
            if let Some(difference) = compare(
                &self.engine_world.cluster,
                &self.model_world.cluster,
                &self.controller.engine().zones(),
                &self.model.zones(),
                flags,
            ) {
                return Err(Failure::Divergence { step: self.step, at: now, difference });
            }
        }
        Ok(())
    }
}
