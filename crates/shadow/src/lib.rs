//! The shadow: what nodewarden would have done, decision by decision,
//! beside what kube-controller-manager did.
//!
//! # Why
//!
//! Before nodewarden replaces kube-controller-manager's node lifecycle
//! controller on a cluster, it can run beside it with `--dry-run`: it
//! watches the same cluster, decides, and writes nothing. That proves it
//! does no harm, not that it would do right. The shadow compares, one
//! decision at a time, what nodewarden concluded with what
//! kube-controller-manager changed, so an operator can read off weeks of
//! real incidents whether nodewarden would have marked the same nodes
//! Unknown, tainted them at the same pace, and deleted the same pods at
//! the same moments, and, where not, which decision and why.
//!
//! # What is compared
//!
//! Eight kinds of decision ([`DecisionKind`]), each about one object: a
//! node's Ready turned `Unknown`; each of the four node lifecycle taints
//! (`not-ready` and `unreachable`, `NoSchedule` and `NoExecute`) added;
//! a node's pods marked not Ready; a pod deleted by the taint manager (the
//! object is the pod); and, in legacy mode, a node's pods deleted after
//! `pod-eviction-timeout`.
//!
//! Nodewarden's side is the engine's [`Judgement`]s: conclusions, reached
//! whether or not a write follows, with the facts behind them.
//! kube-controller-manager publishes no such record, so its side is read
//! from the changes the API server shows: the Ready condition's transition
//! to `Unknown` with reason `NodeStatusUnknown` (at its
//! `lastTransitionTime`); a lifecycle taint newly present (at its
//! `timeAdded`, or when seen); a pod seen not Ready on a node that is not
//! Ready (once per node and episode, when seen); a pod seen terminating on
//! a node with a lifecycle `NoExecute` taint (the taint manager's
//! deletion, when seen), or, in legacy mode, on a node that is not Ready
//! (the node's legacy deletion, once per episode). A pod deleted on a
//! healthy, untainted node is an ordinary deletion and not compared; a pod
//! removed without first being seen terminating (a force deletion) cannot
//! be told from one and is not attributed to anyone.
//!
//! # Verdicts
//!
//! The two sides are paired by kind and object. For a pair, d =
//! nodewarden's time minus kube-controller-manager's: within the tolerance
//! either way they **agree**; below it nodewarden was **earlier**, above
//! it **later**. The tolerance is `node-monitor-period` (both controllers
//! decide on passes that far apart), a tainting pass (100 ms), and the
//! watch latency: the largest delay, over the last two minutes, between a
//! Lease renewal's `renewTime` (or a stamped change) and its sighting, but
//! at least a second, since the API keeps the stamps of changes to the
//! second. For the same reason a stamp without a
//! fraction stands for its whole second: kube-controller-manager's time
//! is the instant of that second nearest to nodewarden's. A side
//! that waits alone longer than the window (ten minutes unless set) is
//! **only-nodewarden** or **only-upstream**. Once a key has its verdict,
//! repeats of it within the window are ignored; when its node is Ready
//! again, the node's decisions are compared afresh (one still waiting from
//! the episode that ended pairs only with the other side's decision made
//! before the end).
//!
//! # The restart rule
//!
//! The shadow compares what both sides decide while it watches, not what
//! happened before. Everything observed before [`Shadow::synced`] (the
//! first list) is the baseline: nothing in it is reported, and pods
//! already terminating in it are nobody's decision. A node that is not
//! Ready when first seen (or when the first list is in) was in trouble
//! before the shadow looked; its decisions on both sides (pod deletions on it included) are left out
//! until it is seen Ready. So is a node whose silence nodewarden judges at
//! its first sight of it (its heartbeats stopped before nodewarden
//! looked), and kube-controller-manager's decisions about it already
//! waiting are dropped. Everything left out is counted as `excused`, so
//! the summary shows how much the rule set aside.
//!
//! # Where verdicts are said
//!
//! Each verdict increments `nodewarden_shadow_decisions_total{kind,
//! verdict}`; each pair records its signed difference in
//! `nodewarden_shadow_difference_seconds{kind}`. Each disagreement is one
//! warning in the log, with both times, the difference and nodewarden's
//! facts in one line, and is kept (the latest 1,000) for the [`Summary`],
//! which `GET /shadow` serves and [`report`] renders.
//!
//! # Shape
//!
//! Pure and deterministic: no I/O, no clock (`now` is an argument
//! everywhere), and memory bounded over days: kube-controller-manager's
//! side keeps per node only its Ready status, lifecycle taints, zone and
//! episode flags, and of pods only the keys of those terminating; every
//! waiting decision is matched or aged out and then forgotten, settled
//! keys expire after the window, and the kept disagreements are capped.

