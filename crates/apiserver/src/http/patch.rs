//! The three patch formats the API serves: JSON merge patch (RFC 7386),
//! JSON patch (RFC 6902) and strategic merge patch (Kubernetes), applied to
//! objects as JSON. Strategic merge patch knows the merge keys of the
//! fields of the served kinds (conditions by `type`, containers by `name`,
//! owner references by `uid`, finalizers as a set) and the `$patch`,
//! `$setElementOrder`, `$deleteFromPrimitiveList` and `$retainKeys`
//! directives that kubectl and client-go send; other lists are replaced,
//! as upstream does for fields without a patch strategy (taints,
//! tolerations).
//!
//! Invariant: a patch either applies whole or is refused (400 or 422) with
//! the object untouched.

use serde_json::{Map, Value};

use crate::error::ApiError;

fn unprocessable(message: String) -> ApiError {
    ApiError::Code { code: 422, reason: "Invalid", message }
}

/// RFC 7386: objects merge, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn pointer_tokens(path: &str) -> Result<Vec<String>, ApiError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(ApiError::BadRequest(format!("invalid JSON pointer {path:?}")));
    };
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

fn parent_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t).ok_or_else(|| format!("missing value at {t:?}"))?,
            Value::Array(a) => {
                let i: usize = t.parse().map_err(|_| format!("bad array index {t:?}"))?;
                a.get_mut(i).ok_or_else(|| format!("array index {i} out of bounds"))?
            }
            _ => return Err(format!("cannot descend into {t:?}")),
        };
    }
    Ok(cur)
}

fn get_at(doc: &Value, tokens: &[String]) -> Option<Value> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur.clone())
}

fn remove_at(doc: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = tokens.split_last() else { return Err("cannot remove the root".into()) };
    match parent_mut(doc, parent)? {
        Value::Object(m) => m.remove(last).ok_or_else(|| format!("missing value at {last:?}")),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| format!("bad array index {last:?}"))?;
            if i < a.len() { Ok(a.remove(i)) } else { Err(format!("array index {i} out of bounds")) }
        }
        _ => Err("parent is not a container".into()),
    }
}

fn add_at(doc: &mut Value, tokens: &[String], value: Value, replace: bool) -> Result<(), String> {
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            if replace && !m.contains_key(last) {
                return Err(format!("replace: missing value at {last:?}"));
            }
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" && !replace {
                a.push(value);
                return Ok(());
            }
            let i: usize = last.parse().map_err(|_| format!("bad array index {last:?}"))?;
            if replace {
                let slot = a.get_mut(i).ok_or_else(|| format!("array index {i} out of bounds"))?;
                *slot = value;
            } else if i <= a.len() {
                a.insert(i, value);
            } else {
                return Err(format!("array index {i} out of bounds"));
            }
            Ok(())
        }
        _ => Err("parent is not a container".into()),
    }
}

/// RFC 6902. A malformed document is a 400; an operation that cannot be
/// applied (a missing path, a failed `test`) a 422, as upstream answers.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Some(ops) = patch.as_array() else {
        return Err(ApiError::BadRequest("json patch must be an array of operations".into()));
    };
    let mut doc = target.clone();
    for (i, op) in ops.iter().enumerate() {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::BadRequest(format!("operation {i} has no \"op\"")))?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::BadRequest(format!("operation {i} has no \"path\"")))?;
        let tokens = pointer_tokens(path)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| ApiError::BadRequest(format!("operation {i} ({name}) has no \"value\"")))
        };
        let from = || -> Result<Vec<String>, ApiError> {
            pointer_tokens(
                op.get("from")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::BadRequest(format!("operation {i} ({name}) has no \"from\"")))?,
            )
        };
        let r = match name {
            "add" => add_at(&mut doc, &tokens, value()?, false),
            "replace" => add_at(&mut doc, &tokens, value()?, true),
            "remove" => remove_at(&mut doc, &tokens).map(drop),
            "move" => {
                let f = from()?;
                remove_at(&mut doc, &f).and_then(|v| add_at(&mut doc, &tokens, v, false))
            }
            "copy" => {
                let f = from()?;
                match get_at(&doc, &f) {
                    Some(v) => add_at(&mut doc, &tokens, v, false),
                    None => Err(format!("copy: missing value at {:?}", f.join("/"))),
                }
            }
            "test" => {
                let want = value()?;
                if get_at(&doc, &tokens).as_ref() == Some(&want) {
                    Ok(())
                } else {
                    Err(format!("testing value {path} failed"))
                }
            }
            other => return Err(ApiError::BadRequest(format!("unexpected json patch operation {other:?}"))),
        };
        r.map_err(|e| unprocessable(format!("the server rejected our request due to an error in our request: {e}")))?;
    }
    *target = doc;
    Ok(())
}

/// How a list field merges under strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListStrategy {
    Replace,
    MergeKey(&'static str),
    PrimitiveSet,
}

fn strategy(field: &str, parent: &str) -> ListStrategy {
    match field {
        "conditions" | "addresses" => ListStrategy::MergeKey("type"),
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "imagePullSecrets" | "env" => {
            ListStrategy::MergeKey("name")
        }
        "ownerReferences" => ListStrategy::MergeKey("uid"),
        "ports" if parent == "containers" || parent == "initContainers" => ListStrategy::MergeKey("containerPort"),
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "podIPs" | "hostIPs" => ListStrategy::MergeKey("ip"),
        "finalizers" => ListStrategy::PrimitiveSet,
        _ => ListStrategy::Replace,
    }
}

/// Kubernetes strategic merge patch over the served kinds' fields.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(_) = patch else {
        return Err(ApiError::BadRequest("strategic merge patch must be a JSON object".into()));
    };
    smp_map(target, patch, "")
}

