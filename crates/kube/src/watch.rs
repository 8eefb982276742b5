//! Watches on Nodes, Pods and node Leases (kube-runtime's watcher: initial
//! list, resumed watches, a fresh list on 410 Gone, bookmarks), turned into
//! observations and sent down the engine's channel.
//!
//! Nothing of an object is kept but its key: the object is read leniently
//! as it is decoded ([`crate::trimmed`], [`crate::convert`]), so one
//! malformed object is logged and read conservatively instead of failing
//! its whole list page, and only its observation travels on. The keys are what a
//! re-list needs to tell the engine which objects were deleted while the
//! watch was away (a watcher's re-list reports only what exists).
//!
//! PodDisruptionBudgets (policy/v1) are watched only when the
//! critical-addon rescheduler runs ([`Watches::rescheduler`]); Nodes and
//! Pods are then read with the rescheduler's facts too
//! ([`crate::trimmed::Scheduled`]).
//!
//! DaemonSets are not watched: the engine recognises a DaemonSet pod by
//! its controller owner reference (docs/semantics.md), which a pod carries
//! itself, so legacy eviction needs no DaemonSet cache.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use nodewarden_engine::Observation;

use crate::convert::NODE_LEASE_NAMESPACE;
use crate::engine_thread::Input;
use crate::trimmed::{Readable, Scheduled, Trimmed};

/// The caches the engine waits for before its first decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Watched {
    /// `nodes`.
    Nodes,
    /// `pods`, every namespace.
    Pods,
    /// `leases` in `kube-node-lease`.
    Leases,
    /// `poddisruptionbudgets` (policy/v1), every namespace; only with the
    /// rescheduler.
    Budgets,
}

impl Watched {
    /// The watches node lifecycle needs.
    pub const LIFECYCLE: [Watched; 3] = [Watched::Nodes, Watched::Pods, Watched::Leases];

    /// Every watch the engine needs: with the rescheduler, budgets too.
    pub fn needed(rescheduler: bool) -> Vec<Watched> {
        let mut w = Watched::LIFECYCLE.to_vec();
        if rescheduler {
            w.push(Watched::Budgets);
        }
        w
    }

    /// For logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Nodes => "nodes",
            Watched::Pods => "pods",
            Watched::Leases => "leases",
            Watched::Budgets => "poddisruptionbudgets",
        }
    }

    /// Whether the engine stops deciding while this watch is down. Nodes
    /// and Leases carry the heartbeats: a node whose heartbeats stop
    /// arriving because the watch is down would look dead. Pods and
    /// budgets carry none: a decision on a stale pod fails on its uid, and
    /// an eviction against a stale budget is judged by the API server,
    /// which refuses (429) what the budget forbids.
    pub fn blinds(self) -> bool {
        matches!(self, Watched::Nodes | Watched::Leases)
    }
}

/// A kind the engine watches: how to key it and what its deletion tells
/// the engine. Objects arrive as [`Trimmed`], already read.
trait WatchedKind: Readable + Send + 'static {
    const WATCHED: Watched;
    /// The key a deletion is reported under.
    fn key(meta: &ObjectMeta) -> Option<String>;
    /// The observation of its deletion.
    fn deleted(key: String) -> Observation;
}

impl WatchedKind for Node {
    const WATCHED: Watched = Watched::Nodes;
    fn key(meta: &ObjectMeta) -> Option<String> {
        meta.name.clone()
    }
    fn deleted(name: String) -> Observation {
        Observation::NodeDeleted { name }
    }
}

impl WatchedKind for Pod {
    const WATCHED: Watched = Watched::Pods;
    fn key(meta: &ObjectMeta) -> Option<String> {
        Some(format!("{}/{}", meta.namespace.as_deref()?, meta.name.as_deref()?))
    }
    fn deleted(key: String) -> Observation {
        Observation::PodDeleted { key }
    }
}

impl<K: WatchedKind> WatchedKind for Scheduled<K>
where
    Scheduled<K>: Readable,
{
    const WATCHED: Watched = K::WATCHED;
    fn key(meta: &ObjectMeta) -> Option<String> {
        K::key(meta)
    }
    fn deleted(key: String) -> Observation {
        K::deleted(key)
    }
}

impl WatchedKind for PodDisruptionBudget {
    const WATCHED: Watched = Watched::Budgets;
    fn key(meta: &ObjectMeta) -> Option<String> {
        Some(format!("{}/{}", meta.namespace.as_deref()?, meta.name.as_deref()?))
    }
    fn deleted(key: String) -> Observation {
        Observation::BudgetDeleted { key }
    }
}

impl WatchedKind for Lease {
    const WATCHED: Watched = Watched::Leases;
    fn key(meta: &ObjectMeta) -> Option<String> {
        meta.name.clone()
    }
    fn deleted(node: String) -> Observation {
        Observation::LeaseDeleted { node }
    }
}

