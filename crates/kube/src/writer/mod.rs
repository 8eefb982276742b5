//! Actions to API calls.
//!
//! [`KubeApi`] is the [`ClusterApi`] the engine thread steps through: it
//! hands each action (judged by the safety interlock when it was decided,
//! so a refused one never gets here) to the async writer and answers
//! "later" (`outcome: None`). The writer ([`spawn_writer`]) carries it out
//! under a client-side rate limit handed out by class ([`crate::limiter`]:
//! kube-controller-manager's `--kube-api-qps` 20, `--kube-api-burst` 30),
//! asks the engine thread again whether the write is still true before it
//! waits for a token and right before each request ([`Input::Judge`]; one
//! no longer true is withdrawn, never sent), retries 429 and 5xx and
//! transport errors with backoff (a `Retry-After` delays only its own
//! request), and answers through the engine's channel: `WriteFinished`,
//! then the object as the API returned it, or, after a refusal or a
//! withdrawal, as a fresh read shows it. Every action gets exactly one
//! `WriteFinished` (Events, which are not writes, get none), so nothing is
//! issued twice and nothing stays in flight.
//!
//! Order ([`dispatch`]): what waits is data, not tasks, so a backlog of
//! tens of thousands of writes costs its actions and no more (pods'
//! not-ready marks wait in the engine as decisions, pulled a few at a
//! time: [`MARKS_HELD`]); a few
//! writes per class at a time are in line for a token. Writes to
//! different objects go out in parallel; writes to one object go out one
//! after another in the order the engine issued them (a node is never
//! seen tainted `unreachable` before it is seen `Unknown`); a pod's status
//! writes waiting together go as one patch.
//!
//! Preconditions: pod writes carry the pod's uid (a delete as a
//! precondition, a status patch naming it, as upstream's `PatchPodStatus`
//! does); a taint change is one patch guarded
//! by the taints it read (a JSON patch `test`), recomputed on a fresh read
//! when they changed (upstream's `RetryOnConflict`); a node status update that
//! conflicts goes back to the engine with the fresh node, which decides
//! again (upstream re-reads and recomputes).
//!
//! [`DryRunApi`] is `--dry-run`: it sends nothing, logs and counts every
//! action, and answers as if the API had accepted it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};
use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ActionKind, ObjectRef, Observation, Withdrawal, WriteOutcome};
use nodewarden_model::{Timestamp, wall};
use tokio::sync::mpsc;

use crate::input::Input;
use crate::leader::Fence;
use crate::limiter::{Budgets, EvictionClient, WriteClass};
use crate::trimmed::{Scheduled, Trimmed};
use crate::whole::Whole;
use crate::write_log::{EventBudget, FailureLog};

mod requests;

use nodewarden_controller::write_order::MARKS_HELD;
use nodewarden_controller::write_order::{DEFAULT_BURST, DEFAULT_CAP, DEFAULT_QPS, MAX_QUEUED_EVENTS, Pushed};

/// The queue, on the process's clock.
type Dispatch = nodewarden_controller::write_order::Dispatch<Instant>;
/// A waiting write, on the process's clock.
type Write = nodewarden_controller::write_order::Write<Instant>;

use nodewarden_objects::{Detail, node_reading, pod_reading, wall_clock_now};
use requests::{get_reading, pod_name};

/// Counter of actions `--dry-run` would have sent, by action kind.
pub const DRY_RUN_METRIC: &str = "nodewarden_dry_run_actions_total";

/// Counter of requests the leader-election fence held back.
pub const FENCED_METRIC: &str = "nodewarden_fenced_requests_total";

/// Counter {reason}: Events dropped, because too many were queued
/// (`backlog`) or their object's allowance was spent (`spam`).
pub const EVENTS_DROPPED_METRIC: &str = "nodewarden_events_dropped_total";

/// Histogram {class}: seconds from a write's decision (handed to the
/// writer) to its first request going out.
pub const WRITE_LAG_METRIC: &str = "nodewarden_write_lag_seconds";

/// Gauge {class}: writes decided and not yet sent.
pub const QUEUE_DEPTH_METRIC: &str = "nodewarden_write_queue_depth";

/// Gauge {class}: seconds since the oldest write still waiting was handed
/// to the writer (0 when none waits). Unlike the lag histogram, which is
/// recorded when a write goes out, it grows while nothing goes: a stalled
/// queue shows.
pub const OLDEST_METRIC: &str = "nodewarden_write_oldest_seconds";

/// How often [`OLDEST_METRIC`] is taken (a pass over what waits).
const OLDEST_EVERY: Duration = Duration::from_secs(2);

/// Counter of API requests retried, by reason (`throttled`, `server_error`,
/// `transport`).
pub const RETRY_METRIC: &str = "nodewarden_api_retries_total";

/// Counter {code}: requests the writer sent (reads before writes, writes,
/// Events), by answer: `2xx`, `4xx`, `5xx`, or `transport` (no answer).
pub const REQUEST_METRIC: &str = "nodewarden_api_requests_total";

