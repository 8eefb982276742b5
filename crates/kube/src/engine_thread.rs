//! The engine's own thread: it owns the [`Controller`] (engine and safety
//! interlock), takes [`Input`]s from the crossbeam channel the watchers and
//! the writer send into, and steps the controller when an observation
//! arrives or the engine's next due time comes, whichever is first.
//!
//! No decision is taken before every watch has listed once: until then
//! observations are handed to the engine, which takes them in as they come
//! ([`Controller::absorb`]) without deciding, and the loop does not step.
//! The same holds while a heartbeat watch is down, and while the channel
//! holds more than one wake takes in (the engine is behind its watches).
//! The engine's clock is the machine's monotonic clock anchored to the
//! wall clock at start ([`EngineClock`]), so a wall-clock jump never moves
//! a deadline.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use nodewarden_controller::{ClusterApi, Controller, StepEvent};
use nodewarden_engine::Withdrawal;
use nodewarden_model::{Span, Timestamp, wall};

use crate::input::{Input, Watched};
use crate::probe::Probe;

/// The engine's time: Unix nanoseconds at start, then the monotonic clock
/// (at the rate of the process's clock, [`wall`]: faster than real time
/// only under `cargo xtask wire`).
#[derive(Clone, Copy, Debug)]
pub struct EngineClock {
    start_instant: Instant,
    start: Timestamp,
}

impl EngineClock {
    /// Anchored now.
    pub fn starting_now() -> EngineClock {
        EngineClock { start_instant: Instant::now(), start: Timestamp::from_nanos(wall::unix_now_nanos()) }
    }

    /// The engine's time now.
    pub fn now(&self) -> Timestamp {
        let elapsed = i64::try_from(wall::since(self.start_instant).as_nanos()).unwrap_or(i64::MAX);
        self.start + Span::from_nanos(elapsed)
    }

    /// The monotonic instant of an engine time (now, for times past).
    pub fn instant_of(&self, t: Timestamp) -> Instant {
        let ahead = (t - self.now()).as_nanos();
        Instant::now() + wall::real(Duration::from_nanos(u64::try_from(ahead).unwrap_or(0)))
    }
}

/// What `/readyz` and `/healthz` read: caches synced, and the last time
/// the loop went round (Unix nanoseconds).
#[derive(Debug, Default)]
pub struct Health {
    /// Every watch has listed once.
    pub synced: AtomicBool,
    /// When the engine thread last woke, Unix nanoseconds.
    pub last_beat_unix_nanos: AtomicI64,
}

impl Health {
    fn beat(&self) {
        self.last_beat_unix_nanos.store(wall::real_unix_nanos(), Ordering::Relaxed);
    }

