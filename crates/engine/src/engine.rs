//! The engine facade: owns the World and the tick's schedules. Observations
//! are handed in by value and actions handed back by value; how they travel
//! (channels, threads, an async runtime) is the driver's business.
//!
//! Building and resetting an engine (its resources, its schedules) lives in
//! [`assembly`]; this file is what an engine does once it exists.

mod assembly;
mod phase;

use bevy_ecs::component::ComponentId;
use bevy_ecs::prelude::*;
use bevy_ecs::schedule::Schedule;
use nodewarden_model::{ControllerConfig, Timestamp, ZoneKey, ZoneState};

use crate::action::Action;
use crate::components::Zone;
use crate::ingest;
use crate::metric_names;
use crate::observation::{ObjectKind, Observation};
use crate::reschedule::SchedFacts;
use crate::resources::*;
use crate::withdrawal::Withdrawal;

pub use phase::{PhaseTiming, TickPhase};

/// The most pending observations whose buffer a tick keeps for the next
/// (a few thousand arrive per tick at 100k nodes; a relist brings the
/// whole cluster, and that buffer is let go).
const KEPT_PENDING: usize = 16_384;

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
    phase: TickPhase,
    due: fn(&LoopTimers, &ControllerConfig) -> bool,
    schedule: Schedule,
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
    /// Answers to refused writes, run right after the observation that
    /// reported them (see [`Engine::tick`]): the retry policy of the system
    /// that issued the write.
    refusals: Schedule,
    /// How long each phase took in the last tick (when a clock was lent).
    timings: Vec<PhaseTiming>,
    /// Observations handed in since the last tick or [`Engine::absorb`],
    /// ingested at the next of either (ingest reads the time, so it waits
    /// for one).
    pending: Vec<Observation>,
    /// Ingest of runs of Lease observations.
    leases: ingest::LeaseIngest,
    last_tick: Option<Timestamp>,
    /// Each resource of a new engine and the entity that holds it: what
    /// [`Engine::reset`] puts back.
    resources: Vec<(ComponentId, Entity)>,
    /// A warm standby's pass ([`Engine::stand_by`]): the health records
    /// alone.
    standby_pass: Schedule,
    /// Standing by: take in, keep health records, decide nothing.
    standby: bool,
}

impl Engine {
    /// Hands the engine one observation; it is taken in at the next
    /// [`Engine::tick`], in the order given. Cheap: nothing is decided here.
    pub fn observe(&mut self, observation: Observation) {
        self.pending.push(observation);
    }

    /// Hands over every observation in `batch`, in order, leaving it empty:
    /// [`Engine::observe`] for a driver that gathers observations in
    /// batches. When nothing is pending, the batch's buffer becomes the
    /// engine's and `batch` gets the engine's empty one, so no observation
    /// is moved.
    pub fn observe_batch(&mut self, batch: &mut Vec<Observation>) {
        if self.pending.is_empty() {
            std::mem::swap(&mut self.pending, batch);
        } else {
            self.pending.append(batch);
        }
    }

    /// Observations handed in and not yet taken in by a tick: lets a driver
    /// (and the facade tests) tell whether a tick has input waiting.
    pub fn pending_observations(&self) -> usize {
        self.pending.len()
    }