fn code_class<T>(result: &ApiResult<T>) -> &'static str {
    match result {
        // Accepted; only the body could not be read.
        Ok(_) | Err(kube::Error::SerdeError(_)) => "2xx",
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => "4xx",
        Err(kube::Error::Api(s)) if s.code >= 500 => "5xx",
        Err(kube::Error::Api(_)) => "other",
        Err(_) => "transport",
    }
}

/// How the writer talks to the API.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// `--kube-api-qps`: sustained requests per second.
    pub qps: f64,
    /// `--kube-api-burst`: requests allowed at once.
    pub burst: u32,
    /// Whether deletions go through a client of their own (the
    /// taint-eviction controller's, with the same rate and burst) or node
    /// lifecycle's (legacy mode). `start` sets it from
    /// `--enable-taint-manager`.
    pub eviction_client: EvictionClient,
    /// First retry delay; doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    /// Longest delay between retries (a `Retry-After` may ask for more).
    pub max_backoff: Duration,
    /// A pod deletion still failing after this long is reported failed
    /// (with the pod's fresh state when it can be read). Deletions are
    /// retried this long because what they rest on (a NoExecute taint only
    /// this controller removes, the pod's uid as a precondition) does not
    /// go stale while the API is away.
    pub give_up_after: Duration,
    /// Any other write whose request has been failing for this long is
    /// reported failed: node conditions, taints and pod readiness rest on
    /// heartbeats, and a decision held through an outage would land on a
    /// cluster that has moved on (every pod marked NotReady after the API
    /// came back). The engine decides again on fresh facts; upstream
    /// likewise gives up and recomputes at its next monitor pass.
    /// `start` sets it to `--node-monitor-period`.
    pub stale_after: Duration,
    /// `reportingController` and `source.component` of Events.
    pub component: String,
    /// `reportingInstance` of Events (the replica's identity).
    pub instance: String,
    /// How much of the objects writes return is read: as much as the
    /// watches read (`start` sets it from `--enable-rescheduler`).
    pub detail: Detail,
    /// Writes per class in line for a token at once; the rest wait as
    /// data, where later decisions can still merge into them or go ahead
    /// of them (`nodewarden_controller::write_order`).
    pub in_line: usize,
    /// A fault for tests to inject: the task carrying out the write with
    /// this action id panics once it is judged, before its first request,
    /// to show a panicking write is contained. `None` outside tests.
    #[doc(hidden)]
    pub panic_on: Option<u64>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            eviction_client: EvictionClient::Own,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
            give_up_after: Duration::from_secs(600),
            stale_after: Duration::from_secs(5),
            component: "node-controller".into(),
            instance: String::new(),
            detail: Detail::Lifecycle,
            in_line: DEFAULT_CAP,
            panic_on: None,
        }
    }
}

/// The short name of an action's kind, for logs and metric labels.
pub fn action_name(kind: &ActionKind) -> &'static str {
    kind.name()
}

/// The [`ClusterApi`] of a replica that writes: actions go to the async
/// writer; their answers come back through the engine's channel.
pub struct KubeApi {
    tx: mpsc::UnboundedSender<Action>,
    /// Events handed over and not yet started or dropped by the writer.
    events_waiting: Arc<AtomicUsize>,
    /// Actions handed over and not yet sent, by class.
    waiting: Arc<Waiting>,
}

/// Actions handed to the writer and not yet sent (nor ended unsent), by
/// class: counted from the hand-over, so the engine thread reads what it
/// has handed over whether or not the writer's task has taken it yet.
#[derive(Default)]
struct Waiting([AtomicI64; 4]);

impl Waiting {
    /// One more of `class` waits.
    fn add(&self, class: WriteClass) {
        let n = self.0[class as usize].fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(n as f64);
    }

    /// One of `class` went out, or ended unsent.
    fn sub(&self, class: WriteClass) {
        let n = self.0[class as usize].fetch_sub(1, Ordering::Relaxed) - 1;
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(n.max(0) as f64);
    }

    fn of(&self, class: WriteClass) -> usize {
        usize::try_from(self.0[class as usize].load(Ordering::Relaxed)).unwrap_or(0)
    }
}

impl ClusterApi for KubeApi {
    fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
        if matches!(action.kind, ActionKind::RecordEvent(_)) {
            // Past the bound, dropped here rather than copied and handed
            // over to be dropped: a zone outage decides an Event per pod
            // of the zone (hundreds of thousands) in one pass.
            if self.events_waiting.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_EVENTS {
                self.events_waiting.fetch_sub(1, Ordering::Relaxed);
                metrics::counter!(EVENTS_DROPPED_METRIC, "reason" => "backlog").increment(1);
                return Applied::default();
            }
        }
        let class = WriteClass::of(&action.kind);
        self.waiting.add(class);
        if self.tx.send(action.clone()).is_err() && action.kind.slot().is_some() {
            self.waiting.sub(class);
            // The writer is gone (shutting down): nothing is sent, and the
            // engine must not wait for an answer that will not come.
            let why = "the writer has stopped".to_string();
            return Applied {
                observations: vec![Observation::WriteFinished {
                    id: action.id,
                    outcome: WriteOutcome::Failed(why.clone()),
                }],
                outcome: Some(WriteOutcome::Failed(why)),
                violation: None,
            };
        }
        Applied::default()
    }

    /// Marks are pulled while fewer than [`MARKS_HELD`] wait unsent;
    /// everything else is handed over as decided.
    fn room(&self) -> usize {
        MARKS_HELD.saturating_sub(self.waiting.of(WriteClass::PodStatus))
    }
}

