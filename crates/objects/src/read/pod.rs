//! A Pod's reading: identity, node, owner, readiness, tolerations (and
//! the rescheduler's facts).

use nodewarden_engine::PodSnapshot;
use nodewarden_model::{Timestamp, Toleration, TolerationOperator};
use serde_json::Value;

use super::{Detail, Reader, Reading, at, effect, name_of, resource_version};

/// The toleration an unreadable one reads as: every taint, forever.
pub(super) fn tolerate_everything() -> Toleration {
    Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
        seconds: None,
    }
}

/// One toleration: `Ok(Some)` as written; `Ok(None)` when it names an
/// operator or effect no version defines, which tolerates no taint (as
/// upstream's `Toleration.ToleratesTaint` reads it: an unknown operator
/// matches nothing, and neither does an effect no taint carries); `Err`
/// when a field has the wrong JSON type, which upstream could not even
/// decode.
pub(crate) fn toleration(t: &Value) -> Result<Option<Toleration>, ()> {
    if !t.is_object() {
        return Err(());
    }
    let opt_str = |f: &str| match t.get(f) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(()),
    };
    let seconds = match t.get("tolerationSeconds") {
        None | Some(Value::Null) => None,
        Some(x) => Some(x.as_i64().ok_or(())?),
    };
    let (key, value) = (opt_str("key")?.unwrap_or_default(), opt_str("value")?.unwrap_or_default());
    let operator = match opt_str("operator")? {
        None | Some("" | "Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(_) => return Ok(None),
    };
    let effect = match opt_str("effect")? {
        None | Some("") => None,
        Some(e) => match effect(e) {
            Some(e) => Some(e),
            None => return Ok(None),
        },
    };
    Ok(Some(Toleration { key: key.to_string(), operator, value: value.to_string(), effect, seconds }))
}

/// A pod's `spec.tolerations` as [`pod_reading`] reads them, for a pod
/// that may not be stored yet (admission reads them before the pod has a
/// uid).
pub fn pod_tolerations(v: &Value) -> Vec<Toleration> {
    let name = at(v, &["metadata", "name"]).and_then(Value::as_str).unwrap_or_default();
    let r = Reading { kind: "Pod", name, seen_at: Timestamp::EPOCH, clock: crate::TimeBase::UNIX };
    tolerations(&r, v)
}

/// The tolerations, each in its place; see the module's documentation.
fn tolerations(r: &Reading<'_>, v: &Value) -> Vec<Toleration> {
    match r.list(v, &["spec", "tolerations"], "spec.tolerations") {
        Err(()) => vec![tolerate_everything()],
        Ok(ts) => ts
            .iter()
            .filter_map(|t| match toleration(t) {
                Ok(Some(t)) => Some(t),
                Ok(None) => {
                    r.odd(
                        "spec.tolerations",
                        &format!("toleration {t} has an unknown operator or effect; it tolerates no taint"),
                    );
                    None
                }
                Err(()) => {
                    r.odd("spec.tolerations", &format!("unreadable toleration {t}; read as tolerating every taint"));
                    Some(tolerate_everything())
                }
            })
            .collect(),
    }
}

/// What the engine reads of a Pod's JSON, or `None` (logged) when it has
/// no name, namespace or uid: every write to a pod carries its uid as a
/// precondition, so a pod without one could never be written safely. See
/// the module's documentation for how each odd field is read.
pub fn pod_reading(v: &Value, seen_at: Timestamp, detail: Detail) -> Option<PodSnapshot> {
    read(v, seen_at, &Reader::new(detail))
}

pub(super) fn read(v: &Value, seen_at: Timestamp, how: &Reader) -> Option<PodSnapshot> {
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
    let r = Reading { kind: "Pod", name: &key, seen_at, clock: how.clock };
    let Some(uid) = at(v, &["metadata", "uid"]).and_then(Value::as_str).filter(|u| !u.is_empty()) else {
        r.odd("metadata.uid", "no readable uid; the pod is ignored (it could not be written safely)");
        return None;
    };
    let daemonset = match super::owner::controller_owner(v) {
        Ok(owner) => owner.is_some_and(|o| o.kind == "DaemonSet"),
        Err(what) => {
            r.odd("metadata.ownerReferences", &format!("{what}; read as a DaemonSet's pod"));
            true
        }
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
    let tolerations = tolerations(&r, v);
    let scheduling = match how.detail {
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
