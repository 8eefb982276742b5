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
//! [`lease_reading`]), field by field, and every reading here is total: it
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
//! - a toleration that cannot be read (unknown operator or effect, a field
//!   of the wrong type) reads as one that tolerates every taint forever,
//!   in its place in pod order: upstream would tolerate less, and a pod
//!   deleted by mistake cannot be brought back;
//! - owner references that cannot be read mark the pod as a DaemonSet's
//!   (legacy eviction spares those); any deletionTimestamp marks it
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
//! production ([`timestamp`]), so a heartbeat's time is what the API says.
//!
//! The watches decode only the fields these readings look at ([`keep`],
//! [`crate::prune`]); a reading that starts looking at another field must
//! name it there, and this module's tests check every reading they make
//! against the reading of the pruned object.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewarden_engine::{BudgetSnapshot, NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::resources::{parse_bytes, parse_cpu_millis};
use nodewarden_model::scheduling::{
    CRITICAL_POD_ANNOTATION, MIRROR_POD_ANNOTATION, NodeSelectorTerm, Requirement, SelectorOperator,
};
use nodewarden_model::{
    ConditionStatus, ConditionType, LabelSelector, NodeAffinity, NodeCondition, Placement, PodScheduling, Resources,
    Span, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator,
};
use serde_json::Value;

use crate::prune::Keep;

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

/// The fields the readings of this module look at, per kind and detail:
/// what a watch decodes of an object ([`crate::prune`]). Everything else
/// (managed fields, container statuses, images, volumes) is skipped as it
/// is parsed.
pub mod keep {
    use super::Keep;

    const fn only(fields: &'static [(&'static str, Keep)]) -> Keep {
        Keep::Only(fields)
    }

    // Every kind keeps its identity (name, namespace, uid,
    // resourceVersion): the readings and the watcher itself read it.

    const NODE_METADATA: Keep =
        Keep::Fields(&["name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels"]);
    const NODE_SPEC: Keep = Keep::Fields(&["taints", "unschedulable"]);

    /// A Node for node lifecycle.
    pub const NODE: Keep =
        only(&[("metadata", NODE_METADATA), ("spec", NODE_SPEC), ("status", Keep::Fields(&["conditions"]))]);

    /// A Node for the rescheduler too: its allocatable as well.
    pub const SCHEDULED_NODE: Keep = only(&[
        ("metadata", NODE_METADATA),
        ("spec", NODE_SPEC),
        ("status", Keep::Fields(&["conditions", "allocatable"])),
    ]);

    /// A Pod for node lifecycle and taint eviction: of its owners and
    /// conditions, only what tells a DaemonSet's pod and a Ready one.
    pub const POD: Keep = only(&[
        (
            "metadata",
            only(&[
                ("name", Keep::All),
                ("namespace", Keep::All),
                ("uid", Keep::All),
                ("resourceVersion", Keep::All),
                ("ownerReferences", Keep::Each(&Keep::Fields(&["kind", "controller"]))),
                ("deletionTimestamp", Keep::All),
            ]),
        ),
        ("spec", Keep::Fields(&["nodeName", "tolerations"])),
        ("status", only(&[("conditions", Keep::Each(&Keep::Fields(&["type", "status"]))), ("reason", Keep::All)])),
    ]);

    /// A Pod for the rescheduler too: its whole spec and metadata (requests,
    /// placement, priority, labels, annotations), less what no reading
    /// needs.
    pub const SCHEDULED_POD: Keep = only(&[
        ("metadata", Keep::AllBut(&["managedFields"])),
        ("spec", Keep::AllBut(&["volumes"])),
        ("status", Keep::Fields(&["conditions", "reason", "phase"])),
    ]);

    /// A node Lease.
    pub const LEASE: Keep = only(&[
        ("metadata", Keep::Fields(&["name", "namespace", "uid", "resourceVersion"])),
        ("spec", Keep::Fields(&["renewTime"])),
    ]);

    /// A PodDisruptionBudget.
    pub const BUDGET: Keep = only(&[
        ("metadata", Keep::Fields(&["name", "namespace", "uid", "resourceVersion", "generation"])),
        ("spec", Keep::Fields(&["selector"])),
        ("status", Keep::Fields(&["disruptionsAllowed", "observedGeneration"])),
    ]);
}

/// A node with more taints than this is logged: no real node needs so
/// many, and it usually means a runaway taint writer. The taints are all
/// kept (dropping one could hide a NoExecute taint the engine must see).
pub const MANY_TAINTS: usize = 256;

/// Timestamps outside 2000-01-01 .. 2200-01-01 are absurd.
const SANE_FROM_UNIX_SECS: i64 = 946_684_800;
const SANE_UNTIL_UNIX_SECS: i64 = 7_258_118_400;

/// The engine's time of an API timestamp: Unix nanoseconds, saturating
/// (jiff's range is wider than an i64 of nanoseconds only by centuries, and
/// a saturated value is as absurd as the original, never a panic).
pub fn timestamp(t: &k8s_openapi::jiff::Timestamp) -> Timestamp {
    let n = t.as_nanosecond();
    Timestamp::from_nanos(i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX }))
}

/// Now, on the engine's production clock (Unix nanoseconds): the
/// `seen_at` of an object decoded now.
pub fn wall_clock_now() -> Timestamp {
    // The process's clock, the engine's: compressed under `cargo xtask wire`.
    Timestamp::from_nanos(nodewarden_model::wall::unix_now_nanos())
}

/// An API timestamp (RFC 3339) within the sane range, or `None`.
pub(crate) fn sane_time(s: &str) -> Option<Timestamp> {
    let t = timestamp(&s.parse::<k8s_openapi::jiff::Timestamp>().ok()?);
    let secs = t.as_nanos() / 1_000_000_000;
    (SANE_FROM_UNIX_SECS..SANE_UNTIL_UNIX_SECS).contains(&secs).then_some(t)
}

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
            Some(t) => Some(t),
            None => {
                self.odd(field, &format!("unparsable or absurd timestamp {s:?}; read as the time it was seen"));
                Some(self.seen_at)
            }
        }
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

