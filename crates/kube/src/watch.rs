//! Watches on Nodes, Pods and node Leases (kube-runtime's watcher: initial
//! list, resumed watches, a fresh list on 410 Gone, bookmarks), turned into
//! observations and sent down the engine's channel.
//!
//! Nothing of an object is kept: the object is read leniently as it is
//! decoded ([`crate::trimmed`], `nodewarden_objects`), so one malformed
//! object is logged and read conservatively instead of failing its whole
//! list page, and only its observation travels on. A re-list (after the
//! watch was away) collects the keys it shows and hands them over
//! ([`Input::Relisted`]): the engine thread tells the engine which objects
//! were deleted meanwhile from what the engine holds, since a watcher's
//! re-list reports only what exists. The first list needs no such set.
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

use crate::input::{Input, Watched};
use crate::trimmed::{Readable, Scheduled, Trimmed};
use nodewarden_objects::NODE_LEASE_NAMESPACE;

/// A kind the engine watches: how to key it and what its deletion tells
/// the engine. Objects arrive as [`Trimmed`], already read.
trait WatchedKind: Readable + Send + 'static {
    const WATCHED: Watched;
    /// The key a deletion is reported under.
    fn key(meta: &ObjectMeta) -> Option<String>;
}

impl WatchedKind for Node {
    const WATCHED: Watched = Watched::Nodes;
    fn key(meta: &ObjectMeta) -> Option<String> {
        meta.name.clone()
    }
}

