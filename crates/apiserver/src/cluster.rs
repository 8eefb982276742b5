//! The served cluster's own state, apart from any way of reaching it: the
//! store, the clock it runs on, the API faults in force, admission's
//! settings, and what the scenario makes the API refuse or hold.
//!
//! Everything that acts on the cluster (the HTTP handlers, the driver's
//! kubelets and scenario, the scheduler, the in-process controller) goes
//! through a [`ServedCluster`]. Invariant: nothing here knows how a
//! request arrived or how an answer is sent; the HTTP layer
//! (`crate::http`) depends on this module, never the reverse.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use nodewarden_cluster::AdmissionDefaults;
use nodewarden_cluster::rules::pod::deletion_grace;
use nodewarden_model::{Span, Timestamp};
use serde_json::{Value, json};

use crate::faults::ApiFaults;
use crate::resource::Kind;
use crate::store::{Inner, NODE_READY, Obj, Store, StoreLimits};
use nodewarden_objects::TimeBase;

/// The served cluster, shared by every task that serves or drives it.
///
/// Its store, clock and faults are public because tests (here and in
/// other crates) look into the store, read the clock and inject faults
/// directly, as an operator with access to etcd and the fault switch
/// would; the rest is the crate's.
pub struct ServedCluster {
    /// Every object, with the change feed watches and journals read.
    pub store: Store,
    /// The wall-clock anchor of the simulator's time: every timestamp the
    /// cluster writes is formatted through it.
    pub time: TimeBase,
    /// The API faults in force; in-process clients obey them as HTTP
    /// clients do.
    pub faults: ApiFaults,
    /// The DefaultTolerationSeconds admission plugin's settings, the
    /// scenario's own when it brings some.
    pub(crate) admission: AdmissionDefaults,
    /// Deletions and evictions the API still refuses, by pod key: a
    /// scenario file's `refuse-deletions: N`, as an admission webhook (or,
    /// for an eviction, a budget) would refuse them.
    refusals: Mutex<HashMap<String, u32>>,
    /// Pods terminating through a grace period a deletion asked for, by
    /// key, with when it ends; `None` when the cluster removes every
    /// deleted pod at once (see [`ServedCluster::graceful_deletion`]).
    graceful: Mutex<Option<BTreeMap<String, Timestamp>>>,
}

impl ServedCluster {
    /// An empty cluster: populating it is the caller's job, so the
    /// in-crate tests can start from nothing.
    /// Whether a stored Node is Ready, as every reader in nodewarden reads
    /// it (`nodewarden_objects`): its kubelet then starts the pods bound
    /// to it at once.
    pub(crate) fn node_ready(&self, v: &serde_json::Value) -> bool {
        let reader = nodewarden_objects::Reader::new(nodewarden_objects::Detail::Lifecycle).on(self.time);
        reader.node(v, self.time.now()).is_some_and(|n| {
            n.conditions.iter().any(|c| {
                c.kind == nodewarden_model::ConditionType::Ready && c.status == nodewarden_model::ConditionStatus::True
            })
        })
    }

    pub(crate) fn new(limits: StoreLimits, time: TimeBase, admission: AdmissionDefaults) -> ServedCluster {
        ServedCluster {
            store: Store::new(limits),
            time,
            faults: ApiFaults::default(),
            admission,
            refusals: Mutex::new(HashMap::new()),
            graceful: Mutex::new(None),
        }
    }

    /// Lets deleted pods stay terminating through their grace period from
    /// now on: only a cluster about scheduling holds them, so that a
    /// rescheduled addon waits for the room as it would on a real node.
    pub(crate) fn hold_graceful_deletions(&self) {
        *self.graceful.lock().unwrap_or_else(PoisonError::into_inner) = Some(BTreeMap::new());
    }

    /// Adds refusals a scenario asks for (pod key, how many).
    pub(crate) fn refuse_deletions(&self, refusals: impl IntoIterator<Item = (String, u32)>) {
        self.refusals.lock().unwrap_or_else(PoisonError::into_inner).extend(refusals);
    }