/// What the engine reads of a Node's JSON, or `None` (logged) when the
/// node has no name. See the module's documentation for how each odd
/// field is read.
pub fn node_reading(v: &Value, seen_at: Timestamp, detail: Detail) -> Option<NodeSnapshot> {
    let Some(name) = name_of(v) else {
        tracing::warn!(kind = "Node", "ignoring a Node without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Node", name, seen_at };
    let created = r.time(v, &["metadata", "creationTimestamp"], "metadata.creationTimestamp").unwrap_or(seen_at);
    let labels = r.labels(v);
    let mut conditions: Vec<NodeCondition> = Vec::new();
    let mut seen_types: Vec<String> = Vec::new();
    for c in r.list(v, &["status", "conditions"], "status.conditions").unwrap_or_default() {
        let Some(type_) = c.get("type").and_then(Value::as_str) else {
            r.odd("status.conditions", "a condition without a readable type; skipped");
            continue;
        };
        if seen_types.iter().any(|t| t == type_) {
            r.odd("status.conditions", &format!("condition {type_} listed twice; the first is read"));
            continue;
        }
        seen_types.push(type_.to_string());
        let status = match c.get("status").and_then(Value::as_str) {
            Some("True") => ConditionStatus::True,
            Some("False") => ConditionStatus::False,
            Some("Unknown") => ConditionStatus::Unknown,
            other => {
                r.odd("status.conditions", &format!("condition {type_} has status {other:?}; read as absent"));
                continue;
            }
        };
        let field = |f: &str| format!("status.conditions[{type_}].{f}");
        conditions.push(NodeCondition {
            kind: ConditionType::parse(type_),
            status,
            reason: r.text(c, &["reason"], &field("reason")).unwrap_or_default().to_string(),
            message: r.text(c, &["message"], &field("message")).unwrap_or_default().to_string(),
            last_heartbeat: r.time(c, &["lastHeartbeatTime"], &field("lastHeartbeatTime")).unwrap_or(Timestamp::EPOCH),
            last_transition: r
                .time(c, &["lastTransitionTime"], &field("lastTransitionTime"))
                .unwrap_or(Timestamp::EPOCH),
        });
    }
    let raw_taints = r.list(v, &["spec", "taints"], "spec.taints").unwrap_or_default();
    if raw_taints.len() > MANY_TAINTS {
        r.odd("spec.taints", &format!("{} taints, an unusually long list; all read", raw_taints.len()));
    }
    let mut taints: Vec<Taint> = Vec::with_capacity(raw_taints.len().min(MANY_TAINTS));
    for t in raw_taints {
        let (Some(key), Some(eff)) = (t.get("key").and_then(Value::as_str), t.get("effect").and_then(Value::as_str))
        else {
            r.odd("spec.taints", "a taint without a readable key or effect; skipped");
            continue;
        };
        let Some(e) = effect(eff) else {
            r.odd("spec.taints", &format!("taint {key} has unknown effect {eff:?}; skipped"));
            continue;
        };
        if taints.iter().any(|k| k.key == key && k.effect == e) {
            r.odd("spec.taints", &format!("taint {key}:{eff} listed twice; read once"));
            continue;
        }
        taints.push(Taint {
            key: key.to_string(),
            value: r.text(t, &["value"], "spec.taints[].value").unwrap_or_default().to_string(),
            effect: e,
            time_added: r.time(t, &["timeAdded"], "spec.taints[].timeAdded"),
        });
    }
    let unschedulable = match at(v, &["spec", "unschedulable"]) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(x) => {
            r.odd("spec.unschedulable", &format!("expected a boolean, found {}; read as false", json_type(x)));
            false
        }
    };
    let allocatable = match detail {
        Detail::Lifecycle => None,
        Detail::Scheduling => r.allocatable(v),
    };
    Some(NodeSnapshot {
        version: resource_version(v),
        allocatable,
        name: name.to_string(),
        created,
        labels,
        conditions,
        taints,
        unschedulable,
    })
}

/// The toleration an unreadable one reads as: every taint, forever.
fn tolerate_everything() -> Toleration {
    Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        seconds: None,
    }
}

/// One toleration, or `None` when it cannot be read as written.
fn toleration(t: &Value) -> Option<Toleration> {
    if !t.is_object() {
        return None;
    }
    let opt_str = |f: &str| match t.get(f) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.as_str())),
        Some(_) => None,
    };
    let operator = match opt_str("operator")? {
        None | Some("" | "Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(_) => return None,
    };
    let effect = match opt_str("effect")? {
        None | Some("") => None,
        Some(e) => Some(effect(e)?),
    };
    let seconds = match t.get("tolerationSeconds") {
        None | Some(Value::Null) => None,
        Some(x) => Some(x.as_i64()?),
    };
    Some(Toleration {
        key: opt_str("key")?.unwrap_or_default().to_string(),
        operator,
        value: opt_str("value")?.unwrap_or_default().to_string(),
        effect,
        seconds,
    })
}

/// What the engine reads of a Pod's JSON, or `None` (logged) when it has
/// no name, namespace or uid: every write to a pod carries its uid as a
/// precondition, so a pod without one could never be written safely. See
/// the module's documentation for how each odd field is read.
pub fn pod_reading(v: &Value, seen_at: Timestamp, detail: Detail) -> Option<PodSnapshot> {
    let ns = at(v, &["metadata", "namespace"]).and_then(Value::as_str).filter(|n| !n.is_empty());
    let (Some(name), Some(ns)) = (name_of(v), ns) else {
        tracing::warn!(
            kind = "Pod",
            name = ?at(v, &["metadata", "name"]),
            namespace = ?at(v, &["metadata", "namespace"]),
            "ignoring a Pod without a readable name or namespace"
        );
        return None;
    };
    let key = format!("{ns}/{name}");
    let r = Reading { kind: "Pod", name: &key, seen_at };
    let Some(uid) = at(v, &["metadata", "uid"]).and_then(Value::as_str).filter(|u| !u.is_empty()) else {
        r.odd("metadata.uid", "no readable uid; the pod is ignored (it could not be written safely)");
        return None;
    };
    let daemonset = match r.list(v, &["metadata", "ownerReferences"], "metadata.ownerReferences") {
        Err(()) => true,
        Ok(refs) => refs.iter().any(|o| {
            let kind = o.get("kind").and_then(Value::as_str);
            let controller = match o.get("controller") {
                None | Some(Value::Null) => Some(false),
                Some(c) => c.as_bool(),
            };
            match (kind, controller) {
                (Some(k), Some(c)) => k == "DaemonSet" && c,
                _ => {
                    r.odd("metadata.ownerReferences", "an unreadable owner reference; read as a DaemonSet's pod");
                    true
                }
            }
        }),
    };
    let ready = match r.list(v, &["status", "conditions"], "status.conditions") {
        Err(()) => None,
        Ok(cs) => cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")).map(|c| {
            match c.get("status").and_then(Value::as_str) {
                Some("True") => true,
                Some("False") => false,
                other => {
                    r.odd("status.conditions", &format!("Ready has status {other:?}; read as not ready"));
                    false
                }
            }
        }),
    };
    let tolerations = match r.list(v, &["spec", "tolerations"], "spec.tolerations") {
        Err(()) => vec![tolerate_everything()],
        Ok(ts) => ts
            .iter()
            .map(|t| {
                toleration(t).unwrap_or_else(|| {
                    r.odd("spec.tolerations", &format!("unreadable toleration {t}; read as tolerating every taint"));
                    tolerate_everything()
                })
            })
            .collect(),
    };
    let scheduling = match detail {
        Detail::Lifecycle => None,
        Detail::Scheduling => Some(Box::new(r.scheduling(v))),
    };
    Some(PodSnapshot {
        version: resource_version(v),
        node_lost: at(v, &["status", "reason"]).and_then(Value::as_str)
            == Some(nodewarden_model::keys::POD_REASON_NODE_LOST),
        scheduling,
        key: key.clone(),
        uid: uid.to_string(),
        node: r.text(v, &["spec", "nodeName"], "spec.nodeName").filter(|n| !n.is_empty()).map(str::to_string),
        daemonset,
        ready,
        terminating: at(v, &["metadata", "deletionTimestamp"]).is_some(),
        tolerations,
    })
}

