//! A Node's reading: identity, labels, conditions, taints and
//! schedulability (and allocatable for the rescheduler).

use nodewarden_engine::NodeSnapshot;
use nodewarden_model::{ConditionStatus, ConditionType, NodeCondition, Taint, Timestamp};
use serde_json::Value;

use super::{Detail, MANY_TAINTS, Reader, Reading, at, effect, json_type, name_of, resource_version};

/// What the engine reads of a Node's JSON, or `None` (logged) when the
/// node has no name. See the module's documentation for how each odd
/// field is read.
pub fn node_reading(v: &Value, seen_at: Timestamp, detail: Detail) -> Option<NodeSnapshot> {
    read(v, seen_at, &Reader::new(detail))
}

pub(super) fn read(v: &Value, seen_at: Timestamp, how: &Reader) -> Option<NodeSnapshot> {
    let Some(name) = name_of(v) else {
        tracing::warn!(kind = "Node", "ignoring a Node without a readable metadata.name");
        return None;
    };
    let r = Reading { kind: "Node", name, seen_at, clock: how.clock };
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
    let allocatable = match how.detail {
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
