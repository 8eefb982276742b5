//! The control loop, written once: tick, judge, apply or hold back, feed
//! back, and tick again within the instant when a refusal brought news.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nodewarden_engine::{
    Action, ActionKind, Engine, ObjectKind, ObjectRef, Observation, Withdrawal, WriteOutcome, WriteSlot,
};
use nodewarden_model::{ConfigError, ControllerConfig, Span, Timestamp};

use crate::api::{Applied, ClusterApi};
use crate::invariants::{Invariant, InvariantChecker, Violation};

/// How many times the engine ticks within one instant to act on what the
/// answers to its writes showed, when the back end answers at once (the
/// in-memory cluster without API latency): the object as a write left it
/// (a NoExecute taint the taint manager now observes) or, after a
/// refusal, as it is (a conflict, a deleted object, a budget that forbids
/// an eviction). Each answer is news the engine acts on as it would once a
/// watch delivered it; the bound keeps an API that refuses every retry
/// from holding the loop. Periodic loops do not run twice in one instant,
/// only the event-driven handlers do. A back end that answers later hands
/// its answers in before a later step instead.
pub const MAX_ANSWER_ROUNDS: usize = 8;

/// Counter of actions the safety interlock held back, labelled
/// `invariant` with the rule's snake_case name. Always 0 in a correct
/// controller; anything else is a bug worth a page.
pub const INTERLOCK_METRIC: &str = "nodewarden_safety_interlock_blocked_total";

/// The reason a held-back write is reported to the engine with.
/// Counter {kind}: writes withdrawn just before they would have been
/// sent, because they were no longer true ([`Controller::still_true`]).
pub const WITHDRAWN_METRIC: &str = "nodewarden_writes_withdrawn_total";

const HELD_BACK: &str = "held back by the safety interlock";

/// What one action came to.
#[derive(Debug)]
pub struct Handled<'a> {
    /// The action, as the engine issued it.
    pub action: &'a Action,
    /// The invariants it would break; not empty exactly when it was held
    /// back.
    pub violations: &'a [Violation],
    /// What the back end did with it; `None` when the interlock held it
    /// back (it was never sent). A write the loop withdrew before handing
    /// it to a back end that sends at once ([`ClusterApi::sends_at_once`])
    /// was never sent either: its answer is the loop's own, with the
    /// outcome [`WriteOutcome::Withdrawn`] and the object as the back end
    /// reads it.
    pub applied: Option<&'a Applied>,
}

/// What a driver may want to see of a step, as it happens.
pub enum StepEvent<'a> {
    /// The engine ticked (once, or again in an answer round) and issued
    /// `actions`; `took` is the tick's wall time when a clock was lent
    /// with [`Controller::measure_with`].
    Ticked {
        /// The engine right after the tick (zones, phase timings).
        engine: &'a Engine,
        /// The actions it issued.
        actions: &'a [Action],
        /// How long the tick took, if measured.
        took: Option<Duration>,
    },
    /// One action was judged and applied or held back.
    Handled(Handled<'a>),
}

/// Tallies of one [`Controller::step`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepSummary {
    /// Engine ticks, answer rounds included.
    pub ticks: usize,
    /// Actions the engine issued.
    pub actions: usize,
    /// Actions the interlock held back.
    pub held_back: usize,
    /// Writes the back end refused.
    pub refused: usize,
    /// Writes withdrawn as they were handed to a back end that sends them
    /// at once ([`ClusterApi::sends_at_once`]), no longer true.
    pub withdrawn: usize,
}

/// The checker's half of [`Controller::observe`] ([`Controller::feeds`]).
pub struct CheckerFeed<'a>(&'a mut InvariantChecker);

impl CheckerFeed<'_> {
    /// Mirrors each of `batch`, seen at `now`, in order, as
    /// [`Controller::observe`] does before handing it to the engine
    /// ([`InvariantChecker::observe_batch`]).
    pub fn observe_batch(&mut self, now: Timestamp, batch: &[Observation]) {
        self.0.observe_batch(now, batch);
    }
}

/// The engine's half of [`Controller::observe`] ([`Controller::feeds`]).
pub struct EngineFeed<'a>(&'a mut Engine);

impl EngineFeed<'_> {
    /// Hands over every observation in `batch`, in order, leaving it
    /// empty ([`Engine::observe_batch`]).
    pub fn observe_batch(&mut self, batch: &mut Vec<Observation>) {
        self.0.observe_batch(batch);
    }

    /// Takes in what was handed over so far, deciding nothing
    /// ([`Controller::absorb`]): the ingest's work done while the other
    /// half is busy, so the next tick has little left to take in.
    pub fn absorb(&mut self, now: Timestamp) {
        self.0.absorb(now);
    }
}

/// The engine, the invariant checker that guards it, and the loop between
/// them and a [`ClusterApi`].
pub struct Controller {
    config: ControllerConfig,
    engine: Engine,
    checker: InvariantChecker,
    stopwatch: Option<fn() -> Instant>,
    /// (rule, object and slot) pairs already logged at error level: a
    /// held-back write is usually issued again at the next pass, and one
    /// loud line per object is what a person can read.
    logged: HashSet<(Invariant, Option<(ObjectRef, WriteSlot)>)>,
    /// An engine of the other eviction mode kept by [`Controller::reset`].
    spare: Option<Engine>,
    /// The engine's monitor pass count the checker was last told of.
    passes_told: u64,
}