/// The observation a node Lease's JSON gives: its name and
/// `spec.renewTime`. `None` for Leases outside `kube-node-lease` or
/// without a name.
pub fn lease_reading(v: &Value, seen_at: Timestamp) -> Option<Observation> {
    if at(v, &["metadata", "namespace"]).and_then(Value::as_str) != Some(NODE_LEASE_NAMESPACE) {
        return None;
    }
    let Some(node) = name_of(v) else {
        tracing::warn!(kind = "Lease", "ignoring a node Lease without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Lease", name: node, seen_at };
    let renew = r.time(v, &["spec", "renewTime"], "spec.renewTime");
    Some(Observation::LeaseUpserted { node: node.to_string(), renew })
}

/// [`node_reading`] of a typed Node (as the writer's requests return it),
/// seen now.
pub fn node_snapshot(node: &Node, detail: Detail) -> Option<NodeSnapshot> {
    node_reading(&serde_json::to_value(node).ok()?, wall_clock_now(), detail)
}

/// [`pod_reading`] of a typed Pod, seen now.
pub fn pod_snapshot(pod: &Pod, detail: Detail) -> Option<PodSnapshot> {
    pod_reading(&serde_json::to_value(pod).ok()?, wall_clock_now(), detail)
}

/// The observation a policy/v1 PodDisruptionBudget's JSON gives: its
/// selector and `status.disruptionsAllowed` ([`Observation::BudgetUpserted`]),
/// or [`Observation::BudgetDeleted`] for a budget without a selector (it
/// covers no pod). `None` when it cannot be named. See the module's
/// documentation for how odd fields are read.
pub fn budget_reading(v: &Value, seen_at: Timestamp) -> Option<Observation> {
    let ns = at(v, &["metadata", "namespace"]).and_then(Value::as_str).filter(|n| !n.is_empty());
    let (Some(name), Some(ns)) = (name_of(v), ns) else {
        tracing::warn!(
            kind = "PodDisruptionBudget",
            "ignoring a PodDisruptionBudget without a readable name or namespace"
        );
        return None;
    };
    let key = format!("{ns}/{name}");
    let r = Reading { kind: "PodDisruptionBudget", name: &key, seen_at };
    let (selector, readable) = match at(v, &["spec", "selector"]) {
        None => return Some(Observation::BudgetDeleted { key }),
        Some(sel) => match label_selector(sel) {
            Ok(s) => (s, true),
            Err(what) => {
                r.odd(
                    "spec.selector",
                    &format!("{what}; read as covering every pod of the namespace and allowing no disruption"),
                );
                (LabelSelector::default(), false)
            }
        },
    };
    let allowed = match at(v, &["status", "disruptionsAllowed"]) {
        None => 0,
        Some(x) => match x.as_i64() {
            Some(n) if n >= 0 => u32::try_from(n).unwrap_or(u32::MAX),
            _ => {
                r.odd("status.disruptionsAllowed", &format!("{x} is not a count; read as 0"));
                0
            }
        },
    };
    let generation = at(v, &["metadata", "generation"]).and_then(Value::as_i64);
    let observed = at(v, &["status", "observedGeneration"]).and_then(Value::as_i64);
    // The disruption controller has not looked at the latest spec yet: the
    // Eviction API refuses every eviction under it until it has.
    let current = match (generation, observed) {
        (Some(g), Some(o)) => o >= g,
        (Some(_), None) => false,
        (None, _) => true,
    };
    let disruptions_allowed = if readable && current { allowed } else { 0 };
    Some(Observation::BudgetUpserted(BudgetSnapshot { key, selector, disruptions_allowed }))
}

/// A `metav1.LabelSelector`, or why it cannot be read. Label selectors
/// take `In`, `NotIn`, `Exists` and `DoesNotExist` only.
fn label_selector(v: &Value) -> Result<LabelSelector, String> {
    let Value::Object(m) = v else { return Err(format!("expected an object, found {}", json_type(v))) };
    let mut sel = LabelSelector::default();
    match m.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            for (k, val) in labels {
                let Some(s) = val.as_str() else { return Err(format!("matchLabels {k:?} is a {}", json_type(val))) };
                sel.match_labels.insert(k.clone(), s.to_string());
            }
        }
        Some(x) => return Err(format!("matchLabels is a {}", json_type(x))),
    }
    sel.match_expressions = requirements(m.get("matchExpressions"), "matchExpressions", false)?;
    Ok(sel)
}

/// A list of requirements (`matchExpressions`, `matchFields`), or why it
/// cannot be read. `Gt` and `Lt` only where node affinity allows them.
fn requirements(v: Option<&Value>, field: &str, node_affinity: bool) -> Result<Vec<Requirement>, String> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(x) => return Err(format!("{field} is a {}", json_type(x))),
    };
    list.iter()
        .map(|e| {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{field}: an entry without a readable key"))?;
            let operator = match e.get("operator").and_then(Value::as_str) {
                Some("In") => SelectorOperator::In,
                Some("NotIn") => SelectorOperator::NotIn,
                Some("Exists") => SelectorOperator::Exists,
                Some("DoesNotExist") => SelectorOperator::DoesNotExist,
                Some("Gt") if node_affinity => SelectorOperator::Gt,
                Some("Lt") if node_affinity => SelectorOperator::Lt,
                other => return Err(format!("{field}: {key}: unknown operator {other:?}")),
            };
            let values = match e.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(vs)) => vs
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("{field}: {key}: a value that is not a string"))?,
                Some(x) => return Err(format!("{field}: {key}: values is a {}", json_type(x))),
            };
            Ok(Requirement { key: key.to_string(), operator, values })
        })
        .collect()
}

/// A quantity field's text: quantities are strings, but a bare JSON
/// number is one too (the API server accepts both).
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What one resource amount is: read, absent, or unreadable.
enum Amount {
    Read(u64),
    Absent,
    Unreadable,
}

/// Resources as the scheduler adds them up: `None` for a dimension that
/// could not be read, which then fills whatever it is added to.
#[derive(Clone, Copy, Default)]
struct Tally {
    cpu: Option<u64>,
    memory: Option<u64>,
}

impl Tally {
    const ZERO: Tally = Tally { cpu: Some(0), memory: Some(0) };

    fn add(self, o: Tally) -> Tally {
        let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        Tally { cpu: sum(self.cpu, o.cpu), memory: sum(self.memory, o.memory) }
    }

    fn max(self, o: Tally) -> Tally {
        let max = |a: Option<u64>, b: Option<u64>| Some(a?.max(b?));
        Tally { cpu: max(self.cpu, o.cpu), memory: max(self.memory, o.memory) }
    }
}

