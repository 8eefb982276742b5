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
//! Order: writes to different objects go out in parallel; writes to one
//! object go out one after another in the order the engine issued them, so
//! a node is never seen tainted `unreachable` before it is seen `Unknown`.
//!
//! Preconditions: pod writes carry the pod's uid (a delete as a
//! precondition, a status update by checking the uid of the object it
//! updates under its resourceVersion); a taint change is one patch guarded
//! by the taints it read (a JSON patch `test`), recomputed on a fresh read
//! when they changed (upstream's `RetryOnConflict`); a node status update that
//! conflicts goes back to the engine with the fresh node, which decides
//! again (upstream re-reads and recomputes).
//!
//! [`DryRunApi`] is `--dry-run`: it sends nothing, logs and counts every
//! action, and answers as if the API had accepted it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use k8s_openapi::api::core::v1::{Node, NodeCondition as KNodeCondition, ObjectReference, Pod, PodCondition};
use k8s_openapi::api::events::v1::Event as KEvent;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions as KPreconditions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ActionKind, EventType, ObjectRef, Observation, WriteOutcome};
use nodewarden_model::{DeletionMode, Taint, Timestamp, wall};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::input::Input;
use crate::leader::Fence;
use crate::limiter::{Limiter, WriteClass};
use crate::trimmed::{Readable, Scheduled, Trimmed};
use crate::write_log::{EventBudget, FailureLog};
use nodewarden_objects::{Detail, node_reading, pod_reading, wall_clock_now};

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

/// Events waiting or under way beyond which new ones are dropped
/// (client-go's broadcaster queues 1000).
const MAX_QUEUED_EVENTS: usize = 1000;

/// Counter of API requests retried, by reason (`throttled`, `server_error`,
/// `transport`).
pub const RETRY_METRIC: &str = "nodewarden_api_retries_total";

/// Counter {code}: requests the writer sent (reads before writes, writes,
/// Events), by answer: `2xx`, `4xx`, `5xx`, or `transport` (no answer).
pub const REQUEST_METRIC: &str = "nodewarden_api_requests_total";

fn code_class<T>(result: &ApiResult<T>) -> &'static str {
    match result {
        Ok(_) => "2xx",
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
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            qps: 20.0,
            burst: 30,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
            give_up_after: Duration::from_secs(600),
            stale_after: Duration::from_secs(5),
            component: "node-controller".into(),
            instance: String::new(),
            detail: Detail::Lifecycle,
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
}

