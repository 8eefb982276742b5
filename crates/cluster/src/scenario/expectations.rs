//! The expectations of a scenario file: at an instant, what must hold of a
//! node, a pod, a zone or the Events recorded.
//!
//! Invariant: an expectation has exactly one subject, and carries only the
//! checks that subject has; anything else is an error at its YAML position.

use std::collections::BTreeMap;
use std::fmt;

use nodewarden_engine::ZoneState;
use nodewarden_model::{ConditionStatus, Span, Taint, TaintEffect};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::*;

/// A taint named by `key:Effect`, as expectations spell it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaintRef {
    /// The taint key.
    pub key: String,
    /// The effect.
    pub effect: TaintEffect,
}

impl TaintRef {
    /// True when `taint` has this key and effect.
    pub fn matches(&self, taint: &Taint) -> bool {
        taint.is(&self.key, self.effect)
    }
}

impl fmt::Display for TaintRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.key, self.effect)
    }
}

impl std::str::FromStr for TaintRef {
    type Err = String;
    fn from_str(s: &str) -> Result<TaintRef, String> {
        let bad = || {
            format!(
                "invalid taint {s:?}: expected key:Effect with Effect one of NoSchedule, \
                 PreferNoSchedule, NoExecute, e.g. node.kubernetes.io/unreachable:NoExecute"
            )
        };
        let (key, effect) = s.rsplit_once(':').ok_or_else(bad)?;
        let effect = match effect {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return Err(bad()),
        };
        if key.is_empty() {
            return Err(bad());
        }
        Ok(TaintRef { key: key.to_string(), effect })
    }
}

impl<'de> Deserialize<'de> for TaintRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TaintRef, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

impl Serialize for TaintRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The `ready` of an expectation: a condition status for a node, a boolean
/// for a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadyValue {
    Status(ConditionStatus),
    Bool(bool),
}

impl<'de> Deserialize<'de> for ReadyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ReadyValue, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ReadyValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"True\", \"False\" or \"Unknown\" for a node, true or false for a pod")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ReadyValue, E> {
                Ok(ReadyValue::Bool(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ReadyValue, E> {
                match v {
                    "True" => Ok(ReadyValue::Status(ConditionStatus::True)),
                    "False" => Ok(ReadyValue::Status(ConditionStatus::False)),
                    "Unknown" => Ok(ReadyValue::Status(ConditionStatus::Unknown)),
                    "true" => Ok(ReadyValue::Bool(true)),
                    "false" => Ok(ReadyValue::Bool(false)),
                    other => Err(E::custom(format!(
                        "unknown ready value {other:?}: expected \"True\", \"False\" or \"Unknown\" \
                         for a node, true or false for a pod"
                    ))),
                }
            }
        }
        // YAML hands every scalar to `deserialize_str` as text, which keeps
        // `True` (a status) apart from `true` (a boolean).
        d.deserialize_str(V)
    }
}

/// A zone state as expectations spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneStateSpec(pub ZoneState);

impl<'de> Deserialize<'de> for ZoneStateSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ZoneStateSpec, D::Error> {
        const NAMES: &[&str] = &["Initial", "Normal", "PartialDisruption", "FullDisruption"];
        let s = String::deserialize(d)?;
        let state = match s.as_str() {
            "Initial" => ZoneState::Initial,
            "Normal" => ZoneState::Normal,
            "PartialDisruption" => ZoneState::PartialDisruption,
            "FullDisruption" => ZoneState::FullDisruption,
            _ => return Err(de::Error::unknown_variant(&s, NAMES)),
        };
        Ok(ZoneStateSpec(state))
    }
}

impl Serialize for ZoneStateSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

/// An Event to look for: by reason, optionally by object, optionally an
/// exact count.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventMatch {
    /// The Event's reason (`NodeNotReady`, `TaintManagerEviction`, ...).
    pub reason: String,
    /// The object: a node name or `namespace/name`; `None` = any object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// `events-include` only: exactly this many matching Events so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// What an expectation checks on a node; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeChecks {
    /// The Ready condition's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<ConditionStatus>,
    /// The exact taint set, order-insensitive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<TaintRef>>,
    /// Taints that must be present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_taints: Option<Vec<TaintRef>>,
    /// Taints that must be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lacks_taints: Option<Vec<TaintRef>>,
    /// Condition statuses by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    /// Condition reasons by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition_reasons: Option<BTreeMap<String, Option<String>>>,
    /// Labels that must have these values; `null` = the label is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, Option<String>>>,
    /// Writes the controller made to the node so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// The node was deleted (true) or exists (false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