impl Reading<'_> {
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

    /// One amount of a resource list (`requests`, `overhead`, `allocatable`).
    fn amount(&self, list: &Value, resource: &str, field: &str) -> Amount {
        let Some(x) = list.get(resource).filter(|x| !x.is_null()) else { return Amount::Absent };
        let parsed = match quantity_text(x) {
            None => Err(format!("a {}, not a quantity", json_type(x))),
            Some(t) => {
                let p = if resource == "cpu" { parse_cpu_millis(&t) } else { parse_bytes(&t) };
                p.map_err(|e| e.to_string())
            }
        };
        match parsed {
            Ok(n) => Amount::Read(n),
            Err(e) => {
                self.odd(&format!("{field}.{resource}"), &format!("malformed quantity: {e}"));
                Amount::Unreadable
            }
        }
    }

    /// The cpu and memory of a resource list at `path` (absent: zero).
    fn tally(&self, v: &Value, path: &[&str], field: &str) -> Tally {
        let Some(list) = at(v, path) else { return Tally::ZERO };
        if !list.is_object() {
            self.odd(field, &format!("expected an object, found {}; read as unreadable", json_type(list)));
            return Tally::default();
        }
        let read = |res| match self.amount(list, res, field) {
            Amount::Read(n) => Some(n),
            Amount::Absent => Some(0),
            Amount::Unreadable => None,
        };
        Tally { cpu: read("cpu"), memory: read("memory") }
    }

    /// One container's requests: `resources.requests`, where a resource
    /// with a limit and no request requests its limit (the API server's
    /// defaulting, for objects that did not go through it).
    fn container_requests(&self, c: &Value, field: &str) -> Tally {
        let requests = self.tally(c, &["resources", "requests"], &format!("{field}.resources.requests"));
        let limits = self.tally(c, &["resources", "limits"], &format!("{field}.resources.limits"));
        let has = |res: &str| at(c, &["resources", "requests", res]).is_some();
        // An unreadable request stays unreadable, whatever the limit says.
        let pick = |res: &str, request: Option<u64>, limit: Option<u64>| match request {
            Some(_) if !has(res) => limit,
            r => r,
        };
        Tally { cpu: pick("cpu", requests.cpu, limits.cpu), memory: pick("memory", requests.memory, limits.memory) }
    }

    /// The pod's effective requests, as kube-scheduler computes them: the
    /// containers summed (restartable init containers, sidecars, count with
    /// them), against the largest init container (plus the sidecars started
    /// before it), whichever is larger, plus `spec.overhead`.
    fn pod_requests(&self, v: &Value) -> Tally {
        let named = |c: &Value, i: usize| c.get("name").and_then(Value::as_str).map_or(i.to_string(), str::to_string);
        let mut sum = Tally::ZERO;
        match self.list(v, &["spec", "containers"], "spec.containers") {
            Err(()) => sum = Tally::default(),
            Ok(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    sum = sum.add(self.container_requests(c, &format!("spec.containers[{}]", named(c, i))));
                }
            }
        }
        let mut init_max = Tally::ZERO;
        let mut sidecars = Tally::ZERO;
        match self.list(v, &["spec", "initContainers"], "spec.initContainers") {
            Err(()) => init_max = Tally::default(),
            Ok(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    let req = self.container_requests(c, &format!("spec.initContainers[{}]", named(c, i)));
                    if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                        sum = sum.add(req);
                        sidecars = sidecars.add(req);
                        init_max = init_max.max(sidecars);
                    } else {
                        init_max = init_max.max(req.add(sidecars));
                    }
                }
            }
        }
        sum.max(init_max).add(self.tally(v, &["spec", "overhead"], "spec.overhead"))
    }

    /// A `nodeSelectorTerms` list, or why it cannot be read.
    fn node_affinity(&self, v: &Value) -> Result<Option<NodeAffinity>, String> {
        let path = ["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"];
        let Some(required) = at(v, &path) else { return Ok(None) };
        let terms = match at(required, &["nodeSelectorTerms"]) {
            None => Vec::new(),
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| {
                    Ok(NodeSelectorTerm {
                        match_expressions: requirements(t.get("matchExpressions"), "matchExpressions", true)?,
                        match_fields: requirements(t.get("matchFields"), "matchFields", false)?,
                    })
                })
                .collect::<Result<_, String>>()?,
            Some(x) => return Err(format!("nodeSelectorTerms is a {}", json_type(x))),
        };
        Ok(Some(NodeAffinity { node_selector_terms: terms }))
    }

    /// Node selector and required node affinity; one that cannot be read
    /// matches no node.
    fn placement(&self, v: &Value) -> Placement {
        let nowhere = || Placement { node_selector: BTreeMap::new(), affinity: Some(NodeAffinity::default()) };
        let mut node_selector = BTreeMap::new();
        match at(v, &["spec", "nodeSelector"]) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, val) in m {
                    let Some(s) = val.as_str() else {
                        self.odd(
                            "spec.nodeSelector",
                            &format!("{k:?} is a {}; the pod matches no node", json_type(val)),
                        );
                        return nowhere();
                    };
                    node_selector.insert(k.clone(), s.to_string());
                }
            }
            Some(x) => {
                self.odd(
                    "spec.nodeSelector",
                    &format!("expected an object, found {}; the pod matches no node", json_type(x)),
                );
                return nowhere();
            }
        }
        match self.node_affinity(v) {
            Ok(affinity) => Placement { node_selector, affinity },
            Err(what) => {
                self.odd("spec.affinity.nodeAffinity", &format!("{what}; the pod matches no node"));
                nowhere()
            }
        }
    }

    /// What the rescheduler reads of a pod (see the module's documentation).
    fn scheduling(&self, v: &Value) -> PodScheduling {
        let annotations = at(v, &["metadata", "annotations"]);
        // Annotations that cannot be read might hide the mirror marker: such
        // a pod is never evicted (and, unmarked, is no critical addon).
        let garbled = annotations.is_some_and(|a| !a.is_object());
        if garbled {
            self.odd("metadata.annotations", "not an object; the pod is never evicted for an addon");
        }
        let annotations = annotations.and_then(Value::as_object);
        let annotated = |a: &str| annotations.is_some_and(|m| m.contains_key(a));
        let finished = matches!(at(v, &["status", "phase"]).and_then(Value::as_str), Some("Succeeded" | "Failed"));
        let tally = self.pod_requests(v);
        let unreadable = tally.cpu.is_none() || tally.memory.is_none();
        let requests = if finished {
            Resources::ZERO
        } else {
            Resources::pod(tally.cpu.unwrap_or(u64::MAX), tally.memory.unwrap_or(u64::MAX))
        };
        if unreadable && !finished {
            self.odd(
                "spec.containers[].resources",
                "requests cannot be read; the pod fills its node in that resource and is never evicted for an addon",
            );
        }
        // Unreadable owner references were logged by the lifecycle reading
        // (which spares the pod as a DaemonSet's).
        let controller_kind = at(v, &["metadata", "ownerReferences"]).and_then(Value::as_array).and_then(|refs| {
            refs.iter()
                .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
                .and_then(|o| o.get("kind").and_then(Value::as_str))
                .map(str::to_string)
        });
        let termination_grace = match at(v, &["spec", "terminationGracePeriodSeconds"]) {
            None => PodScheduling::DEFAULT_TERMINATION_GRACE,
            Some(x) => match x.as_i64() {
                Some(n) if n >= 0 => Span::from_secs(n),
                _ => {
                    self.odd(
                        "spec.terminationGracePeriodSeconds",
                        &format!("{x} is not a number of seconds; read as 30"),
                    );
                    PodScheduling::DEFAULT_TERMINATION_GRACE
                }
            },
        };
        let conditions = at(v, &["status", "conditions"]).and_then(Value::as_array);
        let unschedulable_since = conditions.and_then(|cs| {
            let c = cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))?;
            let unschedulable = c.get("status").and_then(Value::as_str) == Some("False")
                && c.get("reason").and_then(Value::as_str) == Some("Unschedulable");
            if !unschedulable {
                return None;
            }
            Some(
                self.time(c, &["lastTransitionTime"], "status.conditions[PodScheduled].lastTransitionTime")
                    .unwrap_or(self.seen_at),
            )
        });
        PodScheduling {
            requests,
            priority_class: self
                .text(v, &["spec", "priorityClassName"], "spec.priorityClassName")
                .filter(|p| !p.is_empty())
                .map(str::to_string),
            critical_annotation: annotated(CRITICAL_POD_ANNOTATION),
            mirror: annotated(MIRROR_POD_ANNOTATION) || garbled || (unreadable && !finished),
            controller_kind,
            termination_grace,
            labels: self.labels(v),
            placement: self.placement(v),
            unschedulable_since,
        }
    }

    /// `status.allocatable` (cpu, memory, pods); `None` when absent or
    /// unreadable, a missing resource reads as zero.
    fn allocatable(&self, v: &Value) -> Option<Resources> {
        let list = at(v, &["status", "allocatable"])?;
        if !list.is_object() {
            self.odd("status.allocatable", &format!("expected an object, found {}; read as absent", json_type(list)));
            return None;
        }
        let mut out = Resources::ZERO;
        for (res, slot) in [("cpu", &mut out.cpu_millis), ("memory", &mut out.memory_bytes), ("pods", &mut out.pods)] {
            match self.amount(list, res, "status.allocatable") {
                Amount::Read(n) => *slot = n,
                Amount::Absent => {}
                Amount::Unreadable => {
                    self.odd("status.allocatable", "read as absent: no addon is placed on this node");
                    return None;
                }
            }
        }
        Some(out)
    }
}

/// [`lease_reading`] of a typed Lease, seen now.
pub fn lease_observation(lease: &Lease) -> Option<Observation> {
    lease_reading(&serde_json::to_value(lease).ok()?, wall_clock_now())
}