    /// When a deleted pod stays terminating: in a cluster about scheduling
    /// (a scenario with `cluster.scheduler: true`, the critical-addon
    /// cluster), a bound pod whose node is Ready is held by its kubelet
    /// through its grace period (the deletion's `gracePeriodSeconds`, else
    /// the pod's own: [`deletion_grace`]), so the rescheduler's addon waits for the room; the
    /// deletion ends when the grace does. Everything else goes at once, as
    /// in replay: node lifecycle deletes pods of nodes that are not Ready,
    /// whose kubelet cannot hold them. `Some((grace, end))` when it stays.
    pub(crate) fn graceful_deletion(&self, s: &Inner, pod: &Value, grace: Option<i64>) -> Option<(i64, Timestamp)> {
        let tracks = self.graceful.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        let own = pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).map(Span::from_secs);
        let grace = deletion_grace(tracks, grace.map(Span::from_secs), own);
        if grace <= Span::ZERO {
            return None;
        }
        let grace = grace.as_nanos() / 1_000_000_000;
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty())?;
        let terminating = pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
        let node_ready = s.get(Kind::Node, node).is_some_and(|n| n.field(NODE_READY).as_deref() == Some("True"));
        (node_ready && !terminating).then(|| (grace, self.time.now() + Span::from_secs(grace)))
    }

    /// Whether the pod is terminating through a grace period a deletion
    /// asked for: a second deletion or eviction then changes nothing.
    pub(crate) fn terminating_gracefully(&self, key: &str) -> bool {
        self.graceful.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|g| g.contains_key(key))
    }

    /// Marks `pod` terminating until `until` and stores it.
    pub(crate) fn start_graceful(
        &self,
        s: &mut Inner,
        key: &str,
        mut pod: Value,
        grace: i64,
        until: Timestamp,
    ) -> Arc<Obj> {
        mark_graceful(&mut pod, Some(grace), &self.time.time(self.time.now()));
        if let Some(g) = self.graceful.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            g.insert(key.to_string(), until);
        }
        s.commit(Kind::Pod, key, pod, false)
    }

    /// Ends the graceful deletions due by `now`, as their kubelets would.
    pub(crate) fn end_graceful(&self, now: Timestamp) {
        let due: Vec<String> = {
            let mut g = self.graceful.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(g) = g.as_mut() else { return };
            let due: Vec<String> = g.iter().filter(|(_, t)| **t <= now).map(|(k, _)| k.clone()).collect();
            for k in &due {
                g.remove(k);
            }
            due
        };
        if due.is_empty() {
            return;
        }
        let mut s = self.store.lock();
        for key in due {
            if let Some(p) = s.get(Kind::Pod, &key)
                && p.value().pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null())
            {
                s.commit(Kind::Pod, &key, p.value(), true);
            }
        }
    }

    /// Takes one of the pod's remaining refusals: true when this deletion
    /// (or eviction) is to be refused.
    pub(crate) fn refuses_deletion(&self, key: &str) -> bool {
        let mut r = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        match r.get_mut(key) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

/// The served kubelets stop a pod at once, so a deleted pod is removed
/// without waiting. When the deletion asked for a grace period, the pod's
/// last state says so, as a real API server's would while it terminated:
/// `deletionTimestamp` and `deletionGracePeriodSeconds`, which watchers
/// see in the DELETED event (and tests check the grace sent by).
pub(crate) fn mark_graceful(pod: &mut Value, grace: Option<i64>, now: &str) {
    let Some(grace) = grace else { return };
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
        meta.insert("deletionTimestamp".into(), json!(now));
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    }
}

/// A deletion's requested grace period as upstream's `BeforeDelete` takes
/// it: a negative one reads as 1 s.
pub(crate) fn requested_grace(seconds: i64) -> i64 {
    if seconds < 0 { 1 } else { seconds }
}
