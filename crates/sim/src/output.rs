//! The replay's output: one JSON object a line, in virtual-time order.
//!
//! Controller writes and Events (`"action"`), zone state and rate changes
//! (`"zone"`), contract violations (`"violation"`), expectation results
//! (`"expect"`), and one final summary (`"summary": true`).

use std::collections::BTreeMap;

use nodewarden_engine::{ActionKind, EventType, Explanation, ZoneReport, ZoneState};
use nodewarden_model::{ConditionStatus, ConditionType, Span, Taint, Timestamp};
use serde::Serialize;

/// One output line.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Record {
    /// A write or Event the controller made.
    Action(ActionRecord),
    /// A zone's state or rate changed.
    Zone(ZoneRecord),
    /// The controller broke a rule it must never break.
    Violation(ViolationRecord),
    /// One expectation's result.
    Expect(ExpectRecord),
    /// The final tally.
    Summary(Summary),
}

impl Record {
    /// True for lines `--quiet` keeps: failed expectations, violations and
    /// the summary.
    pub fn is_failure_or_summary(&self) -> bool {
        match self {
            Record::Expect(e) => !e.ok,
            Record::Violation(_) | Record::Summary(_) => true,
            Record::Action(_) | Record::Zone(_) => false,
        }
    }

    /// The line as JSON (never fails: every field is a plain value).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
    }
}

/// A write or Event of the controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ActionRecord {
    /// When it was applied.
    pub t: Timestamp,
    /// `update-node-status`, `add-taint`, `remove-taint`, `swap-taints`,
    /// `patch-labels`, `mark-pod-not-ready`, `set-pod-node-lost`,
    /// `add-pod-disruption-target`, `delete-pod` or `event`.
    pub action: &'static str,
    /// The node written to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The pod written to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The Ready status a status update sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<ConditionStatus>,
    /// Other conditions a status update sets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, ConditionStatus>,
    /// Taints added, as `key:Effect`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<String>,
    /// Taints removed, as `key:Effect`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Labels set.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// An Event's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// An Event's object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// An Event's type, Normal or Warning.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// An Event's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the API refused the write, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The invariants the write would have broken, when the safety
    /// interlock held it back (it never reached the cluster).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
    /// Why the write was withdrawn just before it would have been sent (no
    /// longer true: `Controller::still_true`); it never reached the
    /// cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withdrawn: Option<String>,
    /// A deletion's mode: `delete` or `evict` (Eviction API).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    /// A deletion's recorded causes, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// A deletion's recorded causes in full (`replay --explain`).
    #[serde(skip)]
    pub explanation: Option<Box<Explanation>>,
}

fn shorts(taints: &[Taint]) -> Vec<String> {
    taints.iter().map(Taint::short).collect()
}