impl WatchedKind for Pod {
    const WATCHED: Watched = Watched::Pods;
    fn key(meta: &ObjectMeta) -> Option<String> {
        Some(format!("{}/{}", meta.namespace.as_deref()?, meta.name.as_deref()?))
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
}

impl WatchedKind for PodDisruptionBudget {
    const WATCHED: Watched = Watched::Budgets;
    fn key(meta: &ObjectMeta) -> Option<String> {
        Some(format!("{}/{}", meta.namespace.as_deref()?, meta.name.as_deref()?))
    }
}

impl WatchedKind for Lease {
    const WATCHED: Watched = Watched::Leases;
    fn key(meta: &ObjectMeta) -> Option<String> {
        meta.name.clone()
    }
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

/// What one watcher knows between events: whether it is listing, and
/// during a re-list the keys the list has shown so far.
#[derive(Default)]
struct Keys {
    /// Between `Init` and `InitDone`.
    listing: bool,
    /// The keys a re-list has shown so far (`None` during the first list:
    /// the engine knew nothing of this kind before it).
    relisting: Option<HashSet<String>>,
    /// A list has started before.
    listed: bool,
    synced: bool,
}

impl Keys {
    /// The observations (and sync notice) one watcher event gives.
    fn on_event<K: WatchedKind>(&mut self, event: Event<Trimmed<K>>) -> Vec<Input> {
        let mut out = Vec::new();
        match event {
            Event::Init => {
                self.listing = true;
                self.relisting = self.listed.then(HashSet::new);
                self.listed = true;
            }
            Event::InitApply(obj) => {
                if let Some(o) = obj.reading {
                    if let (Some(seen), Some((_, key))) = (&mut self.relisting, o.key()) {
                        seen.insert(key.to_owned());
                    }
                    out.push(Input::Observe(o));
                }
            }
            Event::InitDone => {
                self.listing = false;
                if let Some(present) = self.relisting.take() {
                    out.push(Input::Relisted(K::WATCHED, present));
                }
                if !self.synced {
                    self.synced = true;
                    out.push(Input::Synced(K::WATCHED));
                }
            }
            Event::Apply(obj) => {
                if let Some(o) = obj.reading {
                    out.push(Input::Observe(o));
                }
            }
            Event::Delete(obj) => {
                // The engine ignores the deletion of an object it never held
                // (one whose reading failed, say).
                if let Some(key) = K::key(&obj.metadata) {
                    out.push(Input::Observe(K::WATCHED.deleted(key)));
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

/// When a failing watch counts as caught up again, if nothing else
/// happens first: [`SETTLE`] after it first delivered again, [`QUIET`]
/// after its last error, and never while it re-lists (a re-list of a
/// million pods takes longer than [`QUIET`], and the engine must not
/// decide from half of it: it is up when the list is done).
fn up_at(failing: Option<Instant>, delivering: Option<Instant>, listing: bool) -> Option<Instant> {
    match (failing, delivering) {
        _ if listing => None,
        (Some(_), Some(first)) => Some(first + SETTLE),
        (Some(last_error), None) => Some(last_error + QUIET),
        _ => None,
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
        let up_at = up_at(failing, delivering, keys.listing);
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
                    } else if delivering.is_none() && !keys.listing {
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
    use nodewarden_engine::Observation;
    use nodewarden_model::Timestamp;
    use serde_json::json;

    #[test]
    fn a_watch_re_listing_is_not_up_until_its_list_is_done() {
        let t = Instant::now();
        let later = t + Duration::from_secs(2);
        assert_eq!(up_at(Some(t), None, false), Some(t + QUIET), "quiet after its last error");
        assert_eq!(up_at(Some(t), Some(later), false), Some(later + SETTLE), "settled after delivering again");
        assert_eq!(up_at(Some(t), None, true), None, "a re-list under way, however long");
        assert_eq!(up_at(Some(t), Some(later), true), None);
        assert_eq!(up_at(None, None, false), None, "not failing");
    }

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

    /// The keys a re-list handed over.
    fn relisted(inputs: &[Input]) -> Option<(Watched, Vec<String>)> {
        inputs.iter().find_map(|i| match i {
            Input::Relisted(w, keys) => {
                let mut keys: Vec<String> = keys.iter().cloned().collect();
                keys.sort();
                Some((*w, keys))
            }
            _ => None,
        })
    }

    #[test]
    fn a_budget_relist_hands_over_namespaced_keys() {
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
        let out: Vec<Input> = [Event::Init, Event::InitApply(budget("a")), Event::InitDone]
            .into_iter()
            .flat_map(|e| k.on_event(e))
            .collect();
        assert_eq!(relisted(&out), Some((Watched::Budgets, vec!["kube-system/a".to_string()])));
        assert_eq!(
            Watched::Budgets.deleted("kube-system/b".into()),
            Observation::BudgetDeleted { key: "kube-system/b".into() }
        );
        // Scheduled kinds key as their plain kinds do.
        assert_eq!(<Scheduled<Pod> as WatchedKind>::WATCHED, Watched::Pods);
        assert_eq!(<Scheduled<Node> as WatchedKind>::WATCHED, Watched::Nodes);
    }

    #[test]
    fn only_a_relist_collects_keys_and_the_first_list_syncs_once() {
        let mut k = Keys::default();
        let mut seen = Vec::new();
        for e in [Event::Init, Event::InitApply(node("a")), Event::InitApply(node("b")), Event::InitDone] {
            seen.extend(k.on_event(e));
        }
        // The engine knew nothing before the first list: nothing to compare.
        assert_eq!(observed(&seen), ["+a", "+b", "synced nodes"]);
        assert!(relisted(&seen).is_none());
        let mut seen = Vec::new();
        for e in [Event::Apply(node("c")), Event::Init, Event::InitApply(node("a")), Event::InitDone] {
            seen.extend(k.on_event(e));
        }
        assert_eq!(relisted(&seen), Some((Watched::Nodes, vec!["a".to_string()])));
        assert_eq!(observed(&seen), ["+c", "+a", "other"], "no second sync");
        // A deletion is passed on whether or not the engine held the object.
        assert_eq!(observed(&k.on_event(Event::Delete(node("zz")))), ["-zz"]);
        assert_eq!(observed(&k.on_event(Event::Delete(node("a")))), ["-a"]);
    }

    #[test]
    fn a_list_broken_off_and_started_again_collects_keys() {
        // The watcher may fail during its first list and start over: what
        // the broken list showed is in the engine already.
        let mut k = Keys::default();
        let mut seen = Vec::new();
        for e in [Event::Init, Event::InitApply(node("a")), Event::Init, Event::InitApply(node("b")), Event::InitDone] {
            seen.extend(k.on_event(e));
        }
        assert_eq!(relisted(&seen), Some((Watched::Nodes, vec!["b".to_string()])));
        assert_eq!(observed(&seen), ["+a", "+b", "other", "synced nodes"]);
    }
}
