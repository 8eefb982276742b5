//! The API server between the controller and the simulated cluster, as
//! slow as a real one: each write lands after a latency, each change of
//! the cluster reaches the controller's watch after a delay, in the order
//! of each object's versions (a Node's status echo may come before or
//! after a Lease or Pod event, never after a later version of the same
//! Node). Every delay is drawn from the run's seed, so a run is the same
//! every time.
//!
//! Without latency or a client rate ([`ApiLatency::NONE`]) nothing goes
//! through here: the drivers apply each write at once and hand every
//! change over in the same instant, as they always have, so transcripts
//! stay as they are.
//!
//! Otherwise the [`SlowApi`] holds what is on its way:
//! - a write the controller issues ([`SlowApi::send`]) lands on the cluster
//!   after a write latency ([`SlowApi::land`]); its answer (`WriteFinished`,
//!   then the object as the write left it, or as it is after a refusal)
//!   reaches the controller then, and the change goes on to the watch like
//!   any other;
//! - every change of the cluster ([`SlowApi::publish`]) is stamped with the
//!   next resourceVersion and delivered after a watch delay
//!   ([`SlowApi::deliver`]), never before an earlier change of the same object;
//! - a list (the controller's start or restart, a relist after an outage)
//!   is the cluster as it is now ([`SlowApi::list`]): it replaces the watch
//!   events still on their way to the previous watches. It reaches the
//!   controller in the same instant, so a controller's loops start on the
//!   grid the scenario contract gives them (t, t + period, ...), as one
//!   whose caches have just synced;
//! - writes wait in the queue `nodewarden run`'s writer uses
//!   ([`Dispatch`]): one object's go out one after another, each once the
//!   previous one to the object has landed; with a client rate
//!   ([`ApiLatency::client_rate`]) they also wait for a token of the
//!   client's buckets ([`Bucket`]: node lifecycle's, and the
//!   taint-eviction controller's own), most urgent first. A write that
//!   waited is judged again by the controller just before it goes out
//!   ([`Controller::still_true`](nodewarden_controller::Controller::still_true)),
//!   as the adapter's writer judges it; one no longer true is withdrawn
//!   (answered `Withdrawn`, with the object as it is), never lands and
//!   spends no token;
//! - a restarted controller gets no answer to what its previous life sent
//!   ([`SlowApi::restart`]): those writes still land, as requests already on
//!   the wire do; the writes its previous life had not sent yet die with
//!   it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::str::FromStr;

use nodewarden_controller::write_order::{
    Bucket, DEFAULT_BURST, DEFAULT_QPS, Dispatch, EvictionClient, MARKS_HELD, Turn, WriteClass,
};
use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ObjectKind, ObjectRef, Observation, Withdrawal};
use nodewarden_model::{Span, Timestamp};
use serde::{Deserialize, Deserializer};

use crate::rng::Rng;

/// The queue's cap on writes in line for a token: the wire starts a write
/// only when it sends it, so nothing is ever in line.
const NOTHING_IN_LINE: usize = 1;

/// A range of delays, `min..max` (both included); one value is a fixed
/// delay. Drawn uniformly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanRange {
    /// The shortest delay.
    pub min: Span,
    /// The longest delay.
    pub max: Span,
}

impl SpanRange {
    /// No delay.
    pub const ZERO: SpanRange = SpanRange { min: Span::ZERO, max: Span::ZERO };

    /// `min..max`.
    pub const fn new(min: Span, max: Span) -> SpanRange {
        SpanRange { min, max }
    }

    /// A delay in the range.
    fn draw(&self, rng: &mut Rng) -> Span {
        let width = self.max.as_nanos() - self.min.as_nanos();
        if width <= 0 {
            return self.min;
        }
        self.min + Span::from_nanos(rng.below(width as u64 + 1) as i64)
    }
}

impl FromStr for SpanRange {
    type Err = String;

    /// `20ms..200ms`, or one duration (`100ms`) for a fixed delay.
    fn from_str(s: &str) -> Result<SpanRange, String> {
        let one = |t: &str| -> Result<Span, String> {
            let span: Span = t.trim().parse().map_err(|e| format!("{e}"))?;
            if span.is_negative() {
                return Err(format!("a delay cannot be negative, got {}", t.trim()));
            }
            Ok(span)
        };
        let (min, max) = match s.split_once("..") {
            Some((a, b)) => (one(a)?, one(b)?),
            None => {
                let v = one(s)?;
                (v, v)
            }
        };
        if min > max {
            return Err(format!("the range {s:?} runs backwards: write it as {max}..{min}"));
        }
        Ok(SpanRange { min, max })
    }
}

impl fmt::Display for SpanRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max { write!(f, "{}", self.min) } else { write!(f, "{}..{}", self.min, self.max) }
    }
}

impl<'de> Deserialize<'de> for SpanRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SpanRange, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(|e: String| serde::de::Error::custom(format!("{e} (expected, say, 20ms..200ms)")))
    }
}

/// How slow the simulated API server is (`cluster.api` in a scenario
/// file, `--api-latency` on the command line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ApiLatency {
    /// From a write's issue to its landing (and answer).
    #[serde(default)]
    pub write_latency: SpanRange,
    /// From a change of the cluster to its delivery by the watch.
    #[serde(default)]
    pub watch_delay: SpanRange,
    /// The controller's client rate, `--kube-api-qps`: writes go out at
    /// most this many a second (per client: node lifecycle's, and the
    /// taint-eviction controller's own), in the order `nodewarden run`'s
    /// writer sends them. Unset (with `kube-api-burst` unset too): no
    /// limit, as replay has always played.
    #[serde(default)]
    pub kube_api_qps: Option<f64>,
    /// `--kube-api-burst`: requests a quiet client may send at once.
    #[serde(default)]
    pub kube_api_burst: Option<u32>,
}