fn smp_map(target: &mut Value, patch: &Value, field: &str) -> Result<(), ApiError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut m = p.clone();
            m.remove("$patch");
            *target = Value::Object(m);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) => return Err(ApiError::BadRequest(format!("Unknown patch type: {other} in map: {field}"))),
        None => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return Ok(()) };
    let mut orders = Vec::new();
    for (k, v) in p {
        if let Some(list) = k.strip_prefix("$setElementOrder/") {
            orders.push((list.to_string(), v.clone()));
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let Some(remove) = v.as_array() else {
                return Err(ApiError::BadRequest("invalid patch: $deleteFromPrimitiveList must be a list".into()));
            };
            if let Some(Value::Array(items)) = t.get_mut(list) {
                items.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if k == "$retainKeys" {
            continue;
        }
        if k.starts_with('$') {
            return Err(ApiError::BadRequest(format!("unknown patch directive {k:?}")));
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match v {
            Value::Object(_) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                smp_map(slot, v, k)?;
                if slot.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let slot = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                smp_list(slot, items, strategy(k, field))?;
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (list, order) in orders {
        let (Some(Value::Array(items)), Some(order)) = (t.get_mut(&list), order.as_array()) else { continue };
        let key = match strategy(&list, field) {
            ListStrategy::MergeKey(key) => Some(key),
            _ => None,
        };
        let rank = |x: &Value| {
            let id = key.map_or(x, |k| x.get(k).unwrap_or(&Value::Null));
            order.iter().position(|o| key.map_or(o, |k| o.get(k).unwrap_or(&Value::Null)) == id).unwrap_or(usize::MAX)
        };
        items.sort_by_key(rank);
    }
    Ok(())
}

fn smp_list(target: &mut Value, patch: &[Value], how: ListStrategy) -> Result<(), ApiError> {
    let key = match how {
        ListStrategy::Replace => {
            *target = Value::Array(patch.to_vec());
            return Ok(());
        }
        ListStrategy::PrimitiveSet => {
            let Value::Array(items) = target else { return Ok(()) };
            for v in patch {
                if !items.contains(v) {
                    items.push(v.clone());
                }
            }
            return Ok(());
        }
        ListStrategy::MergeKey(key) => key,
    };
    if patch.iter().any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *target = Value::Array(patch.iter().filter(|e| e.get("$patch").is_none()).cloned().collect());
        return Ok(());
    }
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(items) = target else { return Ok(()) };
    for e in patch {
        let Some(id) = e.get(key) else {
            return Err(ApiError::BadRequest(format!("map: {e} does not contain declared merge key: {key}")));
        };
        let pos = items.iter().position(|x| x.get(key) == Some(id));
        if e.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                items.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => smp_map(&mut items[i], e, key)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                smp_map(&mut fresh, e, key)?;
                items.push(fresh);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_deletes_with_null() {
        let mut t = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"taints": [{"key": "x"}]}});
        merge_patch(&mut t, &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"taints": []}}));
        assert_eq!(t, json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"taints": []}}));
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let mut t = json!({"spec": {"taints": [{"key": "a"}]}});
        let ok = json!([
            {"op": "test", "path": "/spec/taints/0/key", "value": "a"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
            {"op": "replace", "path": "/spec/taints/0/key", "value": "c"},
            {"op": "add", "path": "/metadata", "value": {"labels": {"x~y/z": "1"}}},
            {"op": "remove", "path": "/metadata/labels/x~0y~1z"},
        ]);
        assert_eq!(json_patch(&mut t, &ok), Ok(()));
        assert_eq!(t, json!({"spec": {"taints": [{"key": "c"}, {"key": "b"}]}, "metadata": {"labels": {}}}));
        let before = t.clone();
        let failing = json!([{"op": "remove", "path": "/spec/taints/0"}, {"op": "test", "path": "/spec", "value": 1}]);
        assert_eq!(json_patch(&mut t, &failing).map_err(|e| e.code()), Err(422));
        assert_eq!(t, before, "nothing half-applied");
        assert_eq!(json_patch(&mut t, &json!({"op": "add"})).map_err(|e| e.code()), Err(400));
        assert_eq!(json_patch(&mut t, &json!([{"op": "frob", "path": "/"}])).map_err(|e| e.code()), Err(400));
    }

    #[test]
    fn strategic_merge_by_key_and_directives() {
        let mut node = json!({
            "metadata": {"finalizers": ["a"]},
            "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ]},
        });
        let patch = json!({
            "metadata": {"finalizers": ["b"]},
            "spec": {"taints": [{"key": "y", "effect": "NoExecute"}]},
            "status": {
                "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}, {"type": "DiskPressure"}],
                "conditions": [
                    {"type": "Ready", "status": "Unknown"},
                    {"type": "DiskPressure", "status": "False"},
                ],
            },
        });
        assert_eq!(strategic_merge_patch(&mut node, &patch), Ok(()));
        assert_eq!(node["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(node["spec"]["taints"], json!([{"key": "y", "effect": "NoExecute"}]));
        assert_eq!(
            node["status"]["conditions"],
            json!([
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "Unknown"},
                {"type": "DiskPressure", "status": "False"},
            ])
        );
        let del = json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}, "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        assert_eq!(strategic_merge_patch(&mut node, &del), Ok(()));
        assert_eq!(node["status"]["conditions"].as_array().map(Vec::len), Some(2));
        assert_eq!(node["metadata"]["finalizers"], json!(["b"]));
        let bad = json!({"status": {"conditions": [{"status": "True"}]}});
        assert_eq!(strategic_merge_patch(&mut node, &bad).map_err(|e| e.code()), Err(400));
    }
}
