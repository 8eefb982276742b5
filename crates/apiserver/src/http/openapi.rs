//! Just enough of the OpenAPI documents for kubectl to trust the server
//! with field validation, and the content negotiation of their endpoints.
//!
//! `kubectl create|replace|apply -f` validates strictly by default: it asks
//! `/openapi/v3` whether the server takes the `fieldValidation` query
//! parameter on the object's PATCH operation and, if so, leaves validation
//! to the server (which does it: unknown and duplicate fields are refused
//! under `Strict`). A `kind: List` (what `kubectl get -o yaml` writes for
//! several objects) never gets that answer: kubectl validates a List on the
//! client, item by item, against `/openapi/v2` fetched as protobuf, and
//! refuses the whole command if that document cannot be had. So both are
//! served (`openapi_v2` for v2): each resource's collection and
//! item paths with their operations, group-version-kind and
//! `fieldValidation`, and no schemas. kubectl skips client-side checks of
//! a kind the document has no schema for, the server still validates every
//! item it is sent, and `kubectl explain` has nothing to read, which
//! docs/simulation.md says.
//!
//! Invariant: the documents list exactly the paths and operations that are
//! routed (both are read from [`crate::resource`]'s table).

use hyper::header::{CONTENT_TYPE, ETAG, HeaderValue, VARY};
use hyper::{Response, StatusCode};
use serde_json::{Map, Value, json};

use super::response::{ResBody, full};
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

/// One operation on a path: the HTTP method as OpenAPI keys it, the
/// `x-kubernetes-action`, and whether it writes (and so takes `dryRun`,
/// `fieldManager` and `fieldValidation`).
pub(crate) type Operation = (&'static str, &'static str, bool);

const COLLECTION_OPERATIONS: &[Operation] = &[("get", "list", false), ("post", "post", true)];
const ITEM_OPERATIONS: &[Operation] =
    &[("get", "get", false), ("put", "put", true), ("patch", "patch", true), ("delete", "delete", false)];

/// A served resource's path and what can be done there.
pub(crate) struct Endpoint {
    /// The resource.
    pub resource: &'static Resource,
    /// `/api/v1/namespaces/{namespace}/pods/{name}`.
    pub path: String,
    /// The path's parameters, in order (`namespace`, `name`).
    pub path_parameters: Vec<&'static str>,
    /// Its operations.
    pub operations: &'static [Operation],
}

/// The collection and item endpoints of every resource served at a group
/// version (the group's of every served resource with `None`).
pub(crate) fn endpoints(gv: Option<(&str, &str)>) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for r in RESOURCES.iter().filter(|r| gv.is_none_or(|(g, v)| r.group == g && r.version == v)) {
        let base = format!("/{}", gv_path(r.group, r.version));
        let (collection, mut params) = if r.namespaced {
            (format!("{base}/namespaces/{{namespace}}/{}", r.plural), vec!["namespace"])
        } else {
            (format!("{base}/{}", r.plural), vec![])
        };
        out.push(Endpoint {
            resource: r,
            path: collection.clone(),
            path_parameters: params.clone(),
            operations: COLLECTION_OPERATIONS,
        });
        params.insert(0, "name");
        out.push(Endpoint {
            resource: r,
            path: format!("{collection}/{{name}}"),
            path_parameters: params,
            operations: ITEM_OPERATIONS,
        });
    }
    out
}

/// The names of an operation's query parameters.
pub(crate) fn query_parameters(write: bool) -> &'static [&'static str] {
    if write { &["pretty", "dryRun", "fieldManager", "fieldValidation"] } else { &["pretty"] }
}

/// The `x-kubernetes-group-version-kind` of a resource's operations.
pub(crate) fn gvk(r: &Resource) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind_name})
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

/// The OpenAPI v3 operation object of one verb on one resource.
fn operation(r: &Resource, action: &str, write: bool) -> Value {
    let parameters: Vec<Value> = query_parameters(write)
        .iter()
        .map(|name| json!({"name": name, "in": "query", "schema": {"type": "string"}}))
        .collect();
    json!({
        "operationId": format!("{action}{}", r.kind_name),
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(r),
    })
}

/// `GET /openapi/v3/<group version>`: its resources' collection and item
/// paths with their operations; `None` for a group version not served.
pub fn group_version(group: &str, version: &str) -> Option<Value> {
    let served = endpoints(Some((group, version)));
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for e in served {
        let ops: Map<String, Value> = e
            .operations
            .iter()
            .map(|(method, action, write)| (method.to_string(), operation(e.resource, action, *write)))
            .collect();
        paths.insert(e.path, Value::Object(ops));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (nodewarden sim --serve)", "version": "v1.33.0"},
        "paths": paths,
    }))
}

