//! Kubernetes objects to the engine's observations, read leniently from
//! their JSON and trimmed to what the engine reads, so nothing else of an
//! object is kept.
//!
//! The API server validates what it stores, but a controller must not bet
//! its decisions on that: an object written by an older server, a buggy
//! webhook or a hand-edited etcd may carry duplicated conditions, statuses
//! no version defines, absurd or unparsable timestamps, a taint list
//! thousands long or a field of the wrong JSON type. Decoding such an
//! object into k8s-openapi's types fails, and when it fails inside a list
//! page, the whole page (and so the cache's first sync) fails with it. So
//! the watches read the JSON itself ([`node_reading`], [`pod_reading`],
//! [`lease_reading`], [`budget_reading`]), field by field, and every reading here is total: it
//! never panics, it says what it found odd in a log line naming the object,
//! and it reads the field conservatively (the reading that cannot make an
//! eviction come sooner), or ignores the object when it cannot be named.
//!
//! The conservative readings, field by field:
//! - a timestamp that cannot be parsed, or lies outside 2000..2200, reads
//!   as the moment the object was seen (`seen_at`). The engine uses a
//!   timestamp either to tell whether it changed (heartbeats, transitions,
//!   Lease renewals: a fresh delivery then counts as a sign of life) or as
//!   the start of a grace period (creation: it starts now, the latest it
//!   could). Absent timestamps keep their API meaning;
//! - a condition type listed twice: the first is read (upstream's
//!   `GetNodeCondition`); a status other than True/False/Unknown: the
//!   condition reads as absent (an absent Ready condition decides nothing;
//!   an Unknown one would);
//! - a taint or condition entry that cannot be read is skipped (a NoExecute
//!   taint the engine cannot see evicts nothing); a taint list of the wrong
//!   type reads as empty;
//! - a toleration with a field of the wrong JSON type reads as one that
//!   tolerates every taint forever, in its place in pod order: upstream
//!   could not decode the pod at all, and a pod deleted by mistake cannot
//!   be brought back. A toleration whose operator or effect is a string no
//!   version defines is read as upstream reads it: it tolerates no taint
//!   (`Toleration.ToleratesTaint`; the API server refuses such a pod, so
//!   only a pod stored around validation carries one);
//! - owner references that cannot be read (two entries marked controller
//!   included) mark the pod as a DaemonSet's (legacy eviction spares
//!   those) and leave it uncontrolled for the rescheduler (which drains
//!   only pods something recreates); any deletionTimestamp marks it
//!   terminating (the controller leaves those alone);
//! - a label of the wrong type is skipped (a node without a zone label is
//!   in the engine's unlabelled zone).
//!
//! With the critical-addon rescheduler on ([`Detail::Scheduling`]), pods
//! and nodes are read further (requests, priority, placement, allocatable)
//! and PodDisruptionBudgets are read too ([`budget_reading`]). There the
//! conservative reading is the one that cannot make the rescheduler evict
//! a pod it should not, or prepare a node the addon cannot use:
//! - a pod whose annotations cannot be read is never evicted (they might
//!   mark it a mirror pod) and is no critical addon;
//! - a pod whose requests cannot be read (a malformed quantity, a container
//!   list of the wrong type) fills its node in that resource (the amount
//!   reads as the largest there is, so no addon is placed beside it) and is
//!   never evicted (it reads as a mirror pod, which no eviction removes: it
//!   is not known what evicting it would free); an addon whose requests
//!   cannot be read fits nowhere, and is reported as such by the engine;
//! - a node selector or required node affinity that cannot be read matches
//!   no node (the scheduler would not place the pod anywhere it could not
//!   read either, and the API would have refused the pod);
//! - an allocatable that cannot be read reads as absent: no addon is placed
//!   on that node; a resource missing from it reads as zero, as the
//!   scheduler reads it;
//! - a terminationGracePeriodSeconds that cannot be read is the default
//!   30 s (its pod is then never among those preferred for a short grace);
//! - a `PodScheduled=False/Unschedulable` condition without a readable
//!   lastTransitionTime was marked when it was seen (the grace starts then,
//!   the latest it could);
//! - a pod that has finished (phase Succeeded or Failed) requests nothing:
//!   the scheduler no longer counts it either;
//! - a budget whose selector cannot be read covers every pod of its
//!   namespace and allows no disruption; a budget whose status is missing,
//!   unreadable or older than its spec (`observedGeneration` behind
//!   `generation`: the Eviction API then refuses too) allows none; a budget
//!   without a selector covers no pod (policy/v1), and reads as deleted.
//!
//! Time: the engine's [`Timestamp`] is Unix time in nanoseconds in
//! production ([`crate::time`]), so a heartbeat's time is what the API says.
//!
//! The watches decode only the fields these readings look at ([`keep`],
//! [`prune`]); a reading that starts looking at another field must
//! name it there, and this module's tests check every reading they make
//! against the reading of the pruned object.

use std::collections::BTreeMap;

use nodewarden_model::{TaintEffect, Timestamp};
use serde_json::Value;

use crate::time::{TimeBase, sane_time};

mod budget;
#[cfg(test)]
mod checked;
pub mod keep;
mod lease;
mod node;
mod owner;
mod pod;
pub(crate) mod prune;
mod scheduling;
#[cfg(test)]
mod scheduling_tests;
mod selector;
mod shape;
#[cfg(test)]
mod tests;
pub mod typed;

pub use budget::{budget_amounts, budget_reading};
pub use lease::lease_reading;
pub use node::node_reading;
pub use owner::{ControllerOwner, controller_owner};
pub use pod::{pod_reading, pod_tolerations};
pub use scheduling::pod_priority;
pub use selector::label_selector as label_selector_reading;
use selector::label_selector;