impl ApiLatency {
    /// The instant world: every write lands at once and every change is
    /// seen in the same instant (what replay has always done).
    pub const NONE: ApiLatency = ApiLatency {
        write_latency: SpanRange::ZERO,
        watch_delay: SpanRange::ZERO,
        kube_api_qps: None,
        kube_api_burst: None,
    };

    /// An API server under ordinary load: writes in 20-200 ms, watch
    /// events 50-500 ms after the change.
    pub const REALISTIC: ApiLatency = ApiLatency {
        write_latency: SpanRange::new(Span::from_millis(20), Span::from_millis(200)),
        watch_delay: SpanRange::new(Span::from_millis(50), Span::from_millis(500)),
        kube_api_qps: None,
        kube_api_burst: None,
    };

    /// No delay anywhere and no client rate: the drivers bypass the wire.
    pub fn is_instant(&self) -> bool {
        *self == ApiLatency::NONE
    }

    /// The client rate, `(qps, burst)`, when either is set; the other is
    /// `nodewarden run`'s default.
    pub fn client_rate(&self) -> Option<(f64, u32)> {
        if self.kube_api_qps.is_none() && self.kube_api_burst.is_none() {
            return None;
        }
        Some((self.kube_api_qps.unwrap_or(DEFAULT_QPS), self.kube_api_burst.unwrap_or(DEFAULT_BURST)))
    }

    /// This latency (`--api-latency`) over a file's `cluster.api`: the
    /// delays are this one's; the client rate is this one's when it gives
    /// one, else the file's (a file's rate is part of what it plays, as
    /// its `config:` is).
    pub fn over(self, file: ApiLatency) -> ApiLatency {
        if self.client_rate().is_some() {
            return self;
        }
        ApiLatency { kube_api_qps: file.kube_api_qps, kube_api_burst: file.kube_api_burst, ..self }
    }

    /// A rate that cannot work, said with its field name.
    pub fn check(&self) -> Result<(), String> {
        if let Some(qps) = self.kube_api_qps
            && !(qps.is_finite() && qps >= 0.001)
        {
            return Err(format!("kube-api-qps: must be a number of requests a second of at least 0.001, got {qps}"));
        }
        if self.kube_api_burst == Some(0) {
            return Err("kube-api-burst: must be at least 1".into());
        }
        Ok(())
    }

    /// How late an expectation may come true and still hold: a monitor
    /// period (a heartbeat seen a moment late is taken in at the next
    /// pass) plus three round trips at the longest (an observation, a write
    /// that follows from it, and one that follows from that, such as the
    /// taint, its observation and the deletion). Zero without latency.
    pub fn tolerance(&self, monitor_period: Span) -> Span {
        if self.is_instant() {
            return Span::ZERO;
        }
        monitor_period + (self.write_latency.max + self.watch_delay.max).saturating_mul(3)
    }
}

impl fmt::Display for ApiLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_instant() {
            return f.write_str("none");
        }
        write!(f, "write {}, watch {}", self.write_latency, self.watch_delay)?;
        match self.client_rate() {
            Some((qps, burst)) => write!(f, ", client {qps} QPS burst {burst}"),
            None => Ok(()),
        }
    }
}

impl FromStr for ApiLatency {
    type Err = String;

    /// `none`, `realistic`, or `write=20ms..200ms,watch=50ms..500ms` (a part
    /// left out is no delay), with a client rate `qps=20,burst=30` if
    /// wanted (`realistic,qps=20`).
    fn from_str(s: &str) -> Result<ApiLatency, String> {
        let mut latency = ApiLatency::NONE;
        for (i, part) in s.split(',').enumerate() {
            match part.trim() {
                "none" if i == 0 => continue,
                "realistic" if i == 0 => {
                    latency = ApiLatency::REALISTIC;
                    continue;
                }
                _ => {}
            }
            let Some((name, value)) = part.split_once('=') else {
                return Err(format!(
                    "{part:?}: expected none, realistic, or write=MIN..MAX,watch=MIN..MAX (such as write=20ms..200ms,watch=50ms..500ms), then qps=N,burst=N if wanted"
                ));
            };
            let name = name.trim();
            let number = |what: &str| format!("{name}: expected a number, got {:?}{what}", value.trim());
            match name {
                "write" => latency.write_latency = value.parse().map_err(|e| format!("{name}: {e}"))?,
                "watch" => latency.watch_delay = value.parse().map_err(|e| format!("{name}: {e}"))?,
                "qps" => latency.kube_api_qps = Some(value.trim().parse().map_err(|_| number(""))?),
                "burst" => {
                    latency.kube_api_burst = Some(value.trim().parse().map_err(|_| number(" (whole requests)"))?)
                }
                other => return Err(format!("unknown part {other:?}: the parts are write, watch, qps and burst")),
            }
        }
        latency.check().map_err(|e| e.replacen("kube-api-", "", 1))?;
        Ok(latency)
    }
}

/// One object's place on the wire.
#[derive(Clone, Copy, Debug)]
struct ObjectTimes {
    /// When the newest event about it reaches the controller.
    delivered_by: Timestamp,
    /// When it last changed.
    changed_at: Timestamp,
    /// Its newest resourceVersion (0 before its first change on the wire).
    version: u64,
}

impl ObjectTimes {
    fn new(delivered_by: Timestamp, changed_at: Timestamp) -> ObjectTimes {
        ObjectTimes { delivered_by, changed_at, version: 0 }
    }
}

/// A write on its way.
#[derive(Clone, Debug)]
struct InFlight {
    action: Action,
    /// When the controller sent it.
    sent_at: Timestamp,
    /// The controller had not yet been shown the newest version of the
    /// object when it sent this.
    behind: bool,
    /// Sent by an earlier life of the controller: lands, is not answered.
    orphan: bool,
}