mod facts;
mod kind;
mod latency;
mod matcher;
mod metric_names;
mod pace;
pub mod report;
mod slots;
mod summary;
mod tally;
mod upstream;

use std::collections::BTreeMap;

use nodewarden_engine::{Judged, Judgement, Observation, ZoneReport};
use nodewarden_model::{ControllerConfig, Span, Timestamp, ZoneKey};

use crate::facts::decision_of;
use crate::kind::Side;
use crate::latency::WatchLatency;
use crate::matcher::{Claim, Matcher, Offered};
use crate::slots::Slots;
use crate::tally::{Decided, Tally};
use crate::upstream::{Change, Seen, Upstream};

/// The least watch latency the tolerance allows: the API keeps
/// `lastTransitionTime` and `timeAdded` to the second, so a watch faster
/// than that cannot be measured from them.
pub const LATENCY_FLOOR: Span = Span::from_secs(1);

/// The tainting pass's period, on both sides (upstream's
/// `doNoExecuteTaintingPass` runs every 100 ms).
const TAINTING_PASS: Span = Span::from_millis(100);

pub use crate::kind::{DecisionKind, Verdict};
pub use crate::metric_names::{DECISIONS_TOTAL, DIFFERENCE_BUCKETS, DIFFERENCE_SECONDS, KIND, VERDICT};
pub use crate::summary::{Counts, Disagreement, Distribution, KindSummary, Summary, ZoneSummary};
pub use crate::tally::DISAGREEMENTS_KEPT;

/// How the shadow compares.
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowSettings {
    /// The controller's flags, as nodewarden runs with them (and, for a
    /// fair comparison, as kube-controller-manager does):
    /// `node-monitor-period` is the base of the tolerance, the two eviction
    /// rates name the zone states inferred from kube-controller-manager's
    /// pace, and `enable-taint-manager` says whether terminating pods on
    /// failed nodes are taint-based or legacy deletions.
    pub config: ControllerConfig,
    /// How long one side's decision waits for the other's before it is
    /// judged one-sided, and how long a judged key stays settled.
    pub window: Span,
}

/// The window unless set: long enough for the slowest tainting pace to
/// still pair within a small zone, short enough that a one-sided decision
/// is reported while the incident is still fresh.
pub const DEFAULT_WINDOW: Span = Span::from_secs(600);

impl ShadowSettings {
    /// Settings for `config` with the [`DEFAULT_WINDOW`].
    pub fn new(config: ControllerConfig) -> ShadowSettings {
        ShadowSettings { config, window: DEFAULT_WINDOW }
    }
}

impl Default for ShadowSettings {
    fn default() -> ShadowSettings {
        ShadowSettings::new(ControllerConfig::default())
    }
}