/// The namespace the kubelets keep their Leases in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// How much of a Node or Pod is read.
///
/// The rescheduler's facts (requests, placement, allocatable, ...) cost
/// memory in every pod the engine keeps, so they are read only when it
/// runs; node lifecycle reads none of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// What node lifecycle reads (`--enable-rescheduler=false`).
    #[default]
    Lifecycle,
    /// That, and what the critical-addon rescheduler reads.
    Scheduling,
}

/// How objects are read: how much of each, and on which clock their times
/// are read.
///
/// `nodewarden run` reads on Unix time ([`Reader::new`]); the served
/// cluster (`nodewarden sim --serve`) reads its own objects on the
/// simulator's clock ([`Reader::on`]), so both read every object the same
/// way, odd fields included, and differ only in where their time starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reader {
    /// How much of a Node or Pod is read.
    pub detail: Detail,
    /// The clock the readings' times are on.
    pub clock: TimeBase,
}

impl Reader {
    /// Reads `detail` on Unix time, the engine's production clock.
    pub const fn new(detail: Detail) -> Reader {
        Reader { detail, clock: TimeBase::UNIX }
    }

    /// The same reading, its times on `clock`.
    pub const fn on(self, clock: TimeBase) -> Reader {
        Reader { clock, ..self }
    }

    /// What the engine reads of a Node ([`node_reading`]).
    pub fn node(&self, v: &Value, seen_at: Timestamp) -> Option<nodewarden_engine::NodeSnapshot> {
        node::read(v, seen_at, self)
    }

    /// What the engine reads of a Pod ([`pod_reading`]).
    pub fn pod(&self, v: &Value, seen_at: Timestamp) -> Option<nodewarden_engine::PodSnapshot> {
        pod::read(v, seen_at, self)
    }

    /// What the engine reads of a node Lease ([`lease_reading`]).
    pub fn lease(&self, v: &Value, seen_at: Timestamp) -> Option<nodewarden_engine::Observation> {
        lease::read(v, seen_at, self.clock)
    }

    /// What the engine reads of a PodDisruptionBudget ([`budget_reading`]).
    pub fn budget(&self, v: &Value, seen_at: Timestamp) -> Option<nodewarden_engine::Observation> {
        budget::read(v, seen_at, self.clock)
    }
}

/// A node with more taints than this is logged: no real node needs so
/// many, and it usually means a runaway taint writer. The taints are all
/// kept (dropping one could hide a NoExecute taint the engine must see).
pub const MANY_TAINTS: usize = 256;

/// A taint's or toleration's effect, `None` when no version defines it.
pub(crate) fn effect(s: &str) -> Option<TaintEffect> {
    match s {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

/// `metadata.resourceVersion` as a number, for the engine's per-object
/// order ([`NodeSnapshot::version`]). Clients are told to treat it as
/// opaque, but every API server in use (etcd's revision, and the one
/// `sim --serve` serves) writes a decimal number that grows with every
/// change; one that is absent or not such a number reads as 0, "unknown",
/// which the engine always takes in: the watch's own order then rules, as
/// it does for client-go's informers.
fn resource_version(v: &Value) -> u64 {
    at(v, &["metadata", "resourceVersion"]).and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The value at `path`, `None` when absent or null.
fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// One object being read: its name for the log lines, and when it was
/// seen (what an unreadable timestamp reads as).
struct Reading<'a> {
    kind: &'static str,
    name: &'a str,
    seen_at: Timestamp,
    clock: TimeBase,
}

impl Reading<'_> {
    fn odd(&self, field: &str, what: &str) {
        tracing::warn!(kind = self.kind, object = self.name, field, "malformed API object: {what}");
    }

    /// A string field: `None` when absent, null or (logged) not a string.
    fn text<'v>(&self, v: &'v Value, path: &[&str], field: &str) -> Option<&'v str> {
        let x = at(v, path)?;
        let s = x.as_str();
        if s.is_none() {
            self.odd(field, &format!("expected a string, found {}", json_type(x)));
        }
        s
    }

    /// A timestamp field: `None` when absent or null; `seen_at` (logged)
    /// when unparsable, of the wrong type or absurd.
    fn time(&self, v: &Value, path: &[&str], field: &str) -> Option<Timestamp> {
        let x = at(v, path)?;
        let Some(s) = x.as_str() else {
            self.odd(field, &format!("timestamp is a {}; read as the time it was seen", json_type(x)));
            return Some(self.seen_at);
        };
        match sane_time(s) {
            Some(t) => Some(self.clock.from_unix_nanos(t.as_nanos())),
            None => {
                self.odd(field, &format!("unparsable or absurd timestamp {s:?}; read as the time it was seen"));
                Some(self.seen_at)
            }
        }
    }

    /// `metadata.labels`; a label of the wrong type is skipped (logged).
    fn labels(&self, v: &Value) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        match at(v, &["metadata", "labels"]) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, val) in m {
                    match val.as_str() {
                        Some(s) => {
                            labels.insert(k.clone(), s.to_string());
                        }
                        None => self.odd("metadata.labels", &format!("label {k:?} is a {}; skipped", json_type(val))),
                    }
                }
            }
            Some(x) => {
                self.odd("metadata.labels", &format!("expected an object, found {}; no labels read", json_type(x)))
            }
        }
        labels
    }

    /// An array field: empty when absent or null; `Err` (logged) when of
    /// another type.
    fn list<'v>(&self, v: &'v Value, path: &[&str], field: &str) -> Result<&'v [Value], ()> {
        match at(v, path) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(x) => {
                self.odd(field, &format!("expected a list, found {}", json_type(x)));
                Err(())
            }
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn name_of(v: &Value) -> Option<&str> {
    at(v, &["metadata", "name"]).and_then(Value::as_str).filter(|n| !n.is_empty())
}