#[cfg(test)]
mod checked {
    //! The readings this module's tests call: each is checked against the
    //! reading of the object as a watch decodes it, so no test passes on a
    //! field the watches would not have decoded.

    use super::{Detail, Keep, NodeSnapshot, Observation, PodSnapshot, Timestamp, Value, keep};

    /// `v` as a watch decodes it: pruned to `keep`.
    fn decoded(v: &Value, keep: &Keep) -> Value {
        crate::prune::from_str(&v.to_string(), keep).expect("the test's object is JSON")
    }

    pub(super) fn node_reading(v: &Value, at: Timestamp, detail: Detail) -> Option<NodeSnapshot> {
        let keep = match detail {
            Detail::Lifecycle => &keep::NODE,
            Detail::Scheduling => &keep::SCHEDULED_NODE,
        };
        let full = super::node_reading(v, at, detail);
        assert_eq!(super::node_reading(&decoded(v, keep), at, detail), full, "pruning changed the reading of {v}");
        full
    }

    pub(super) fn pod_reading(v: &Value, at: Timestamp, detail: Detail) -> Option<PodSnapshot> {
        let keep = match detail {
            Detail::Lifecycle => &keep::POD,
            Detail::Scheduling => &keep::SCHEDULED_POD,
        };
        let full = super::pod_reading(v, at, detail);
        assert_eq!(super::pod_reading(&decoded(v, keep), at, detail), full, "pruning changed the reading of {v}");
        if detail == Detail::Lifecycle
            && let Some((_, typed)) = crate::typed::pod(&v.to_string())
        {
            assert_eq!(Some(typed), full, "the typed reading differs from the lenient one for {v}");
        }
        full
    }

    pub(super) fn lease_reading(v: &Value, at: Timestamp) -> Option<Observation> {
        let full = super::lease_reading(v, at);
        assert_eq!(super::lease_reading(&decoded(v, &keep::LEASE), at), full, "pruning changed the reading of {v}");
        if let Some((_, typed)) = crate::typed::lease(&v.to_string()) {
            assert_eq!(typed, full, "the typed reading differs from the lenient one for {v}");
        }
        full
    }

    pub(super) fn budget_reading(v: &Value, at: Timestamp) -> Option<Observation> {
        let full = super::budget_reading(v, at);
        assert_eq!(super::budget_reading(&decoded(v, &keep::BUDGET), at), full, "pruning changed the reading of {v}");
        full
    }
}

#[cfg(test)]
mod tests {
    //! One test per kind of malformed object: each shows the object is
    //! read (or ignored) without a panic, and read the conservative way.

    use super::checked::{lease_reading, node_reading, pod_reading};
    use super::*;

    use serde_json::json;

    /// When the objects of these tests are seen: 2025-01-01T00:00:00Z.
    fn seen() -> Timestamp {
        Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
    }

    fn node(v: Value) -> NodeSnapshot {
        node_reading(&v, seen(), Detail::Lifecycle).expect("a named node is read")
    }

    fn pod(v: Value) -> PodSnapshot {
        pod_reading(&v, seen(), Detail::Lifecycle).expect("an identified pod is read")
    }