impl ClusterApi for KubeApi {
    fn apply(&mut self, _now: Timestamp, action: &Action) -> Applied {
        if self.tx.send(action.clone()).is_err() && action.kind.slot().is_some() {
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
/// `answers`. Dropping the `KubeApi` ends the writer once the writes under
/// way have finished; aborting the returned task stops it at once.
pub fn spawn_writer(
    client: Client,
    answers: Sender<Input>,
    opts: WriterOptions,
    fence: Arc<Fence>,
) -> (KubeApi, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Action>();
    let shared = Arc::new(Writer {
        client,
        answers,
        limiter: Limiter::new(opts.qps, opts.burst),
        core_events: AtomicBool::new(false),
        events_queued: std::sync::atomic::AtomicUsize::new(0),
        event_budget: EventBudget::default(),
        waiting: WriteClass::ALL.map(|_| AtomicI64::new(0)),
        failures: FailureLog::default(),
        opts,
        fence,
    });
    for class in WriteClass::ALL {
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(0.0);
    }
    let task = tokio::spawn(async move {
        // Writes to different objects go out in parallel; writes to one
        // object go out one at a time, in the order the engine issued them
        // (its Unknown status before its taint, as upstream's separate
        // passes order them), each waiting for the one before to finish.
        //
        // A write waiting behind another to the same object lends it its
        // class: a pod's deletion queued behind that pod's not-ready
        // status raises the status write to the deletion's class, or the
        // deletion would wait for the least urgent class to be served.
        let mut under_way: tokio::task::JoinSet<Option<ObjectRef>> = tokio::task::JoinSet::new();
        let mut waiting: HashMap<ObjectRef, Chain> = HashMap::new();
        let start = |under_way: &mut tokio::task::JoinSet<Option<ObjectRef>>, sending: Arc<Sending>| {
            let w = shared.clone();
            let object = sending.action.kind.slot().map(|(o, _)| o);
            under_way.spawn(async move {
                w.carry_out(sending).await;
                object
            });
        };
        let mut open = true;
        while open || !under_way.is_empty() {
            tokio::select! {
                next = rx.recv(), if open => match next.inspect(|a| shared.queued(a)) {
                    None => open = false,
                    Some(action) => match action.kind.slot().map(|(o, _)| o) {
                        Some(object) if waiting.contains_key(&object) => {
                            if let Some((current, queue)) = waiting.get_mut(&object) {
                                current.raise(WriteClass::of(&action.kind));
                                queue.push_back((action, Instant::now()));
                            }
                        }
                        Some(object) => {
                            let sending = Sending::new(action, None, Instant::now(), false);
                            waiting.insert(object, (sending.clone(), VecDeque::new()));
                            start(&mut under_way, sending);
                        }
                        None => start(&mut under_way, Sending::new(action, None, Instant::now(), false)),
                    },
                },
                Some(done) = under_way.join_next(), if !under_way.is_empty() => {
                    let Ok(Some(object)) = done else { continue };
                    let Some((current, queue)) = waiting.get_mut(&object) else { continue };
                    match queue.pop_front() {
                        Some((action, decided)) => {
                            let lent = queue.iter().map(|(a, _)| WriteClass::of(&a.kind)).min();
                            let sending = Sending::new(action, lent, decided, true);
                            *current = sending.clone();
                            start(&mut under_way, sending);
                        }
                        None => {
                            waiting.remove(&object);
                        }
                    }
                }
            }
        }
    });
    (KubeApi { tx }, task)
}

struct Writer {
    client: Client,
    answers: Sender<Input>,
    limiter: Limiter,
    /// events.k8s.io is not served: record core/v1 Events.
    core_events: AtomicBool,
    /// Events waiting or under way.
    events_queued: std::sync::atomic::AtomicUsize,
    /// Each object's allowance of Events.
    event_budget: EventBudget,
    /// Actions handed over and not yet sent (nor ended unsent), by class.
    waiting: [AtomicI64; 4],
    /// Failed writes, logged once a burst.
    failures: FailureLog,
    opts: WriterOptions,
    /// Asked before every request: a replica that may not be the leader
    /// any more sends nothing.
    fence: Arc<Fence>,
}

/// The error of a request the fence held back (never sent).
#[derive(Debug, thiserror::Error)]
#[error("not sent: this replica's leadership has lapsed (renew deadline passed)")]
pub struct Fenced;

/// How one attempt ended.
enum Attempt {
    /// Accepted; the object as it now is (if known).
    Done(Vec<Observation>),
    /// Refused for good (precondition, not found, budget); the object's
    /// state as far as known.
    Refused(String, Vec<Observation>),
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

fn time(t: Timestamp) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(t.as_nanos())).ok().map(Time)
}

fn pod_name(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// A pod as a write returned it, read with the same detail as the
/// watches read it (a reading without the rescheduler's facts would make
/// the engine forget them until the watch delivered the pod again).
fn pod_state(key: &str, pod: Option<&Pod>, detail: Detail) -> Vec<Observation> {
    match pod {
        None => vec![Observation::PodDeleted { key: key.to_string() }],
        Some(p) => serde_json::to_value(p)
            .ok()
            .and_then(|v| pod_reading(&v, wall_clock_now(), detail))
            .map(Observation::PodUpserted)
            .into_iter()
            .collect(),
    }
}

/// A node as a write returned it; see [`pod_state`].
fn node_state(name: &str, node: Option<&Node>, detail: Detail) -> Vec<Observation> {
    match node {
        None => vec![Observation::NodeDeleted { name: name.to_string() }],
        Some(n) => serde_json::to_value(n)
            .ok()
            .and_then(|v| node_reading(&v, wall_clock_now(), detail))
            .map(Observation::NodeUpserted)
            .into_iter()
            .collect(),
    }
}

/// A node read after a refusal: its state when the read answered (gone
/// when the API said so), nothing when the read failed: a failed read is
/// no news, and must not read as a deletion.
fn node_read(name: &str, read: ApiResult<Option<Node>>, detail: Detail) -> Vec<Observation> {
    read.map_or_else(|_| Vec::new(), |n| node_state(name, n.as_ref(), detail))
}

/// A pod read after a refusal; see [`node_read`].
fn pod_read(key: &str, read: ApiResult<Option<Pod>>, detail: Detail) -> Vec<Observation> {
    read.map_or_else(|_| Vec::new(), |p| pod_state(key, p.as_ref(), detail))
}

/// One object read leniently ([`Trimmed`]): `Some(None)` when it is gone.
async fn get_reading<K: Readable>(api: Api<Trimmed<K>>, name: &str) -> ApiResult<Option<Option<Observation>>> {
    Ok(api.get_opt(name).await?.map(|o| o.reading))
}

/// The Eviction to POST. Not kube-rs's `Api::evict`: kube-core 5 writes
/// its delete options as `delete_options`, a field the API server does not
/// know and drops (a warning at most), so the uid precondition and the
/// grace period would silently not apply; here they are `deleteOptions`,
/// as policy/v1 spells them.
fn eviction(ns: &str, name: &str, uid: &str, grace_period_seconds: Option<u32>) -> Eviction {
    Eviction {
        metadata: ObjectMeta { name: Some(name.to_string()), namespace: Some(ns.to_string()), ..ObjectMeta::default() },
        delete_options: Some(DeleteOptions {
            grace_period_seconds: grace_period_seconds.map(i64::from),
            preconditions: Some(KPreconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..DeleteOptions::default()
        }),
    }
}

fn same_taint(k: &k8s_openapi::api::core::v1::Taint, t: &Taint) -> bool {
    k.key == t.key && k.effect == t.effect.as_str()
}

tokio::task_local! {
    /// Set while carrying out a write that may be retried up to
    /// `give_up_after` (a pod deletion) rather than `stale_after`.
    static HOLDS_THROUGH_OUTAGES: bool;
}

/// Default create/update parameters (a static, so request futures may
/// borrow it).
static POST: PostParams = PostParams { dry_run: false, field_manager: None };

/// Conflict retries for a write recomputed on a fresh read (upstream's
/// `retry.DefaultRetry` makes 5 attempts).
const CONFLICT_ATTEMPTS: usize = 5;

/// One object's writes in the writer: the one under way, then those
/// waiting behind it with when each was handed over.
type Chain = (Arc<Sending>, VecDeque<(Action, Instant)>);

/// The action a task is carrying out: the class its requests wait at
/// (its own, or a more urgent one lent by a write queued behind it),
/// when it was decided (handed to the writer), and whether a request of
/// it has gone out yet.
struct Sending {
    action: Action,
    /// Its own class, counted in the queue-depth gauge.
    own: WriteClass,
    /// The class it waits at now; a request waiting for a token hears of a
    /// raise at once.
    class: tokio::sync::watch::Sender<WriteClass>,
    decided: Instant,
    sent: AtomicBool,
    /// Started once an earlier write to the same object finished.
    chained: bool,
}

impl Sending {
    /// `lent`: the most urgent class of the writes queued behind it, if
    /// any (a write started after another to the same object is part of a
    /// chain under way: its requests go as a started write's do).
    fn new(action: Action, lent: Option<WriteClass>, decided: Instant, chained: bool) -> Arc<Sending> {
        let own = WriteClass::of(&action.kind);
        let class = lent.map_or(own, |l| l.min(own));
        Arc::new(Sending {
            action,
            own,
            class: tokio::sync::watch::Sender::new(class),
            decided,
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
}

tokio::task_local! {
    static SENDING: Arc<Sending>;
}

/// The error of a request withdrawn before it was sent: the write it
/// belongs to was no longer true ([`Input::Judge`]).
#[derive(Debug, thiserror::Error)]
#[error("withdrawn before it was sent: {0}")]
pub struct Withdrawn(String);

fn withdrawn_reason(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Service(b) => b.downcast_ref::<Withdrawn>().map(|w| w.0.clone()),
        _ => None,
    }
}

impl Writer {
    /// An action reached the writer: it waits (counted) until its first
    /// request goes out.
    fn queued(&self, action: &Action) {
        let class = WriteClass::of(&action.kind);
        let n = self.waiting[class as usize].fetch_add(1, Ordering::Relaxed) + 1;
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(n as f64);
    }

    /// The first request of the action under way goes out now (or it ends
    /// without one): it no longer waits, and its lag is recorded.
    fn left_queue(&self, sending: &Sending, sent: bool) {
        if sending.sent.swap(true, Ordering::Relaxed) {
            return;
        }
        let class = sending.own;
        let n = self.waiting[class as usize].fetch_sub(1, Ordering::Relaxed) - 1;
        metrics::gauge!(QUEUE_DEPTH_METRIC, "class" => class.as_str()).set(n.max(0) as f64);
        if sent {
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

    /// Asks the engine thread whether the write under way is still true;
    /// `Err(Withdrawn)` when it is not (or the engine is gone).
    async fn judge(&self, action: &Action) -> ApiResult<()> {
        let (reply, verdict) = tokio::sync::oneshot::channel();
        let gone = || kube::Error::Service(Box::new(Withdrawn("the engine has stopped".into())));
        if self.answers.send(Input::Judge { action: Box::new(action.clone()), reply }).is_err() {
            return Err(gone());
        }
        match verdict.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(kube::Error::Service(Box::new(Withdrawn(why)))),
            Err(_) => Err(gone()),
        }
    }

    /// A request of the write under way that changes the cluster (or
    /// reads it for one): [`Writer::call`], with the write judged again
    /// by the engine right before each attempt goes out.
    async fn send<T, F, Fut>(&self, since: Instant, f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        self.request(since, true, f).await
    }

    /// A request that is not itself judged (a read after a refusal, an
    /// Event).
    async fn call<T, F, Fut>(&self, since: Instant, f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        self.request(since, false, f).await
    }

    /// One request under the rate limit, at the class of the action under
    /// way, retried while the error is retriable, the write is younger
    /// than `give_up_after` and, unless it is a pod deletion, the request
    /// has been failing for less than `stale_after` (time spent queued
    /// behind the rate limit does not count: a decision is not stale
    /// because the client is busy; a judged write is checked again before
    /// every attempt anyway). A `Retry-After` delays this request only.
    async fn request<T, F, Fut>(&self, since: Instant, judged: bool, mut f: F) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        let mut backoff = self.opts.initial_backoff;
        let mut failing_since: Option<Instant> = None;
        let holds = HOLDS_THROUGH_OUTAGES.try_with(|h| *h).unwrap_or(false);
        let sending = SENDING.try_with(Arc::clone).ok();
        loop {
            match &sending {
                Some(s) => {
                    // Once before waiting for a token, so a write withdrawn
                    // spends none, and once after, right before it goes.
                    if judged && let Err(e) = self.judge(&s.action).await {
                        self.left_queue(s, false);
                        return Err(e);
                    }
                    self.acquire_as(s).await;
                }
                None => self.limiter.acquire(WriteClass::Node, false).await,
            }
            // Asked after the rate limiter's wait, right before sending.
            if !self.fence.allows() {
                metrics::counter!(FENCED_METRIC).increment(1);
                return Err(kube::Error::Service(Box::new(Fenced)));
            }
            if let Some(s) = &sending {
                if judged && let Err(e) = self.judge(&s.action).await {
                    self.left_queue(s, false);
                    return Err(e);
                }
                self.left_queue(s, true);
            }
            let result = f().await;
            metrics::counter!(REQUEST_METRIC, "code" => code_class(&result)).increment(1);
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let Some((asked, why)) = retry_after(&e) else { return Err(e) };
                    let first = *failing_since.get_or_insert_with(Instant::now);
                    if wall::since(since) >= self.opts.give_up_after
                        || (!holds && wall::since(first) >= self.opts.stale_after)
                    {
                        return Err(e);
                    }
                    metrics::counter!(RETRY_METRIC, "reason" => why).increment(1);
                    let wait = asked.map_or(backoff, |a| a.max(backoff));
                    tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "API request failed; retrying");
                    tokio::time::sleep(wall::real(wait)).await;
                    backoff = (backoff * 2).min(self.opts.max_backoff);
                }
            }
        }
    }

    async fn carry_out(&self, sending: Arc<Sending>) {
        let since = sending.decided;
        SENDING.scope(sending.clone(), self.carry_out_now(since, &sending.action)).await;
        // Ended without a request (an Event dropped, a taint already so).
        self.left_queue(&sending, false);
    }

    async fn carry_out_now(&self, since: Instant, action: &Action) {
        let name = action_name(&action.kind);
        if let ActionKind::RecordEvent(ev) = &action.kind {
            if !self.event_budget.allows(&ev.object.to_string(), Instant::now()) {
                metrics::counter!(EVENTS_DROPPED_METRIC, "reason" => "spam").increment(1);
                tracing::debug!(reason = ev.reason, object = %ev.object, "Event dropped: its object's allowance is spent");
                return;
            }
            // Events queue behind every write; past a bound they are
            // dropped (counted), as client-go's broadcaster drops them when
            // its queue is full, rather than held for minutes.
            let queued = self.events_queued.fetch_add(1, Ordering::Relaxed);
            if queued >= MAX_QUEUED_EVENTS {
                self.events_queued.fetch_sub(1, Ordering::Relaxed);
                metrics::counter!(EVENTS_DROPPED_METRIC, "reason" => "backlog").increment(1);
                tracing::debug!(reason = ev.reason, object = %ev.object, "Event dropped: too many queued");
                return;
            }
            let r = self.record_event(since, ev).await;
            self.events_queued.fetch_sub(1, Ordering::Relaxed);
            if let Err(e) = r {
                self.failures.failed("record_event", &e.to_string());
            }
            return;
        }
        let holds = matches!(action.kind, ActionKind::DeletePod { .. });
        let result = HOLDS_THROUGH_OUTAGES.scope(holds, self.write(since, &action.kind)).await;
        // What to send back: the outcome, then the object's state; `None`
        // when the state must be read (after a failure or a withdrawal).
        let (outcome, state) = match result {
            Ok(Attempt::Done(state)) => {
                self.failures.succeeded();
                (WriteOutcome::Done, Some(state))
            }
            Ok(Attempt::Refused(why, state)) => {
                metrics::counter!("nodewarden_write_refusals_total", "action" => name).increment(1);
                tracing::info!(action = name, "write refused: {why}");
                (WriteOutcome::Failed(why), Some(state))
            }
            Err(e) => match withdrawn_reason(&e) {
                // Node lifecycle applied the write to its own view when it
                // decided: the node as it is puts that right. (The engine
                // undoes a pod write's marks itself.)
                Some(why) if matches!(action.kind.slot(), Some((ObjectRef::Node(_), _))) => {
                    (WriteOutcome::Withdrawn(why), None)
                }
                Some(why) => (WriteOutcome::Withdrawn(why), Some(Vec::new())),
                None => {
                    let why = e.to_string();
                    self.failures.failed(name, &why);
                    (WriteOutcome::Failed(why), None)
                }
            },
        };
        let _ = self.answers.send(Input::Observe(Observation::WriteFinished { id: action.id, outcome }));
        let state = match state {
            Some(state) => state,
            None => self.fresh_state(&action.kind).await,
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

    async fn write(&self, since: Instant, kind: &ActionKind) -> ApiResult<Attempt> {
        match kind {
            ActionKind::UpdateNodeConditions { node, conditions, version } => {
                // One request, as upstream's UpdateStatus from its cache: a
                // strategic merge patch of the conditions (merged by type),
                // guarded by the resourceVersion the decision was made on.
                // Decided on an older node (a kubelet's post came since),
                // it is refused with 409 and the engine decides again from
                // the node as it is, as upstream's conflict makes it
                // recompute.
                let api = Api::<Node>::all(self.client.clone());
                let list: Vec<KNodeCondition> = conditions
                    .iter()
                    .map(|c| KNodeCondition {
                        type_: c.kind.as_str().to_string(),
                        status: c.status.as_str().to_string(),
                        reason: Some(c.reason.clone()),
                        message: Some(c.message.clone()),
                        last_heartbeat_time: time(c.last_heartbeat),
                        last_transition_time: time(c.last_transition),
                    })
                    .collect();
                let mut body = json!({"status": {"conditions": list}});
                if *version != 0 {
                    body["metadata"] = json!({"resourceVersion": version.to_string()});
                }
                let pp = PatchParams::default();
                let patch = Patch::Strategic(&body);
                match self.send(since, || api.patch_status(node, &pp, &patch)).await {
                    Ok(n) => Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail))),
                    Err(e) if code(&e) == Some(409) || code(&e) == Some(404) => {
                        let fresh = self.call(since, || api.get_opt(node)).await;
                        Ok(Attempt::Refused(e.to_string(), node_read(node, fresh, self.opts.detail)))
                    }
                    Err(e) => Err(e),
                }
            }
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                let api = Api::<Node>::all(self.client.clone());
                let mut last = String::new();
                // Guarded by the taints it read, not by the whole node's
                // resourceVersion: a kubelet's status post between the read
                // and the patch changes the node, not its taints, and need
                // not cost a conflict and a second patch (under load, with
                // every recovering kubelet posting, most taint patches
                // conflicted once). Falls back to the resourceVersion when
                // the test cannot be written (no taints yet) or failed for
                // a reason other than the taints (a 422 the JSON reading
                // of the taints cannot explain).
                let mut guard_on_taints = true;
                for _ in 0..CONFLICT_ATTEMPTS {
                    let Some(cur) = self.send(since, || api.get_opt(node)).await? else {
                        return Ok(Attempt::Refused(
                            format!("nodes {node:?} not found"),
                            node_state(node, None, self.opts.detail),
                        ));
                    };
                    let old = cur.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
                    let mut taints = old.clone();
                    taints.retain(|k| !remove.iter().any(|t| same_taint(k, t)));
                    for t in add {
                        taints.retain(|k| !same_taint(k, t));
                        taints.push(k8s_openapi::api::core::v1::Taint {
                            key: t.key.clone(),
                            value: (!t.value.is_empty()).then(|| t.value.clone()),
                            effect: t.effect.as_str().to_string(),
                            time_added: t.time_added.and_then(time),
                        });
                    }
                    if taints == old {
                        return Ok(Attempt::Done(node_state(node, Some(&cur), self.opts.detail)));
                    }
                    let read =
                        cur.spec.as_ref().and_then(|s| s.taints.as_ref()).and_then(|t| serde_json::to_value(t).ok());
                    let guarded = guard_on_taints.then_some(read).flatten().and_then(|old| {
                        serde_json::from_value::<json_patch::Patch>(json!([
                            {"op": "test", "path": "/spec/taints", "value": old},
                            {"op": "replace", "path": "/spec/taints", "value": taints},
                        ]))
                        .ok()
                    });
                    let merge = json!({
                        "metadata": {"resourceVersion": cur.metadata.resource_version},
                        "spec": {"taints": taints},
                    });
                    let patch = match guarded {
                        Some(ops) => Patch::Json::<Value>(ops),
                        None => Patch::Merge(merge),
                    };
                    let pp = PatchParams::default();
                    match self.send(since, || api.patch(node, &pp, &patch)).await {
                        Ok(n) => return Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail))),
                        Err(e) if code(&e) == Some(409) => last = e.to_string(),
                        // The taints changed since the read (the test
                        // failed), or the test itself could not be met:
                        // read again; the next attempt is guarded by the
                        // resourceVersion, which cannot be misread.
                        Err(e) if code(&e) == Some(422) && matches!(patch, Patch::Json(_)) => {
                            last = e.to_string();
                            guard_on_taints = false;
                        }
                        Err(e) if code(&e) == Some(404) => {
                            return Ok(Attempt::Refused(e.to_string(), node_state(node, None, self.opts.detail)));
                        }
                        Err(e) => return Err(e),
                    }
                }
                let fresh = self.call(since, || api.get_opt(node)).await;
                Ok(Attempt::Refused(last, node_read(node, fresh, self.opts.detail)))
            }
            ActionKind::PatchNodeLabels { node, labels } => {
                let api = Api::<Node>::all(self.client.clone());
                let patch = json!({"metadata": {"labels": labels}});
                let pp = PatchParams::default();
                let merge = Patch::Merge(&patch);
                match self.send(since, || api.patch(node, &pp, &merge)).await {
                    Ok(n) => Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail))),
                    Err(e) if code(&e) == Some(404) => {
                        Ok(Attempt::Refused(e.to_string(), node_state(node, None, self.opts.detail)))
                    }
                    Err(e) => Err(e),
                }
            }
            ActionKind::MarkPodNotReady { pod, uid }
            | ActionKind::SetPodNodeLost { pod, uid, .. }
            | ActionKind::AddPodDisruptionTarget { pod, uid } => self.pod_status(since, pod, uid, kind).await,
            ActionKind::DeletePod { pod, uid, mode, .. } => self.delete_pod(since, pod, uid, *mode, None).await,
            ActionKind::EvictForAddon { pod, uid, grace, .. } => {
                self.delete_pod(since, pod, uid, DeletionMode::Evict, *grace).await
            }
            ActionKind::RecordEvent(_) => Ok(Attempt::Done(Vec::new())),
        }
    }

    /// A pod deletion (plain, or through the Eviction API), preconditioned
    /// on the pod's uid, with `grace` as `gracePeriodSeconds` when given.
    async fn delete_pod(
        &self,
        since: Instant,
        pod: &str,
        uid: &str,
        mode: DeletionMode,
        grace: Option<nodewarden_model::Span>,
    ) -> ApiResult<Attempt> {
        let (ns, name) = pod_name(pod);
        let api = Api::<Pod>::namespaced(self.client.clone(), ns);
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            grace_period_seconds: grace.map(|g| g.as_secs_f64().ceil().max(0.0) as u32),
            ..DeleteParams::default()
        };
        let result = match mode {
            DeletionMode::Delete => self.send(since, || api.delete(name, &dp)).await.map(|r| r.left()),
            DeletionMode::Evict => {
                let eviction = eviction(ns, name, uid, dp.grace_period_seconds);
                let pp = PostParams::default();
                self.send(since, || api.create_subresource::<_, serde_json::Value>("eviction", name, &pp, &eviction))
                    .await
                    .map(|_| None)
            }
        };
        match result {
            Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => {
                Ok(Attempt::Done(pod_state(pod, Some(&p), self.opts.detail)))
            }
            Ok(_) => Ok(Attempt::Done(pod_state(pod, None, self.opts.detail))),
            // Already gone: what the deletion wanted.
            Err(e) if code(&e) == Some(404) => Ok(Attempt::Done(pod_state(pod, None, self.opts.detail))),
            Err(e) if matches!(code(&e), Some(409 | 429)) => {
                let fresh = self.call(since, || api.get_opt(name)).await;
                Ok(Attempt::Refused(e.to_string(), pod_read(pod, fresh, self.opts.detail)))
            }
            Err(e) => Err(e),
        }
    }

    /// A pod status write: read, check the uid, change, update under the
    /// read's resourceVersion; a conflict re-reads and recomputes.
    async fn pod_status(&self, since: Instant, key: &str, uid: &str, kind: &ActionKind) -> ApiResult<Attempt> {
        let (ns, name) = pod_name(key);
        let api = Api::<Pod>::namespaced(self.client.clone(), ns);
        let now = || Time(k8s_openapi::jiff::Timestamp::now());
        let mut last = String::new();
        for _ in 0..CONFLICT_ATTEMPTS {
            let Some(mut cur) = self.send(since, || api.get_opt(name)).await? else {
                return Ok(Attempt::Refused(format!("pods {key:?} not found"), pod_state(key, None, self.opts.detail)));
            };
            if cur.metadata.uid.as_deref() != Some(uid) {
                let why = format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {:?}",
                    cur.metadata.uid
                );
                return Ok(Attempt::Refused(why, pod_state(key, Some(&cur), self.opts.detail)));
            }
            let status = cur.status.get_or_insert_with(Default::default);
            match kind {
                ActionKind::MarkPodNotReady { .. } => {
                    match status.conditions.get_or_insert_with(Vec::new).iter_mut().find(|c| c.type_ == "Ready") {
                        Some(c) if c.status != "False" => {
                            c.status = "False".into();
                            c.last_transition_time = Some(now());
                        }
                        _ => return Ok(Attempt::Done(pod_state(key, Some(&cur), self.opts.detail))),
                    }
                }
                ActionKind::SetPodNodeLost { node, .. } => {
                    status.reason = Some("NodeLost".into());
                    status.message = Some(format!("Node {node} which was running pod {name} is unresponsive"));
                }
                _ => {
                    let list = status.conditions.get_or_insert_with(Vec::new);
                    let c = PodCondition {
                        type_: "DisruptionTarget".into(),
                        status: "True".into(),
                        reason: Some("DeletionByTaintManager".into()),
                        message: Some("Taint manager: deleting due to NoExecute taint".into()),
                        last_transition_time: Some(now()),
                        ..PodCondition::default()
                    };
                    match list.iter_mut().find(|x| x.type_ == c.type_) {
                        Some(x) => *x = c,
                        None => list.push(c),
                    }
                }
            }
            match self.send(since, || api.replace_status(name, &POST, &cur)).await {
                Ok(p) => return Ok(Attempt::Done(pod_state(key, Some(&p), self.opts.detail))),
                Err(e) if code(&e) == Some(409) => last = e.to_string(),
                Err(e) if code(&e) == Some(404) => {
                    return Ok(Attempt::Refused(e.to_string(), pod_state(key, None, self.opts.detail)));
                }
                Err(e) => return Err(e),
            }
        }
        let fresh = self.call(since, || api.get_opt(name)).await;
        Ok(Attempt::Refused(last, pod_read(key, fresh, self.opts.detail)))
    }

    /// An Event in events.k8s.io/v1, or core/v1 where that is not served.
    async fn record_event(&self, since: Instant, ev: &nodewarden_engine::Event) -> ApiResult<()> {
        let (kind, ns, name) = match &ev.object {
            ObjectRef::Node(n) => ("Node", "default".to_string(), n.clone()),
            ObjectRef::Pod(p) => {
                let (ns, name) = pod_name(p);
                ("Pod", ns.to_string(), name.to_string())
            }
        };
        let regarding = ObjectReference {
            kind: Some(kind.into()),
            api_version: Some("v1".into()),
            name: Some(name.clone()),
            namespace: (kind == "Pod").then(|| ns.clone()),
            ..ObjectReference::default()
        };
        let type_ = match ev.kind {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let meta = ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        };
        if !self.core_events.load(Ordering::Relaxed) {
            let e = KEvent {
                metadata: meta.clone(),
                event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                reason: Some(ev.reason.to_string()),
                note: Some(ev.message.clone()),
                type_: Some(type_.into()),
                action: Some(ev.reason.to_string()),
                regarding: Some(regarding.clone()),
                reporting_controller: Some(self.opts.component.clone()),
                reporting_instance: Some(if self.opts.instance.is_empty() {
                    self.opts.component.clone()
                } else {
                    self.opts.instance.clone()
                }),
                ..KEvent::default()
            };
            let api = Api::<KEvent>::namespaced(self.client.clone(), &ns);
            match self.call(since, || api.create(&POST, &e)).await {
                Ok(_) => return Ok(()),
                Err(e)
                    if code(&e) == Some(404)
                        && !matches!(&e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| !d.name.is_empty())) =>
                {
                    tracing::info!("events.k8s.io/v1 is not served; recording core/v1 Events");
                    self.core_events.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let e = k8s_openapi::api::core::v1::Event {
            metadata: meta,
            involved_object: regarding,
            reason: Some(ev.reason.to_string()),
            message: Some(ev.message.clone()),
            type_: Some(type_.into()),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some(self.opts.component.clone()),
                host: None,
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some(self.opts.component.clone()),
            reporting_instance: Some(self.opts.instance.clone()),
            ..Default::default()
        };
        let api = Api::<k8s_openapi::api::core::v1::Event>::namespaced(self.client.clone(), &ns);
        self.call(since, || api.create(&POST, &e)).await.map(|_| ())
    }
}

#[cfg(test)]
mod eviction_body_tests {
    use super::*;

    /// What goes over the wire: `deleteOptions` with the uid precondition
    /// and the grace period, which kube-rs's own `evict` would misspell.
    #[test]
    fn the_eviction_body_spells_delete_options_as_the_api_does() {
        let v = serde_json::to_value(eviction("kube-system", "p", "u-1", Some(10))).expect("json");
        assert_eq!(v["apiVersion"], "policy/v1");
        assert_eq!(v["kind"], "Eviction");
        assert_eq!(v["metadata"]["name"], "p");
        assert_eq!(v["deleteOptions"]["gracePeriodSeconds"], 10);
        assert_eq!(v["deleteOptions"]["preconditions"]["uid"], "u-1");
        assert!(v.get("delete_options").is_none());
        let v = serde_json::to_value(eviction("ns", "p", "u", None)).expect("json");
        assert!(v["deleteOptions"].get("gracePeriodSeconds").is_none(), "no grace: the pod's own");
        // kube-rs's body, for the record: the reason this module builds its own.
        let req = kube::core::Request::new("/api/v1/namespaces/ns/pods")
            .evict("p", &kube::api::EvictParams::default())
            .expect("request");
        let body: serde_json::Value = serde_json::from_slice(req.body()).expect("json");
        assert!(
            body.get("deleteOptions").is_none() && body.as_object().is_some_and(|m| m.contains_key("delete_options"))
        );
    }
}