/// What the shadow holds, for a memory gauge and for tests of its bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Nodes in kube-controller-manager's view (the cluster's size).
    pub nodes: usize,
    /// Pods seen terminating and not yet gone, and pods of nodes in
    /// trouble seen marked not Ready (kept to attribute their removal).
    pub terminating_pods: usize,
    /// Decisions waiting for the other side.
    pub waiting: usize,
    /// Judged keys not yet expired.
    pub settled: usize,
    /// Expiry entries queued for the waiting and settled keys.
    pub queued: usize,
    /// Disagreements kept for the summary (at most [`DISAGREEMENTS_KEPT`]).
    pub disagreements: usize,
    /// Zones seen.
    pub zones: usize,
    /// NoExecute releases of the last window, both sides, kept to compare
    /// them at the same place in their zone's queue.
    pub releases: usize,
}

impl Footprint {
    /// A rough figure in bytes (map overheads and typical name lengths
    /// assumed): enough to see growth on a dashboard, not an exact count.
    pub fn approx_bytes(&self) -> usize {
        self.nodes * 96
            + self.terminating_pods * 80
            + self.waiting * 200
            + self.settled * 80
            + self.queued * 48
            + self.disagreements * 400
            + self.zones * 160
            + self.releases * 16
    }
}

/// The comparison of nodewarden's decisions with kube-controller-manager's.
/// Feed it every observation the engine gets ([`Shadow::observe`]), say
/// when the first list is in ([`Shadow::synced`]), hand it the engine's
/// judgements ([`Shadow::judged`]), tick it ([`Shadow::tick`]), and ask for
/// a [`Summary`] when wanted.
#[derive(Debug)]
pub struct Shadow {
    settings: ShadowSettings,
    started: Timestamp,
    synced: bool,
    upstream: Upstream,
    matcher: Matcher,
    tally: Tally,
    latency: WatchLatency,
    /// The latest `now` handed in: the tolerance's latency is that of the
    /// time before it.
    last_seen: Timestamp,
    excused: u64,
    /// Scratch for what one observation showed.
    seen: Vec<Seen>,
    /// Scratch for what one tick aged out.
    aged: Vec<Decided>,
    /// Each zone's NoExecute releases, both sides, for comparing them at
    /// the same place in the zone's queue.
    slots: Slots,
}

impl Shadow {
    /// A shadow that began watching at `started`.
    pub fn new(settings: ShadowSettings, started: Timestamp) -> Shadow {
        Shadow {
            upstream: Upstream::new(&settings.config),
            matcher: Matcher::new(settings.window),
            settings,
            started,
            synced: false,
            tally: Tally::default(),
            latency: WatchLatency::default(),
            last_seen: started,
            excused: 0,
            seen: Vec::new(),
            aged: Vec::new(),
            slots: Slots::default(),
        }
    }

    /// The tolerance now: `node-monitor-period` (each side decides on its
    /// own passes), a tainting pass (a NoExecute taint goes on at the
    /// first 100 ms pass after its token, on either side), and the watch
    /// latency, at least [`LATENCY_FLOOR`].
    pub fn tolerance(&self) -> Span {
        let latency = self.latency.current(self.last_seen).max(LATENCY_FLOOR);
        self.settings.config.node_monitor_period + TAINTING_PASS + latency
    }

    /// Takes in an observation the engine was also given, seen at `now`:
    /// kube-controller-manager's side. Before [`Shadow::synced`] it only
    /// sets the baseline.
    pub fn observe(&mut self, now: Timestamp, obs: &Observation) {
        self.last_seen = self.last_seen.max(now);
        let mut seen = std::mem::take(&mut self.seen);
        self.upstream.observe(now, obs, &mut seen);
        for s in seen.drain(..) {
            match s {
                Seen::Decision(Change { kind, object, node, at, spread }) => {
                    let claim = Claim { kind, object, node, at, spread, reason: None };
                    self.offer(now, Side::Upstream, claim);
                }
                Seen::Excused => self.excused += 1,
                Seen::Latency(l) => self.latency.add(now, l),
                Seen::EpisodeEnded(node) => self.matcher.new_episode(now, &node),
                Seen::Slot(zone, at) => {
                    if let Some(name) = self.upstream.zone_name(zone) {
                        self.slots.record(&name, Side::Upstream, at, None);
                    }
                }
            }
        }
        self.seen = seen;
    }