impl Controller {
    /// A controller whose engine starts at `start`. Refuses a configuration
    /// that cannot work.
    pub fn new(config: ControllerConfig, start: Timestamp) -> Result<Controller, ConfigError> {
        let engine = Engine::new(config.clone(), start)?;
        let checker = InvariantChecker::new(&config);
        Ok(Controller { config, engine, checker, stopwatch: None, logged: HashSet::new(), spare: None, passes_told: 0 })
    }

    /// Replaces the engine with a fresh one started at `at`, as a restarted
    /// process would be: it keeps nothing, and the driver sends it the
    /// cluster again. The checker keeps what it knows of the cluster (the
    /// cluster did not restart) and forgets what was in flight.
    pub fn restart(&mut self, at: Timestamp) -> Result<(), ConfigError> {
        self.engine.reset(self.config.clone(), at)?;
        if let Some(clock) = self.stopwatch {
            self.engine.measure_with(clock);
        }
        self.checker.controller_restarted();
        self.passes_told = 0;
        self.logged.clear();
        Ok(())
    }

    /// Makes the engine a warm standby's ([`Engine::stand_by`]): it takes
    /// in and keeps health records, and decides nothing until
    /// [`Controller::take_over`]. The checker follows the cluster as ever.
    pub fn stand_by(&mut self) {
        self.engine.stand_by();
    }

    /// The standby becomes the leader at `now` ([`Engine::take_over`]).
    pub fn take_over(&mut self, now: Timestamp) {
        self.engine.take_over(now);
    }

    /// Makes this controller what [`Controller::new`] with `config` and
    /// `start` would make (a new engine, a new checker, no clock lent),
    /// keeping the engine's schedules when it can (see `Engine::reset`):
    /// for drivers that run many short lives one after another, such as
    /// the fuzzer.
    pub fn reset(&mut self, config: ControllerConfig, start: Timestamp) -> Result<(), ConfigError> {
        if !self.engine.resets_cheaply_to(&config) {
            // Keep the engine of the other eviction mode for a later reset.
            match self.spare.take() {
                Some(spare) if spare.resets_cheaply_to(&config) => {
                    self.spare = Some(std::mem::replace(&mut self.engine, spare));
                }
                _ => self.spare = Some(std::mem::replace(&mut self.engine, Engine::new(config.clone(), start)?)),
            }
        }
        self.engine.reset(config.clone(), start)?;
        self.checker = InvariantChecker::new(&config);
        self.passes_told = 0;
        self.config = config;
        self.stopwatch = None;
        self.logged.clear();
        Ok(())
    }

    /// Lends a clock for figures only (tick and phase durations, the
    /// health-pass histogram); no decision ever reads it.
    pub fn measure_with(&mut self, clock: fn() -> Instant) {
        self.stopwatch = Some(clock);
        self.engine.measure_with(clock);
    }

    /// Has the engine keep its judgements, for a shadow
    /// ([`Engine::keep_judgements`]).
    pub fn keep_judgements(&mut self) {
        self.engine.keep_judgements();
    }

    /// The engine's judgements since the last call
    /// ([`Engine::take_judgements`]).
    pub fn take_judgements(&mut self) -> Vec<nodewarden_engine::Judgement> {
        self.engine.take_judgements()
    }

    /// The engine, for its reports (zones, next due time, timings).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The invariant checker, for its verdicts.
    pub fn checker(&self) -> &InvariantChecker {
        &self.checker
    }

    /// The configuration the engine runs with.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Takes the controller apart, for measuring what each part holds (the
    /// engine's memory apart from the interlock's mirror of the cluster).
    pub fn into_parts(self) -> (Engine, InvariantChecker) {
        (self.engine, self.checker)
    }

    /// When the engine next has work; see [`Engine::next_due`].
    pub fn next_due(&self) -> Timestamp {
        self.engine.next_due()
    }

    /// Hands one observation to the checker and the engine.
    pub fn observe(&mut self, now: Timestamp, observation: Observation) {
        self.checker.observe(now, &observation);
        self.engine.observe(observation);
    }

    /// Hands several observations over, in order.
    pub fn observe_all(&mut self, now: Timestamp, observations: impl IntoIterator<Item = Observation>) {
        for o in observations {
            self.observe(now, o);
        }
    }

    /// [`Controller::observe`] in two halves that can run on two threads
    /// at once: the checker's mirror and the engine's ingest read the same
    /// observations and share nothing else. A driver that produces
    /// observations on one thread (the simulator's kubelets) can have the
    /// checker judge them there while the engine takes in the previous
    /// batch on the other. Every observation must reach both halves, in the
    /// same order; the borrow ends before the next [`Controller::step`],
    /// so both are up to date when the actions are judged.
    pub fn feeds(&mut self) -> (CheckerFeed<'_>, EngineFeed<'_>) {
        (CheckerFeed(&mut self.checker), EngineFeed(&mut self.engine))
    }