/// `--dry-run`: decides as the leader would and sends nothing. Each action
/// is logged (`would_send`) and counted in [`DRY_RUN_METRIC`]; writes are
/// answered as accepted, so the engine goes on as if they had been, and
/// the watches show the cluster as whoever does write leaves it.
#[derive(Default)]
pub struct DryRunApi {
    /// Every action it was handed, for tests and a summary at exit.
    pub actions: Vec<Action>,
}

impl ClusterApi for DryRunApi {
    fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
        let name = action_name(&action.kind);
        metrics::counter!(DRY_RUN_METRIC, "action" => name).increment(1);
        match &action.kind {
            ActionKind::DeletePod { why, .. } => {
                tracing::info!(action = name, dry_run = true, "would send {:?}: {}", action.kind.slot(), why.one_line())
            }
            ActionKind::EvictForAddon { why, .. } => {
                tracing::info!(action = name, dry_run = true, "would send {:?}: {}", action.kind.slot(), why.one_line())
            }
            ActionKind::RecordEvent(e) => {
                tracing::info!(action = name, dry_run = true, reason = e.reason, object = %e.object, "would record: {}", e.message)
            }
            other => tracing::info!(action = name, dry_run = true, "would send {other:?}"),
        }
        self.actions.push(action.clone());
        if action.kind.slot().is_none() {
            return Applied::default();
        }
        Applied {
            observations: vec![Observation::WriteFinished { id: action.id, outcome: WriteOutcome::Done }],
            outcome: Some(WriteOutcome::Done),
            violation: None,
        }
    }
}

/// Starts the writer on the current tokio runtime. Returns the
/// [`ClusterApi`] the engine thread steps through; the writer answers on
/// `answers`. Dropping the `KubeApi` ends the writer once the writes handed
/// over have finished; aborting the returned task stops it at once.
pub fn spawn_writer(
    client: Client,
    answers: Sender<Input>,
    opts: WriterOptions,
    fence: Arc<Fence>,
) -> (KubeApi, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Action>();
    let events_waiting = Arc::new(AtomicUsize::new(0));
    let events_started = events_waiting.clone();
    let waiting = Arc::new(Waiting::default());
    let (left_line, mut out_of_line) = mpsc::unbounded_channel::<tokio::task::Id>();
    let shared = Arc::new(Writer {
        left_line,
        client,
        answers,
        limiter: Budgets::new(opts.qps, opts.burst, opts.eviction_client),
        core_events: AtomicBool::new(false),
        event_budget: EventBudget::default(),
        taints_seen: TaintsSeen::default(),
        waiting: waiting.clone(),
        failures: FailureLog::default(),
        opts,
        fence,
        not_before: NotBefore::default(),
    });
    for class in WriteClass::ALL {
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(0.0);
        metrics::gauge!(OLDEST_METRIC, "class" => class.as_str()).set(0.0);
    }
    let task = tokio::spawn(async move {
        // What waits is kept as data in `dispatch` (a few hundred bytes a
        // write); only the writes it hands out have a task, and it hands
        // out a few per class at a time (those in line for a token). See
        // `dispatch` for the order.
        let mut dispatch = Dispatch::new(shared.opts.in_line);
        let mut under_way: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
        // Each task's write and the class it started at (`None` once out
        // of line), to answer for it if the task panics, and to lend it a
        // class when a more urgent write queues behind it.
        let mut tasks: HashMap<tokio::task::Id, (Arc<Sending>, Option<WriteClass>)> = HashMap::new();
        let mut by_object: HashMap<ObjectRef, Arc<Sending>> = HashMap::new();
        let mut open = true;
        let mut oldest_tick = tokio::time::interval(OLDEST_EVERY);
        oldest_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            for start in dispatch.starts() {
                if start.class == WriteClass::Event {
                    events_started.fetch_sub(1, Ordering::Relaxed);
                }
                let sending = Sending::new(start.write, start.class, start.chained);
                if let Some(object) = &sending.object {
                    by_object.insert(object.clone(), sending.clone());
                }
                let w = shared.clone();
                let s = sending.clone();
                let handle = under_way.spawn(async move { w.carry_out(s).await });
                tasks.insert(handle.id(), (sending, Some(start.class)));
            }
            if !open && under_way.is_empty() {
                break;
            }
            tokio::select! {
                next = rx.recv(), if open => match next {
                    None => open = false,
                    Some(action) => {
                        let class = WriteClass::of(&action.kind);
                        match dispatch.push(action, Instant::now()) {
                            Pushed::Queued => {}
                            Pushed::EventDropped => {
                                events_started.fetch_sub(1, Ordering::Relaxed);
                                shared.waiting.sub(class);
                                metrics::counter!(EVENTS_DROPPED_METRIC, "reason" => "backlog").increment(1);
                                tracing::debug!("Event dropped: {MAX_QUEUED_EVENTS} already waiting");
                            }
                            Pushed::EventFolded => {
                                // Counted in the similar Event it joined.
                                events_started.fetch_sub(1, Ordering::Relaxed);
                                shared.waiting.sub(class);
                            }
                            Pushed::Raise(object, class) => {
                                if let Some(s) = by_object.get(&object) {
                                    s.raise(class);
                                }
                            }
                        }
                    }
                },
                _ = oldest_tick.tick() => {
                    // Waiting here, or started and still in line for a
                    // token.
                    let mut oldest = dispatch.oldest();
                    for (sending, in_line) in tasks.values() {
                        if let Some(class) = in_line {
                            let o = &mut oldest[*class as usize];
                            *o = Some(o.map_or(sending.decided, |x| x.min(sending.decided)));
                        }
                    }
                    for class in WriteClass::ALL {
                        let age = oldest[class as usize].map_or(0.0, |at| wall::since(at).as_secs_f64());
                        metrics::gauge!(OLDEST_METRIC, "class" => class.as_str()).set(age);
                    }
                }
                Some(id) = out_of_line.recv() => {
                    if let Some((_, in_line)) = tasks.get_mut(&id)
                        && let Some(class) = in_line.take()
                    {
                        dispatch.sent(class);
                    }
                }
                Some(done) = under_way.join_next_with_id(), if !under_way.is_empty() => {
                    let id = match &done {
                        Ok((id, ())) => *id,
                        Err(e) => e.id(),
                    };
                    let Some((sending, in_line)) = tasks.remove(&id) else { continue };
                    if let Some(class) = in_line {
                        dispatch.sent(class);
                    }
                    if let Err(e) = done {
                        // Nothing panics on purpose; if a write did, its
                        // object must not wait for ever, nor the engine
                        // for its answer: the write and those queued
                        // behind it (decided on what it would have done)
                        // fail, and the engine decides again.
                        tracing::error!(error = %e, "a write's task ended without finishing it");
                        let why = format!("the write's task ended: {e}");
                        shared.answer_all(&sending, &Finish::Failed(why.clone()));
                        if let Some(o) = &sending.object {
                            let queued = dispatch.drop_waiting(o);
                            for w in &queued {
                                for class in w.actions().map(|a| WriteClass::of(&a.kind)) {
                                    shared.waiting.sub(class);
                                }
                            }
                            shared.fail_unsent(queued.into_iter().flat_map(Write::into_actions), &why);
                        }
                    }
                    if let Some(o) = &sending.object {
                        if by_object.get(o).is_some_and(|s| Arc::ptr_eq(s, &sending)) {
                            by_object.remove(o);
                        }
                        dispatch.finished(o);
                    }
                }
            }
        }
    });
    (KubeApi { tx, events_waiting, waiting }, task)
}