    /// True when the loop has gone round within `limit`.
    pub fn alive_within(&self, limit: Duration) -> bool {
        let unix = wall::real_unix_nanos();
        let last = self.last_beat_unix_nanos.load(Ordering::Relaxed);
        u64::try_from(unix.saturating_sub(last)).unwrap_or(0) < u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The loop never sleeps longer than this, so `/healthz` sees it beat.
/// Gauge {resource}: 1 once the watch on `nodes`, `pods`, `leases` (or,
/// with the rescheduler, `poddisruptionbudgets`) has listed once (the
/// engine decides only when all have), 0 before.
/// Recorded by a replica that runs the controller: the leader, a warm
/// standby, a `--dry-run` replica (not a cold standby, which watches
/// nothing).
pub const SYNCED_METRIC: &str = "nodewarden_watch_synced";

const MAX_SLEEP: Duration = Duration::from_secs(1);

/// At most this many queued inputs are taken in at one wake, so what is
/// handed to the engine is absorbed (made compact) in bounded chunks.
const BATCH: usize = 50_000;

/// Gauge: inputs waiting in the engine thread's channel when it last woke.
/// Above zero for long, the engine is behind what its watches delivered
/// and decides nothing until it has caught up.
pub const BACKLOG_METRIC: &str = "nodewarden_engine_input_backlog";

/// Gauge: 1 while the engine decides nothing because it cannot see the
/// cluster's heartbeats (a node or Lease watch down, or the API server not
/// answering its probes, and the settle time after either), 0 otherwise.
/// Being behind the watches, or not yet synced, has its own signals
/// (`nodewarden_engine_input_backlog`, `nodewarden_watch_synced`).
pub const BLIND_METRIC: &str = "nodewarden_engine_blind";

/// Gauge: writes the engine has decided and not yet built, because the
/// writer had no room for them (pods' not-ready marks through a zone
/// outage; see `ClusterApi::room`). They wait as a flag on the pod and
/// its place in line, not as writes: `nodewarden_write_queue_depth`
/// counts the writes built and not yet sent.
pub const WANTED_METRIC: &str = "nodewarden_writes_wanted";

/// Being behind this long is logged (shorter spells, a re-list or a burst
/// of pod events, are normal).
const BEHIND_WARN: Duration = Duration::from_secs(2);

/// Whether the API server answers the adapter's probe (see
/// [`crate::runner`]): while it does not, and for a settling time after it
/// answers again, the engine is blind. A frozen API server (stopped, or
/// hung) keeps its watch connections open and silent: no watch reports an
/// error, and without the probe the engine would go on deciding from a view
/// that stopped moving (every node's heartbeat ageing past its grace), then
/// send those decisions when the server wakes.
#[derive(Debug, Default)]
struct Quiet {
    /// The last probe went unanswered.
    unanswered: bool,
    /// Answered again: blind until then, so the watches deliver what
    /// happened meanwhile before anything is decided.
    settled_at: Option<Instant>,
}

impl Quiet {
    fn blinds(&self) -> bool {
        self.unanswered || self.settled_at.is_some_and(|t| Instant::now() < t)
    }
}

/// The engine thread's state and loop.
pub struct EngineThread {
    /// The one control loop.
    pub controller: Controller,
    /// Its time.
    pub clock: EngineClock,
    /// Shared with the HTTP endpoints.
    pub health: Arc<Health>,
    /// The watches that run ([`Watched::needed`]): each must list once
    /// before the first decision.
    pub watches: Vec<Watched>,
    /// Start the engine at this time rather than at once (`run
    /// --start-at`, for `cargo xtask wire`): until then what the watches
    /// deliver is held, and at that moment the engine starts afresh and
    /// takes it all in, as a controller started then and listing at once
    /// would. A successor can so be ready the moment its scenario says the
    /// controller restarts.
    pub start_at: Option<Timestamp>,
    /// A `--dry-run` replica's shadow: it sees what the engine is handed
    /// and what it concludes.
    pub shadow: Option<crate::shadow::ShadowFeed>,
}

impl EngineThread {
    /// One step at `at`, and the shadow told what it concluded.
    fn step(&mut self, at: Timestamp, api: &mut dyn ClusterApi, events: &mut dyn FnMut(StepEvent<'_>)) {
        self.controller.step(at, api, events);
        if let Some(shadow) = &mut self.shadow {
            shadow.stepped(at, &mut self.controller);
        }
    }

    /// A re-list of `watched` showed `present`: every object of the kind the
    /// engine holds and the list did not show is reported deleted
    /// ([`Controller::relisted`]).
    pub fn relisted(&mut self, watched: Watched, present: &HashSet<String>) {
        let now = self.clock.now();
        self.relisted_at(now, watched, present);
    }

    fn relisted_at(&mut self, now: Timestamp, watched: Watched, present: &HashSet<String>) {
        let gone = self.controller.relisted(now, watched.kind(), present);
        if gone > 0 {
            tracing::info!(
                kind = watched.as_str(),
                deleted = gone,
                "re-list found objects deleted while the watch was away"
            );
        }
    }

    /// The start `start_at` asked for: the engine begins afresh at `at` and
    /// takes in, at that time, everything held until then, in order.
    fn start_held(&mut self, at: Timestamp, held: Vec<Input>) {
        self.start_at = None;
        if let Err(e) = self.controller.restart(at) {
            tracing::error!(error = %e, "the engine could not start");
            return;
        }
        tracing::info!(observations = held.len(), "the engine starts, as asked (--start-at)");
        for input in held {
            match input {
                Input::Observe(o) => self.controller.observe(at, o),
                Input::Relisted(w, present) => self.relisted_at(at, w, &present),
                _ => {}
            }
        }
    }

    /// Runs until [`Input::Stop`] or until every sender is gone. Each wake:
    /// a pass that came due a little before it first, as of its own
    /// instant ([`nodewarden_controller::late_pass`]); then take in what arrived, and, once every
    /// watch has synced, one `Controller::step` through `api`, both at the
    /// wake's time.
    pub fn run(&mut self, rx: &Receiver<Input>, api: &mut dyn ClusterApi, events: &mut dyn FnMut(StepEvent<'_>)) {
        // After the API server answers again, no decision for as long as it
        // was silent, at most a grace period: every node has that long to
        // be heard from again (a heartbeat stalled in a frozen server is
        // no sign of a dead node).
        let settle = Duration::from_nanos(
            u64::try_from(self.controller.config().node_monitor_grace_period.as_nanos()).unwrap_or(0),
        );
        let mut state = LoopState::new(&self.watches, settle);
        loop {
            self.health.beat();
            if let Some(at) = self.start_at
                && self.clock.now() >= at
            {
                self.start_held(at, std::mem::take(&mut state.held));
                state.fed = at;
            }
            let first = match rx.recv_deadline(self.wake_deadline(&state)) {
                Ok(i) => Some(i),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let now = self.clock.now();
            // A pass due before this wake is decided as of its own instant,
            // on what had arrived by then; what arrived since is taken in
            // as seen now, never earlier (a NoExecute taint's countdown
            // runs from when it was seen).
            if let Some(pass) = nodewarden_controller::late_pass(now, self.controller.next_due(), state.fed)
                && self.start_at.is_none()
                && state.waiting.is_empty()
                && !state.blind()
                && state.behind_since.is_none()
            {
                self.step(pass, api, events);
                state.fed = pass;
            }
            // One time for everything this wake takes in and decides.
            let at = now.max(state.fed);
            state.fed = at;
            let Some(taken) = self.take_in(rx, first, at, &mut state) else { return };
            // Pods and budgets carry no heartbeat: their watch being down
            // delays nothing (see `Watched::blinds`).
            let blind = state.blind();
            metrics::gauge!(BLIND_METRIC).set(if blind { 1.0 } else { 0.0 });
            // This wake stopped at its cap with more waiting: what is
            // still queued may hold the very heartbeats that show a node
            // alive, so deciding now would judge nodes by an old view (a
            // busy process whose watches deliver faster than the engine
            // takes in). Nothing is decided until the queue is drained; a
            // deadline missed meanwhile is met late, from a current view.
            let backlog = rx.len();
            metrics::gauge!(BACKLOG_METRIC).set(backlog as f64);
            let behind = taken >= BATCH && backlog > 0;
            state.behind_since = behind_spell(behind, state.behind_since, backlog);
            if self.start_at.is_some() {
                // Not started: nothing is decided, nothing taken in.
            } else if state.waiting.is_empty() && !blind && !behind {
                self.step(at, api, events);
                metrics::gauge!(WANTED_METRIC).set(self.controller.engine().writes_wanted() as f64);
            } else if taken > 0 {
                // No decision yet, but what arrived is taken in now, in the
                // engine's compact form: a first list of a million pods
                // held as snapshots until every watch has synced would
                // cost several times the engine's memory, and one long
                // first tick.
                self.controller.absorb(at);
            }
        }
    }

    /// When the loop wakes at the latest: the held start, or the engine's
    /// next due time once it may decide, and never later than
    /// [`MAX_SLEEP`] from now.
    fn wake_deadline(&self, state: &LoopState) -> Instant {
        if let Some(at) = self.start_at {
            self.clock.instant_of(at).min(Instant::now() + MAX_SLEEP)
        } else if state.waiting.is_empty() && !state.down.iter().any(|w| w.blinds()) && !state.quiet.blinds() {
            self.clock.instant_of(self.controller.next_due()).min(Instant::now() + MAX_SLEEP)
        } else {
            Instant::now() + MAX_SLEEP
        }
    }

    /// Takes in what one wake brings: `first`, then what is queued, at most
    /// [`BATCH`] in all, held instead while the start waits. Returns how
    /// many were taken, or `None` when told to stop.
    fn take_in(
        &mut self,
        rx: &Receiver<Input>,
        first: Option<Input>,
        at: Timestamp,
        state: &mut LoopState,
    ) -> Option<usize> {
        let mut taken = 0;
        let mut next = first;
        while let Some(input) = next {
            if self.start_at.is_some() && matches!(input, Input::Observe(_) | Input::Relisted(..)) {
                state.held.push(input);
            } else if !self.handle(input, at, state) {
                return None;
            }
            taken += 1;
            next = if taken < BATCH { rx.try_recv().ok() } else { None };
        }
        Some(taken)
    }

    /// One input at the wake's time `at`; false for [`Input::Stop`]. One
    /// `match` over every kind of input, so a new kind cannot go unhandled.
    fn handle(&mut self, input: Input, at: Timestamp, state: &mut LoopState) -> bool {
        match input {
            Input::Observe(o) => {
                if let Some(shadow) = &mut self.shadow {
                    shadow.observed(at, &o);
                }
                self.controller.observe(at, o);
            }
            Input::Synced(w) => {
                state.waiting.remove(&w);
                metrics::gauge!(SYNCED_METRIC, "resource" => w.as_str()).set(1.0);
                tracing::info!(watch = w.as_str(), "cache synced");
                if state.waiting.is_empty() {
                    if let Some(shadow) = &mut self.shadow {
                        shadow.synced(at);
                    }
                    self.health.synced.store(true, Ordering::Relaxed);
                    tracing::info!(
                        after_ms = state.started.elapsed().as_millis() as u64,
                        "every cache synced; deciding from now on"
                    );
                }
            }
            Input::Relisted(w, present) => self.relisted_at(at, w, &present),
            Input::WatchDown(w) => {
                if state.down.insert(w) && w.blinds() {
                    tracing::warn!(watch = w.as_str(), "watch down: no decisions until it has caught up");
                }
            }
            Input::WatchUp(w) => {
                if state.down.remove(&w) && w.blinds() {
                    tracing::info!(watch = w.as_str(), "watch caught up: deciding again");
                }
            }
            Input::Judge { action, reply } => {
                let verdict = match state.blind_by() {
                    Some(view) => self.controller.withdraw_unjudged(&action, Withdrawal::NotCurrent { view }),
                    None => self.controller.still_true(at, &action),
                };
                let _ = reply.send(verdict);
            }
            Input::ApiUnanswered => {
                if !state.quiet.unanswered {
                    tracing::warn!(
                        "the API server does not answer: no decisions until it does and the watches have caught up"
                    );
                }
                state.quiet.unanswered = true;
            }
            Input::ApiAnswered { silence } => {
                if state.quiet.unanswered {
                    // The silence ran on the real clock; the grace is on
                    // the process's.
                    let settle = Probe::settle(silence, wall::real(state.settle));
                    tracing::info!(
                        silence_ms = silence.as_millis() as u64,
                        settle_ms = settle.as_millis() as u64,
                        "the API server answers again: deciding once the watches have caught up"
                    );
                    state.quiet.settled_at = Some(Instant::now() + settle);
                }
                state.quiet.unanswered = false;
            }
            Input::TakeOver => {
                self.controller.take_over(at);
                tracing::info!(
                    synced = state.waiting.is_empty(),
                    "leading: deciding from what this standby observed (probe times kept)"
                );
            }
            Input::Stop => return false,
        }
        true
    }
}

/// What [`EngineThread::run`] carries from one wake to the next, so its
/// steps can share it.
struct LoopState {
    /// Watches that have not listed once yet.
    waiting: BTreeSet<Watched>,
    /// Watches that are down.
    down: BTreeSet<Watched>,
    /// Whether the API server answers.
    quiet: Quiet,
    /// How long the engine stays blind after the API server answers again.
    settle: Duration,
    /// When the loop started (for the log line on sync).
    started: Instant,
    /// What arrived before the held start (`start_at`).
    held: Vec<Input>,
    /// The latest time the controller was given (a step's, an
    /// observation's, a verdict's): time never goes back for it.
    fed: Timestamp,
    /// Since when the channel has held more than one wake takes in, and
    /// whether that was logged.
    behind_since: Option<(Instant, bool)>,
}

impl LoopState {
    /// Before the first wake: every watch awaited (its gauge set to 0).
    fn new(watches: &[Watched], settle: Duration) -> LoopState {
        let waiting: BTreeSet<Watched> = watches.iter().copied().collect();
        for w in &waiting {
            metrics::gauge!(SYNCED_METRIC, "resource" => w.as_str()).set(0.0);
        }
        LoopState {
            waiting,
            down: BTreeSet::new(),
            quiet: Quiet::default(),
            settle,
            started: Instant::now(),
            held: Vec::new(),
            fed: Timestamp::MIN,
            behind_since: None,
        }
    }

    /// A heartbeat watch is down, or the API server is quiet.
    fn blind(&self) -> bool {
        self.down.iter().any(|w| w.blinds()) || self.quiet.blinds()
    }

    /// What keeps the engine from judging an action now, named for the
    /// withdrawal's message: a heartbeat watch down, a watch not yet
    /// listed, or the API server.
    fn blind_by(&self) -> Option<&'static str> {
        let blind_by = self.down.iter().find(|w| w.blinds()).or(self.waiting.first()).map(|w| w.as_str());
        blind_by.or(self.quiet.blinds().then_some("API server"))
    }
}

/// The next state of a spell of being behind the watches, logging when one
/// has lasted [`BEHIND_WARN`] and when a logged one ends.
fn behind_spell(behind: bool, since: Option<(Instant, bool)>, backlog: usize) -> Option<(Instant, bool)> {
    match (behind, since) {
        (false, Some((since, true))) => {
            tracing::info!(
                behind_ms = since.elapsed().as_millis() as u64,
                "the engine has caught up with its watches: deciding again"
            );
            None
        }
        (false, _) => None,
        (true, None) => Some((Instant::now(), false)),
        (true, Some((since, false))) if since.elapsed() >= BEHIND_WARN => {
            tracing::warn!(
                waiting = backlog,
                behind_ms = since.elapsed().as_millis() as u64,
                "the engine is behind its watches: no decisions until it has taken in what they delivered"
            );
            Some((since, true))
        }
        (true, kept) => kept,
    }
}

#[cfg(test)]
mod tests {

    use nodewarden_engine::{Action, NodeSnapshot, ObjectKind, Observation, PodSnapshot};
    use nodewarden_model::ControllerConfig;

    use super::*;

    fn node(name: &str) -> Observation {
        Observation::NodeUpserted(NodeSnapshot::new(name, Timestamp::EPOCH))
    }

    fn pod(key: &str) -> Observation {
        Observation::PodUpserted(PodSnapshot::new(key, format!("uid-{key}"), Some("a")))
    }

    fn thread() -> EngineThread {
        let clock = EngineClock::starting_now();
        EngineThread {
            controller: Controller::new(ControllerConfig::default(), clock.now()).expect("default config"),
            clock,
            health: Arc::default(),
            watches: Watched::LIFECYCLE.to_vec(),
            start_at: None,
            shadow: None,
        }
    }

    /// What the engine holds once it has taken everything in.
    fn keys(t: &mut EngineThread, kind: ObjectKind) -> Vec<String> {
        t.controller.absorb(t.clock.now());
        let mut k = t.controller.known_keys(kind);
        k.sort();
        k
    }

    #[test]
    fn a_relist_deletes_what_the_engine_holds_and_the_list_did_not_show() {
        let mut t = thread();
        let now = t.clock.now();
        for o in [node("a"), node("b"), pod("ns/p"), pod("ns/q")] {
            t.controller.observe(now, o);
        }
        t.controller.absorb(now);
        // Handed over but not yet taken in when the re-list ends: it was
        // there before the list, which did not show it, so it is gone too.
        t.controller.observe(now, node("c"));
        t.relisted(Watched::Nodes, &HashSet::from(["a".to_string()]));
        assert_eq!(keys(&mut t, ObjectKind::Node), ["a"]);
        assert_eq!(keys(&mut t, ObjectKind::Pod), ["ns/p", "ns/q"], "another kind is left alone");
        t.relisted(Watched::Pods, &HashSet::from(["ns/q".to_string(), "ns/new".to_string()]));
        assert_eq!(keys(&mut t, ObjectKind::Pod), ["ns/q"]);
    }

    /// Records what it is asked to write.
    #[derive(Default)]
    struct Recorder(Vec<Action>);

    impl ClusterApi for Recorder {
        fn apply(&mut self, _now: Timestamp, action: &Action) -> nodewarden_controller::Applied {
            self.0.push(action.clone());
            nodewarden_controller::Applied::default()
        }
    }

    fn ready_node(name: &str, beat: Timestamp) -> Observation {
        Observation::NodeUpserted(
            NodeSnapshot::new(name, Timestamp::EPOCH).with_ready(nodewarden_model::ConditionStatus::True, beat),
        )
    }

    /// The nodes the engine wrote Unknown.
    fn marked(api: &Recorder) -> Vec<&str> {
        api.0
            .iter()
            .filter_map(|a| match &a.kind {
                nodewarden_engine::ActionKind::UpdateNodeConditions { node, .. } => Some(node.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn nothing_is_decided_while_inputs_wait_beyond_one_wake() {
        // Two nodes last heard from a minute ago (past the 40 s grace).
        // The channel holds more than one wake takes in: a flood of pod
        // events, then a fresh Lease renewal from `alive`. Deciding after
        // the first wake would mark `alive` Unknown from an old view; the
        // engine waits until it has taken everything in, then marks only
        // `dead`.
        let mut t = thread();
        let long_ago = t.clock.now() - Span::from_secs(60);
        t.controller = Controller::new(ControllerConfig::default(), long_ago).expect("default config");
        for n in ["alive", "dead"] {
            t.controller.observe(long_ago, ready_node(n, long_ago));
            t.controller.observe(long_ago, Observation::LeaseUpserted { node: n.into(), renew: Some(long_ago) });
        }
        // A monitor pass then takes their heartbeats in.
        t.controller.step(long_ago, &mut Recorder::default(), &mut |_| {});
        let (tx, rx) = crossbeam_channel::unbounded();
        for w in Watched::LIFECYCLE {
            tx.send(Input::Synced(w)).unwrap();
        }
        for i in 0..BATCH + 10 {
            tx.send(Input::Observe(pod(&format!("ns/p{i}")))).unwrap();
        }
        let now = t.clock.now();
        tx.send(Input::Observe(Observation::LeaseUpserted { node: "alive".into(), renew: Some(now) })).unwrap();
        drop(tx);
        let mut api = Recorder::default();
        t.run(&rx, &mut api, &mut |_| {});
        assert_eq!(marked(&api), ["dead"], "only the node whose heartbeat stopped");
    }

    #[test]
    fn leases_are_known_with_or_without_their_node() {
        let mut t = thread();
        let now = t.clock.now();
        for o in [
            node("a"),
            Observation::LeaseUpserted { node: "a".into(), renew: Some(now) },
            Observation::LeaseUpserted { node: "orphan".into(), renew: Some(now) },
            node("b"),
        ] {
            t.controller.observe(now, o);
        }
        t.controller.absorb(now);
        assert_eq!(keys(&mut t, ObjectKind::Lease), ["a", "orphan"]);
        t.relisted(Watched::Leases, &HashSet::new());
        assert_eq!(keys(&mut t, ObjectKind::Lease), Vec::<String>::new());
        assert_eq!(keys(&mut t, ObjectKind::Node), ["a", "b"]);
    }
}