/// A write that landed ([`SlowApi::land`]).
#[derive(Debug)]
pub struct Landed {
    /// When it landed.
    pub at: Timestamp,
    /// The write.
    pub action: Action,
    /// What the cluster did with it. A contract violation the controller
    /// could not have seen coming (the object changed after the controller
    /// last saw it, or from the instant the write was sent on) is taken
    /// out: with latency it is a race every controller runs, not a broken
    /// rule.
    pub applied: Applied,
}

/// What is on its way between the controller and the simulated cluster;
/// see the module's description.
#[derive(Debug)]
pub struct SlowApi {
    latency: ApiLatency,
    rng: Rng,
    seq: u64,
    revision: u64,
    writes: BTreeMap<(Timestamp, u64), InFlight>,
    /// Writes not sent yet: behind a write to the same object on its way,
    /// or waiting for a token. The adapter's writer's queue, so they go
    /// out in its order.
    unsent: Dispatch<Timestamp>,
    /// Writes on their way, by object: when the last lands, the object's
    /// next write may go.
    on_way: HashMap<ObjectRef, u32, foldhash::fast::RandomState>,
    /// The client's token buckets, with a client rate.
    client: Option<Client>,
    /// Watch events on their way, in delivery order. Boxed: a node or pod
    /// snapshot is some 150 bytes, and the map shifts its entries on
    /// every insert and removal (a change per renewal).
    events: BTreeMap<(Timestamp, u64), Box<Observation>>,
    /// Per object (by [`object_id`]): its version and watch times. Never
    /// iterated, so its hasher's seed changes nothing a run shows.
    objects: HashMap<u64, ObjectTimes, foldhash::fast::RandomState>,
}

/// The controller's clients under a rate: node lifecycle's bucket, the
/// taint-eviction controller's own (as `nodewarden run` has them), and the
/// marks held unsent ([`MARKS_HELD`]).
#[derive(Clone, Debug)]
struct Client {
    qps: f64,
    burst: u32,
    eviction: EvictionClient,
    lifecycle_bucket: Bucket,
    eviction_bucket: Bucket,
    /// When the buckets were last refilled.
    refilled: Timestamp,
    /// When the next token a waiting write needs comes.
    next_token: Option<Timestamp>,
    /// Not-ready marks handed over and not yet sent or withdrawn.
    marks_unsent: usize,
}

impl Client {
    fn new(qps: f64, burst: u32, eviction: EvictionClient) -> Client {
        Client {
            qps,
            burst,
            eviction,
            lifecycle_bucket: Bucket::new(qps, burst),
            eviction_bucket: Bucket::new(qps, burst),
            refilled: Timestamp::MIN,
            next_token: None,
            marks_unsent: 0,
        }
    }
}

/// How many of `actions` are not-ready marks.
fn marks(actions: &[Action]) -> usize {
    actions.iter().filter(|a| matches!(a.kind, nodewarden_engine::ActionKind::MarkPodNotReady { .. })).count()
}

/// Asked just before a queued write goes out, at the instant it goes: `Err`
/// withdraws it, saying why.
pub type Judge<'a> = dyn FnMut(Timestamp, &Action) -> Result<(), Withdrawal> + 'a;