/// The key and reading of an object, when it has both.
fn keyed<K: WatchedKind>(obj: Trimmed<K>) -> Option<(String, Observation)> {
    Some((K::key(&obj.metadata)?, obj.reading?))
}

/// Which watches to start, and how much they read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watches {
    /// The critical-addon rescheduler runs: read nodes and pods with its
    /// facts, and watch PodDisruptionBudgets.
    pub rescheduler: bool,
}

/// Starts the watchers ([`Watched::needed`]) on the current tokio runtime.
/// Each sends [`Input::Observe`] for every change and [`Input::Synced`]
/// once, after its first complete list. They end when the channel's
/// receiver is gone.
pub fn spawn_watchers(client: &Client, tx: &Sender<Input>, watches: Watches) -> Vec<tokio::task::JoinHandle<()>> {
    let c = || client.clone();
    let mut tasks = vec![tokio::spawn(run::<Lease>(Api::namespaced(c(), NODE_LEASE_NAMESPACE), tx.clone()))];
    if watches.rescheduler {
        tasks.push(tokio::spawn(run::<Scheduled<Node>>(Api::all(c()), tx.clone())));
        tasks.push(tokio::spawn(run::<Scheduled<Pod>>(Api::all(c()), tx.clone())));
        tasks.push(tokio::spawn(run::<PodDisruptionBudget>(Api::all(c()), tx.clone())));
    } else {
        tasks.push(tokio::spawn(run::<Node>(Api::all(c()), tx.clone())));
        tasks.push(tokio::spawn(run::<Pod>(Api::all(c()), tx.clone())));
    }
    tasks
}

/// What one watcher knows between events: the keys that exist, and during
/// a (re-)list the keys the list has shown so far.
#[derive(Default)]
struct Keys {
    known: HashSet<String>,
    relisting: Option<HashSet<String>>,
    synced: bool,
}

impl Keys {
    /// The observations (and sync notice) one watcher event gives.
    fn on_event<K: WatchedKind>(&mut self, event: Event<Trimmed<K>>) -> Vec<Input> {
        let mut out = Vec::new();
        match event {
            Event::Init => self.relisting = Some(HashSet::new()),
            Event::InitApply(obj) => {
                if let Some((key, o)) = keyed(obj) {
                    self.relisting.get_or_insert_with(HashSet::new).insert(key);
                    out.push(Input::Observe(o));
                }
            }
            Event::InitDone => {
                let fresh = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> = self.known.difference(&fresh).cloned().collect();
                if !gone.is_empty() {
                    tracing::info!(
                        kind = K::WATCHED.as_str(),
                        deleted = gone.len(),
                        "re-list found objects deleted while the watch was away"
                    );
                }
                out.extend(gone.into_iter().map(|k| Input::Observe(K::deleted(k))));
                self.known = fresh;
                if !self.synced {
                    self.synced = true;
                    out.push(Input::Synced(K::WATCHED));
                }
            }
            Event::Apply(obj) => {
                if let Some((key, o)) = keyed(obj) {
                    self.known.insert(key);
                    out.push(Input::Observe(o));
                }
            }
            Event::Delete(obj) => {
                if let Some(key) = K::key(&obj.metadata)
                    && self.known.remove(&key)
                {
                    out.push(Input::Observe(K::deleted(key)));
                }
            }
        }
        out
    }
}

/// After a failure, a watch that delivers again counts as caught up once
/// this long has passed since its first event (a resumed watch replays
/// what it missed in its first moments), or at once when it re-listed.
const SETTLE: Duration = Duration::from_secs(1);

/// A failing watch that has reported no error for this long is connected
/// again, even if nothing changed since (longer than [`WATCH_BACKOFF_MAX`],
/// so retries failing in an outage keep it down).
const QUIET: Duration = Duration::from_secs(10);

/// The longest wait between attempts of a failing watch (kube-runtime's
/// default waits up to 30 s: after an outage, that is how long the engine
/// would stay blind).
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// Doubling from 250 ms to [`WATCH_BACKOFF_MAX`], reset by a success.
struct WatchBackoff(Duration);

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.0;
        self.0 = (self.0 * 2).min(WATCH_BACKOFF_MAX);
        Some(now)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.0 = Duration::from_millis(250);
    }
}