    fn pod_with_tolerations(tolerations: Value) -> PodSnapshot {
        pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                   "spec": {"nodeName": "n1", "tolerations": tolerations}}))
    }

    #[test]
    fn a_well_formed_node_reads_as_written() {
        let s = node(json!({
            "metadata": {"name": "n1", "creationTimestamp": "2024-12-31T00:00:00Z",
                         "labels": {"topology.kubernetes.io/zone": "z1"}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute", "timeAdded": "2024-12-31T00:00:05Z"}],
                     "unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": "2024-12-31T00:00:10Z", "lastTransitionTime": "2024-12-31T00:00:01Z"}]},
        }));
        assert_eq!(s.created, seen() - Span::from_secs(86_400));
        assert_eq!(s.labels.get("topology.kubernetes.io/zone").map(String::as_str), Some("z1"));
        assert_eq!(s.conditions[0].last_heartbeat, seen() - Span::from_secs(86_390));
        assert_eq!(s.conditions[0].reason, "KubeletReady");
        assert_eq!(s.taints[0].time_added, Some(seen() - Span::from_secs(86_395)));
        assert!(s.unschedulable);
    }

    #[test]
    fn missing_conditions_read_as_none() {
        let s = node(json!({"metadata": {"name": "n1"}}));
        assert!(s.conditions.is_empty() && s.taints.is_empty() && !s.unschedulable);
        assert_eq!(s.created, seen(), "no creationTimestamp: the startup grace starts when the node is seen");
        let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": null}}));
        assert!(s.conditions.is_empty());
    }

    #[test]
    fn duplicated_conditions_read_the_first() {
        let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Ready", "status": "Unknown"},
            {"type": "DiskPressure", "status": "Perhaps"},
            {"type": "DiskPressure", "status": "True"},
        ]}}));
        // The first Ready is read; the first DiskPressure is unreadable, so
        // DiskPressure reads as absent (its duplicate does not stand in).
        assert_eq!(s.conditions.len(), 1);
        assert_eq!((&s.conditions[0].kind, s.conditions[0].status), (&ConditionType::Ready, ConditionStatus::True));
    }

    #[test]
    fn unknown_condition_statuses_read_as_absent() {
        let s = node(json!({"metadata": {"name": "n1"}, "status": {"conditions": [
            {"type": "Ready", "status": "Maybe"},
            {"type": "MemoryPressure", "status": 3},
            {"type": "PIDPressure"},
            {"status": "True"},
            "Ready",
            {"type": "NetworkUnavailable", "status": "False"},
        ]}}));
        assert_eq!(s.conditions.len(), 1, "{:?}", s.conditions);
        assert_eq!(s.conditions[0].kind, ConditionType::NetworkUnavailable);
    }

    #[test]
    fn absurd_and_unparsable_timestamps_read_as_the_time_seen() {
        let bad = ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2400-01-01T00:00:00Z", "yesterday", ""];
        for t in bad {
            let v = json!({
                "metadata": {"name": "n1", "creationTimestamp": t},
                "spec": {"taints": [{"key": "k", "effect": "NoExecute", "timeAdded": t}]},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": t, "lastTransitionTime": 12}]},
            });
            let s = node(v);
            assert_eq!(s.created, seen(), "{t}");
            assert_eq!(s.conditions[0].last_heartbeat, seen(), "{t}");
            assert_eq!(s.conditions[0].last_transition, seen(), "{t}");
            assert_eq!(s.taints[0].time_added, Some(seen()), "{t}");
        }
        // The typed decoding refuses what the lenient one reads.
        let typed =
            serde_json::from_value::<Node>(json!({"metadata": {"name": "n", "creationTimestamp": "yesterday"}}));
        assert!(typed.is_err());
        // A renewal seen later reads later, so it counts as one.
        let lease = |renew: &str, at: Timestamp| {
            lease_reading(
                &json!({"metadata": {"name": "n1", "namespace": NODE_LEASE_NAMESPACE}, "spec": {"renewTime": renew}}),
                at,
            )
        };
        let later = seen() + Span::from_secs(10);
        assert!(
            matches!(lease("9999-12-31T23:59:59.000000Z", later), Some(Observation::LeaseUpserted { renew: Some(r), .. }) if r == later)
        );
        assert!(
            matches!(lease("soon", seen()), Some(Observation::LeaseUpserted { renew: Some(r), .. }) if r == seen())
        );
    }

    #[test]
    fn huge_and_duplicated_taint_lists_are_read_whole_once() {
        let mut taints: Vec<_> = (0..5000).map(|i| json!({"key": format!("k{i}"), "effect": "NoSchedule"})).collect();
        taints.push(json!({"key": "k1", "effect": "NoSchedule"}));
        taints.push(json!({"key": "x", "effect": "Sometimes"}));
        taints.push(json!({"key": 7, "effect": "NoExecute"}));
        taints.push(json!("node.kubernetes.io/unreachable:NoExecute"));
        taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}));
        let s = node(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}));
        assert_eq!(s.taints.len(), 5001);
        assert!(s.taints.iter().any(|t| t.is("node.kubernetes.io/unreachable", TaintEffect::NoExecute)));
    }

    #[test]
    fn missing_and_malformed_zone_labels_leave_the_node_unlabelled() {
        let s = node(json!({"metadata": {"name": "n1"}}));
        assert!(s.labels.is_empty());
        let s = node(json!({"metadata": {"name": "n1", "labels": {
            "topology.kubernetes.io/zone": 5, "kubernetes.io/os": "linux"}}}));
        assert_eq!(s.labels.len(), 1);
        assert!(!s.labels.contains_key("topology.kubernetes.io/zone"));
        let s = node(json!({"metadata": {"name": "n1", "labels": ["topology.kubernetes.io/zone=z1"]}}));
        assert!(s.labels.is_empty());
    }

    #[test]
    fn fields_of_the_wrong_type_read_as_absent() {
        let s = node(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": "node.kubernetes.io/unreachable:NoExecute", "unschedulable": "yes"},
            "status": {"conditions": {"type": "Ready", "status": "False"}},
        }));
        assert!(s.taints.is_empty() && s.conditions.is_empty() && !s.unschedulable);
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                           "spec": {"nodeName": 5}, "status": {"conditions": "Ready"}}));
        assert_eq!((p.node, p.ready), (None, None));
    }

    #[test]
    fn objects_that_cannot_be_named_are_ignored() {
        assert!(node_reading(&json!({"metadata": {}}), seen(), Detail::Lifecycle).is_none());
        assert!(node_reading(&json!({"metadata": {"name": 3}}), seen(), Detail::Lifecycle).is_none());
        assert!(node_reading(&json!([1, 2]), seen(), Detail::Lifecycle).is_none());
        assert!(
            pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns"}}), seen(), Detail::Lifecycle).is_none()
        );
        assert!(pod_reading(&json!({"metadata": {"name": "p", "uid": "u"}}), seen(), Detail::Lifecycle).is_none());
        assert!(
            pod_reading(&json!({"metadata": {"name": "p", "namespace": "ns", "uid": 1}}), seen(), Detail::Lifecycle)
                .is_none()
        );
        assert!(lease_reading(&json!({"metadata": {"namespace": NODE_LEASE_NAMESPACE}}), seen()).is_none());
        assert!(
            lease_reading(&json!({"metadata": {"name": "n1", "namespace": "kube-system"}}), seen()).is_none(),
            "not a node Lease"
        );
    }

    #[test]
    fn unreadable_tolerations_tolerate_everything_in_their_place() {
        let all = tolerate_everything();
        let p = pod_with_tolerations(json!([
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "k", "operator": "Sideways"},
            {"key": "k", "effect": "Whenever"},
            {"key": "k", "tolerationSeconds": "300"},
            {"key": "k", "tolerationSeconds": 1.5},
            {"key": ["k"]},
            "node.kubernetes.io/unreachable",
            {"key": "k", "value": "v", "tolerationSeconds": -5},
        ]));
        assert_eq!(p.tolerations[0].seconds, Some(300));
        assert_eq!(&p.tolerations[1..7], vec![all.clone(); 6].as_slice());
        assert_eq!(p.tolerations[7].seconds, Some(-5), "a negative time is valid: evict at once");
        let p = pod_with_tolerations(json!("all of them"));
        assert_eq!(p.tolerations, vec![all]);
    }

    #[test]
    fn unreadable_owner_references_spare_the_pod_as_a_daemonsets() {
        let with = |refs: Value| {
            pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": refs}}))
        };
        assert!(with(json!([{"kind": "DaemonSet", "name": "d", "controller": true}])).daemonset);
        assert!(!with(json!([{"kind": "ReplicaSet", "name": "r", "controller": true}])).daemonset);
        assert!(!with(json!([{"kind": "DaemonSet", "name": "d"}])).daemonset);
        assert!(with(json!([{"kind": "DaemonSet", "controller": "true"}])).daemonset);
        assert!(with(json!({"kind": "DaemonSet"})).daemonset);
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "deletionTimestamp": "soon"}}));
        assert!(p.terminating, "any deletionTimestamp means terminating");
    }

    #[test]
    fn a_list_page_with_a_malformed_object_decodes_whole() {
        let page = json!({
            "apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"},
            "items": [
                {"metadata": {"name": "good", "resourceVersion": "5"}},
                {"metadata": {"name": "bad", "resourceVersion": "6", "creationTimestamp": "9999-12-31T23:59:59Z"},
                 "spec": {"taints": 12}},
                17,
            ],
        });
        assert!(serde_json::from_value::<kube::core::ObjectList<Node>>(page.clone()).is_err());
        let list: kube::core::ObjectList<crate::Trimmed<Node>> = serde_json::from_value(page).expect("lenient page");
        let names: Vec<_> = list.items.iter().map(|n| n.metadata.name.clone()).collect();
        assert_eq!(names, [Some("good".into()), Some("bad".into()), None]);
        assert_eq!(list.items[1].metadata.resource_version.as_deref(), Some("6"));
        assert!(matches!(&list.items[1].reading, Some(Observation::NodeUpserted(n)) if n.name == "bad"));
        assert!(list.items[2].reading.is_none());
    }

    /// Answers every write as done, with the node a taint patch leaves (so
    /// the taint manager observes the taint), and records the pods deleted.
    #[derive(Default)]
    struct Accepting {
        deleted: Vec<String>,
        nodes: std::collections::BTreeMap<String, NodeSnapshot>,
    }

    impl nodewarden_controller::ClusterApi for Accepting {
        fn apply(&mut self, _now: Timestamp, action: &nodewarden_engine::Action) -> nodewarden_controller::Applied {
            let done = nodewarden_engine::WriteOutcome::Done;
            let mut observations = vec![Observation::WriteFinished { id: action.id, outcome: done.clone() }];
            match &action.kind {
                nodewarden_engine::ActionKind::DeletePod { pod, .. } => self.deleted.push(pod.clone()),
                nodewarden_engine::ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                    if let Some(n) = self.nodes.get_mut(node) {
                        n.taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
                        n.taints.extend(add.iter().cloned());
                        observations.push(Observation::NodeUpserted(n.clone()));
                    }
                }
                _ => {}
            }
            nodewarden_controller::Applied { observations, outcome: action.kind.slot().map(|_| done), violation: None }
        }
    }

    #[test]
    fn malformed_pods_on_a_tainted_node_are_not_evicted() {
        let start = seen();
        let mut c = nodewarden_controller::Controller::new(nodewarden_model::ControllerConfig::default(), start)
            .expect("default configuration");
        let ready = |name: &str, status: &str| {
            json!({"metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z",
                                "labels": {"topology.kubernetes.io/zone": "z"}},
                   "spec": {"taints": if status == "True" { json!([]) } else {
                       json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                               "timeAdded": "2024-12-31T23:59:00Z"}]) }},
                   "status": {"conditions": [{"type": "Ready", "status": status,
                       "lastHeartbeatTime": "2024-12-31T23:59:59Z"}]}})
        };
        let mut api = Accepting::default();
        for (name, status) in [("dead", "Unknown"), ("a", "True"), ("b", "True"), ("c", "True")] {
            let n = node(ready(name, status));
            api.nodes.insert(n.name.clone(), n.clone());
            c.observe(start, Observation::NodeUpserted(n));
        }
        let on_dead = |name: &str, tolerations: Value| {
            json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
                   "spec": {"nodeName": "dead", "tolerations": tolerations}})
        };
        for p in [
            on_dead("plain", json!([])),
            on_dead("garbled", json!("all")),
            on_dead(
                "sideways",
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Sideways",
                                        "effect": "NoExecute", "tolerationSeconds": 0}]),
            ),
            on_dead(
                "stringly",
                json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                        "effect": "NoExecute", "tolerationSeconds": "0"}]),
            ),
        ] {
            c.observe(start, Observation::PodUpserted(pod(p)));
        }
        for i in 0..120 {
            let now = start + Span::from_secs(5 * i);
            for n in ["a", "b", "c"] {
                c.observe(now, Observation::LeaseUpserted { node: n.into(), renew: Some(now) });
            }
            let _ = c.step(now, &mut api, &mut |_| {});
        }
        // The pod without tolerations shows the taint does evict; the
        // malformed ones stay.
        assert_eq!(api.deleted, ["ns/plain"]);
    }
}