struct Writer {
    /// Where a task says its write's first request went out (or it ended
    /// without one): it is out of line, and the next may start.
    left_line: mpsc::UnboundedSender<tokio::task::Id>,
    client: Client,
    answers: Sender<Input>,
    /// Node lifecycle's bucket, and the taint-eviction client's.
    limiter: Budgets,
    /// events.k8s.io is not served: record core/v1 Events.
    core_events: AtomicBool,
    /// Each object's allowance of Events.
    event_budget: EventBudget,
    /// Nodes' taints as the last answers showed them.
    taints_seen: TaintsSeen,
    /// Actions handed over and not yet sent (nor ended unsent), by class.
    waiting: Arc<Waiting>,
    /// Failed writes, logged once a burst.
    failures: FailureLog,
    opts: WriterOptions,
    /// Asked before every request: a replica that may not be the leader
    /// any more sends nothing.
    fence: Arc<Fence>,
    /// Objects the API server asked to be left alone until then (a
    /// `Retry-After` longer than the write that got it could wait): the
    /// write decided next for the object waits it out before its first
    /// request.
    not_before: NotBefore,
}

/// See [`Writer::not_before`]. An entry is taken when the object's next
/// write starts; the rare ones left behind (an object never written
/// again) are dropped once past, when the map grows.
#[derive(Default)]
struct NotBefore(std::sync::Mutex<HashMap<ObjectRef, Instant>>);

impl NotBefore {
    /// Entries kept before the past ones are dropped.
    const PRUNE_AT: usize = 4096;

    fn set(&self, object: ObjectRef, until: Instant) {
        let Ok(mut map) = self.0.lock() else { return };
        if map.len() >= Self::PRUNE_AT {
            let now = Instant::now();
            map.retain(|_, t| *t > now);
        }
        let t = map.entry(object).or_insert(until);
        *t = (*t).max(until);
    }

    /// When `object` may be written again, if it must wait.
    fn take(&self, object: &ObjectRef) -> Option<Instant> {
        self.0.lock().ok()?.remove(object).filter(|t| *t > Instant::now())
    }
}