async fn run<K: WatchedKind>(api: Api<Trimmed<K>>, tx: Sender<Input>) {
    let config = watcher::Config::default().page_size(500);
    let mut stream = watcher::watcher(api, config).backoff(WatchBackoff(Duration::from_millis(250))).boxed();
    let mut keys = Keys::default();
    // Since when the watch has been failing (its last error), and when it
    // first delivered again.
    let mut failing: Option<Instant> = None;
    let mut delivering: Option<Instant> = None;
    loop {
        let up_at = match (failing, delivering) {
            (Some(_), Some(first)) => Some(first + SETTLE),
            (Some(last_error), None) => Some(last_error + QUIET),
            _ => None,
        };
        let wake = up_at.map(tokio::time::Instant::from_std);
        let item = tokio::select! {
            item = stream.next() => item,
            () = async { if let Some(w) = wake { tokio::time::sleep_until(w).await } }, if wake.is_some() => {
                failing = None;
                delivering = None;
                if tx.send(Input::WatchUp(K::WATCHED)).is_err() {
                    return;
                }
                continue;
            }
        };
        let Some(item) = item else { return };
        match item {
            Ok(event) => {
                let relisted = matches!(event, Event::InitDone);
                for input in keys.on_event(event) {
                    if tx.send(input).is_err() {
                        return;
                    }
                }
                if failing.is_some() {
                    if relisted {
                        failing = None;
                        delivering = None;
                        if tx.send(Input::WatchUp(K::WATCHED)).is_err() {
                            return;
                        }
                    } else if delivering.is_none() && keys.relisting.is_none() {
                        delivering = Some(Instant::now());
                    }
                }
            }
            Err(e) => {
                metrics::counter!("nodewarden_watch_errors_total", "resource" => K::WATCHED.as_str()).increment(1);
                tracing::warn!(kind = K::WATCHED.as_str(), error = %e, "watch failed; retrying with backoff");
                if failing.is_none() && tx.send(Input::WatchDown(K::WATCHED)).is_err() {
                    return;
                }
                failing = Some(Instant::now());
                delivering = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::Timestamp;
    use serde_json::json;

    fn node(name: &str) -> Trimmed<Node> {
        Trimmed::from_json(&json!({"metadata": {"name": name}}), Timestamp::EPOCH)
    }

    fn observed(inputs: &[Input]) -> Vec<String> {
        inputs
            .iter()
            .map(|i| match i {
                Input::Observe(Observation::NodeUpserted(n)) => format!("+{}", n.name),
                Input::Observe(Observation::NodeDeleted { name }) => format!("-{name}"),
                Input::Synced(w) => format!("synced {}", w.as_str()),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn budgets_are_watched_with_the_rescheduler_and_do_not_blind_the_engine() {
        assert_eq!(Watched::needed(false), Watched::LIFECYCLE);
        assert_eq!(Watched::needed(true), [Watched::Nodes, Watched::Pods, Watched::Leases, Watched::Budgets]);
        let blinding: Vec<_> = Watched::needed(true).into_iter().filter(|w| w.blinds()).collect();
        assert_eq!(blinding, [Watched::Nodes, Watched::Leases], "heartbeats come through these only");
    }

    #[test]
    fn a_budget_deleted_while_away_is_reported_by_its_namespaced_key() {
        let budget = |name: &str| {
            Trimmed::<PodDisruptionBudget>::from_json(
                &json!({"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"selector": {}}}),
                Timestamp::EPOCH,
            )
        };
        let mut k = Keys::default();
        for e in [Event::Init, Event::InitApply(budget("a")), Event::InitApply(budget("b")), Event::InitDone] {
            k.on_event(e);
        }
        let out = [Event::Init, Event::InitApply(budget("a")), Event::InitDone]
            .into_iter()
            .flat_map(|e| k.on_event(e))
            .filter_map(|i| match i {
                Input::Observe(Observation::BudgetDeleted { key }) => Some(key),
                _ => None,
            })
            .collect::<Vec<_>>();
        assert_eq!(out, ["kube-system/b"]);
        // Scheduled kinds key and delete as their plain kinds do.
        assert_eq!(
            <Scheduled<Pod> as WatchedKind>::deleted("ns/p".into()),
            Observation::PodDeleted { key: "ns/p".into() }
        );
        assert_eq!(<Scheduled<Node> as WatchedKind>::WATCHED, Watched::Nodes);
    }

    #[test]
    fn a_relist_reports_what_was_deleted_while_away_and_syncs_once() {
        let mut k = Keys::default();
        let mut seen = Vec::new();
        for e in [Event::Init, Event::InitApply(node("a")), Event::InitApply(node("b")), Event::InitDone] {
            seen.extend(k.on_event(e));
        }
        assert_eq!(observed(&seen), ["+a", "+b", "synced nodes"]);
        let mut seen = Vec::new();
        for e in [Event::Apply(node("c")), Event::Init, Event::InitApply(node("a")), Event::InitDone] {
            seen.extend(k.on_event(e));
        }
        let mut got = observed(&seen);
        got[2..].sort();
        assert_eq!(got, ["+c", "+a", "-b", "-c"]);
        assert_eq!(observed(&k.on_event(Event::Delete(node("zz")))), Vec::<String>::new());
        assert_eq!(observed(&k.on_event(Event::Delete(node("a")))), ["-a"]);
    }
}