    /// Lets the engine take in what it was handed at `now` without deciding
    /// anything ([`Engine::absorb`]): for a driver that may not step yet
    /// (caches not synced, a heartbeat watch down) while observations keep
    /// arriving. The checker has seen them already, in [`Controller::observe`].
    pub fn absorb(&mut self, now: Timestamp) {
        self.engine.absorb(now);
    }

    /// The keys of the objects of `kind` the engine holds
    /// ([`Engine::known_keys`]).
    pub fn known_keys(&mut self, kind: ObjectKind) -> Vec<String> {
        self.engine.known_keys(kind)
    }

    /// A re-list of `kind` (after a watch lost track) showed `present`:
    /// hands over the deletion of every object of the kind the engine holds
    /// beyond them, in key order, and returns how many. What was handed
    /// over before is taken in first, so an object added and deleted while
    /// the watch was away is seen both ways. Drivers keep no copy of every
    /// key for this; the engine's is the one.
    pub fn relisted(&mut self, now: Timestamp, kind: ObjectKind, present: &HashSet<String>) -> usize {
        self.absorb(now);
        let mut gone: Vec<String> = self.known_keys(kind).into_iter().filter(|k| !present.contains(k)).collect();
        gone.sort();
        let n = gone.len();
        for key in gone {
            self.observe(now, Observation::deletion(kind, key));
        }
        n
    }