/// Nodes as the writer's own requests last returned them (a node's status
/// write returns the whole node): their taints and resourceVersion, what a
/// taint patch is guarded by instead of a read first (a test of the taints,
/// or, for a node without taints, the resourceVersion). Taken when used,
/// put back by the answer. A stale entry costs a refused patch and a read,
/// never a wrong write. One small entry per node written: O(nodes).
#[derive(Default)]
struct TaintsSeen(std::sync::Mutex<HashMap<String, SeenNode>>);

/// A node's taints (as the server wrote them, fields of newer APIs
/// included) and resourceVersion, as an answer showed them.
struct SeenNode {
    taints: Vec<serde_json::Value>,
    version: Option<String>,
}

impl TaintsSeen {
    /// Remembers `node`'s taints; a node whose `spec.taints` is not a list
    /// is forgotten instead (its next taint patch reads it first).
    fn remember(&self, node: &Whole<Node>) {
        let Some(name) = node.metadata.name.clone() else { return };
        let Ok(mut seen) = self.0.lock() else { return };
        match requests::taints_of(node) {
            Some(taints) => {
                seen.insert(name, SeenNode { taints, version: node.metadata.resource_version.clone() });
            }
            None => {
                seen.remove(&name);
            }
        }
    }

    fn forget(&self, name: &str) -> Option<SeenNode> {
        self.0.lock().ok()?.remove(name)
    }
}

/// The error of a request the fence held back (never sent).
#[derive(Debug, thiserror::Error)]
#[error("not sent: this replica's leadership has lapsed (renew deadline passed)")]
pub struct Fenced;

/// The error of a request cut off when the fence closed while it was on
/// its way: it may or may not have been applied.
#[derive(Debug, thiserror::Error)]
#[error("given up: this replica's leadership lapsed while the request was unanswered (it may have been applied)")]
pub struct FencedInFlight;

/// How one attempt ended.
enum Attempt {
    /// Accepted; the object as it now is (if known).
    Done(Vec<Observation>),
    /// Refused for good (precondition, not found, budget); the object's
    /// state as far as known.
    Refused(String, Vec<Observation>),
    /// Nothing done: the object was already gone (a deletion answered
    /// 404). Reported withdrawn, so it is not counted as the controller's
    /// deletion, with the object's absence.
    Gone(Vec<Observation>),
}

type ApiResult<T> = Result<T, kube::Error>;

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The delay a retriable error asks for, or `None` when it is final.
fn retry_after(e: &kube::Error) -> Option<(Option<Duration>, &'static str)> {
    match e {
        kube::Error::Api(s) if s.code == 429 => {
            // An eviction refused by a budget is a 429 with a
            // DisruptionBudget cause: an answer, not throttling.
            let budget = s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"));
            if budget {
                return None;
            }
            let secs = s.details.as_ref().map_or(0, |d| d.retry_after_seconds);
            Some(((secs > 0).then(|| Duration::from_secs(u64::from(secs))), "throttled"))
        }
        kube::Error::Api(s) if s.code >= 500 => Some((None, "server_error")),
        kube::Error::Api(_) => None,
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) | kube::Error::InferConfig(_) => None,
        _ => Some((None, "transport")),
    }
}

tokio::task_local! {
    /// Set while carrying out a write that may be retried up to
    /// `give_up_after` (a pod deletion) rather than `stale_after`.
    static HOLDS_THROUGH_OUTAGES: bool;
}

/// The write a task is carrying out: its actions (one, or several pod
/// status actions carried by one patch; one withdrawn before it went
/// leaves the rest), the class its requests wait at (its own, or a more
/// urgent one lent by a write queued behind it), when it was decided
/// (handed to the writer), and whether a request of it has gone out yet.
struct Sending {
    /// The object it writes (`None` for an Event), kept apart from the
    /// actions: a write whose every action was withdrawn still holds its
    /// object's place until it finishes.
    object: Option<ObjectRef>,
    /// The actions still to be sent.
    live: std::sync::Mutex<Vec<Action>>,
    /// Those withdrawn before they went, with why.
    withdrawn: std::sync::Mutex<Vec<(Action, Withdrawal)>>,
    /// The classes the queue-depth gauge counted them in.
    counted: Vec<WriteClass>,
    /// The class it waits at now; a request waiting for a token hears of a
    /// raise at once.
    class: tokio::sync::watch::Sender<WriteClass>,
    decided: Instant,
    sent: AtomicBool,
    /// Started once an earlier write to the same object finished.
    chained: bool,
    /// For an Event: similar Events folded into it.
    folded: u32,
}

impl Sending {
    /// `class`: the class the dispatcher started it at (its own, or one
    /// lent by the writes queued behind it); `chained`: started after
    /// another write to the same object (part of a chain under way: its
    /// requests go as a started write's do).
    fn new(write: Write, class: WriteClass, chained: bool) -> Arc<Sending> {
        let object = write.actions().find_map(|a| a.kind.slot()).map(|(o, _)| o);
        let folded = write.folded;
        Arc::new(Sending {
            folded,
            object,
            counted: write.actions().map(|a| WriteClass::of(&a.kind)).collect(),
            decided: write.decided,
            live: std::sync::Mutex::new(write.into_actions()),
            withdrawn: std::sync::Mutex::new(Vec::new()),
            class: tokio::sync::watch::Sender::new(class),
            sent: AtomicBool::new(false),
            chained,
        })
    }