/// What an expectation checks on a pod; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct PodChecks {
    /// The pod was deleted (true) or exists (false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// The pod's Ready condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `status.reason`; `null` = none set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Option<String>>,
    /// Pod condition statuses by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    /// Writes the controller made to the pod so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// The node the pod is bound to; `null` = unscheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Option<String>>,
    /// The pod is terminating (has a deletion timestamp and is not gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
    /// The pod carries `PodScheduled=False` with reason `Unschedulable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// What an expectation checks on a zone; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ZoneChecks {
    /// The engine's state for the zone; `null` = it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Option<ZoneStateSpec>>,
    /// The zone limiter's QPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Nodes of the zone carrying a not-ready or unreachable NoExecute taint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tainted: Option<u64>,
}

/// What an expectation is about, with its checks.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// A node, by name.
    Node {
        /// The node name.
        name: String,
        /// The checks.
        checks: NodeChecks,
    },
    /// A pod, by `namespace/name`.
    Pod {
        /// The pod key.
        key: String,
        /// The checks.
        checks: PodChecks,
    },
    /// A zone, spelled `region/zone`.
    Zone {
        /// The zone as written.
        zone: String,
        /// The checks.
        checks: ZoneChecks,
    },
    /// Events recorded so far include these.
    EventsInclude(Vec<EventMatch>),
    /// Events recorded so far include none of these.
    EventsExclude(Vec<EventMatch>),
}

/// One entry of `expect`: an instant and one subject with its checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// When it is checked (after everything due at that instant has run).
    pub at: Span,
    /// What is checked.
    pub subject: Subject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawExpect {
    at: Span,
    #[serde(default, deserialize_with = "double_option")]
    node: Option<Option<String>>,
    #[serde(default)]
    pod: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    events_include: Option<Vec<EventMatch>>,
    #[serde(default)]
    events_exclude: Option<Vec<EventMatch>>,
    #[serde(default)]
    ready: Option<ReadyValue>,
    #[serde(default)]
    taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    has_taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    lacks_taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    #[serde(default)]
    condition_reasons: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    writes: Option<u64>,
    #[serde(default)]
    deleted: Option<bool>,
    #[serde(default, deserialize_with = "double_option")]
    reason: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    state: Option<Option<ZoneStateSpec>>,
    #[serde(default)]
    rate: Option<f64>,
    #[serde(default)]
    tainted: Option<u64>,
    #[serde(default)]
    terminating: Option<bool>,
    #[serde(default)]
    unschedulable: Option<bool>,
}

const EXPECT_SUBJECTS: &str = "node, pod, zone, events-include, events-exclude";

impl TryFrom<RawExpect> for Expectation {
    type Error = String;

    fn try_from(r: RawExpect) -> Result<Expectation, String> {
        // Checks given, by name (read before `node` is taken apart below).
        let checks = checks_given(&r, r.pod.is_some() && r.node.is_some());
        // With a pod, `node` is a check (the node it is bound to), not a subject.
        let (node_subject, node_check) = if r.pod.is_some() { (None, r.node) } else { (r.node, None) };
        let given: Vec<&str> = [
            ("node", node_subject.is_some()),
            ("pod", r.pod.is_some()),
            ("zone", r.zone.is_some()),
            ("events-include", r.events_include.is_some()),
            ("events-exclude", r.events_exclude.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, g)| g.then_some(n))
        .collect();
        if given.len() > 1 {
            return Err(format!("an expectation has exactly one subject, found {}: {}", given.len(), given.join(", ")));
        }
        let only = |subject: &str, allowed: &[&str]| only_checks(&checks, subject, allowed);
        let subject = if let Some(name) = node_subject {
            let Some(name) = name else {
                return Err("node: a node name, not null".to_string());
            };
            only(
                "node",
                &[
                    "ready",
                    "taints",
                    "has-taints",
                    "lacks-taints",
                    "conditions",
                    "condition-reasons",
                    "labels",
                    "writes",
                    "deleted",
                ],
            )?;
            let ready = r.ready.map(ReadyValue::node_status).transpose()?;
            Subject::Node {
                name,
                checks: NodeChecks {
                    ready,
                    taints: r.taints,
                    has_taints: r.has_taints,
                    lacks_taints: r.lacks_taints,
                    conditions: r.conditions,
                    condition_reasons: r.condition_reasons,
                    labels: r.labels,
                    writes: r.writes,
                    deleted: r.deleted,
                },
            }
        } else if let Some(key) = r.pod {
            only(
                "pod",
                &["deleted", "ready", "reason", "conditions", "writes", "node", "terminating", "unschedulable"],
            )?;
            let ready = r.ready.map(ReadyValue::pod_ready).transpose()?;
            Subject::Pod {
                key,
                checks: PodChecks {
                    deleted: r.deleted,
                    ready,
                    reason: r.reason,
                    conditions: r.conditions,
                    writes: r.writes,
                    node: node_check,
                    terminating: r.terminating,
                    unschedulable: r.unschedulable,
                },
            }
        } else if let Some(zone) = r.zone {
            only("zone", &["state", "rate", "tainted"])?;
            if let Some(rate) = r.rate
                && !(rate.is_finite() && rate >= 0.0)
            {
                return Err(format!("rate: must be a non-negative number, got {rate}"));
            }
            Subject::Zone { zone, checks: ZoneChecks { state: r.state, rate: r.rate, tainted: r.tainted } }
        } else if let Some(list) = r.events_include {
            only_events("events-include", &checks, &list)?;
            Subject::EventsInclude(list)
        } else if let Some(list) = r.events_exclude {
            only_events("events-exclude", &checks, &list)?;
            if list.iter().any(|m| m.count.is_some()) {
                return Err("events-exclude: `count` belongs in events-include (events-include with \
                     count: 0 says the same)"
                    .to_string());
            }
            Subject::EventsExclude(list)
        } else {
            return Err(format!("an expectation needs a subject, one of: {EXPECT_SUBJECTS}"));
        };
        Ok(Expectation { at: r.at, subject })
    }
}