    /// One instant of the loop at `now`: tick the engine, pull what `api`
    /// has room for of the writes decided and not yet built
    /// ([`ClusterApi::room`]), judge each action, hold back those that
    /// would break an invariant, withdraw a write `api` would send at
    /// once that is no longer true
    /// ([`ClusterApi::sends_at_once`]), apply the rest through `api` in
    /// order and feed back what it answers. When a
    /// write was answered with the object's state, tick again at `now` (at most
    /// [`MAX_ANSWER_ROUNDS`] ticks in all). `events` sees every tick and
    /// every action as it happens.
    pub fn step(
        &mut self,
        now: Timestamp,
        api: &mut dyn ClusterApi,
        events: &mut dyn FnMut(StepEvent<'_>),
    ) -> StepSummary {
        let mut summary = StepSummary::default();
        for _ in 0..MAX_ANSWER_ROUNDS {
            let started = self.stopwatch.map(|clock| clock());
            let mut actions = self.engine.tick(now);
            // Then what the back end has room for of the writes decided
            // and not yet built (`ClusterApi::room`).
            actions.extend(self.engine.pull(now, api.room()));
            let passes = self.engine.monitor_passes();
            if passes != self.passes_told {
                self.passes_told = passes;
                self.checker.monitor_passed();
            }
            let took = self.stopwatch.zip(started).map(|(clock, s)| clock().duration_since(s));
            summary.ticks += 1;
            summary.actions += actions.len();
            events(StepEvent::Ticked { engine: &self.engine, actions: &actions, took });
            let all_down = self.engine.all_zones_down();
            // Handed over by value: each action is freed once applied (a
            // zone outage's tick issues hundreds of thousands).
            let again = self.carry_out(now, actions, api, events, &mut summary);
            self.checker.end_step(all_down);
            if !again {
                break;
            }
        }
        summary
    }

    /// Judges `actions` in order, holds back those that would break an
    /// invariant, withdraws those `api` would send at once that are no
    /// longer true, and applies the rest; true when an answer brought the
    /// object's state (the engine should tick again at `now`).
    fn carry_out(
        &mut self,
        now: Timestamp,
        actions: Vec<Action>,
        api: &mut dyn ClusterApi,
        events: &mut dyn FnMut(StepEvent<'_>),
        summary: &mut StepSummary,
    ) -> bool {
        let zones = self.engine.zones();
        self.checker.zones_ticked(now, &zones);
        let all_down = self.engine.all_zones_down();
        let mut again = false;
        for action in actions {
            let action = &action;
            let violations = self.checker.judge(now, action, &zones, all_down);
            self.checker.count(&violations);
            if !violations.is_empty() {
                summary.held_back += 1;
                self.hold_back(action, &violations);
                events(StepEvent::Handled(Handled { action, violations: &violations, applied: None }));
                continue;
            }
            if action.kind.slot().is_some()
                && api.sends_at_once(now, action)
                && let Err(why) = self.engine.still_true(now, &action.kind)
            {
                // The interlock's half of `still_true` was asked just above,
                // against the same mirror; the engine's is the send-time one.
                note_withdrawn(action, &why);
                summary.withdrawn += 1;
                let applied = withdrawn(action, why, api);
                again |= applied.brought_state();
                events(StepEvent::Handled(Handled { action, violations: &[], applied: Some(&applied) }));
                self.observe_all(now, applied.observations);
                continue;
            }
            self.checker.commit(now, action, &zones);
            let applied = api.apply(now, action);
            if matches!(applied.outcome, Some(WriteOutcome::Failed(_))) {
                summary.refused += 1;
            }
            again |= applied.brought_state();
            events(StepEvent::Handled(Handled { action, violations: &[], applied: Some(&applied) }));
            self.observe_all(now, applied.observations);
        }
        again
    }

    /// Asked by whoever sends `action`, just before it goes out (after any
    /// wait behind a rate limit or an earlier write to the same object):
    /// is it still true? The engine checks it against everything observed
    /// so far ([`Engine::still_true`]); a deletion is also judged again by
    /// the safety interlock against its mirror of the cluster as it now
    /// is. `Err` says why not: the sender must not send it, and reports it
    /// [`WriteOutcome::Withdrawn`]. Counted in [`WITHDRAWN_METRIC`].
    pub fn still_true(&mut self, now: Timestamp, action: &Action) -> Result<(), Withdrawal> {
        let verdict = self.engine.still_true(now, &action.kind).and_then(|()| {
            if !matches!(action.kind, ActionKind::DeletePod { .. } | ActionKind::EvictForAddon { .. }) {
                return Ok(());
            }
            let zones = self.engine.zones();
            let violations = self.checker.judge(now, action, &zones, self.engine.all_zones_down());
            match violations.into_iter().next() {
                None => Ok(()),
                Some(v) => Err(Withdrawal::Interlock { invariant: v.invariant.name(), detail: v.detail }),
            }
        });
        if let Err(why) = &verdict {
            note_withdrawn(action, why);
        }
        verdict
    }

    /// [`Controller::still_true`]'s answer when the sender's view is not
    /// current (a watch down, the API server silent): withdrawn without
    /// asking, counted alike, logged at DEBUG (a whole queue goes at once).
    pub fn withdraw_unjudged(&self, action: &Action, why: Withdrawal) -> Result<(), Withdrawal> {
        metrics::counter!(WITHDRAWN_METRIC, "kind" => action.kind.name()).increment(1);
        tracing::debug!(write = action.kind.name(), "write withdrawn before it was sent: {why}");
        Err(why)
    }

    /// Keeps `action` from the API: logs why, counts it, and tells the
    /// engine the write failed so it is not left in flight (the engine
    /// treats it as any refused write and may try again later, when the
    /// facts may allow it).
    fn hold_back(&mut self, action: &Action, violations: &[Violation]) {
        let slot = action.kind.slot();
        let object = slot.as_ref().map_or_else(|| "an Event".to_string(), |(o, s)| format!("{s:?} of {o}"));
        // A deletion carries the engine's reasons: what it believed, which
        // the checker's detail contradicts.
        let engine_said = match &action.kind {
            nodewarden_engine::ActionKind::DeletePod { why, .. } => why.one_line(),
            _ => format!("{:?}", action.kind),
        };
        for v in violations {
            metrics::counter!(INTERLOCK_METRIC, "invariant" => v.invariant.name()).increment(1);
            if self.logged.insert((v.invariant, slot.clone())) {
                tracing::error!(
                    invariant = v.invariant.name(),
                    write = %object,
                    engine_said = %engine_said,
                    "safety interlock held back a write (not sent; the controller goes on): {}",
                    v.detail
                );
            } else {
                tracing::debug!(invariant = v.invariant.name(), write = %object, "held back again: {}", v.detail);
            }
        }
        if slot.is_some() {
            let rules: Vec<&str> = violations.iter().map(|v| v.invariant.name()).collect();
            let reason = format!("{HELD_BACK}: {}", rules.join(", "));
            self.engine.observe(Observation::WriteFinished { id: action.id, outcome: WriteOutcome::Failed(reason) });
        }
    }
}

/// Logs and counts a write withdrawn before it was sent because it was no
/// longer true.
fn note_withdrawn(action: &Action, why: &Withdrawal) {
    metrics::counter!(WITHDRAWN_METRIC, "kind" => action.kind.name()).increment(1);
    let object = action.kind.slot().map_or_else(String::new, |(o, _)| o.to_string());
    tracing::info!(write = action.kind.name(), %object, "write withdrawn before it was sent: {why}");
}

/// The answer to a write withdrawn before it was handed to `api`: the
/// outcome, then, for a node write, the node as `api` reads it (node
/// lifecycle took the write into its own view when it decided, and the
/// node as it is puts that view right), as the senders that judge their
/// own writes answer one they withdraw.
fn withdrawn(action: &Action, why: Withdrawal, api: &mut dyn ClusterApi) -> Applied {
    let outcome = WriteOutcome::Withdrawn(why);
    let mut observations = vec![Observation::WriteFinished { id: action.id, outcome: outcome.clone() }];
    if let Some((object @ ObjectRef::Node(_), _)) = action.kind.slot() {
        observations.extend(api.read(&object));
    }
    Applied { observations, outcome: Some(outcome), violation: None }
}

/// How late a wake may be and still decide as of the instant its work was
/// due ([`late_pass`]).
pub const WAKE_LAG: Span = Span::from_secs(1);

/// The instant to decide a pass at before a driver's wake takes anything
/// in (`nodewarden run`'s engine thread, `sim --serve`'s in-process
/// controller):
/// the instant the engine's work was due, when the thread woke a little
/// after it (up to [`WAKE_LAG`]). A pass is so judged as of its own
/// instant: the thread's wake-up lateness (a busy machine, a descheduled
/// thread) never ages a node past its grace, and the passes keep the grid
/// replay keeps. What arrived in those moments is taken in after it, as
/// seen at the wake, by the engine and the safety interlock alike: taken
/// in as of the due instant, a NoExecute taint that arrived after it had
/// its countdown start before it was seen, and a pod went that much
/// before its toleration ran out (the full-size `freeze` chaos trial: 17
/// ms early). `None` when the wake is not late, far too late (then the
/// pass runs at the wake), or the time would go back (`fed`, the last
/// time the controller was given).
pub fn late_pass(now: Timestamp, due: Timestamp, fed: Timestamp) -> Option<Timestamp> {
    (due <= now && now - due <= WAKE_LAG && due > fed).then_some(due)
}

#[cfg(test)]
mod tests {
    //! The interlock, shown one invariant at a time: a wrong action is
    //! injected where the engine's own actions go, and must not reach the
    //! API while a right one does.

    use std::collections::BTreeMap;

    use nodewarden_engine::{ActionKind, Changed};
    use nodewarden_model::ConditionStatus;

    use super::*;
    use crate::fixtures::{
        delete, evict_for_addon, node, not_ready, pod, reservation, reservation_patch, scheduled_pod, t, taint_patch,
        unreachable,
    };

    #[test]
    fn a_late_wake_decides_the_pass_as_of_the_due_instant() {
        let at = |ms: i64| Timestamp::from_nanos(ms * 1_000_000);
        // Woke 60 ms after the pass was due: the pass's own instant.
        assert_eq!(late_pass(at(40_060), at(40_000), at(39_000)), Some(at(40_000)));
        // Never at or before the last time given.
        assert_eq!(late_pass(at(40_060), at(40_000), at(40_030)), None);
        assert_eq!(late_pass(at(40_060), at(40_000), at(40_000)), None);
        // Woken early by an input, or far too late: no pass of its own.
        assert_eq!(late_pass(at(39_000), at(40_000), at(39_000)), None);
        assert_eq!(late_pass(at(50_000), at(40_000), at(39_000)), None);
    }

    /// Applies everything it is given, as a fast API server would; the
    /// nodes it was given (`nodes`) are kept and their new state answered,
    /// so the taint manager observes the taints written to them.
    #[derive(Default)]
    struct Recorder {
        applied: Vec<ActionKind>,
        nodes: BTreeMap<String, nodewarden_engine::NodeSnapshot>,
        /// Says it sends every write at once (the loop then judges it).
        at_once: bool,
    }

    impl Recorder {
        /// Keeps `node` (a `NodeUpserted`) to answer writes to it with.
        fn keep(&mut self, node: &Observation) {
            if let Observation::NodeUpserted(n) = node {
                self.nodes.insert(n.name.clone(), n.clone());
            }
        }
    }

    impl ClusterApi for Recorder {
        fn sends_at_once(&self, _now: Timestamp, _action: &Action) -> bool {
            self.at_once
        }

        fn read(&mut self, object: &ObjectRef) -> Vec<Observation> {
            match object {
                ObjectRef::Node(name) => {
                    self.nodes.get(name).map(|n| Observation::NodeUpserted(n.clone())).into_iter().collect()
                }
                ObjectRef::Pod(_) => Vec::new(),
            }
        }

        fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
            self.applied.push(action.kind.clone());
            let done = WriteOutcome::Done;
            let mut observations = vec![Observation::WriteFinished { id: action.id, outcome: done.clone() }];
            let node = match &action.kind {
                ActionKind::PatchNodeTaints { node, .. } | ActionKind::UpdateNodeConditions { node, .. } => {
                    self.nodes.get_mut(node)
                }
                _ => None,
            };
            if let Some(n) = node {
                match &action.kind {
                    ActionKind::PatchNodeTaints { add, remove, .. } => {
                        n.taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
                        n.taints.extend(add.iter().cloned());
                    }
                    ActionKind::UpdateNodeConditions { conditions, .. } => {
                        for c in conditions {
                            n.conditions.retain(|x| x.kind != c.kind);
                            n.conditions.push(c.clone());
                        }
                    }
                    _ => {}
                }
                observations.push(Observation::NodeUpserted(n.clone()));
            }
            Applied { observations, outcome: action.kind.slot().map(|_| done), violation: None }
        }
    }

    /// Hands `actions` to the loop as if the engine had issued them at
    /// `now`; returns what reached the API and the rules that held the
    /// others back.
    fn inject(c: &mut Controller, now: Timestamp, actions: Vec<Action>) -> (Vec<ActionKind>, Vec<Invariant>) {
        let mut api = Recorder::default();
        let mut held = Vec::new();
        let mut summary = StepSummary::default();
        let pending_before = c.engine.pending_observations();
        c.carry_out(
            now,
            actions.clone(),
            &mut api,
            &mut |e| {
                if let StepEvent::Handled(h) = e {
                    assert_eq!(h.applied.is_none(), !h.violations.is_empty(), "held back exactly when wrong");
                    held.extend(h.violations.iter().map(|v| v.invariant));
                }
            },
            &mut summary,
        );
        c.checker.end_step(c.engine.all_zones_down());
        assert_eq!(summary.held_back + api.applied.len(), actions.len());
        // Every write, sent or held back, is answered to the engine, so
        // none stays in flight.
        let writes = actions.iter().filter(|a| a.kind.slot().is_some()).count();
        assert_eq!(c.engine.pending_observations() - pending_before, writes);
        (api.applied, held)
    }

    fn controller(config: ControllerConfig) -> Controller {
        Controller::new(config, t(0)).expect("valid configuration")
    }

    #[test]
    fn a_write_that_gives_a_node_both_noexecute_taints_is_held_back() {
        let mut c = controller(ControllerConfig::default());
        c.observe(t(0), node("n1", ConditionStatus::Unknown, vec![unreachable()]));
        let (sent, held) = inject(&mut c, t(1), vec![taint_patch("n1", vec![not_ready()], vec![])]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::NeverBothNoExecuteTaints]);
        // The swap the engine really makes goes through.
        let (sent, held) = inject(&mut c, t(2), vec![taint_patch("n1", vec![not_ready()], vec![unreachable()])]);
        assert_eq!((sent.len(), held.len()), (1, 0));
    }

