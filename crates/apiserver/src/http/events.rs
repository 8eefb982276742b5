//! `events.k8s.io/v1` Events as a view of core/v1 Events, converted as
//! upstream converts between the two versions of one stored resource.
//!
//! Invariant: the store holds core/v1 Events only; a v1 view converts on
//! the way out and back, so both versions show the same objects.

use serde_json::{Map, Value};

const PAIRS: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("count", "deprecatedCount"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("source", "deprecatedSource"),
    ("reportingComponent", "reportingController"),
];

fn rename(v: &Value, api_version: &str, from_core: bool) -> Value {
    let Some(m) = v.as_object() else { return v.clone() };
    let mut out = Map::new();
    for (k, val) in m {
        let key = PAIRS
            .iter()
            .find(|(c, e)| if from_core { c == k } else { e == k })
            .map_or(k.as_str(), |(c, e)| if from_core { e } else { c });
        out.insert(key.to_string(), val.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

/// A core/v1 Event as events.k8s.io/v1 serves it.
pub fn to_v1(core: &Value) -> Value {
    rename(core, "events.k8s.io/v1", true)
}

/// An events.k8s.io/v1 Event as core/v1 stores it.
pub fn to_core(v1: &Value) -> Value {
    rename(v1, "v1", false)
}

/// An events.k8s.io field selector's field, as core/v1 names it.
pub fn core_field(f: &str) -> String {
    if let Some(rest) = f.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match f {
        "reportingController" => "reportingComponent".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn round_trip() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "n"}, "message": "m", "reason": "R", "count": 2});
        let v1 = to_v1(&core);
        assert_eq!(v1["regarding"]["name"], "n");
        assert_eq!(v1["note"], "m");
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(to_core(&v1), core);
        assert_eq!(core_field("regarding.name"), "involvedObject.name");
    }
}