    /// Takes in the pending observations, then runs every loop due at `now`,
    /// in a fixed order: pod assignment (event handlers see events before
    /// the periodic loops do), health monitor (with zone disruption
    /// handling), NoSchedule taints and labels, the NoExecute tainting
    /// (or legacy eviction) pass, and the taint manager. A loop that missed
    /// several periods runs once. `now` earlier than the previous tick is
    /// treated as the previous tick's time. A refused pod deletion reported
    /// by an observation is answered by the system that issued it (retry,
    /// Event) before the next observation is taken in. Returns the actions
    /// the loops issued, in the order they were issued (the monitor pass's
    /// actions grouped node by node, in name order).
    #[must_use = "the actions are the tick's decisions; dropping them leaves their writes in flight"]
    pub fn tick(&mut self, now: Timestamp) -> Vec<Action> {
        if self.standby {
            self.standby_tick(now);
            return Vec::new();
        }
        let now = self.set_now(now);
        self.timings.clear();
        let started = self.stopwatch.map(|now| now());
        self.take_in_pending();
        if let (Some(clock), Some(started)) = (self.stopwatch, started) {
            self.timings.push(PhaseTiming { phase: TickPhase::Ingest, took: clock().duration_since(started) });
        }
        let period = self.world.resource::<Settings>().0.node_monitor_period;
        {
            let mut t = self.world.resource_mut::<LoopTimers>();
            t.monitor_now = now >= t.next_monitor;
            t.tainting_now = now >= t.next_tainting;
            t.rescheduler_now = now >= t.next_rescheduler;
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
                if phase.phase == TickPhase::HealthMonitor {
                    metrics::histogram!(metric_names::UPDATE_ALL_NODES_HEALTH_DURATION_SECONDS)
                        .record(took.as_secs_f64());
                }
                self.timings.push(PhaseTiming { phase: phase.phase, took });
            }
        }
        {
            let mut t = self.world.resource_mut::<LoopTimers>();
            let start = t.start;
            if t.monitor_now {
                t.monitor_passes += 1;
                t.next_monitor =
                    LoopTimers::grid_at_or_after(start, period, now + nodewarden_model::Span::from_nanos(1));
            }
            if t.tainting_now {
                t.next_tainting =
                    LoopTimers::grid_at_or_after(start, TAINTING_PERIOD, now + nodewarden_model::Span::from_nanos(1));
            }
            if t.rescheduler_now {
                let every = config.rescheduler_housekeeping_interval;
                t.next_rescheduler =
                    LoopTimers::grid_at_or_after(start, every, now + nodewarden_model::Span::from_nanos(1));
            }
            t.monitor_now = false;
            t.tainting_now = false;
            t.rescheduler_now = false;
        }
        self.world.clear_trackers();
        std::mem::take(&mut self.world.resource_mut::<Outbox>().ready)
    }

    /// Makes this engine a warm standby's: from now on a tick takes in
    /// what was observed and, at the monitor's cadence, keeps each node's
    /// health record as a pass would (probe times from the heartbeats
    /// observed, a first sight's grace counted from when this engine first
    /// saw the node), and decides nothing: no write, no Event, no queue.
    ///
    /// kube-controller-manager's standby starts its informers only once
    /// elected, so a new leader counts every node's grace from its own
    /// first pass, and a node that died during the failover is noticed a
    /// full grace after the takeover. A warm standby's records let the
    /// new leader judge each node by its own last heartbeat
    /// ([`Engine::take_over`]).
    pub fn stand_by(&mut self) {
        self.standby = true;
    }

    /// Whether the engine is standing by ([`Engine::stand_by`]).
    pub fn standing_by(&self) -> bool {
        self.standby
    }

    /// The standby becomes the leader at `now`: its loops start at `now`
    /// (monitor passes at `now`, `now` + period, ...) as a new process's
    /// would, its rate limiters full, and it decides from everything it
    /// observed, the health records included. Nodes it has seen are not
    /// new to it: no `RegisteredNode` Event, and the NoExecute taints they
    /// carry stay (a new process takes them off and puts them back through
    /// the zone's rate limiter; the standby knows them to be its
    /// predecessor's and current).
    pub fn take_over(&mut self, now: Timestamp) {
        let now = self.set_now(now);
        self.standby = false;
        let mut t = self.world.resource_mut::<LoopTimers>();
        t.start = now;
        t.next_monitor = now;
        t.next_tainting = now;
        t.next_rescheduler = now;
    }

    /// A standby's tick: take in, and at the monitor's cadence keep the
    /// health records.
    fn standby_tick(&mut self, now: Timestamp) {
        let now = self.set_now(now);
        self.timings.clear();
        self.take_in_pending();
        let period = self.world.resource::<Settings>().0.node_monitor_period;
        let due = {
            let t = self.world.resource::<LoopTimers>();
            now >= t.next_monitor && self.world.resource::<Settings>().0.node_lifecycle
        };
        if due {
            self.standby_pass.run(&mut self.world);
            let mut t = self.world.resource_mut::<LoopTimers>();
            t.monitor_passes += 1;
            t.next_monitor = LoopTimers::grid_at_or_after(t.start, period, now + nodewarden_model::Span::from_nanos(1));
        }
        self.world.clear_trackers();
        // Ingest only answers the engine's own refused writes, and a
        // standby has none: nothing to send.
        std::mem::take(&mut self.world.resource_mut::<Outbox>().ready);
    }

    /// Takes in the pending observations at `now` without running any
    /// loop: what [`Engine::tick`] does first, on its own.
    ///
    /// For a driver that receives a flood of observations while it may not
    /// decide yet (the adapter's first list of a large cluster, or a watch
    /// that is down while another keeps delivering): pending observations
    /// are full snapshots with their own strings and lists, several times
    /// the engine's compact form, so holding a million pods until the first
    /// tick would cost hundreds of megabytes and one long tick. Taking them
    /// in as they arrive keeps the memory at the engine's form and the first
    /// tick short.
    ///
    /// The facts recorded are the same as a tick at `now` whose loops were
    /// not due would record: ingest reads the time only to start a new
    /// zone's rate limiter (full at `now`, so full at any later tick too) and
    /// to date the retry of a refused pod deletion. Any action ingest issues
    /// (such a retry's Event) is returned by the next tick. `now` earlier
    /// than the previous tick's is held there, as in [`Engine::tick`].
    pub fn absorb(&mut self, now: Timestamp) {
        self.set_now(now);
        self.take_in_pending();
    }

    /// Holds `now` at the last tick's time if the clock went backwards,
    /// records it as the last tick's time and the world's, and returns it.
    fn set_now(&mut self, now: Timestamp) -> Timestamp {
        let now = match self.last_tick {
            Some(last) if now < last => {
                tracing::warn!(%now, %last, "clock went backwards; holding it at the last tick");
                last
            }
            _ => now,
        };
        self.last_tick = Some(now);
        self.world.resource_mut::<Now>().0 = now;
        now
    }

    /// Ingests the pending observations, in order, at the world's time.
    ///
    /// Runs of Lease observations and of pod upserts are read in place in
    /// the buffer (each observation is a large value: moving a million of
    /// them out one by one showed in a whole-cluster ingest); the others
    /// are taken out of it one at a time.
    fn take_in_pending(&mut self) {
        let mut buffer = std::mem::take(&mut self.pending);
        let mut at = 0;
        while at < buffer.len() {
            let rest = &mut buffer[at..];
            if ingest::LeaseIngest::takes(&rest[0]) {
                // Leases never report a refused deletion.
                at += self.leases.apply(&mut self.world, rest);
                continue;
            }
            if ingest::PodRun::takes(&rest[0]) {
                // Nor do pod upserts.
                at += ingest::PodRun::apply(&mut self.world, rest);
                continue;
            }
            // What is left in its place is cleared with the buffer.
            let obs = std::mem::replace(&mut rest[0], Observation::NodeDeleted { name: String::new() });
            at += 1;
            ingest::apply(&mut self.world, obs);
            // Ingest only records a refused deletion; its owner decides
            // what follows, before the next observation is taken in, so the
            // retry and its Event land exactly where they would if ingest
            // had decided (a later observation of the same tick may cancel
            // the retry, or emit Events of its own after this one).
            if !self.world.resource::<RefusedDeletions>().0.is_empty() {
                self.refusals.run(&mut self.world);
            }
        }
        buffer.clear();
        // The buffer is kept for the next tick's observations, unless a
        // whole cluster's list left it large.
        if buffer.capacity() <= KEPT_PENDING {
            self.pending = buffer;
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
    /// unless [`Engine::measure_with`] lent a clock). For load reports: the
    /// engine itself never looks at these figures.
    pub fn last_tick_timings(&self) -> &[PhaseTiming] {
        &self.timings
    }

    /// The tick's phases, in the order a tick runs them, so a report can
    /// list every phase, including those that did not run in a given tick.
    pub fn tick_phases(&self) -> Vec<TickPhase> {
        std::iter::once(TickPhase::Ingest).chain(self.phases.iter().map(|p| p.phase)).collect()
    }

    /// Entities in the World: nodes, pods and zones. For load reports (the
    /// engine's memory grows with it); no decision depends on it.
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
        if self.world.resource::<Settings>().0.enable_rescheduler {
            due = due.min(t.next_rescheduler);
        }
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

    /// Every zone the engine knows, sorted by key: what replay expectations
    /// and status output check zone states and rates against.
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
    /// (no tainting, no eviction). Public so an outside checker can tell a
    /// deliberate pause from a stuck controller.
    pub fn all_zones_down(&self) -> bool {
        self.world.resource::<DisruptionMode>().all_zones_down
    }

    /// The World, for the engine's own unit tests.
    #[cfg(test)]
    pub(crate) fn world(&self) -> &World {
        &self.world
    }

    /// The World, to change (for tests).
    #[cfg(test)]
    pub(crate) fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    /// The key of every object of `kind` the engine holds, in no order:
    /// what its observations told it exists, deletions applied, pending
    /// observations not included (take them in first, [`Engine::absorb`]).
    ///
    /// A driver whose watch lost track and listed again reports the objects
    /// that went away meanwhile as the difference between these and what
    /// the list showed, so it keeps no copy of every key itself: at a
    /// million pods such a copy would be a tenth of the process.
    pub fn known_keys(&mut self, kind: ObjectKind) -> Vec<String> {
        match kind {
            ObjectKind::Node => self.world.resource::<NodeIndex>().0.keys().map(|n| n.as_str().to_owned()).collect(),
            ObjectKind::Lease => {
                let mut out: Vec<String> = self.world.resource::<OrphanLeases>().0.keys().cloned().collect();
                let mut leases = self.world.query::<&crate::components::LeaseView>();
                for (name, &e) in &self.world.resource::<NodeIndex>().0 {
                    if leases.get(&self.world, e).is_ok_and(|l| l.present) {
                        out.push(name.as_str().to_owned());
                    }
                }
                out
            }
            ObjectKind::Pod => {
                let mut pods = self.world.query::<&crate::components::Pod>();
                pods.iter(&self.world).map(|p| p.key.to_string()).collect()
            }
            ObjectKind::Budget => self.world.resource::<SchedFacts>().budgets.keys().cloned().collect(),
        }
    }

    /// Whether a write the engine issued is still true at `now`, asked by
    /// whoever sends it just before it goes out: what was handed in so
    /// far is taken in first ([`Engine::absorb`]), then the write is
    /// checked against that view (see `send_check`). `Err` names the fact
    /// that changed ([`Withdrawal::NoLongerTrue`]); the sender then reports
    /// it [`WriteOutcome::Withdrawn`](crate::observation::WriteOutcome::Withdrawn)
    /// instead of sending it. Decides nothing and changes no fact.
    pub fn still_true(&mut self, now: Timestamp, kind: &crate::action::ActionKind) -> Result<(), Withdrawal> {
        self.absorb(now);
        crate::send_check::still_true(&self.world, kind).map_err(Withdrawal::NoLongerTrue)
    }

    /// Builds up to `room` of the writes decided but not yet built (pods'
    /// not-ready marks, oldest decision first) from the world as it is at
    /// `now`, and returns them with their Events: what a sender pulls when
    /// it has room. A decision that no longer stands (the node is Ready
    /// again, the pod terminating or gone) is passed over, never built.
    /// What was handed in so far is taken in first, as for
    /// [`Engine::still_true`]. Decides nothing new.
    ///
    /// Why pulled: a zone outage decides a mark for every pod of the zone
    /// at once, and a client rate sends them over minutes; built at once,
    /// they were hundreds of megabytes of waiting writes, and many of them
    /// were no longer true by their turn.
    pub fn pull(&mut self, now: Timestamp, room: usize) -> Vec<crate::action::Action> {
        if room == 0 || self.world.resource::<Outbox>().marks_wanted() == 0 {
            return Vec::new();
        }
        self.absorb(now);
        crate::systems::marks::build_marks(&mut self.world, room);
        std::mem::take(&mut self.world.resource_mut::<Outbox>().ready)
    }

    /// From now on, keeps what the engine concludes, whether or not a
    /// write follows ([`Judgement`](crate::judgement::Judgement)), for a shadow to
    /// compare with what another controller did. Off by default: the
    /// systems then record nothing.
    pub fn keep_judgements(&mut self) {
        self.world.resource_mut::<crate::judgement::Judgements>().on = true;
    }

    /// The judgements reached since the last call, in the order reached
    /// (empty unless [`Engine::keep_judgements`] was called).
    pub fn take_judgements(&mut self) -> Vec<crate::judgement::Judgement> {
        std::mem::take(&mut self.world.resource_mut::<crate::judgement::Judgements>().list)
    }

    /// Writes decided and not yet built ([`Engine::pull`]); some of them
    /// may no longer stand and will not be built.
    pub fn writes_wanted(&self) -> usize {
        self.world.resource::<Outbox>().marks_wanted()
    }

    /// Bytes the writes decided and not yet built hold: the cost of a
    /// backlog, apart from the objects themselves.
    pub fn writes_wanted_bytes(&self) -> usize {
        self.world.resource::<Outbox>().wanted_marks_bytes()
    }

    /// How many health-monitor passes this engine has run: a heartbeat
    /// observed before the latest one is in its records. The safety
    /// interlock needs this to know which heartbeats the controller's
    /// probe times can rest on.
    pub fn monitor_passes(&self) -> u64 {
        self.world.resource::<LoopTimers>().monitor_passes
    }

    /// Writes issued and not yet reported finished. A driver that stops (or
    /// a test that wants a quiet engine) waits for this to reach 0; a count
    /// that only grows means outcomes are not being reported back.
    pub fn writes_in_flight(&self) -> usize {
        self.world.resource::<Outbox>().in_flight()
    }
}

#[cfg(test)]
mod rescheduler_tests {
    //! The rescheduler's facts are kept only while it runs.

    use std::collections::BTreeMap;

    use nodewarden_model::{ControllerConfig, LabelSelector, PodScheduling, Resources, Span, Timestamp};

    use super::Engine;
    use crate::observation::{BudgetSnapshot, NodeSnapshot, Observation, PodSnapshot};
    use crate::reschedule::{ReschedulerState, SchedFacts};

    fn feed(engine: &mut Engine) {
        engine.observe(Observation::NodeUpserted(NodeSnapshot {
            version: 0,
            name: "a".into(),
            created: Timestamp::EPOCH,
            labels: BTreeMap::from([("pool".to_string(), "x".to_string())]),
            conditions: vec![],
            taints: vec![],
            unschedulable: false,
            allocatable: Some(Resources::pod(1000, 1 << 30)),
        }));
        for (key, since) in [("default/web", None), ("kube-system/dns", Some(Timestamp::EPOCH))] {
            engine.observe(Observation::PodUpserted(PodSnapshot {
                version: 0,
                node_lost: false,
                key: key.into(),
                uid: "u".into(),
                node: since.is_none().then(|| "a".to_string()),
                daemonset: false,
                ready: None,
                terminating: false,
                tolerations: vec![],
                scheduling: Some(Box::new(PodScheduling {
                    requests: Resources::pod(100, 0),
                    critical_annotation: since.is_some(),
                    unschedulable_since: since,
                    labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                    ..PodScheduling::default()
                })),
            }));
        }
        engine.observe(Observation::BudgetUpserted(BudgetSnapshot {
            key: "default/web".into(),
            selector: LabelSelector::default(),
            disruptions_allowed: 1,
        }));
    }

    #[test]
    fn with_the_flag_off_nothing_is_kept() {
        let off = ControllerConfig::default();
        assert!(!off.enable_rescheduler);
        let mut engine = Engine::new(off, Timestamp::EPOCH).unwrap();
        feed(&mut engine);
        let _ = engine.tick(Timestamp::EPOCH + Span::from_secs(60));
        let facts = engine.world().resource::<SchedFacts>();
        assert!(!facts.enabled);
        assert!(
            facts.pods.is_empty() && facts.nodes.is_empty() && facts.budgets.is_empty() && facts.pending.is_empty()
        );
        assert!(!engine.world().resource::<ReschedulerState>().started, "the pass never ran");

        let on = ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() };
        let mut engine = Engine::new(on, Timestamp::EPOCH).unwrap();
        feed(&mut engine);
        let _ = engine.tick(Timestamp::EPOCH);
        let facts = engine.world().resource::<SchedFacts>();
        assert_eq!((facts.pods.len(), facts.nodes.len(), facts.budgets.len()), (2, 1, 1));
        assert_eq!(facts.pending.iter().collect::<Vec<_>>(), ["kube-system/dns"]);
        assert!(facts.pods["default/web"].placement.is_none(), "placement is kept only for pending addons");
        assert!(facts.pods["kube-system/dns"].placement.is_some());
        assert!(engine.world().resource::<ReschedulerState>().started);
    }
}