    /// The first list is in, at `now`: what was observed so far is the
    /// baseline, and changes from now on are compared.
    pub fn synced(&mut self, _now: Timestamp) {
        self.synced = true;
        self.upstream.synced();
    }

    /// Whether [`Shadow::synced`] was called.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Takes in one of the engine's judgements, handed over at `now`:
    /// nodewarden's side. Judgements before the first list, and about
    /// nodes the restart rule excuses, are counted as excused and not
    /// compared.
    pub fn judged(&mut self, now: Timestamp, j: Judgement) {
        self.last_seen = self.last_seen.max(now);
        let Some((kind, object)) = decision_of(&j) else { return };
        if !self.synced {
            self.excused += 1;
            return;
        }
        if let Judged::Silent { first_sight: true, .. } = j.what {
            // The node fell silent before nodewarden looked: neither side's
            // decisions about it are comparable until it is Ready again.
            self.upstream.mark_pre_existing(&j.node);
            self.excused += 1 + self.matcher.drop_upstream_of(&j.node) as u64;
            return;
        }
        if self.upstream.is_pre_existing(&j.node) {
            self.excused += 1;
            return;
        }
        if let Judged::Taint { taint, released: Some(facts) } = &j.what
            && taint.effect == nodewarden_model::TaintEffect::NoExecute
            && facts.queued_at.is_some()
        {
            self.slots.record(&facts::zone_name(&facts.zone), Side::Nodewarden, j.at, Some(facts.zone_rate));
        }
        let object: Box<str> = object.into();
        let reason = facts::reason(&j, now).into_boxed_str();
        let claim =
            Claim { kind, object, node: j.node.into_boxed_str(), at: j.at, spread: Span::ZERO, reason: Some(reason) };
        self.offer(now, Side::Nodewarden, claim);
    }

    fn offer(&mut self, now: Timestamp, side: Side, claim: Claim) {
        let tolerance = self.tolerance();
        match self.matcher.offer(now, side, claim, tolerance) {
            Offered::Judged(d) => {
                let d = self.at_the_same_place(d, tolerance);
                self.tally.record(d);
            }
            Offered::Superseded(d) => self.tally.record(d),
            Offered::Waiting | Offered::Repeat => {}
        }
    }

    /// A NoExecute pair compared at the same place in its zone's queue
    /// (see `slots`), within the tolerance and one token of the zone's
    /// bucket (each side's bucket fills on its own phase): when the node's
    /// places differ, the difference and verdict are those of the two
    /// sides' releases at the earlier place, and the reason says so.
    fn at_the_same_place(&self, mut d: Decided, tolerance: Span) -> Decided {
        let noexecute = matches!(d.kind, DecisionKind::NoExecuteNotReady | DecisionKind::NoExecuteUnreachable);
        let (Some(nodewarden), Some(upstream)) = (d.nodewarden_at, d.upstream_at) else { return d };
        let Some(zone) = self.upstream.zone_name_of_node(&d.object).filter(|_| noexecute) else { return d };
        let Some(same) = self.slots.same_place(&zone, nodewarden, upstream) else { return d };
        let tolerance = tolerance + same.token.unwrap_or(Span::ZERO);
        if same.places.0 == same.places.1 {
            // `difference` is `d`'s own (spread taken off) at the same place.
            d.verdict = matcher::verdict_for(d.difference.unwrap_or(same.difference), tolerance);
            return d;
        }
        d.difference = Some(same.difference);
        d.verdict = matcher::verdict_for(same.difference, tolerance);
        let (nw, up) = same.places;
        d.reason = format!(
            "{}; release {nw} of zone {zone} here, {up} at kube-controller-manager (queue order differs): compared with release {} of each",
            d.reason,
            nw.min(up)
        )
        .into_boxed_str();
        d
    }

