//! Just enough of the OpenAPI v3 documents for kubectl to trust the server
//! with field validation.
//!
//! `kubectl create|replace|apply -f` validates strictly by default: it asks
//! `/openapi/v3` whether the server takes the `fieldValidation` query
//! parameter on the object's PATCH operation and, if so, leaves validation
//! to the server (which does it: unknown and duplicate fields are refused
//! under `Strict`). Without these documents kubectl falls back to
//! validating on the client against `/openapi/v2`, which is not served, and
//! refuses the command. So each served group version gets a document that
//! lists its resources' operations with their group-version-kind and
//! `fieldValidation`, and no schemas: `kubectl explain` still has nothing
//! to read, which docs/simulation.md says.

use serde_json::{Map, Value, json};

use crate::resource::{RESOURCES, Resource};

/// The URL path of a group version, as the OpenAPI v3 index keys it:
/// `api/v1`, `apis/coordination.k8s.io/v1`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// Served group versions, each once, in the order resources are listed.
fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in &RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// `GET /openapi/v3`: where each group version's document is. The `hash`
/// lets clients cache a document for as long as the server runs (it never
/// changes while it does).
pub fn index() -> Value {
    let mut paths = Map::new();
    for (g, v) in group_versions() {
        let path = gv_path(g, v);
        let url = format!("/openapi/v3/{path}?hash=nodewarden-sim-1");
        paths.insert(path, json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

/// The operation object of one verb on one resource.
fn operation(r: &Resource, action: &str, write: bool) -> Value {
    let mut parameters = vec![json!({"name": "pretty", "in": "query", "schema": {"type": "string"}})];
    if write {
        parameters.push(json!({"name": "dryRun", "in": "query", "schema": {"type": "string"}}));
        parameters.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string"}}));
        parameters.push(json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}));
    }
    json!({
        "operationId": format!("{action}{}", r.kind_name),
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind_name},
    })
}

/// `GET /openapi/v3/<group version>`: its resources' collection and item
/// paths with their operations; `None` for a group version not served.
pub fn group_version(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&Resource> = RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
    if served.is_empty() {
        return None;
    }
    let base = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    for r in served {
        let collection = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{base}/{}", r.plural)
        };
        paths.insert(
            collection.clone(),
            json!({ "get": operation(r, "list", false), "post": operation(r, "post", true) }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(r, "get", false),
                "put": operation(r, "put", true),
                "patch": operation(r, "patch", true),
                "delete": operation(r, "delete", false),
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (nodewarden sim --serve)", "version": "v1.33.0"},
        "paths": paths,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_group_version_has_a_document_with_field_validation_on_patch() {
        let index = index();
        let paths = index["paths"].as_object().map(|m| m.len()).unwrap_or(0);
        assert_eq!(paths, group_versions().len());
        for (g, v) in group_versions() {
            let Some(doc) = group_version(g, v) else { panic!("{g}/{v} has no document") };
            for r in RESOURCES.iter().filter(|r| r.group == g && r.version == v) {
                let patch = doc["paths"]
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .filter_map(|p| p.get("patch"))
                    .find(|op| op["x-kubernetes-group-version-kind"]["kind"] == r.kind_name);
                let Some(patch) = patch else { panic!("{} has no patch operation", r.kind_name) };
                let params = patch["parameters"].as_array().cloned().unwrap_or_default();
                assert!(params.iter().any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
            }
        }
        assert!(group_version("apps", "v9").is_none());
    }
}