/// The checks an expectation gives, by name, so that one foreign to its
/// subject can be named in the error.
fn checks_given(r: &RawExpect, node_check: bool) -> Vec<&'static str> {
    [
        ("ready", r.ready.is_some()),
        ("taints", r.taints.is_some()),
        ("has-taints", r.has_taints.is_some()),
        ("lacks-taints", r.lacks_taints.is_some()),
        ("conditions", r.conditions.is_some()),
        ("condition-reasons", r.condition_reasons.is_some()),
        ("labels", r.labels.is_some()),
        ("writes", r.writes.is_some()),
        ("deleted", r.deleted.is_some()),
        ("reason", r.reason.is_some()),
        ("state", r.state.is_some()),
        ("rate", r.rate.is_some()),
        ("tainted", r.tainted.is_some()),
        ("node", node_check),
        ("terminating", r.terminating.is_some()),
        ("unschedulable", r.unschedulable.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, g)| g.then_some(n))
    .collect()
}

/// A subject's checks are among those it has (`allowed`), and there is at
/// least one.
fn only_checks(checks: &[&str], subject: &str, allowed: &[&str]) -> Result<(), String> {
    if let Some(bad) = checks.iter().find(|c| !allowed.contains(c)) {
        return Err(format!("`{bad}` is not a check for a {subject} (its checks: {})", allowed.join(", ")));
    }
    if checks.is_empty() {
        return Err(format!("an expectation about a {subject} needs at least one check: {}", allowed.join(", ")));
    }
    Ok(())
}

impl ReadyValue {
    /// As a node's Ready check: a condition status, never a boolean.
    fn node_status(self) -> Result<ConditionStatus, String> {
        match self {
            ReadyValue::Status(s) => Ok(s),
            ReadyValue::Bool(b) => Err(format!(
                "ready: a node's Ready is a condition status, \"True\", \"False\" or \
                 \"Unknown\" (quoted), not the boolean {b}"
            )),
        }
    }

    /// As a pod's ready check: a boolean (True and False read as such).
    fn pod_ready(self) -> Result<bool, String> {
        match self {
            ReadyValue::Bool(b) => Ok(b),
            ReadyValue::Status(ConditionStatus::True) => Ok(true),
            ReadyValue::Status(ConditionStatus::False) => Ok(false),
            ReadyValue::Status(ConditionStatus::Unknown) => {
                Err("ready: a pod's ready is a boolean, true or false".to_string())
            }
        }
    }
}

fn only_events(subject: &str, checks: &[&str], list: &[EventMatch]) -> Result<(), String> {
    if let Some(bad) = checks.first() {
        return Err(format!("`{bad}` is not a check for {subject}: it takes only a list of {{reason, object}}"));
    }
    if list.is_empty() {
        return Err(format!("{subject} needs at least one {{reason, object}} entry"));
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Expectation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expectation, D::Error> {
        deserialize_checked::<D, RawExpect, Expectation>(
            d,
            "an expectation: a mapping with `at`, one subject and its checks",
        )
    }
}