    /// Judges one-sided every decision that has waited longer than the
    /// window at `now`, and forgets settled keys older than it. Call it
    /// regularly (every second or so): a one-sided verdict is said at the
    /// first tick after its window.
    pub fn tick(&mut self, now: Timestamp) {
        self.last_seen = self.last_seen.max(now);
        let mut aged = std::mem::take(&mut self.aged);
        self.matcher.age(now, &mut aged);
        for d in aged.drain(..) {
            self.tally.record(d);
        }
        self.aged = aged;
        self.slots.prune(now, self.settings.window);
    }

    /// Everything found so far, as of `now`; `zones` is nodewarden's own
    /// view of its zones (the engine's `zones()`), shown beside what
    /// kube-controller-manager's taints show.
    pub fn summary(&self, now: Timestamp, zones: &[ZoneReport]) -> Summary {
        let counts = self.tally.counts();
        Summary {
            since: self.started.to_string(),
            now: now.to_string(),
            watched_seconds: (now - self.started).as_secs_f64().max(0.0),
            window_seconds: self.settings.window.as_secs_f64(),
            tolerance_seconds: self.tolerance().as_secs_f64(),
            watch_latency_seconds: self.latency.current(now).as_secs_f64(),
            synced: self.synced,
            decisions: counts.total(),
            counts,
            pending_nodewarden: self.matcher.waiting(Side::Nodewarden) as u64,
            pending_upstream: self.matcher.waiting(Side::Upstream) as u64,
            excused: self.excused,
            kinds: self.tally.kinds(|kind, side| self.matcher.waiting_of(kind, side) as u64),
            zones: self.zones(zones),
            disagreements: self.tally.disagreements(),
        }
    }

    /// Nodewarden's zones and kube-controller-manager's, side by side.
    fn zones(&self, reports: &[ZoneReport]) -> Vec<ZoneSummary> {
        let mut zones: BTreeMap<ZoneKey, ZoneSummary> = BTreeMap::new();
        let blank = |key: &ZoneKey| ZoneSummary {
            zone: facts::zone_name(key),
            nodewarden_state: None,
            nodewarden_rate: None,
            upstream_taints: 0,
            upstream_pace_per_second: None,
            upstream_state_inferred: None,
        };
        for r in reports {
            let z = zones.entry(r.key.clone()).or_insert_with(|| blank(&r.key));
            z.nodewarden_state = r.state.map(|s| s.as_str().to_string());
            z.nodewarden_rate = Some(r.rate);
        }
        for (key, pace) in self.upstream.zones() {
            let z = zones.entry(key.clone()).or_insert_with(|| blank(key));
            z.upstream_taints = pace.taints;
            z.upstream_pace_per_second = pace.per_second();
            z.upstream_state_inferred = z
                .upstream_pace_per_second
                .and_then(|p| pace::inferred_state(p, &self.settings.config))
                .map(|s| s.as_str().to_string());
        }
        zones.into_values().collect()
    }

    /// What the comparison holds: decisions waiting, keys settled, and
    /// their expiry entries. It drains back to zero once nothing new has
    /// happened for two windows; the view of the cluster (nodes, pods
    /// terminating) is not counted here but in [`Shadow::footprint`].
    pub fn len(&self) -> usize {
        self.matcher.waiting(Side::Nodewarden)
            + self.matcher.waiting(Side::Upstream)
            + self.matcher.settled()
            + self.matcher.queued()
    }

    /// True when the comparison holds nothing ([`Shadow::len`] is zero).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Everything the shadow holds, counted.
    pub fn footprint(&self) -> Footprint {
        Footprint {
            nodes: self.upstream.nodes(),
            terminating_pods: self.upstream.terminating(),
            waiting: self.matcher.waiting(Side::Nodewarden) + self.matcher.waiting(Side::Upstream),
            settled: self.matcher.settled(),
            queued: self.matcher.queued(),
            disagreements: self.tally.kept(),
            zones: self.upstream.zones().count(),
            releases: self.slots.len(),
        }
    }
}