/// Picks what to answer from an `Accept` header as kube-openapi's handlers
/// do (not as the resource endpoints do): no header means `*/*`; clauses
/// are tried from the highest `q` and, at equal `q`, concrete types before
/// wildcards; within a clause, the offers in the server's order. The index
/// of the offer (`type/subtype`) chosen, or `None` when none matches (a
/// 406 with an empty body upstream). As upstream, a `q=0` clause is not
/// treated specially.
pub fn negotiate(accept: Option<&str>, offers: &[&str]) -> Option<usize> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty()).unwrap_or("*/*");
    let mut clauses: Vec<(&str, &str, f64)> = Vec::new();
    for part in accept.split(',') {
        let mut pieces = part.split(';');
        let range = pieces.next().unwrap_or_default().trim();
        let (ty, sub) = match range.split_once('/') {
            Some((t, s)) if !s.contains('/') => (t.trim(), s.trim()),
            None if range == "*" => ("*", "*"),
            _ => continue,
        };
        let q = pieces
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim() == "q")
            .map_or(1.0, |(_, v)| v.trim().parse::<f64>().unwrap_or(0.0));
        clauses.push((ty, sub, q));
    }
    // Stable: clauses that tie keep the client's order.
    clauses.sort_by(|a, b| {
        b.2.total_cmp(&a.2).then_with(|| (a.0 == "*").cmp(&(b.0 == "*"))).then_with(|| (a.1 == "*").cmp(&(b.1 == "*")))
    });
    clauses.iter().find_map(|(ty, sub, _)| {
        offers.iter().position(|offer| {
            let (oty, osub) = offer.split_once('/').unwrap_or((offer, ""));
            (*ty == oty || *ty == "*") && (*sub == osub || *sub == "*")
        })
    })
}

/// The answer to an OpenAPI request that matched no offered media type:
/// 406 with an empty body, as kube-openapi writes it.
pub fn not_acceptable() -> Response<ResBody> {
    let mut r = Response::new(full(Vec::new()));
    *r.status_mut() = StatusCode::NOT_ACCEPTABLE;
    r.headers_mut().insert(VARY, HeaderValue::from_static("Accept"));
    r
}

/// `GET /openapi/v3` or one of its group-version documents, negotiated
/// as upstream's handler does; only the JSON form is served (the v3
/// protobuf form, which kubectl does not ask for, is not).
pub fn v3_response(accept: Option<&str>, doc: &Value) -> Response<ResBody> {
    if negotiate(accept, &["application/json"]).is_none() {
        return not_acceptable();
    }
    let mut r = Response::new(full(serde_json::to_vec(doc).unwrap_or_default()));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(VARY, HeaderValue::from_static("Accept"));
    r
}

/// A 200 answer carrying an OpenAPI document with an entity tag, or 304
/// when the client already holds that version (`If-None-Match`).
pub(crate) fn tagged_response(
    body: Vec<u8>,
    content_type: &'static str,
    etag: &str,
    if_none_match: Option<&str>,
) -> Response<ResBody> {
    let quoted = format!("\"{etag}\"");
    let unchanged = if_none_match
        .is_some_and(|h| h.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == quoted));
    let mut r = Response::new(full(if unchanged { Vec::new() } else { body }));
    if unchanged {
        *r.status_mut() = StatusCode::NOT_MODIFIED;
    } else {
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if let Ok(v) = HeaderValue::from_str(&quoted) {
        r.headers_mut().insert(ETAG, v);
    }
    r.headers_mut().insert(VARY, HeaderValue::from_static("Accept"));
    r
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

    #[test]
    fn an_unchanged_document_is_not_sent_again() {
        let fresh = tagged_response(b"{}".to_vec(), "application/json", "abc", None);
        assert_eq!(fresh.status(), StatusCode::OK);
        assert_eq!(fresh.headers()[ETAG], "\"abc\"");
        let same = tagged_response(b"{}".to_vec(), "application/json", "abc", Some("\"abc\""));
        assert_eq!(same.status(), StatusCode::NOT_MODIFIED);
        let other = tagged_response(b"{}".to_vec(), "application/json", "abc", Some("\"old\""));
        assert_eq!(other.status(), StatusCode::OK);
        assert_eq!(not_acceptable().status(), StatusCode::NOT_ACCEPTABLE);
    }
}
