//! A pod's (or a ReplicaSet's) controller: the entry of
//! `metadata.ownerReferences` marked `controller: true`.
//!
//! Legacy eviction spares a DaemonSet's pods, the rescheduler drains only
//! pods something will recreate, the served cluster's workload controllers
//! recreate what they own, and what-if groups pods by workload: all four
//! ask this one reading.
//!
//! Invariant: a list that cannot be read (not a list, an entry whose
//! `kind` is not a string or whose `controller` is not a boolean, or two
//! entries marked controller, which the API server refuses) is an error,
//! never a guess; each caller says what such a pod counts as.

use serde_json::Value;

use super::{at, json_type};

/// The owner reference marked `controller: true` (the API server allows
/// at most one).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ControllerOwner {
    /// `ReplicaSet`, `StatefulSet`, `Job`, `DaemonSet`, ...
    pub kind: String,
    /// The owner's name, in the object's namespace (empty when the entry
    /// has none: the watches keep only `kind` and `controller`).
    pub name: String,
}

/// The object's controller, `None` when no entry is marked `controller:
/// true`, or an error naming what in `metadata.ownerReferences` could not
/// be read.
pub fn controller_owner(v: &Value) -> Result<Option<ControllerOwner>, String> {
    let refs = match at(v, &["metadata", "ownerReferences"]) {
        None => return Ok(None),
        Some(Value::Array(refs)) => refs,
        Some(x) => return Err(format!("expected a list, found {}", json_type(x))),
    };
    let mut found = None;
    for r in refs {
        let kind = r.get("kind").and_then(Value::as_str);
        let controller = match r.get("controller") {
            None | Some(Value::Null) => Some(false),
            Some(c) => c.as_bool(),
        };
        match (kind, controller) {
            (Some(_), Some(true)) if found.is_some() => {
                return Err("more than one entry is marked controller".to_string());
            }
            (Some(kind), Some(true)) => {
                let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                found = Some(ControllerOwner { kind: kind.to_string(), name: name.to_string() });
            }
            (Some(_), Some(_)) => {}
            _ => return Err(format!("an entry without a readable kind and controller flag: {r}")),
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn owned(refs: Value) -> Value {
        json!({"metadata": {"name": "p", "ownerReferences": refs}})
    }

    #[test]
    fn the_controller_is_the_entry_marked_so() {
        let v = owned(json!([
            {"kind": "ConfigMap", "name": "c"},
            {"kind": "ReplicaSet", "name": "web-1", "controller": true},
        ]));
        assert_eq!(controller_owner(&v), Ok(Some(ControllerOwner { kind: "ReplicaSet".into(), name: "web-1".into() })));
        assert_eq!(controller_owner(&owned(json!([{"kind": "ReplicaSet", "controller": false}]))), Ok(None));
        assert_eq!(controller_owner(&json!({"metadata": {"name": "p"}})), Ok(None));
        assert_eq!(controller_owner(&owned(Value::Null)), Ok(None));
    }

    #[test]
    fn an_unreadable_list_or_entry_is_an_error_not_a_guess() {
        for bad in [
            json!("none"),
            json!({"kind": "ReplicaSet"}),
            json!([{"kind": 7, "controller": true}]),
            json!([{"kind": "ReplicaSet", "controller": "yes"}]),
            json!([{"controller": true}]),
            json!([{"kind": "ReplicaSet", "controller": true}, {"kind": "DaemonSet", "controller": true}]),
        ] {
            assert!(controller_owner(&owned(bad.clone())).is_err(), "{bad}");
        }
    }
}