    #[test]
    fn the_two_halves_of_observe_fed_from_two_threads_are_observe() {
        let mut c = controller(ControllerConfig::default());
        let mut batch = vec![node("n1", ConditionStatus::Unknown, vec![unreachable()])];
        let (mut checker, mut engine) = c.feeds();
        std::thread::scope(|s| {
            let seen = &batch;
            s.spawn(move || checker.observe_batch(t(0), seen));
        });
        engine.observe_batch(&mut batch);
        engine.absorb(t(0));
        assert!(batch.is_empty());
        // The engine took the node in, and the checker knows its taints:
        // the write that would give it both NoExecute taints is held back.
        assert_eq!(c.known_keys(ObjectKind::Node), ["n1"]);
        let (sent, held) = inject(&mut c, t(1), vec![taint_patch("n1", vec![not_ready()], vec![])]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::NeverBothNoExecuteTaints]);
    }

    #[test]
    fn a_protected_pod_evicted_for_an_addon_is_held_back() {
        let mut c = controller(ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() });
        c.observe(t(0), node("n1", ConditionStatus::True, vec![]));
        let mut ds = scheduled_pod("default/ds", Some("n1"), false, false);
        ds.daemonset = true;
        c.observe(t(0), Observation::PodUpserted(ds));
        c.observe(t(0), Observation::PodUpserted(scheduled_pod("default/web", Some("n1"), false, false)));
        let (sent, held) = inject(&mut c, t(1), vec![evict_for_addon("default/ds"), evict_for_addon("default/web")]);
        assert_eq!(held, [Invariant::NoProtectedPodEvictedForAddon]);
        assert!(matches!(&sent[..], [ActionKind::EvictForAddon { pod, .. }] if pod == "default/web"), "{sent:?}");
    }

    #[test]
    fn a_second_prepared_node_is_held_back() {
        let mut c = controller(ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() });
        c.observe(t(0), node("a", ConditionStatus::True, vec![reservation()]));
        c.observe(t(0), node("b", ConditionStatus::True, vec![]));
        let (sent, held) = inject(&mut c, t(1), vec![reservation_patch("b", true)]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::AtMostOneNodePrepared]);
        // Released first, as the engine does: both go.
        let (sent, held) = inject(&mut c, t(2), vec![reservation_patch("a", false), reservation_patch("b", true)]);
        assert_eq!((sent.len(), held.len()), (2, 0));
    }

    #[test]
    fn rescheduling_while_every_zone_is_down_is_held_back() {
        let mut c = controller(ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() });
        c.observe(t(0), node("n1", ConditionStatus::False, vec![]));
        c.observe(t(0), Observation::PodUpserted(scheduled_pod("default/web", Some("n1"), false, false)));
        let mut api = Recorder::default();
        for at in [0, 5] {
            let _ = c.step(t(at), &mut api, &mut |_| {});
        }
        assert!(c.engine().all_zones_down());
        let (sent, held) = inject(&mut c, t(6), vec![evict_for_addon("default/web"), reservation_patch("n1", true)]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::NoReschedulingWhileAllZonesDown, Invariant::NoReschedulingWhileAllZonesDown]);
    }

    #[test]
    fn a_taint_while_every_zone_is_down_is_held_back() {
        let mut c = controller(ControllerConfig::default());
        c.observe(t(0), node("n1", ConditionStatus::False, vec![]));
        let mut api = Recorder::default();
        for at in [0, 5] {
            let _ = c.step(t(at), &mut api, &mut |_| {});
        }
        assert!(c.engine().all_zones_down(), "the only zone has no ready node");
        let (sent, held) = inject(&mut c, t(6), vec![taint_patch("n1", vec![not_ready()], vec![])]);
        assert!(sent.is_empty());
        assert!(held.contains(&Invariant::NoTaintWhileAllZonesDown), "{held:?}");
    }

    #[test]
    fn a_second_taint_inside_the_zone_interval_is_held_back() {
        let mut c = controller(ControllerConfig::default());
        for n in ["n1", "n2", "n3"] {
            c.observe(t(0), node(n, ConditionStatus::Unknown, vec![]));
        }
        let (sent, _) = inject(&mut c, t(1), vec![taint_patch("n1", vec![unreachable()], vec![])]);
        assert_eq!(sent.len(), 1);
        // 0.1 per second: the next one may go on at 11 s, not at 2 s.
        let (sent, held) = inject(&mut c, t(2), vec![taint_patch("n2", vec![unreachable()], vec![])]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::ZoneRateRespected]);
        // The held-back taint was never sent, so the interval still runs
        // from the first: at 11 s the next may go on.
        let (sent, held) = inject(&mut c, t(11), vec![taint_patch("n3", vec![unreachable()], vec![])]);
        assert_eq!((sent.len(), held.len()), (1, 0));
    }

    #[test]
    fn a_deletion_before_the_toleration_ends_is_held_back() {
        let mut c = controller(ControllerConfig::default());
        c.observe(t(0), node("n1", ConditionStatus::Unknown, vec![]));
        c.observe(t(0), pod("ns/p", "n1", Some(300), false));
        c.observe(t(10), node("n1", ConditionStatus::Unknown, vec![unreachable()]));
        let (sent, held) = inject(&mut c, t(20), vec![delete("ns/p")]);
        assert!(sent.is_empty());
        assert_eq!(held, [Invariant::NoEvictionBeforeDeadline]);
        let (sent, held) = inject(&mut c, t(310), vec![delete("ns/p")]);
        assert_eq!((sent.len(), held.len()), (1, 0));
    }

    #[test]
    fn a_daemonset_pod_deletion_in_legacy_mode_is_held_back() {
        let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
        let mut c = controller(config);
        c.observe(t(0), node("n1", ConditionStatus::False, vec![]));
        c.observe(t(0), pod("ns/ds", "n1", None, true));
        c.observe(t(0), pod("ns/web", "n1", None, false));
        // Seen not Ready from 0 s: at 301 s the 5 minute
        // pod-eviction-timeout has run out, for the DaemonSet pod too.
        let (sent, held) = inject(&mut c, t(301), vec![delete("ns/ds"), delete("ns/web")]);
        assert_eq!(held, [Invariant::NoDaemonSetPodDeletedInLegacyMode]);
        assert!(matches!(&sent[..], [ActionKind::DeletePod { pod, .. }] if pod == "ns/web"), "{sent:?}");
    }

    /// A back end that sends a write at once has the loop judge it first
    /// (`still_true`), as one that sends later judges it when it goes out:
    /// a write no longer true is withdrawn, never applied, and answered
    /// `Withdrawn` with the node as the back end reads it. A back end that
    /// judges its own writes is handed it as before.
    #[test]
    fn a_write_sent_at_once_is_judged_first_and_withdrawn_when_no_longer_true() {
        for at_once in [false, true] {
            let mut c = controller(ControllerConfig::default());
            let n1 = node("n1", ConditionStatus::True, vec![]);
            let mut api = Recorder { at_once, ..Recorder::default() };
            api.keep(&n1);
            c.observe(t(0), n1);
            // An unreachable taint for a node observed Ready: the interlock
            // has nothing against it, the send-time check has.
            let patch = taint_patch("n1", vec![unreachable()], vec![]);
            let mut answers = Vec::new();
            let mut summary = StepSummary::default();
            let again = c.carry_out(
                t(1),
                vec![patch.clone()],
                &mut api,
                &mut |e| {
                    if let StepEvent::Handled(h) = e {
                        assert!(h.violations.is_empty());
                        answers.extend(h.applied.map(|a| a.outcome.clone()));
                    }
                },
                &mut summary,
            );
            c.checker.end_step(c.engine.all_zones_down());
            if !at_once {
                assert_eq!(api.applied.len(), 1, "handed over, to be judged when it goes out");
                assert_eq!(summary.withdrawn, 0);
                continue;
            }
            assert!(api.applied.is_empty(), "withdrawn, never applied");
            assert_eq!(summary.withdrawn, 1);
            assert!(
                matches!(
                    &answers[..],
                    [Some(WriteOutcome::Withdrawn(Withdrawal::NoLongerTrue(Changed::TaintNoLongerCalledFor { .. })))]
                ),
                "{answers:?}"
            );
            assert!(again, "the node as read came with the answer");
            // The answer leaves nothing in flight.
            let _ = c.engine.tick(t(1));
            assert_eq!(c.engine.writes_in_flight(), 0);
        }
    }

    #[test]
    fn the_same_write_twice_in_one_step_is_held_back() {
        let mut c = controller(ControllerConfig::default());
        c.observe(t(0), node("n1", ConditionStatus::Unknown, vec![]));
        let patch = taint_patch("n1", vec![], vec![unreachable()]);
        let (sent, held) = inject(&mut c, t(1), vec![patch.clone(), patch]);
        assert_eq!(sent.len(), 1);
        assert_eq!(held, [Invariant::NoDuplicateInFlightWrite]);
    }

    #[test]
    fn the_engines_own_actions_pass_and_refusals_are_retried_within_the_instant() {
        /// Refuses every write with the node's state, as a conflict would.
        struct Refuser(usize);
        impl ClusterApi for Refuser {
            fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
                self.0 += 1;
                let failed = WriteOutcome::Failed("conflict".into());
                Applied {
                    observations: vec![
                        Observation::WriteFinished { id: action.id, outcome: failed.clone() },
                        node("n1", ConditionStatus::True, vec![]),
                    ],
                    outcome: action.kind.slot().map(|_| failed),
                    violation: None,
                }
            }
        }
        let mut c = controller(ControllerConfig::default());
        c.observe(t(0), node("n1", ConditionStatus::True, vec![]));
        let mut api = Recorder::default();
        let first = c.step(t(0), &mut api, &mut |_| {});
        assert_eq!((first.held_back, first.ticks), (0, 1));
        // A silent node goes Unknown after the grace period; that write is
        // refused every time, and the loop gives up after the bound.
        let mut refuser = Refuser(0);
        let mut summary = StepSummary::default();
        let mut at = 5;
        while summary.actions == 0 && at < 120 {
            summary = c.step(t(at), &mut refuser, &mut |_| {});
            at += 5;
        }
        assert_eq!(summary.held_back, 0);
        assert!(summary.refused > 0);
        assert!(summary.ticks > 1 && summary.ticks <= MAX_ANSWER_ROUNDS, "{summary:?}");
    }

    /// What one configuration does, scenario-free, on a small zone: `n1`
    /// goes silent at 0 s (its pod `ns/a` tolerates `unreachable` for 10 s)
    /// while `n2`..`n4` renew their Leases; `pre` is already Unknown and
    /// carries an `unreachable` taint someone else set (its pod `ns/b`
    /// tolerates it for 10 s). Returns every action sent in five minutes.
    fn five_minutes(config: ControllerConfig) -> Vec<ActionKind> {
        let mut c = controller(config);
        let mut api = Recorder::default();
        for n in ["n1", "n2", "n3", "n4"] {
            let n = node(n, ConditionStatus::True, vec![]);
            api.keep(&n);
            c.observe(t(0), n);
        }
        let mut foreign = unreachable();
        foreign.time_added = Some(t(-1));
        let pre = node("pre", ConditionStatus::Unknown, vec![foreign]);
        api.keep(&pre);
        c.observe(t(0), pre);
        c.observe(t(0), pod("ns/a", "n1", Some(10), false));
        c.observe(t(0), pod("ns/b", "pre", Some(10), false));
        for at in (0..300).step_by(5) {
            for n in ["n2", "n3", "n4"] {
                c.observe(t(at), Observation::LeaseUpserted { node: n.into(), renew: Some(t(at)) });
            }
            let _ = c.step(t(at), &mut api, &mut |_| {});
        }
        api.applied
    }

    fn deleted(actions: &[ActionKind]) -> Vec<&str> {
        actions
            .iter()
            .filter_map(|a| match a {
                ActionKind::DeletePod { pod, .. } => Some(pod.as_str()),
                _ => None,
            })
            .collect()
    }

    fn wrote_to(actions: &[ActionKind], node: &str) -> (bool, bool) {
        let conditions =
            actions.iter().any(|a| matches!(a, ActionKind::UpdateNodeConditions { node: n, .. } if n == node));
        let noexecute = actions.iter().any(
            |a| matches!(a, ActionKind::PatchNodeTaints { node: n, add, .. } if n == node && add.iter().any(|t| t.same_as(&unreachable()))),
        );
        (conditions, noexecute)
    }

    #[test]
    fn each_controller_switch_does_what_it_says() {
        let on = five_minutes(ControllerConfig::default());
        assert_eq!(wrote_to(&on, "n1"), (true, true), "{on:?}");
        // ns/b 10 s after its node was first seen tainted, ns/a 10 s after n1's
        // taint was observed.
        assert_eq!(deleted(&on), ["ns/b", "ns/a"], "{on:?}");

        // -taint-eviction-controller: the same tainting, no deletion.
        let no_eviction = five_minutes(ControllerConfig { taint_eviction: false, ..ControllerConfig::default() });
        assert_eq!(wrote_to(&no_eviction, "n1"), (true, true), "{no_eviction:?}");
        assert!(deleted(&no_eviction).is_empty(), "{no_eviction:?}");
        assert!(!no_eviction.iter().any(|a| matches!(a, ActionKind::AddPodDisruptionTarget { .. })));

        // -node-lifecycle-controller: no node or pod status is touched, and
        // taints set by others still evict.
        let no_lifecycle = five_minutes(ControllerConfig { node_lifecycle: false, ..ControllerConfig::default() });
        assert_eq!(wrote_to(&no_lifecycle, "n1"), (false, false), "{no_lifecycle:?}");
        assert!(
            no_lifecycle.iter().all(|a| matches!(
                a,
                ActionKind::DeletePod { .. } | ActionKind::AddPodDisruptionTarget { .. } | ActionKind::RecordEvent(_)
            )),
            "{no_lifecycle:?}"
        );
        assert_eq!(deleted(&no_lifecycle), ["ns/b"]);

        // Legacy (enable-taint-manager=false): no NoExecute taint; pods of
        // unready nodes deleted after pod-eviction-timeout.
        let legacy = five_minutes(ControllerConfig {
            enable_taint_manager: false,
            pod_eviction_timeout: nodewarden_model::Span::from_secs(30),
            ..ControllerConfig::default()
        });
        assert_eq!(wrote_to(&legacy, "n1"), (true, false), "{legacy:?}");
        let mut gone = deleted(&legacy);
        gone.sort_unstable();
        assert_eq!(gone, ["ns/a", "ns/b"], "{legacy:?}");
    }
}