/// An object's identity on the wire, hashed (64 bits). A collision would
/// only be conservative: two objects' events ordered as if they were one's
/// (still a valid order), and a node status write refused as a conflict
/// (decided again).
fn object_id(kind: ObjectKind, key: &str) -> u64 {
    // A fixed seed: the identity is the same in every run.
    let mut h = foldhash::quality::FixedState::with_seed(0).build_hasher();
    (kind as u8).hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

fn object_of(action: &Action) -> Option<u64> {
    let (object, _) = action.kind.slot()?;
    Some(match &object {
        ObjectRef::Node(n) => object_id(ObjectKind::Node, n),
        ObjectRef::Pod(p) => object_id(ObjectKind::Pod, p),
    })
}

impl SlowApi {
    /// A wire with `latency`, its delays drawn from `seed`.
    pub fn new(latency: ApiLatency, seed: u64) -> SlowApi {
        SlowApi {
            latency,
            rng: Rng::stream(seed, 0x41_50_49),
            seq: 0,
            revision: 0,
            writes: BTreeMap::new(),
            unsent: Dispatch::new(NOTHING_IN_LINE),
            on_way: HashMap::default(),
            client: latency.client_rate().map(|(qps, burst)| Client::new(qps, burst, EvictionClient::Own)),
            events: BTreeMap::new(),
            objects: HashMap::default(),
        }
    }

    /// Deletions spend node lifecycle's bucket (legacy mode, where node
    /// lifecycle deletes), not a client of their own.
    pub fn with_eviction_client(mut self, eviction: EvictionClient) -> SlowApi {
        if let Some(c) = &mut self.client {
            c.eviction = eviction;
        }
        self
    }

    /// The latency it models.
    pub fn latency(&self) -> ApiLatency {
        self.latency
    }

    /// Without latency: the drivers bypass the wire.
    pub fn is_instant(&self) -> bool {
        self.latency.is_instant()
    }

    /// When something next lands or is delivered, or a waiting write's
    /// token comes.
    pub fn next_due(&self) -> Option<Timestamp> {
        let write = self.writes.keys().next().map(|(t, _)| *t);
        let event = self.events.keys().next().map(|(t, _)| *t);
        let token = self.client.as_ref().and_then(|c| c.next_token);
        write.into_iter().chain(event).chain(token).min()
    }

    /// Whether anything is due by `now`: a write to land, a watch event
    /// to deliver, or a write waiting to go. The drivers let the wire
    /// work again after a step only then.
    pub fn busy_at(&self, now: Timestamp) -> bool {
        self.writes.keys().next().is_some_and(|(t, _)| *t <= now)
            || self.events.keys().next().is_some_and(|(t, _)| *t <= now)
            || self.unsent.queued() > 0
    }

    /// How many more not-ready marks the controller may build now
    /// ([`ClusterApi::room`]): without a client rate, all; with one, as
    /// many as keep [`MARKS_HELD`] unsent, as the adapter's writer holds.
    pub fn room(&self) -> usize {
        match &self.client {
            None => usize::MAX,
            Some(c) => MARKS_HELD.saturating_sub(c.marks_unsent),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Gives a changed object its resourceVersion (the next revision).
    fn stamp(&mut self, obs: &mut Observation) {
        let (version, id) = match obs {
            Observation::NodeUpserted(n) => (&mut n.version, object_id(ObjectKind::Node, &n.name)),
            Observation::PodUpserted(p) => (&mut p.version, object_id(ObjectKind::Pod, &p.key)),
            _ => return,
        };
        self.revision += 1;
        *version = self.revision;
        self.objects.entry(id).or_insert(ObjectTimes::new(Timestamp::MIN, Timestamp::MIN)).version = self.revision;
    }

    /// A node status write decided on another version of the node than the
    /// one it would land on: refused, as the API server's resourceVersion
    /// precondition refuses it.
    fn conflict(&self, action: &Action) -> Option<String> {
        let nodewarden_engine::ActionKind::UpdateNodeConditions { node, version, .. } = &action.kind else {
            return None;
        };
        let now_at = self.objects.get(&object_id(ObjectKind::Node, node)).map_or(0, |t| t.version);
        (*version != 0 && now_at != 0 && now_at != *version)
            .then(|| format!("node {node} changed since the decision (resourceVersion {version}, now {now_at})"))
    }

    /// The cluster changed at `now` (a kubelet, a scenario event, a landed
    /// write): each change goes out on the watch, stamped, after a delay
    /// and after the earlier changes of the same object.
    pub fn publish(&mut self, now: Timestamp, observations: impl IntoIterator<Item = Observation>) {
        for mut obs in observations {
            self.stamp(&mut obs);
            self.publish_stamped(now, obs);
        }
    }

    /// A list of the whole cluster at `now` (a controller starting, or its
    /// watches starting over): the watch events still on their way belong
    /// to watches that are gone; the list, stamped, is what the controller
    /// sees now. It shows an object deleted meanwhile by its absence: that
    /// deletion comes first, so whoever kept the object (the safety
    /// interlock's mirror outlives a restart) lets it go.
    pub fn list(&mut self, now: Timestamp, mut state: Vec<Observation>) -> Vec<Observation> {
        let listed: std::collections::HashSet<u64> =
            state.iter().filter_map(|o| o.key().map(|(kind, key)| object_id(kind, key))).collect();
        let gone = std::mem::take(&mut self.events).into_values().map(|o| *o).filter(|o| {
            matches!(
                o,
                Observation::NodeDeleted { .. }
                    | Observation::PodDeleted { .. }
                    | Observation::LeaseDeleted { .. }
                    | Observation::BudgetDeleted { .. }
            ) && o.key().is_some_and(|(kind, key)| !listed.contains(&object_id(kind, key)))
        });
        let mut out: Vec<Observation> = gone.collect();
        for obs in &mut state {
            self.stamp(obs);
            if let Some((kind, key)) = obs.key() {
                let times = self.objects.entry(object_id(kind, key)).or_insert(ObjectTimes::new(now, Timestamp::MIN));
                times.delivered_by = now;
            }
        }
        out.extend(state);
        out
    }

    /// The controller that sent what is on its way is gone: its writes
    /// still land (they were sent), unanswered.
    pub fn restart(&mut self) {
        for w in self.writes.values_mut() {
            w.orphan = true;
        }
        // A new process: a new queue (its writes to an object still wait
        // for the old life's writes to it to land) and full buckets.
        self.unsent = Dispatch::new(NOTHING_IN_LINE);
        for w in self.writes.values() {
            if let Some((object, _)) = w.action.kind.slot() {
                self.unsent.went_out(object, &w.action.kind);
            }
        }
        if let Some(c) = &mut self.client {
            *c = Client::new(c.qps, c.burst, c.eviction);
        }
    }

    /// The controller issues `action` at `now`. Without a client rate it
    /// goes out at once unless a write to the same object is on its way or
    /// waits; with one, it waits its turn for a token. A write that waits
    /// is judged when it goes out ([`SlowApi::pump`]). It lands after a write
    /// latency. Events go too (they are writes to the API), unanswered.
    pub fn send(&mut self, now: Timestamp, action: &Action) {
        if self.goes_out_at_once(now, action) {
            if let Some((object, _)) = action.kind.slot() {
                self.unsent.went_out(object, &action.kind);
            }
            self.go_out(now, action.clone());
            return;
        }
        if let Some(c) = &mut self.client {
            c.marks_unsent += marks(std::slice::from_ref(action));
        }
        // A dropped Event (a thousand wait) is lost, as the adapter's.
        let _ = self.unsent.push(action.clone(), now);
    }

    /// Whether [`SlowApi::send`] at `now` sends `action` out at once: without
    /// a client rate, when nothing of its object is on its way or waits.
    /// A write that waits its turn is judged when it goes out
    /// ([`SlowApi::pump`]), one that goes at once is judged by the loop
    /// before it is handed over ([`ClusterApi::sends_at_once`]).
    pub fn goes_out_at_once(&self, _now: Timestamp, action: &Action) -> bool {
        self.client.is_none()
            && action.kind.slot().is_none_or(|(object, _)| !self.unsent.holds(&object))
            && !self.unsent.must_wait(&action.kind)
    }

    /// `object` as `cluster` has it, at the version the wire last gave it
    /// (read, not changed): the answer that goes with a withdrawn write.
    fn read(&self, cluster: &mut dyn ClusterApi, object: &ObjectRef) -> Vec<Observation> {
        let (kind, key) = match object {
            ObjectRef::Node(name) => (ObjectKind::Node, name),
            ObjectRef::Pod(key) => (ObjectKind::Pod, key),
        };
        let version = self.objects.get(&object_id(kind, key)).map_or(0, |t| t.version);
        let mut state = cluster.read(object);
        for o in &mut state {
            match o {
                Observation::NodeUpserted(n) => n.version = version,
                Observation::PodUpserted(p) => p.version = version,
                _ => {}
            }
        }
        state
    }

    /// `action` leaves the controller at `now`.
    fn go_out(&mut self, now: Timestamp, action: Action) {
        if let Some((object, _)) = action.kind.slot() {
            *self.on_way.entry(object).or_default() += 1;
        }
        let latency = self.latency.write_latency.draw(&mut self.rng);
        let at = now + latency;
        let behind = object_of(&action).and_then(|id| self.objects.get(&id)).is_some_and(|t| t.delivered_by > now);
        let seq = self.next_seq();
        self.writes.insert((at, seq), InFlight { action, sent_at: now, behind, orphan: false });
    }

    /// Sends what may go at `now`: without a client rate, every write whose
    /// object has nothing on its way; with one, as many as the buckets
    /// have tokens for, most urgent first, in the adapter's writer's
    /// order. Each is judged as it goes out; one no longer true is answered
    /// `Withdrawn` (with the object as it is) and never lands, and its
    /// object's next write may go at once.
    pub fn pump(
        &mut self,
        now: Timestamp,
        cluster: &mut dyn ClusterApi,
        judge: &mut Judge<'_>,
        answers: &mut Vec<Observation>,
    ) {
        if let Some(c) = &mut self.client {
            let seconds = if c.refilled == Timestamp::MIN { 0.0 } else { (now - c.refilled).as_secs_f64() };
            c.lifecycle_bucket.refill(seconds);
            c.eviction_bucket.refill(seconds);
            c.refilled = now;
            c.next_token = None;
        }
        while let Some((class, start)) = self.turn(now).and_then(|c| self.unsent.start(c).map(|s| (c, s))) {
            self.unsent.sent(start.class);
            let actions = start.write.into_actions();
            let object = actions.first().and_then(|a| a.kind.slot()).map(|(o, _)| o);
            let unmarked = marks(&actions);
            let mut sent = false;
            for action in actions {
                match judge(now, &action) {
                    Ok(()) => {
                        self.go_out(now, action);
                        sent = true;
                    }
                    Err(why) => {
                        let outcome = nodewarden_engine::WriteOutcome::Withdrawn(why);
                        answers.push(Observation::WriteFinished { id: action.id, outcome });
                        if let Some((object @ ObjectRef::Node(_), _)) = action.kind.slot() {
                            answers.extend(self.read(cluster, &object));
                        }
                    }
                }
            }
            // A write withdrawn whole sent no request: its token is kept.
            if let Some(c) = &mut self.client {
                c.marks_unsent = c.marks_unsent.saturating_sub(unmarked);
                let bucket =
                    if c.eviction.spends_own(class) { &mut c.eviction_bucket } else { &mut c.lifecycle_bucket };
                bucket.grant(class, sent);
            }
            if !sent && let Some(object) = object {
                self.unsent.finished(&object);
            }
        }
    }

    /// The class whose write goes next at `now`, if one may: without a
    /// client rate, the most urgent that waits; with one, the most urgent
    /// a bucket has a token for (noting when the next token comes for the
    /// others).
    fn turn(&mut self, now: Timestamp) -> Option<WriteClass> {
        let unsent = &mut self.unsent;
        let Some(c) = &mut self.client else {
            return WriteClass::ALL.into_iter().find(|&class| unsent.has(class));
        };
        let mut go: Option<WriteClass> = None;
        let eviction = c.eviction;
        for own in [false, true] {
            let bucket = if own { &mut c.eviction_bucket } else { &mut c.lifecycle_bucket };
            match bucket.turn(|class| eviction.spends_own(class) == own && unsent.has(class)) {
                Turn::Idle => {}
                Turn::Go(class) => go = Some(go.map_or(class, |g| g.min(class))),
                Turn::Wait(_, seconds) => {
                    // Rounded up, so that the bucket holds the token then.
                    let at = now + Span::from_nanos((seconds * 1e9).ceil().max(1.0) as i64);
                    c.next_token = Some(c.next_token.map_or(at, |t| t.min(at)));
                }
            }
        }
        go
    }

    /// Lands every write due by `now` on `cluster`, each at its own time,
    /// in order. The answers (to hand to the controller now) go to
    /// `answers`; the changes go on to the watch. Returns what landed.
    ///
    /// `judge` is asked about each queued write as it goes out.
    pub fn land(
        &mut self,
        now: Timestamp,
        cluster: &mut dyn ClusterApi,
        answers: &mut Vec<Observation>,
        judge: &mut Judge<'_>,
    ) -> Vec<Landed> {
        let mut landed = Vec::new();
        let mut pumped = false;
        loop {
            let Some(entry) = self.writes.first_entry().filter(|e| e.key().0 <= now) else {
                // What may go now goes; without write latency it lands now
                // too, so look again.
                if pumped {
                    break;
                }
                self.pump(now, cluster, judge, answers);
                pumped = true;
                continue;
            };
            let (at, _) = *entry.key();
            pumped = false;
            let w = entry.remove();
            let w = self.land_one(at, w, cluster, answers);
            if let Some((object, _)) = w.action.kind.slot()
                && let Some(n) = self.on_way.get_mut(&object)
            {
                *n -= 1;
                if *n == 0 {
                    self.on_way.remove(&object);
                    // The object's next write goes out as this one lands.
                    self.unsent.finished(&object);
                    self.pump(at, cluster, judge, answers);
                }
            }
            landed.push(w);
        }
        landed
    }

    /// One write lands at `at`.
    fn land_one(
        &mut self,
        at: Timestamp,
        w: InFlight,
        cluster: &mut dyn ClusterApi,
        answers: &mut Vec<Observation>,
    ) -> Landed {
        if let Some(why) = self.conflict(&w.action) {
            // Refused with nothing changed; the node's newer version is
            // on the watch already.
            let outcome = nodewarden_engine::WriteOutcome::Failed(why);
            let finished = Observation::WriteFinished { id: w.action.id, outcome: outcome.clone() };
            if !w.orphan {
                answers.push(finished.clone());
            }
            let applied = Applied { observations: vec![finished], outcome: Some(outcome), violation: None };
            return Landed { at, action: w.action, applied };
        }
        let mut applied = cluster.apply(at, &w.action);
        let id = object_of(&w.action);
        let changed_since = id.and_then(|id| self.objects.get(&id)).is_some_and(|t| t.changed_at >= w.sent_at);
        if w.behind || changed_since {
            applied.violation = None;
        }
        // The object as the write left it: stamped once, answered at
        // once, and sent on to the watch with the same version.
        let mut state = Vec::new();
        for mut obs in std::mem::take(&mut applied.observations) {
            if !matches!(obs, Observation::WriteFinished { .. }) {
                self.stamp(&mut obs);
                state.push(obs.clone());
            }
            applied.observations.push(obs);
        }
        let accepted = applied.outcome == Some(nodewarden_engine::WriteOutcome::Done);
        if !w.orphan {
            answers.extend(applied.observations.iter().cloned());
        }
        if accepted {
            for obs in state {
                self.publish_stamped(at, obs);
            }
        }
        Landed { at, action: w.action, applied }
    }

    /// [`SlowApi::publish`] for one change already stamped.
    fn publish_stamped(&mut self, now: Timestamp, obs: Observation) {
        let mut at = now + self.latency.watch_delay.draw(&mut self.rng);
        if let Some((kind, key)) = obs.key() {
            let times = self.objects.entry(object_id(kind, key)).or_insert(ObjectTimes::new(at, now));
            at = at.max(times.delivered_by);
            times.delivered_by = at;
            times.changed_at = times.changed_at.max(now);
        }
        let seq = self.next_seq();
        self.events.insert((at, seq), Box::new(obs));
    }

    /// The watch events due by `now`, in order, into `out`.
    pub fn deliver(&mut self, now: Timestamp, out: &mut Vec<Observation>) {
        while let Some(entry) = self.events.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out.push(*entry.remove());
        }
    }

    /// Drops the watch events on their way (the watches broke).
    pub fn drop_events(&mut self) {
        self.events.clear();
    }
}

/// The [`ClusterApi`] a driver steps the controller through: without
/// latency the cluster itself, answering at once; with it, the
/// [`SlowApi`], answering later.
pub struct Delayed<'a> {
    /// The slow API (bypassed when instant).
    pub wire: &'a mut SlowApi,
    /// Where writes land when instant.
    pub cluster: &'a mut dyn ClusterApi,
}

impl ClusterApi for Delayed<'_> {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        if self.wire.is_instant() {
            return self.cluster.apply(now, action);
        }
        self.wire.send(now, action);
        Applied::default()
    }

    /// Instant: every write lands at once. With latency: a write goes out
    /// at once unless one to the same object is on its way (that one is
    /// judged by [`SlowApi::land`] when it goes out).
    fn sends_at_once(&self, now: Timestamp, action: &Action) -> bool {
        self.wire.is_instant() || self.wire.goes_out_at_once(now, action)
    }

    fn read(&mut self, object: &ObjectRef) -> Vec<Observation> {
        if self.wire.is_instant() { self.cluster.read(object) } else { self.wire.read(self.cluster, object) }
    }

    fn room(&self) -> usize {
        self.wire.room()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_engine::{ActionId, ActionKind, NodeSnapshot, WriteOutcome};

    fn node(name: &str) -> Observation {
        Observation::NodeUpserted(NodeSnapshot {
            version: 0,
            name: name.into(),
            created: Timestamp::from_millis(0),
            labels: Default::default(),
            conditions: vec![],
            taints: vec![],
            unschedulable: false,
            allocatable: None,
        })
    }

    fn version(o: &Observation) -> u64 {
        match o {
            Observation::NodeUpserted(n) => n.version,
            _ => 0,
        }
    }

    #[test]
    fn ranges_and_flags_parse_and_say_what_is_wrong() {
        assert_eq!("none".parse::<ApiLatency>(), Ok(ApiLatency::NONE));
        assert_eq!("realistic".parse::<ApiLatency>(), Ok(ApiLatency::REALISTIC));
        assert_eq!("write=20ms..200ms,watch=50ms..500ms".parse::<ApiLatency>(), Ok(ApiLatency::REALISTIC));
        let fixed: ApiLatency = "watch=100ms".parse().unwrap();
        assert_eq!(fixed.watch_delay, SpanRange::new(Span::from_millis(100), Span::from_millis(100)));
        assert_eq!(fixed.write_latency, SpanRange::ZERO);
        assert!("write=200ms..20ms".parse::<ApiLatency>().unwrap_err().contains("backwards"));
        assert!("read=1s".parse::<ApiLatency>().unwrap_err().contains("write, watch, qps and burst"));
        let rated: ApiLatency = "realistic,qps=5,burst=2".parse().unwrap();
        assert_eq!((rated.write_latency, rated.client_rate()), (ApiLatency::REALISTIC.write_latency, Some((5.0, 2))));
        assert_eq!("none,qps=5".parse::<ApiLatency>().unwrap().client_rate(), Some((5.0, DEFAULT_BURST)));
        assert!(!"none,burst=5".parse::<ApiLatency>().unwrap().is_instant(), "a rate goes through the wire");
        assert!("qps=0".parse::<ApiLatency>().unwrap_err().contains("qps: must be"));
        assert!("burst=0".parse::<ApiLatency>().unwrap_err().contains("burst: must be at least 1"));
        assert!("qps=many".parse::<ApiLatency>().unwrap_err().contains("qps: expected a number"));
        assert!("fast".parse::<ApiLatency>().unwrap_err().contains("realistic"));
        assert!("write=-1s".parse::<ApiLatency>().unwrap_err().contains("negative"));
        assert_eq!(ApiLatency::REALISTIC.to_string(), "write 0.02s..0.2s, watch 0.05s..0.5s");
        assert_eq!(ApiLatency::NONE.tolerance(Span::from_secs(5)), Span::ZERO);
        assert_eq!(ApiLatency::REALISTIC.tolerance(Span::from_secs(5)), Span::from_millis(7100));
    }

    #[test]
    fn one_objects_events_keep_their_order_and_versions_grow() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 7);
        for i in 0..50 {
            wire.publish(Timestamp::from_millis(i), [node("a"), node("b")]);
        }
        let mut out = Vec::new();
        wire.deliver(Timestamp::from_millis(10_000), &mut out);
        assert_eq!(out.len(), 100);
        for name in ["a", "b"] {
            let versions: Vec<u64> = out
                .iter()
                .filter(|o| matches!(o, Observation::NodeUpserted(n) if n.name == name))
                .map(version)
                .collect();
            assert_eq!(versions.len(), 50);
            assert!(versions.windows(2).all(|w| w[0] < w[1]), "{name}: {versions:?}");
        }
        // Across objects the order is the delays', not the publication's.
        let all: Vec<u64> = out.iter().map(version).collect();
        assert!(all.windows(2).any(|w| w[0] > w[1]), "some events overtake others");
    }

    /// Answers with the node's new state.
    struct Api;
    impl ClusterApi for Api {
        fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
            Applied {
                observations: vec![
                    Observation::WriteFinished { id: action.id, outcome: WriteOutcome::Done },
                    node("a"),
                ],
                outcome: Some(WriteOutcome::Done),
                violation: Some("would be a violation".into()),
            }
        }
    }

    /// Every queued write is still true.
    fn yes_judge() -> impl FnMut(Timestamp, &Action) -> Result<(), Withdrawal> {
        |_, _| Ok(())
    }

    fn patch() -> Action {
        Action { id: ActionId(1), kind: ActionKind::PatchNodeLabels { node: "a".into(), labels: Default::default() } }
    }

    #[test]
    fn a_write_lands_late_is_answered_then_and_echoed_later() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 1);
        wire.send(Timestamp::from_millis(0), &patch());
        let mut answers = Vec::new();
        assert!(
            wire.land(Timestamp::from_millis(19), &mut Api, &mut answers, &mut yes_judge()).is_empty(),
            "not before 20 ms"
        );
        let landed = wire.land(Timestamp::from_millis(200), &mut Api, &mut answers, &mut yes_judge());
        assert_eq!(landed.len(), 1);
        assert!(landed[0].at >= Timestamp::from_millis(20) && landed[0].at <= Timestamp::from_millis(200));
        assert!(landed[0].applied.violation.is_some(), "the controller had seen everything: a real violation");
        assert_eq!(answers.len(), 2);
        let answered = version(&answers[1]);
        assert!(answered > 0);
        let mut echo = Vec::new();
        wire.deliver(Timestamp::from_millis(10_000), &mut echo);
        assert_eq!(echo.len(), 1);
        assert_eq!(version(&echo[0]), answered, "the echo is the same version");
    }

    #[test]
    fn a_violation_the_controller_could_not_see_is_a_race() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 1);
        wire.publish(Timestamp::from_millis(0), [node("a")]);
        wire.send(Timestamp::from_millis(1), &patch());
        let landed = wire.land(Timestamp::from_millis(1_000), &mut Api, &mut Vec::new(), &mut yes_judge());
        assert!(landed[0].applied.violation.is_none(), "sent while a change of the object was on its way");
    }

    #[test]
    fn a_restarted_controller_gets_no_old_answers_and_a_list_replaces_old_events() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 3);
        wire.send(Timestamp::from_millis(0), &patch());
        wire.publish(Timestamp::from_millis(0), [node("b")]);
        wire.restart();
        let listed = wire.list(Timestamp::from_millis(0), vec![node("a")]);
        assert!(version(&listed[0]) > 0);
        let mut answers = Vec::new();
        assert_eq!(
            wire.land(Timestamp::from_millis(1_000), &mut Api, &mut answers, &mut yes_judge()).len(),
            1,
            "the old write still lands"
        );
        assert!(answers.is_empty(), "unanswered");
        let mut out = Vec::new();
        wire.deliver(Timestamp::from_millis(10_000), &mut out);
        assert!(out.iter().all(|o| !matches!(o, Observation::NodeUpserted(n) if n.name == "b")), "{out:?}");
    }

    #[test]
    fn a_queued_write_goes_out_when_the_one_ahead_lands_unless_it_is_no_longer_true() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 5);
        let second = Action { id: ActionId(2), ..patch() };
        let third = Action { id: ActionId(3), ..patch() };
        wire.send(Timestamp::from_millis(0), &patch());
        wire.send(Timestamp::from_millis(0), &second);
        wire.send(Timestamp::from_millis(0), &third);
        let mut asked = Vec::new();
        let mut judge = |at: Timestamp, a: &Action| {
            asked.push((at, a.id));
            if a.id == ActionId(2) { Err(Withdrawal::NotCurrent { view: "nodes" }) } else { Ok(()) }
        };
        let mut answers = Vec::new();
        let landed = wire.land(Timestamp::from_millis(10_000), &mut Api, &mut answers, &mut judge);
        let ids: Vec<ActionId> = landed.iter().map(|l| l.action.id).collect();
        assert_eq!(ids, [ActionId(1), ActionId(3)], "the withdrawn write never lands");
        assert_eq!(asked.len(), 2, "each queued write is judged once, when it would go out");
        assert_eq!(asked[0].0, landed[0].at, "judged when the write ahead landed");
        assert!(answers.iter().any(|o| matches!(
            o,
            Observation::WriteFinished { id: ActionId(2), outcome: nodewarden_engine::WriteOutcome::Withdrawn(_) }
        )));
        assert!(landed[1].at >= landed[0].at + Span::from_millis(20), "sent after the first landed");
    }

    #[test]
    fn a_restarted_controllers_unsent_writes_die_with_it() {
        let mut wire = SlowApi::new(ApiLatency::REALISTIC, 5);
        wire.send(Timestamp::from_millis(0), &patch());
        wire.send(Timestamp::from_millis(0), &Action { id: ActionId(2), ..patch() });
        wire.restart();
        let landed = wire.land(Timestamp::from_millis(10_000), &mut Api, &mut Vec::new(), &mut yes_judge());
        assert_eq!(landed.len(), 1, "only the write already sent lands");
    }

    fn taint(id: u64, node: &str, slot: nodewarden_engine::WriteSlot) -> Action {
        let kind = ActionKind::PatchNodeTaints { node: node.into(), add: vec![], remove: vec![], slot };
        Action { id: ActionId(id), kind }
    }

    fn mark(id: u64, pod: &str) -> Action {
        Action { id: ActionId(id), kind: ActionKind::MarkPodNotReady { pod: pod.into(), uid: format!("u-{pod}") } }
    }

    /// A deletion-class write (the DisruptionTarget that goes just before
    /// a deletion, on the same client).
    fn disruption_target(id: u64, pod: &str) -> Action {
        let kind = ActionKind::AddPodDisruptionTarget { pod: pod.into(), uid: format!("u-{pod}") };
        Action { id: ActionId(id), kind }
    }

    /// Plays the wire until nothing is left: each step at its next due
    /// time, as the drivers step. Returns (when it landed, action id).
    fn drain(wire: &mut SlowApi, judge: &mut Judge<'_>) -> Vec<(Timestamp, u64)> {
        let mut landed = Vec::new();
        let mut t = Timestamp::from_millis(0);
        let mut answers = Vec::new();
        for _ in 0..1000 {
            landed.extend(wire.land(t, &mut Api, &mut answers, judge).into_iter().map(|l| (l.at, l.action.id.0)));
            wire.deliver(t, &mut Vec::new());
            match wire.next_due() {
                Some(n) if n > t => t = n,
                _ => break,
            }
        }
        landed
    }

    /// One request a second, none saved beyond one: node writes go out a
    /// second apart, a NoExecute taint handed over last goes before the
    /// NoSchedule ones, marks after them, and deletions spend a bucket of
    /// their own.
    #[test]
    fn under_a_client_rate_writes_go_in_the_writers_order_at_its_pace() {
        use nodewarden_engine::WriteSlot::{NoExecuteTaints, NoScheduleTaints};
        let latency: ApiLatency = "write=10ms,qps=1,burst=1".parse().unwrap();
        let mut wire = SlowApi::new(latency, 1);
        let t0 = Timestamp::from_millis(0);
        wire.send(t0, &mark(1, "ns/p1"));
        wire.send(t0, &taint(2, "n1", NoScheduleTaints));
        wire.send(t0, &taint(3, "n2", NoScheduleTaints));
        wire.send(t0, &taint(4, "n3", NoExecuteTaints));
        wire.send(t0, &disruption_target(5, "ns/p2"));
        assert_eq!(wire.room(), MARKS_HELD - 1, "one mark unsent");
        let sent = drain(&mut wire, &mut yes_judge());
        // Sent at 0, 0, 1 s, 2 s and 3 s; each lands 10 ms later.
        let s = |ms: i64, id: u64| (Timestamp::from_millis(ms + 10), id);
        assert_eq!(sent, [s(0, 4), s(0, 5), s(1000, 2), s(2000, 3), s(3000, 1)], "{sent:?}");
        assert_eq!(wire.room(), MARKS_HELD);
    }

    /// Legacy mode: node lifecycle deletes through its own client, so a
    /// deletion waits its turn among the node writes (after a streak of
    /// them at most).
    #[test]
    fn in_legacy_mode_deletions_share_node_lifecycles_bucket() {
        use nodewarden_engine::WriteSlot::NoScheduleTaints;
        let latency: ApiLatency = "qps=1,burst=1".parse().unwrap();
        let mut wire = SlowApi::new(latency, 1).with_eviction_client(EvictionClient::Shared);
        let t0 = Timestamp::from_millis(0);
        for (i, n) in ["n1", "n2", "n3", "n4", "n5"].iter().enumerate() {
            wire.send(t0, &taint(i as u64 + 1, n, NoScheduleTaints));
        }
        wire.send(t0, &disruption_target(9, "ns/p"));
        let sent = drain(&mut wire, &mut yes_judge());
        let at = sent.iter().find(|(_, id)| *id == 9).map(|(t, _)| *t);
        assert_eq!(at, Some(Timestamp::from_millis(3000)), "after three node writes: {sent:?}");
    }

    /// A write that waited for its token is judged when it goes: one no
    /// longer true then is withdrawn, and the next write of its object
    /// goes in its place.
    #[test]
    fn a_write_waiting_for_a_token_is_judged_when_its_token_comes() {
        let latency: ApiLatency = "qps=2,burst=1".parse().unwrap();
        let mut wire = SlowApi::new(latency, 1);
        let t0 = Timestamp::from_millis(0);
        wire.send(t0, &patch());
        wire.send(t0, &Action { id: ActionId(2), ..patch() });
        wire.send(t0, &Action { id: ActionId(3), ..patch() });
        let mut asked = Vec::new();
        let mut judge = |at: Timestamp, a: &Action| {
            asked.push((at, a.id.0));
            if a.id == ActionId(2) { Err(Withdrawal::NotCurrent { view: "nodes" }) } else { Ok(()) }
        };
        let sent = drain(&mut wire, &mut judge);
        assert_eq!(sent, [(t0, 1), (Timestamp::from_millis(500), 3)], "{sent:?}");
        assert_eq!(asked, [(t0, 1), (Timestamp::from_millis(500), 2), (Timestamp::from_millis(500), 3)]);
    }
}
