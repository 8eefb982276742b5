//! Replays a scenario: the real engine on a virtual clock against the
//! simulated cluster, checking expectations as it goes.
//!
//! Time moves in steps. The next step is the earliest of: the next
//! scenario event, the next kubelet renewal or post, the next expectation,
//! the engine's next due time, never past the scenario's end. At
//! each instant `t`, in this order:
//!
//! 1. the controller starts, at the first instant `t >= 0`: a fresh engine
//!    receives the whole cluster (nodes, Leases, pods);
//! 2. scenario events due at `t` are applied in file order (a
//!    `restart-controller` among them replaces the engine with a fresh one
//!    started at `t`, which receives the cluster as it is at that point);
//! 3. simulated kubelets do what is due at `t`; then the cluster's
//!    housekeeping ([`Cluster::housekeeping`]: graceful deletions that
//!    end, the simulated scheduler, budget status; nothing unless the file
//!    runs the scheduler or the rescheduler, or has budgets);
//!    every change of steps 2 and 3 is sent to the engine as an observation;
//! 4. one step of the [`Controller`] loop at `t`: the engine ticks; each
//!    action it issued is judged by the safety interlock and either held
//!    back or applied to the cluster; either way it is printed, and the
//!    cluster's answer (`WriteFinished`, then the object) is fed back; when
//!    a write was refused the engine ticks again at `t`, so it learns of
//!    the refusal in the same instant (its periodic loops do not run twice);
//!    then housekeeping runs again, so a pod the controller's writes made
//!    room for is bound in the same instant;
//! 5. zone state and rate changes (from `engine.zones()`) are printed;
//! 6. expectations due at `t` are checked, in file order.
//!
//! With API latency (`cluster.api` in the file, or
//! [`ReplayOptions::api`]) the cluster and the controller talk through a
//! [`SlowApi`]: the changes of steps 2 and 3 and the writes of step 4 go on
//! it, and before step 4 the writes due by `t` land (their answers reach
//! the controller) and the watch events due by `t` are delivered. Time
//! then also stops where something lands or is delivered. A (re)started
//! controller gets its list at once, so its loops keep the contract's
//! grid; what its previous life sent still lands, unanswered. An
//! expectation then holds when it comes true at some instant from its
//! `at` to `at` + the tolerance ([`ApiLatency::tolerance`]); its line says
//! when (`seen`).

use std::collections::BTreeMap;
use std::io::{self, Write};

use nodewarden_cluster::cluster::Cluster;
use nodewarden_cluster::error::ScenarioError;
use nodewarden_cluster::faults::apply_event;
use nodewarden_cluster::kubelet::Kubelets;
use nodewarden_cluster::latency::{ApiLatency, Delayed, SlowApi};
use nodewarden_cluster::scenario::{EventAction, EventEntry, Expectation, Scenario};
use nodewarden_cluster::validate::validate;
use nodewarden_controller::{Controller, StepEvent};
use nodewarden_engine::{Observation, WriteOutcome, ZoneReport, ZoneState};
use nodewarden_model::{ConfigError, Timestamp, ZoneKey};
use tracing::debug;

use nodewarden_model::Span;

use crate::expect::evaluate;
use crate::output::{ActionRecord, Record, Summary, ViolationRecord, ZoneRecord};
use nodewarden_controller::write_order::EvictionClient;

/// How much of the replay to report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReplayOptions {
    /// Report only failed expectations, contract violations and the summary.
    pub quiet: bool,
    /// The API latency to replay with, instead of the file's own
    /// (`cluster.api`; absent there: none); the file's client rate stays
    /// unless this gives one ([`ApiLatency::over`]).
    pub api: Option<ApiLatency>,
    /// Seed of the latency draws (the same seed, the same run).
    pub seed: u64,
}

/// Everything a replay reported, and its verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOutcome {
    /// The output lines, in order (filtered by [`ReplayOptions::quiet`]).
    pub records: Vec<Record>,
    /// The tally (also the last record).
    pub summary: Summary,
}