#[cfg(test)]
mod scheduling_tests {
    //! The rescheduler's readings ([`Detail::Scheduling`]): each field as
    //! written, and each malformed field read the safe way.

    use super::checked::{budget_reading, node_reading, pod_reading};
    use super::*;
    use nodewarden_model::scheduling::SelectorOperator::*;
    use serde_json::json;

    fn seen() -> Timestamp {
        Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
    }

    fn sched(v: Value) -> PodScheduling {
        *pod_reading(&v, seen(), Detail::Scheduling).expect("read").scheduling.expect("scheduling read")
    }

    fn pod_spec(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "kube-system", "uid": "u"}, "spec": spec})
    }

    fn container(requests: Value) -> Value {
        json!({"name": "c", "resources": {"requests": requests}})
    }

    const MI: u64 = 1 << 20;

    #[test]
    fn lifecycle_reads_no_scheduling_facts() {
        let v = pod_spec(json!({"containers": [container(json!({"cpu": "1"}))]}));
        assert!(pod_reading(&v, seen(), Detail::Lifecycle).unwrap().scheduling.is_none());
        let n =
            json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
        assert!(node_reading(&n, seen(), Detail::Lifecycle).unwrap().allocatable.is_none());
    }

    #[test]
    fn requests_are_summed_against_init_containers_plus_overhead() {
        let s = sched(pod_spec(json!({
            "containers": [container(json!({"cpu": "100m", "memory": "64Mi"})),
                           container(json!({"cpu": "0.25", "memory": "64Mi"}))],
            "initContainers": [container(json!({"cpu": "1", "memory": "16Mi"}))],
            "overhead": {"cpu": "10m", "memory": "1Mi"},
        })));
        // cpu: max(350m, 1000m) + 10m; memory: max(128Mi, 16Mi) + 1Mi.
        assert_eq!(s.requests, Resources::pod(1010, 129 * MI));
        let none = sched(pod_spec(json!({"containers": [{"name": "c"}]})));
        assert_eq!(none.requests, Resources::pod(0, 0), "no requests: only a pod slot");
    }

    #[test]
    fn sidecars_count_with_the_containers_and_before_later_init_containers() {
        // A restartable init container (sidecar) runs beside the app and
        // beside every init container after it, as kube-scheduler counts.
        let s = sched(pod_spec(json!({
            "containers": [container(json!({"cpu": "100m"}))],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                container(json!({"cpu": "500m"})),
            ],
        })));
        // steady: 100m + 200m = 300m; init: 500m + 200m sidecar = 700m.
        assert_eq!(s.requests.cpu_millis, 700);
    }

    #[test]
    fn a_limit_without_a_request_requests_the_limit() {
        let s = sched(pod_spec(json!({"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"memory": "512Mi"}}}]})));
        assert_eq!(s.requests, Resources::pod(2000, 512 * MI));
    }

    #[test]
    fn a_malformed_quantity_fills_the_node_and_is_never_evicted() {
        for bad in [json!("lots"), json!("-1"), json!({"m": 100}), json!("1.2.3")] {
            let s = sched(pod_spec(json!({"containers": [container(json!({"cpu": bad, "memory": "1Gi"}))]})));
            assert_eq!(s.requests.cpu_millis, u64::MAX, "{bad}");
            assert_eq!(s.requests.memory_bytes, 1 << 30, "{bad}: the readable dimension is kept");
            assert!(s.mirror, "{bad}: read as unevictable");
        }
        // Wrong types further up.
        let s = sched(pod_spec(json!({"containers": "c"})));
        assert_eq!((s.requests.cpu_millis, s.requests.memory_bytes, s.mirror), (u64::MAX, u64::MAX, true));
        let s = sched(pod_spec(json!({"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]})));
        assert!(s.mirror && s.requests.cpu_millis == u64::MAX);
        let s = sched(pod_spec(json!({"containers": [], "initContainers": 3})));
        assert!(s.mirror);
        let s = sched(pod_spec(json!({"containers": [], "overhead": {"memory": "x"}})));
        assert_eq!(s.requests.memory_bytes, u64::MAX);
        // A bare number is a quantity.
        let s = sched(pod_spec(json!({"containers": [container(json!({"cpu": 2, "memory": 1024}))]})));
        assert_eq!((s.requests, s.mirror), (Resources::pod(2000, 1024), false));
    }

    #[test]
    fn a_finished_pod_requests_nothing() {
        let mut v = pod_spec(json!({"containers": [container(json!({"cpu": "nonsense"}))]}));
        v["status"] = json!({"phase": "Succeeded"});
        let s = sched(v);
        assert_eq!((s.requests, s.mirror), (Resources::ZERO, false));
    }

    #[test]
    fn critical_markers_owner_grace_and_labels() {
        let s = sched(json!({
            "metadata": {"name": "dns", "namespace": "kube-system", "uid": "u",
                "labels": {"k8s-app": "kube-dns", "bad": 1},
                "annotations": {CRITICAL_POD_ANNOTATION: "", MIRROR_POD_ANNOTATION: "abc"},
                "ownerReferences": [{"kind": "Deployment", "name": "x"},
                                    {"kind": "ReplicaSet", "name": "dns-1", "controller": true}]},
            "spec": {"priorityClassName": "system-cluster-critical", "terminationGracePeriodSeconds": 5},
        }));
        assert!(s.critical_annotation && s.mirror);
        assert_eq!(s.priority_class.as_deref(), Some("system-cluster-critical"));
        assert_eq!(s.controller_kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(s.termination_grace, Span::from_secs(5));
        assert_eq!(s.labels.len(), 1, "a label of the wrong type is skipped");

        let bare = sched(pod_spec(json!({"priorityClassName": ""})));
        assert!(!bare.critical_annotation && !bare.mirror && bare.priority_class.is_none());
        assert_eq!(bare.controller_kind, None, "no controller owner: a bare pod");
        assert_eq!(bare.termination_grace, PodScheduling::DEFAULT_TERMINATION_GRACE);
        for bad in [json!(-1), json!("10"), json!(2.5)] {
            let s = sched(pod_spec(json!({"terminationGracePeriodSeconds": bad})));
            assert_eq!(s.termination_grace, Span::from_secs(30), "{bad}");
        }
        let s = sched(pod_spec(json!({"priorityClassName": 7})));
        assert_eq!(s.priority_class, None);
        let garbled = sched(json!({"metadata": {"name": "p", "namespace": "kube-system", "uid": "u",
                                                "annotations": ["kubernetes.io/config.mirror"]}}));
        assert!(garbled.mirror && !garbled.critical_annotation, "unreadable annotations: never evicted");
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let s = sched(pod_spec(json!({
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                      {"key": "gen", "operator": "Gt", "values": ["3"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
            ]}, "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
        })));
        let p = &s.placement;
        assert_eq!(p.node_selector.get("kubernetes.io/os").map(String::as_str), Some("linux"));
        let terms = &p.affinity.as_ref().expect("affinity read").node_selector_terms;
        assert_eq!(terms.len(), 2);
        assert_eq!(terms[0].match_expressions[1].operator, Gt);
        assert_eq!(terms[1].match_fields[0].values, ["n9"]);
        let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(p.allows("n1", &labels(&[("kubernetes.io/os", "linux"), ("zone", "a"), ("gen", "4")])));
        assert!(p.allows("n9", &labels(&[("kubernetes.io/os", "linux")])));
        assert!(!p.allows("n1", &labels(&[("kubernetes.io/os", "linux"), ("zone", "c"), ("gen", "4")])));

        let free = sched(pod_spec(json!({})));
        assert_eq!(free.placement, Placement::default(), "no selector, no affinity: any node");
    }

    #[test]
    fn unreadable_placement_matches_no_node() {
        let anywhere: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
        for spec in [
            json!({"nodeSelector": ["zone=a"]}),
            json!({"nodeSelector": {"zone": 1}}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]}}}}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [1]}]}]}}}}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "Gt", "values": ["1"]}]}]}}}}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": {"matchExpressions": []}}}}}),
        ] {
            let s = sched(pod_spec(spec.clone()));
            assert!(!s.placement.allows("n1", &anywhere), "{spec}");
        }
    }

    #[test]
    fn unschedulable_since_comes_from_the_pod_scheduled_condition() {
        let with = |cond: Value| {
            let mut v = pod_spec(json!({}));
            v["status"] = json!({"conditions": [{"type": "Ready", "status": "False"}, cond]});
            sched(v).unschedulable_since
        };
        let t = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "lastTransitionTime": "2024-12-31T23:59:50Z"}));
        assert_eq!(t, Some(seen() - Span::from_secs(10)));
        assert_eq!(with(json!({"type": "PodScheduled", "status": "True"})), None);
        assert_eq!(with(json!({"type": "PodScheduled", "status": "False", "reason": "SchedulerError"})), None);
        let odd = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "lastTransitionTime": "last tuesday"}));
        assert_eq!(odd, Some(seen()), "an unreadable time: marked when seen");
        let absent = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}));
        assert_eq!(absent, Some(seen()));
        let mut v = pod_spec(json!({}));
        v["status"] = json!({"conditions": "PodScheduled"});
        assert_eq!(sched(v).unschedulable_since, None);
    }

    #[test]
    fn allocatable_is_read_and_an_unreadable_one_is_absent() {
        let node = |alloc: Value| {
            node_reading(
                &json!({"metadata": {"name": "n"}, "status": {"allocatable": alloc}}),
                seen(),
                Detail::Scheduling,
            )
            .unwrap()
            .allocatable
        };
        let a = node(json!({"cpu": "3920m", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}));
        assert_eq!(a, Some(Resources { cpu_millis: 3920, memory_bytes: 16 << 30, pods: 110 }));
        assert_eq!(node(json!({"cpu": "4"})), Some(Resources { cpu_millis: 4000, memory_bytes: 0, pods: 0 }));
        assert_eq!(node(json!({"cpu": "four", "memory": "1Gi", "pods": "10"})), None);
        assert_eq!(node(json!({"cpu": "4", "memory": "1Gi", "pods": true})), None);
        assert_eq!(node(json!(["cpu"])), None);
        let absent = node_reading(&json!({"metadata": {"name": "n"}}), seen(), Detail::Scheduling).unwrap();
        assert_eq!(absent.allocatable, None);
    }

    fn budget(v: Value) -> Option<Observation> {
        budget_reading(&v, seen())
    }

    fn upserted(o: Option<Observation>) -> BudgetSnapshot {
        match o {
            Some(Observation::BudgetUpserted(b)) => b,
            other => panic!("expected a budget, got {other:?}"),
        }
    }

    #[test]
    fn budgets_read_selector_and_disruptions_allowed() {
        let b = upserted(budget(json!({
            "metadata": {"name": "dns", "namespace": "kube-system", "generation": 2},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"},
                                  "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
                     "minAvailable": 1},
            "status": {"disruptionsAllowed": 2, "observedGeneration": 2},
        })));
        assert_eq!(b.key, "kube-system/dns");
        assert_eq!(b.disruptions_allowed, 2);
        assert_eq!(b.selector.match_labels.get("k8s-app").map(String::as_str), Some("kube-dns"));
        assert_eq!(b.selector.match_expressions[0].operator, NotIn);
        let all = upserted(budget(json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {}}})));
        assert_eq!(
            (all.selector, all.disruptions_allowed),
            (LabelSelector::default(), 0),
            "no status yet: none allowed"
        );
    }

    #[test]
    fn malformed_budgets_allow_nothing() {
        let meta = json!({"name": "b", "namespace": "ns"});
        for (spec, status) in [
            (json!({"selector": {"matchLabels": {"app": 1}}}), json!({"disruptionsAllowed": 3})),
            (
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}}),
                json!({"disruptionsAllowed": 3}),
            ),
            (json!({"selector": "app=web"}), json!({"disruptionsAllowed": 3})),
            (json!({"selector": {}}), json!({"disruptionsAllowed": -1})),
            (json!({"selector": {}}), json!({"disruptionsAllowed": "3"})),
        ] {
            let b = upserted(budget(json!({"metadata": meta, "spec": spec, "status": status})));
            assert_eq!(b.disruptions_allowed, 0, "{spec} {status}");
            assert_eq!(b.selector, LabelSelector::default(), "covers the whole namespace: {spec}");
        }
        // Status older than the spec: the Eviction API refuses until it is current.
        let stale = upserted(budget(json!({"metadata": {"name": "b", "namespace": "ns", "generation": 3},
            "spec": {"selector": {}}, "status": {"disruptionsAllowed": 4, "observedGeneration": 2}})));
        assert_eq!(stale.disruptions_allowed, 0);
        // No selector: covers no pod.
        let none = budget(json!({"metadata": meta, "spec": {"maxUnavailable": 1}}));
        assert_eq!(none, Some(Observation::BudgetDeleted { key: "ns/b".into() }));
        assert_eq!(budget(json!({"metadata": {"name": "b"}})), None, "no namespace");
        assert_eq!(budget(json!({"metadata": {"namespace": "ns"}})), None, "no name");
    }

    #[test]
    fn scheduled_trimmed_types_read_the_rescheduler_facts() {
        let v = json!({"metadata": {"name": "n", "resourceVersion": "3"}, "status": {"allocatable": {"pods": "10"}}});
        let t = crate::Trimmed::<crate::Scheduled<Node>>::from_json(&v, seen());
        assert!(
            matches!(&t.reading, Some(Observation::NodeUpserted(n)) if n.allocatable.is_some_and(|a| a.pods == 10))
        );
        let t = crate::Trimmed::<Node>::from_json(&v, seen());
        assert!(matches!(&t.reading, Some(Observation::NodeUpserted(n)) if n.allocatable.is_none()));
        let page = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList", "metadata": {},
            "items": [{"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"a": 1}}}}, 5]});
        let list: kube::core::ObjectList<crate::Trimmed<k8s_openapi::api::policy::v1::PodDisruptionBudget>> =
            serde_json::from_value(page).expect("a lenient page");
        assert!(matches!(&list.items[0].reading, Some(Observation::BudgetUpserted(b)) if b.disruptions_allowed == 0));
        assert!(list.items[1].reading.is_none());
    }
}