    fn class(&self) -> WriteClass {
        *self.class.borrow()
    }

    /// Lends it `to`'s urgency, if that is greater.
    fn raise(&self, to: WriteClass) {
        self.class.send_if_modified(|c| {
            let raised = to < *c;
            if raised {
                *c = to;
            }
            raised
        });
    }

    /// The actions still to be sent.
    fn live(&self) -> Vec<Action> {
        self.live.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The first action still to be sent (a write's actions all address
    /// one object).
    fn first(&self) -> Option<Action> {
        self.live.lock().ok().and_then(|l| l.first().cloned())
    }

    /// Takes `action` out of the write: it will not be sent.
    fn withdraw(&self, id: nodewarden_engine::ActionId, why: Withdrawal) {
        let Ok(mut live) = self.live.lock() else { return };
        if let Some(i) = live.iter().position(|a| a.id == id) {
            let a = live.remove(i);
            if let Ok(mut w) = self.withdrawn.lock() {
                w.push((a, why));
            }
        }
    }
}

/// How a write ended, for each action still in it.
enum Finish {
    Done,
    Failed(String),
    Withdrawn(Withdrawal),
}

tokio::task_local! {
    static SENDING: Arc<Sending>;
}

/// The error of a request withdrawn before it was sent: the write it
/// belongs to was no longer true ([`Input::Judge`]).
#[derive(Debug, thiserror::Error)]
#[error("withdrawn before it was sent: {0}")]
pub struct Withdrawn(Withdrawal);

fn withdrawn_reason(e: &kube::Error) -> Option<Withdrawal> {
    match e {
        kube::Error::Service(b) => b.downcast_ref::<Withdrawn>().map(|w| w.0.clone()),
        _ => None,
    }
}

impl Writer {
    /// The first request of the write under way goes out now (or it ends
    /// without one): its actions no longer wait, and its lag is recorded.
    fn left_queue(&self, sending: &Sending, sent: bool) {
        if sending.sent.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Some(id) = tokio::task::try_id() {
            let _ = self.left_line.send(id);
        }
        for &class in &sending.counted {
            self.waiting.sub(class);
        }
        if sent {
            let class = sending.counted.iter().min().copied().unwrap_or(WriteClass::Event);
            metrics::histogram!(WRITE_LAG_METRIC, "class" => class.as_str())
                .record(wall::since(sending.decided).as_secs_f64());
        }
    }

    /// Waits for a token at the class of the write under way; when a
    /// write queued behind it lends it a more urgent class meanwhile, the
    /// wait starts again at that class.
    async fn acquire_as(&self, s: &Sending) {
        let continuing = s.chained || s.sent.load(Ordering::Relaxed);
        let mut lent = s.class.subscribe();
        let wait = self.limiter.acquire(*lent.borrow_and_update(), continuing);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                () = &mut wait => return,
                changed = lent.changed() => {
                    if changed.is_err() {
                        // Cannot happen while `s` lives; wait as we are.
                        (&mut wait).await;
                        return;
                    }
                    let class = *lent.borrow_and_update();
                    wait.set(self.limiter.acquire(class, continuing));
                }
            }
        }
    }

    /// Asks the engine thread whether an action is still true; `Err`
    /// says why not (or that the engine is gone).
    async fn judge(&self, action: &Action) -> Result<(), Withdrawal> {
        let (reply, verdict) = tokio::sync::oneshot::channel();
        if self.answers.send(Input::Judge { action: Box::new(action.clone()), reply }).is_err() {
            return Err(Withdrawal::EngineStopped);
        }
        verdict.await.unwrap_or(Err(Withdrawal::EngineStopped))
    }

    /// Judges each action of the write under way: one no longer true is
    /// taken out of it; `Err(Withdrawn)` when none is left.
    async fn judge_write(&self, s: &Sending) -> ApiResult<()> {
        let mut last = None;
        for action in s.live() {
            if let Err(why) = self.judge(&action).await {
                s.withdraw(action.id, why.clone());
                last = Some(why);
            }
        }
        match last {
            Some(why) if s.first().is_none() => Err(kube::Error::Service(Box::new(Withdrawn(why)))),
            _ => Ok(()),
        }
    }

    /// A request of the write under way that changes the cluster (or
    /// reads it for one): [`Writer::call`], with the write judged again
    /// by the engine right before each attempt goes out.
    async fn send<T, F, Fut>(&self, f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        self.request(true, f).await
    }

    /// A request that is not itself judged (a read after a refusal, an
    /// Event).
    async fn call<T, F, Fut>(&self, f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        self.request(false, f).await
    }