impl ReplayOutcome {
    /// True when every expectation held and no rule was broken.
    pub fn ok(&self) -> bool {
        self.summary.ok()
    }

    /// The failed expectations and the violations.
    pub fn failures(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.is_failure_or_summary() && !matches!(r, Record::Summary(_)))
    }
}

/// Why a replay could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The scenario does not validate.
    #[error("invalid scenario: {0}")]
    Invalid(#[from] ScenarioError),
    /// The engine refused the configuration.
    #[error("the engine refused the configuration: {0}")]
    Engine(#[from] ConfigError),
    /// The engine kept asking for ticks without time moving on enough.
    #[error("stopped after {steps} steps at {at}: the engine asks to tick too often")]
    Runaway {
        /// Steps taken.
        steps: u64,
        /// Virtual time reached.
        at: Timestamp,
    },
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

/// More steps than any sensible scenario needs (a week at 100 ms ticks is
/// about 6 million).
const MAX_STEPS: u64 = 50_000_000;

/// Replays `scenario` and returns every output line.
pub fn replay(scenario: &Scenario, opts: &ReplayOptions) -> Result<ReplayOutcome, ReplayError> {
    let mut records = Vec::new();
    let summary = replay_with(scenario, opts, &mut |r: &Record| {
        if !opts.quiet || r.is_failure_or_summary() {
            records.push(r.clone());
        }
    })?;
    Ok(ReplayOutcome { records, summary })
}

/// Replays `scenario`, writing one JSON line per record to `out` as it
/// goes. A closed output (broken pipe) stops the writing, not the replay.
pub fn replay_to_writer<W: Write>(
    scenario: &Scenario,
    opts: &ReplayOptions,
    mut out: W,
) -> Result<Summary, ReplayError> {
    let mut failure: Option<io::Error> = None;
    let summary = replay_with(scenario, opts, &mut |r: &Record| {
        if failure.is_some() || (opts.quiet && !r.is_failure_or_summary()) {
            return;
        }
        if let Err(e) = writeln!(out, "{}", r.to_json()) {
            failure = Some(e);
        }
    })?;
    if failure.is_none()
        && let Err(e) = out.flush()
    {
        failure = Some(e);
    }
    match failure {
        Some(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(ReplayError::Output(e)),
        _ => Ok(summary),
    }
}

/// Replays `scenario`, handing every record to `sink` as it is produced.
pub fn replay_with(
    scenario: &Scenario,
    opts: &ReplayOptions,
    sink: &mut dyn FnMut(&Record),
) -> Result<Summary, ReplayError> {
    validate(scenario)?;
    Runner::new(scenario, opts, sink).run()
}

struct Runner<'a> {
    scenario: &'a Scenario,
    sink: &'a mut dyn FnMut(&Record),
    cluster: Cluster,
    kubelets: Kubelets,
    /// The API between the controller and the cluster (bypassed when
    /// instant).
    wire: SlowApi,
    /// How late an expectation may come true.
    tolerance: Span,
    largest_deviation: Option<Span>,
    held_back: usize,
    /// The engine behind its safety interlock, from the first instant at
    /// or after 0.
    controller: Option<Controller>,
    zones: Vec<ZoneReport>,
    reported: BTreeMap<ZoneKey, (Option<ZoneState>, f64)>,
    passed: usize,
    failed: usize,
    violations: usize,
}

impl<'a> Runner<'a> {
    fn new(scenario: &'a Scenario, opts: &ReplayOptions, sink: &'a mut dyn FnMut(&Record)) -> Runner<'a> {
        let (cluster, kubelets) = Cluster::from_scenario(scenario);
        let latency = opts.api.map_or(scenario.cluster.api, |flag| flag.over(scenario.cluster.api));
        Runner {
            scenario,
            sink,
            cluster,
            kubelets,
            wire: SlowApi::new(latency, opts.seed)
                .with_eviction_client(EvictionClient::for_mode(scenario.config.enable_taint_manager)),
            tolerance: latency.tolerance(scenario.config.node_monitor_period),
            largest_deviation: None,
            held_back: 0,
            controller: None,
            zones: Vec::new(),
            reported: BTreeMap::new(),
            passed: 0,
            failed: 0,
            violations: 0,
        }
    }

    fn emit(&mut self, record: Record) {
        (self.sink)(&record);
    }

    /// What changed in the cluster at `t`: handed to the controller at
    /// once, or put on the wire.
    fn send(&mut self, t: Timestamp, observations: Vec<Observation>) {
        if !self.wire.is_instant() {
            self.wire.publish(t, observations);
        } else if let Some(c) = &mut self.controller {
            c.observe_all(t, observations);
        }
    }

    /// Starts the controller at `t` (or restarts it: a fresh engine that
    /// keeps nothing) and sends it the whole cluster. With latency, it
    /// hears nothing of what its previous life had sent.
    fn start_controller(&mut self, t: Timestamp) -> Result<(), ReplayError> {
        let mut state = self.cluster.state();
        if !self.wire.is_instant() {
            self.wire.restart();
            state = self.wire.list(t, state);
        }
        let c = match &mut self.controller {
            Some(c) => {
                c.restart(t)?;
                c
            }
            None => self.controller.insert(Controller::new(self.scenario.config.clone(), t)?),
        };
        c.observe_all(t, state);
        Ok(())
    }

    /// With latency: what lands and arrives by `t` (the answers to writes,
    /// then watch events) reaches the controller.
    fn arrive(&mut self, t: Timestamp) {
        if self.wire.is_instant() {
            return;
        }
        let mut answers = Vec::new();
        let controller = &mut self.controller;
        let mut judge = |at: Timestamp, action: &nodewarden_engine::Action| match controller.as_mut() {
            Some(c) => c.still_true(at, action),
            None => Err(nodewarden_engine::Withdrawal::ControllerDown),
        };
        for landed in self.wire.land(t, &mut self.cluster, &mut answers, &mut judge) {
            if let Some(violation) = landed.applied.violation {
                self.violations += 1;
                self.emit(Record::Violation(ViolationRecord { t: landed.at, violation }));
            }
        }
        let mut events = Vec::new();
        self.wire.deliver(t, &mut events);
        if let Some(c) = &mut self.controller {
            c.observe_all(t, answers);
            c.observe_all(t, events);
        }
    }

    fn run(mut self) -> Result<Summary, ReplayError> {
        let s = self.scenario;
        let tolerance = self.tolerance;
        let latency = (!self.wire.is_instant()).then(|| self.wire.latency());
        // With latency the last expectation may come true up to the
        // tolerance later.
        let end = s.end() + tolerance;
        let mut waiting: Vec<(usize, &Expectation)> = Vec::new();
        let at = |span| Timestamp::EPOCH + span;
        let mut events: Vec<(usize, &EventEntry)> = s.events.iter().enumerate().collect();
        events.sort_by_key(|(i, e)| (e.at, *i));
        let mut expects: Vec<(usize, &Expectation)> = s.expect.iter().enumerate().collect();
        expects.sort_by_key(|(i, x)| (x.at, *i));
        let (mut next_event, mut next_expect) = (0, 0);

        let mut t =
            [Some(Timestamp::EPOCH), events.first().map(|(_, e)| at(e.at)), expects.first().map(|(_, x)| at(x.at))]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(Timestamp::EPOCH);
        let mut steps: u64 = 0;
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                return Err(ReplayError::Runaway { steps, at: t });
            }
            if self.controller.is_none() && t >= Timestamp::EPOCH {
                debug!(%t, "controller starts");
                self.start_controller(t)?;
            }
            while let Some((_, e)) = events.get(next_event).filter(|(_, e)| at(e.at) == t) {
                self.apply_event(t, &e.action)?;
                next_event += 1;
            }
            let observations = self.kubelets.run_due(t, &mut self.cluster);
            self.send(t, observations);
            let observations = self.cluster.housekeeping(t);
            self.send(t, observations);
            self.arrive(t);
            self.tick(t);
            // What the tick handed over and may go now goes now (a client
            // rate's token at hand; a write with no latency lands now).
            if self.wire.busy_at(t) {
                self.arrive(t);
            }
            // What the controller's writes let the scheduler do lands in
            // the same instant (the engine hears of it at its next tick).
            let observations = self.cluster.housekeeping(t);
            self.send(t, observations);
            while let Some(&(i, x)) = expects.get(next_expect).filter(|(_, x)| at(x.at) == t) {
                waiting.push((i, x));
                next_expect += 1;
            }
            waiting.retain(|&(i, x)| !self.check(i, t, x, at(x.at) + tolerance <= t));

            let engine_next = self.controller.as_ref().map(|c| c.next_due()).filter(|&n| n > t);
            let next = [
                (self.controller.is_none()).then_some(Timestamp::EPOCH),
                events.get(next_event).map(|(_, e)| at(e.at)),
                expects.get(next_expect).map(|(_, x)| at(x.at)),
                self.kubelets.next_due(),
                self.cluster.next_due(),
                engine_next,
                self.wire.next_due(),
                waiting.iter().map(|(_, x)| at(x.at) + tolerance).min(),
            ]
            .into_iter()
            .flatten()
            .filter(|&n| n > t)
            .min();
            match next {
                Some(n) if n <= end => t = n,
                _ => break,
            }
        }
        // Nothing is left unchecked: every `at` is within the run
        // (validated), and so is every tolerance window.
        for &(i, x) in waiting.iter().chain(expects.get(next_expect..).unwrap_or_default()) {
            self.check(i, at(x.at), x, true);
        }
        let summary = Summary {
            summary: true,
            name: s.name.clone(),
            passed: self.passed,
            failed: self.failed + self.violations,
            violations: self.violations,
            writes: self.cluster.total_writes(),
            events: self.cluster.events().len(),
            end,
            held_back: self.held_back,
            api_latency: latency.map(|l| l.to_string()),
            tolerance: latency.map(|_| tolerance),
            largest_deviation: latency.and(self.largest_deviation),
        };
        self.emit(Record::Summary(summary.clone()));
        Ok(summary)
    }

    fn apply_event(&mut self, t: Timestamp, action: &EventAction) -> Result<(), ReplayError> {
        if let EventAction::RestartController = action {
            debug!(%t, "controller restarts");
            return self.start_controller(t);
        }
        let observations = apply_event(&mut self.cluster, &mut self.kubelets, t, action);
        self.send(t, observations);
        Ok(())
    }

    fn tick(&mut self, t: Timestamp) {
        let Some(controller) = &mut self.controller else { return };
        let (sink, violations, held_back) = (&mut self.sink, &mut self.violations, &mut self.held_back);
        let mut api = Delayed { wire: &mut self.wire, cluster: &mut self.cluster };
        controller.step(t, &mut api, &mut |event| {
            let StepEvent::Handled(handled) = event else { return };
            if !handled.violations.is_empty() {
                *held_back += 1;
            }
            for v in handled.violations {
                *violations += 1;
                sink(&Record::Violation(ViolationRecord { t, violation: v.to_string() }));
            }
            let mut record = ActionRecord::new(t, &handled.action.kind);
            match handled.applied {
                None => {
                    let rules: Vec<&str> = handled.violations.iter().map(|v| v.invariant.name()).collect();
                    record.blocked = Some(rules.join(", "));
                }
                Some(applied) => match &applied.outcome {
                    Some(WriteOutcome::Failed(why)) => record.failed = Some(why.clone()),
                    Some(WriteOutcome::Withdrawn(why)) => record.withdrawn = Some(why.to_string()),
                    _ => {}
                },
            }
            sink(&Record::Action(record));
            if let Some(violation) = handled.applied.and_then(|a| a.violation.clone()) {
                *violations += 1;
                sink(&Record::Violation(ViolationRecord { t, violation }));
            }
        });
        let zones = controller.engine().zones();
        self.report_zones(t, &zones);
        self.zones = zones;
    }

    fn report_zones(&mut self, t: Timestamp, zones: &[ZoneReport]) {
        let mut seen = BTreeMap::new();
        for z in zones {
            let now = (z.state, z.rate);
            if self.reported.get(&z.key) != Some(&now) {
                self.emit(Record::Zone(ZoneRecord::new(t, z.key.to_string(), Some(z))));
            }
            seen.insert(z.key.clone(), now);
        }
        let gone: Vec<ZoneKey> = self.reported.keys().filter(|k| !seen.contains_key(*k)).cloned().collect();
        for key in gone {
            self.emit(Record::Zone(ZoneRecord::new(t, key.to_string(), None)));
        }
        self.reported = seen;
    }

    /// Checks expectation `index` at `t`; a result is reported when it
    /// holds, or when `last` (its window is over). True when reported.
    fn check(&mut self, index: usize, t: Timestamp, x: &Expectation, last: bool) -> bool {
        let at = Timestamp::EPOCH + x.at;
        let mut record = evaluate(index + 1, at, x, &self.cluster, &self.zones);
        if !record.ok && !last {
            return false;
        }
        if !self.wire.is_instant() {
            record.seen = Some(t);
        }
        if record.ok {
            self.passed += 1;
            let late = t - at;
            self.largest_deviation = Some(self.largest_deviation.map_or(late, |d| d.max(late)));
        } else {
            self.failed += 1;
        }
        self.emit(Record::Expect(record));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_cluster::validate::parse_scenario;

    fn run(text: &str, opts: ReplayOptions) -> ReplayOutcome {
        let s = match parse_scenario(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        match replay(&s, &opts) {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        }
    }

    fn expects(o: &ReplayOutcome) -> Vec<&crate::output::ExpectRecord> {
        o.records
            .iter()
            .filter_map(|r| match r {
                Record::Expect(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    const KUBELETS: &str = r#"
name: kubelets keep nodes alive
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
pods:
- {name: default/p, node: a}
expect:
- {at: 200s, node: a, ready: "True", lacks-taints: ["node.kubernetes.io/unreachable:NoExecute"], writes: 0}
- {at: 100s, pod: default/p, deleted: false, ready: true, writes: 0}
- {at: 200s, node: b, ready: "False"}
"#;

    #[test]
    fn reports_in_time_order_and_ends_with_the_summary() {
        let o = run(KUBELETS, ReplayOptions::default());
        let e = expects(&o);
        // Checked in time order, numbered in file order.
        assert_eq!(e.iter().map(|e| e.expect).collect::<Vec<_>>(), [2, 1, 3]);
        assert!(e[0].ok && e[1].ok, "{e:?}");
        assert!(!e[2].ok);
        assert_eq!(e[2].failed, ["ready"]);
        assert_eq!(o.summary.passed, 2);
        assert_eq!(o.summary.failed, 1);
        assert_eq!(o.summary.end, Timestamp::from_nanos(201_000_000_000));
        assert!(!o.ok());
        assert!(matches!(o.records.last(), Some(Record::Summary(_))));
        assert_eq!(o.failures().count(), 1);
        // Virtual-time order across all kinds of lines.
        let times: Vec<Timestamp> = o
            .records
            .iter()
            .filter_map(|r| match r {
                Record::Action(a) => Some(a.t),
                Record::Zone(z) => Some(z.t),
                Record::Violation(v) => Some(v.t),
                Record::Expect(x) => Some(x.at),
                Record::Summary(_) => None,
            })
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    #[test]
    fn quiet_keeps_failures_and_summary() {
        let o = run(KUBELETS, ReplayOptions { quiet: true, ..ReplayOptions::default() });
        assert_eq!(o.records.len(), 2, "{:?}", o.records);
        assert!(matches!(&o.records[0], Record::Expect(e) if e.expect == 3 && !e.ok));
    }

    #[test]
    fn writer_prints_json_lines() {
        let s = parse_scenario(KUBELETS).unwrap();
        let mut out = Vec::new();
        let summary = replay_to_writer(&s, &ReplayOptions::default(), &mut out).unwrap();
        assert_eq!(summary.failed, 1);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let last = lines.last().unwrap();
        assert_eq!(last["summary"], true);
        assert_eq!(last["name"], "kubelets keep nodes alive");
        let first_expect = lines.iter().find(|l| l.get("expect").is_some()).unwrap();
        assert_eq!(first_expect["expect"], 2);
        assert_eq!(first_expect["at"], "100s");
        assert_eq!(first_expect["pod"], "default/p");
        assert_eq!(first_expect["want"], serde_json::json!({"deleted": false, "ready": true, "writes": 0}));
    }

    #[test]
    fn events_before_the_start_shape_the_initial_cluster() {
        let o = run(
            r#"
nodes: [{name: a, created: -1h, ready: "True", heartbeat: -20s}]
events:
- {at: -10s, set-ready: {node: a, status: "False"}}
expect:
- {at: -5s, node: a, ready: "False", writes: 0}
- {at: 0s, node: a, ready: "False"}
"#,
            ReplayOptions::default(),
        );
        assert!(o.ok(), "{:?}", o.records);
    }

    #[test]
    fn scenario_events_reach_the_cluster() {
        let o = run(
            r#"
cluster: {default-not-ready-toleration-seconds: null, default-unreachable-toleration-seconds: 7}
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
events:
- {at: 1s, add-node: {name: n, zone: r/z, labels: {x: y}, kubelet: true}}
- {at: 2s, set-labels: {node: n, labels: {x: null, k: v}}}
- {at: 3s, add-pod: {name: ns/p, tolerations: [{operator: Exists}]}}
- {at: 3s, add-pod: {name: ns/q}}
- {at: 4s, bind-pod: {pod: ns/p, node: n}}
- {at: 5s, delete-pod: ns/q}
- {at: 6s, set-unschedulable: {node: n, value: true}}
- {at: 7s, delete-node: n}
expect:
- {at: 2s, node: n, ready: "True", labels: {k: v, x: null, topology.kubernetes.io/zone: z}}
- {at: 6s, pod: ns/q, deleted: true, ready: true}
- {at: 6s, node: n, deleted: false}
- {at: 8s, node: n, deleted: true}
- {at: 8s, pod: ns/p, deleted: false}
"#,
            ReplayOptions::default(),
        );
        assert!(o.ok(), "{:?}", o.records);
    }

    #[test]
    fn restart_controller_starts_a_fresh_engine() {
        let o = run(
            r#"
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
events:
- {at: 30s, restart-controller: true}
expect:
- {at: 29s, events-include: [{reason: RegisteredNode, object: a, count: 1}]}
- {at: 30s, events-include: [{reason: RegisteredNode, object: a, count: 2}]}
- {at: 60s, zone: r/z, state: Normal, rate: 0.1, tainted: 0}
"#,
            ReplayOptions::default(),
        );
        assert!(o.ok(), "{:?}", o.records);
    }

    #[test]
    fn unschedulable_since_without_a_scheduler_lasts_until_bound() {
        let o = run(
            r#"
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
pods:
- {name: kube-system/dns, unschedulable-since: -30s, priority-class: system-node-critical}
events:
- {at: 2s, add-pod: {name: kube-system/late, unschedulable-since: now}}
- {at: 5s, bind-pod: {pod: kube-system/dns, node: a}}
expect:
- {at: 1s, pod: kube-system/dns, unschedulable: true, node: null, conditions: {PodScheduled: "False"}}
- {at: 3s, pod: kube-system/late, unschedulable: true}
- {at: 5s, pod: kube-system/dns, unschedulable: false, node: a, conditions: {PodScheduled: "True"}}
- {at: 6s, pod: kube-system/late, unschedulable: true, node: null}
"#,
            ReplayOptions::default(),
        );
        assert!(o.ok(), "{:?}", o.failures().collect::<Vec<_>>());
    }
}