impl ActionRecord {
    /// Describes an action applied at `t`.
    pub fn new(t: Timestamp, kind: &ActionKind) -> ActionRecord {
        let r = ActionRecord { t, ..ActionRecord::default() };
        match kind {
            ActionKind::UpdateNodeConditions { node, conditions, .. } => ActionRecord {
                action: "update-node-status",
                node: Some(node.clone()),
                ready: conditions.iter().find(|c| c.kind == ConditionType::Ready).map(|c| c.status),
                conditions: conditions
                    .iter()
                    .filter(|c| c.kind != ConditionType::Ready)
                    .map(|c| (c.kind.to_string(), c.status))
                    .collect(),
                ..r
            },
            ActionKind::PatchNodeTaints { node, add, remove, .. } => ActionRecord {
                action: match (add.is_empty(), remove.is_empty()) {
                    (false, true) => "add-taint",
                    (true, false) => "remove-taint",
                    _ => "swap-taints",
                },
                node: Some(node.clone()),
                add: shorts(add),
                remove: shorts(remove),
                ..r
            },
            ActionKind::PatchNodeLabels { node, labels } => {
                ActionRecord { action: "patch-labels", node: Some(node.clone()), labels: labels.clone(), ..r }
            }
            ActionKind::MarkPodNotReady { pod, .. } => {
                ActionRecord { action: "mark-pod-not-ready", pod: Some(pod.clone()), ..r }
            }
            ActionKind::SetPodNodeLost { pod, node, .. } => {
                ActionRecord { action: "set-pod-node-lost", pod: Some(pod.clone()), node: Some(node.clone()), ..r }
            }
            ActionKind::AddPodDisruptionTarget { pod, .. } => {
                ActionRecord { action: "add-pod-disruption-target", pod: Some(pod.clone()), ..r }
            }
            ActionKind::ClearPodDisruptionTarget { pod, .. } => {
                ActionRecord { action: "clear-pod-disruption-target", pod: Some(pod.clone()), ..r }
            }
            ActionKind::DeletePod { pod, why, mode, .. } => ActionRecord {
                action: "delete-pod",
                pod: Some(pod.clone()),
                mode: Some(match mode {
                    nodewarden_model::DeletionMode::Delete => "delete",
                    nodewarden_model::DeletionMode::Evict => "evict",
                }),
                why: Some(why.one_line()),
                explanation: Some(why.clone()),
                ..r
            },
            ActionKind::EvictForAddon { pod, why, .. } => ActionRecord {
                action: "evict-for-addon",
                pod: Some(pod.clone()),
                node: Some(why.node.clone()),
                mode: Some("evict"),
                why: Some(why.one_line()),
                ..r
            },
            ActionKind::RecordEvent(e) => ActionRecord {
                action: "event",
                reason: Some(e.reason),
                object: Some(e.object.to_string()),
                kind: Some(match e.kind {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }),
                message: Some(e.message.clone()),
                ..r
            },
        }
    }
}

/// A zone whose state or rate changed since the previous tick.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ZoneRecord {
    /// When the change was seen.
    pub t: Timestamp,
    /// The zone, `region/zone`.
    pub zone: String,
    /// Its new state; `null` when the engine no longer reports one.
    pub state: Option<&'static str>,
    /// Its limiter's QPS.
    pub rate: f64,
}

impl ZoneRecord {
    /// The line for a zone as reported at `t`; `None` = the zone is gone.
    pub fn new(t: Timestamp, zone: String, report: Option<&ZoneReport>) -> ZoneRecord {
        ZoneRecord {
            t,
            zone,
            state: report.and_then(|r| r.state).map(ZoneState::as_str),
            rate: report.map_or(0.0, |r| r.rate),
        }
    }
}

/// A write the controller must never make (scenario rule 12).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ViolationRecord {
    /// When.
    pub t: Timestamp,
    /// What happened.
    pub violation: String,
}

/// One expectation's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExpectRecord {
    /// Its position in the file's `expect` list, from 1.
    pub expect: usize,
    /// When it was checked.
    pub at: Timestamp,
    /// Whether every check held.
    pub ok: bool,
    /// The node it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The pod it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The zone it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The checks, as written.
    pub want: serde_json::Value,
    /// What was found, under the same keys.
    pub got: serde_json::Value,
    /// The checks that did not hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// With API latency: when it was found to hold (or, failing, last
    /// checked), within the tolerance after `at`. Absent without latency,
    /// where it is checked at `at` exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen: Option<Timestamp>,
}

/// The last line: how the replay went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Always true: marks the line.
    pub summary: bool,
    /// The scenario's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Expectations that held.
    pub passed: usize,
    /// Expectations that did not hold, plus contract violations.
    pub failed: usize,
    /// Contract violations (counted in `failed` too).
    pub violations: usize,
    /// Writes the controller made.
    pub writes: u64,
    /// Events the controller recorded.
    pub events: usize,
    /// The last simulated instant.
    pub end: Timestamp,
    /// Writes the safety interlock held back (counted in `violations`
    /// too): none in a correct run, with or without latency.
    #[serde(skip_serializing_if = "is_zero")]
    pub held_back: usize,
    /// With API latency: the latency, as `--api-latency` spells it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_latency: Option<String>,
    /// With API latency: how late an expectation may come true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Span>,
    /// With API latency: the latest an expectation that held came true
    /// after its `at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_deviation: Option<Span>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// True when every expectation held and no rule was broken.
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}