    /// One request under the rate limit, at the class of the action under
    /// way, retried while the error is retriable and the request has been
    /// failing for less than its budget: `give_up_after`, or, unless it is
    /// a pod deletion, `stale_after` (time spent queued behind the rate
    /// limit or behind other writes does not count: a decision is not
    /// stale because the client is busy, and a judged write is checked
    /// again before every attempt anyway). A `Retry-After` delays this
    /// request only, and never past its budget.
    async fn request<T, F, Fut>(&self, judged: bool, mut f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        let mut backoff = self.opts.initial_backoff;
        let mut failing_since: Option<Instant> = None;
        let holds = HOLDS_THROUGH_OUTAGES.try_with(|h| *h).unwrap_or(false);
        let sending = SENDING.try_with(Arc::clone).ok();
        // A Retry-After an earlier write to the object could not wait out.
        if let Some(until) = sending.as_ref().and_then(|s| s.object.as_ref()).and_then(|o| self.not_before.take(o)) {
            tokio::time::sleep_until(until.into()).await;
        }
        loop {
            match &sending {
                Some(s) => {
                    // Once before waiting for a token, so a write withdrawn
                    // spends none, and once after, right before it goes.
                    if judged && let Err(e) = self.judge_write(s).await {
                        self.left_queue(s, false);
                        return Err(e);
                    }
                    if let Some(id) = self.opts.panic_on
                        && s.live().iter().any(|a| a.id.0 == id)
                    {
                        panic!("a test injected a panic into write {id}");
                    }
                    self.acquire_as(s).await;
                }
                None => self.limiter.acquire(WriteClass::Node, false).await,
            }
            if let Some(s) = &sending
                && judged
                && let Err(e) = self.judge_write(s).await
            {
                self.left_queue(s, false);
                return Err(e);
            }
            // Asked after the rate limiter's wait and after every
            // judgement (a round trip to a busy engine thread can take
            // seconds), right before the request leaves.
            if !self.fence.allows() {
                metrics::counter!(FENCED_METRIC).increment(1);
                if let Some(s) = &sending {
                    self.left_queue(s, false);
                }
                return Err(kube::Error::Service(Box::new(Fenced)));
            }
            if let Some(s) = &sending {
                self.left_queue(s, true);
            }
            let Some(result) = self.fence.bound(f()).await else {
                metrics::counter!(FENCED_METRIC).increment(1);
                return Err(kube::Error::Service(Box::new(FencedInFlight)));
            };
            metrics::counter!(REQUEST_METRIC, "code" => code_class(&result)).increment(1);
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let Some((asked, why)) = retry_after(&e) else { return Err(e) };
                    let first = *failing_since.get_or_insert_with(Instant::now);
                    let budget = self.retry_budget(holds);
                    let left = budget.saturating_sub(wall::since(first));
                    // A Retry-After past the budget: give the write up now
                    // (it is decided again on fresh facts), and hold the
                    // object's next write until the server's time.
                    if let Some(asked) = asked.filter(|a| *a > left)
                        && let Some(object) = sending.as_ref().and_then(|s| s.object.clone())
                    {
                        self.not_before.set(object, Instant::now() + wall::real(asked));
                        return Err(e);
                    }
                    if left.is_zero() {
                        return Err(e);
                    }
                    metrics::counter!(RETRY_METRIC, "reason" => why).increment(1);
                    let wait = asked.map_or(backoff, |a| a.max(backoff)).min(left);
                    tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "API request failed; retrying");
                    tokio::time::sleep(wall::real(wait)).await;
                    backoff = (backoff * 2).min(self.opts.max_backoff);
                }
            }
        }
    }

    /// How long a request may go on failing: `give_up_after`, and for a
    /// write that does not hold through outages (all but pod deletions)
    /// no longer than `stale_after`, after which it is decided again.
    fn retry_budget(&self, holds_through_outages: bool) -> Duration {
        if holds_through_outages { self.opts.give_up_after } else { self.opts.give_up_after.min(self.opts.stale_after) }
    }

    async fn carry_out(&self, sending: Arc<Sending>) {
        SENDING.scope(sending.clone(), self.carry_out_now(&sending)).await;
        // Ended without a request (an Event dropped, a taint already so).
        self.left_queue(&sending, false);
    }

    /// `WriteFinished`, failed for `why`, for actions that were never
    /// started (Events excepted: they are not writes).
    fn fail_unsent(&self, actions: impl Iterator<Item = Action>, why: &str) {
        for action in actions.filter(|a| a.kind.slot().is_some()) {
            let outcome = WriteOutcome::Failed(format!("not sent: {why}"));
            let _ = self.answers.send(Input::Observe(Observation::WriteFinished { id: action.id, outcome }));
        }
    }

    /// `WriteFinished` for every action of the write: `how` for those
    /// still in it, `Withdrawn` for those taken out before it went.
    fn answer_all(&self, sending: &Sending, how: &Finish) {
        for action in sending.live().into_iter().filter(|a| a.kind.slot().is_some()) {
            let outcome = match how {
                Finish::Done => WriteOutcome::Done,
                Finish::Failed(why) => WriteOutcome::Failed(why.clone()),
                Finish::Withdrawn(why) => WriteOutcome::Withdrawn(why.clone()),
            };
            let _ = self.answers.send(Input::Observe(Observation::WriteFinished { id: action.id, outcome }));
        }
        let withdrawn = sending.withdrawn.lock().map(|mut w| std::mem::take(&mut *w)).unwrap_or_default();
        for (action, why) in withdrawn {
            let outcome = WriteOutcome::Withdrawn(why);
            let _ = self.answers.send(Input::Observe(Observation::WriteFinished { id: action.id, outcome }));
        }
    }

    async fn carry_out_now(&self, sending: &Sending) {
        let since = sending.decided;
        let Some(first) = sending.first() else { return };

        let name = action_name(&first.kind);
        if let ActionKind::RecordEvent(ev) = &first.kind {
            if !self.event_budget.allows(&ev.object.to_string(), Instant::now()) {
                metrics::counter!(EVENTS_DROPPED_METRIC, "reason" => "spam").increment(1);
                tracing::debug!(reason = ev.reason, object = %ev.object, "Event dropped: its object's allowance is spent");
                return;
            }
            if let Err(e) = self.record_event(since, ev, sending.folded).await {
                self.failures.failed("record_event", &e.to_string());
            }
            return;
        }
        let holds = matches!(first.kind, ActionKind::DeletePod { .. });
        let result = HOLDS_THROUGH_OUTAGES.scope(holds, self.write(sending)).await;
        // How it ended, and the object's state to send back after the
        // answers; `None` when the state must be read (after a failure or
        // a withdrawal).
        let (how, state) = match result {
            Ok(Attempt::Done(state)) => {
                self.failures.succeeded();
                (Finish::Done, Some(state))
            }
            Ok(Attempt::Gone(state)) => (Finish::Withdrawn(Withdrawal::AlreadyGone), Some(state)),
            Ok(Attempt::Refused(why, state)) => {
                metrics::counter!("nodewarden_write_refusals_total", "action" => name).increment(1);
                tracing::info!(action = name, "write refused: {why}");
                (Finish::Failed(why), Some(state))
            }
            Err(e) => match withdrawn_reason(&e) {
                // Node lifecycle applied the write to its own view when it
                // decided: the node as it is puts that right. (The engine
                // undoes a pod write's marks itself.)
                Some(why) if matches!(first.kind.slot(), Some((ObjectRef::Node(_), _))) => {
                    (Finish::Withdrawn(why), None)
                }
                Some(why) => (Finish::Withdrawn(why), Some(Vec::new())),
                None => {
                    let why = e.to_string();
                    self.failures.failed(name, &why);
                    (Finish::Failed(why), None)
                }
            },
        };
        self.answer_all(sending, &how);
        let state = match state {
            Some(state) => state,
            None => self.fresh_state(&first.kind).await,
        };
        for o in state {
            let _ = self.answers.send(Input::Observe(o));
        }
    }

    /// The object's state after a failure or a withdrawal. Read leniently
    /// ([`Trimmed`]), so a malformed object still tells the engine what it
    /// can. A node is read until the read succeeds (backing off, for up to
    /// `give_up_after`): node lifecycle applied the write to its own view
    /// when it decided, and only the node as it is puts that right (a
    /// watch that resumes after an outage does not deliver a node that did
    /// not change). The node's next writes wait meanwhile, so none is
    /// judged against the view the write left. A pod is read once.
    async fn fresh_state(&self, kind: &ActionKind) -> Vec<Observation> {
        let since = Instant::now();
        match kind.slot() {
            Some((ObjectRef::Node(n), _)) => {
                let mut backoff = self.opts.initial_backoff;
                loop {
                    self.limiter.acquire(SENDING.try_with(|s| s.class()).unwrap_or(WriteClass::Node), true).await;
                    let c = self.client.clone();
                    let read = match self.opts.detail {
                        Detail::Lifecycle => get_reading(Api::<Trimmed<Node>>::all(c), &n).await,
                        Detail::Scheduling => get_reading(Api::<Trimmed<Scheduled<Node>>>::all(c), &n).await,
                    };
                    match read {
                        Ok(None) => return vec![Observation::NodeDeleted { name: n }],
                        Ok(Some(reading)) => return reading.into_iter().collect(),
                        Err(e) if wall::since(since) >= self.opts.give_up_after => {
                            tracing::warn!(node = %n, error = %e, "could not read the node back after a write; the engine waits for its next watch event");
                            return Vec::new();
                        }
                        Err(_) => {
                            tokio::time::sleep(wall::real(backoff)).await;
                            backoff = (backoff * 2).min(self.opts.max_backoff);
                        }
                    }
                }
            }
            Some((ObjectRef::Pod(p), _)) => {
                let (ns, name) = pod_name(&p);
                self.limiter.acquire(SENDING.try_with(|s| s.class()).unwrap_or(WriteClass::Node), true).await;
                let c = self.client.clone();
                let read = match self.opts.detail {
                    Detail::Lifecycle => get_reading(Api::<Trimmed<Pod>>::namespaced(c, ns), name).await,
                    Detail::Scheduling => get_reading(Api::<Trimmed<Scheduled<Pod>>>::namespaced(c, ns), name).await,
                };
                match read {
                    Ok(None) => vec![Observation::PodDeleted { key: p }],
                    Ok(Some(reading)) => reading.into_iter().collect(),
                    Err(_) => Vec::new(),
                }
            }
            None => Vec::new(),
        }
    }
}
