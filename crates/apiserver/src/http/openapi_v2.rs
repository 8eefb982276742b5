//! `GET /openapi/v2`: the Swagger 2.0 document of the served API, as JSON
//! or in the protobuf form of gnostic's `openapi_v2.Document`, which is
//! what client-go asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, nothing
//! else).
//!
//! kubectl reads it to validate a `kind: List` on the client (it never
//! asks the v3 documents whether the server validates a List; see
//! [`super::openapi`]) and, in client-side apply, to learn which patch
//! types an object's PATCH takes. The document lists the same paths and
//! operations as the v3 documents, with their group-version-kind, the
//! `fieldValidation` parameter and, on PATCH, the patch types served
//! (not server-side apply's, which is not). It has no definitions: kubectl
//! then skips client-side checks of the items and builds strategic merge
//! patches from its compiled-in types, as it does for any kind without a
//! schema, and the server validates every item it is sent.
//!
//! The protobuf form is encoded here from the JSON document, as
//! kube-openapi derives it from the JSON, for just the parts of the
//! Swagger schema this document uses; anything else is an
//! [`EncodeError`] (answered 503, as kube-openapi answers when it cannot
//! produce the document).
//!
//! Invariant: the protobuf form says what the JSON form says, or the
//! document is not served at all.

use hyper::Response;
use serde_json::{Map, Value, json};

use super::openapi::{self, Endpoint};
use super::response::ResBody;

/// The v2 protobuf media type as client-go asks for it.
pub const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The v2 protobuf media type as the server labels it (either request form
/// is answered with this one, as upstream does).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The patch types a PATCH here takes (no `application/apply-patch+yaml`:
/// server-side apply is not served).
const PATCH_TYPES: [&str; 3] =
    ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"];

/// A part of the JSON document the protobuf encoder does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the OpenAPI v2 document cannot be encoded as protobuf: {0}")]
pub struct EncodeError(String);

/// The Swagger operation object of one verb on one resource.
fn operation(e: &Endpoint, method: &str, action: &str, write: bool) -> Value {
    let parameters: Vec<Value> = openapi::query_parameters(write)
        .iter()
        .map(|name| json!({"name": name, "in": "query", "type": "string", "uniqueItems": true}))
        .collect();
    let mut op = json!({
        "operationId": format!("{action}{}", e.resource.kind_name),
        "produces": ["application/json"],
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": openapi::gvk(e.resource),
    });
    let consumes: &[&str] = match method {
        "patch" => &PATCH_TYPES,
        "post" | "put" => &["*/*"],
        _ => &[],
    };
    if !consumes.is_empty() {
        op["consumes"] = json!(consumes);
    }
    op
}

/// The whole document: every served resource's collection and item paths.
pub fn document() -> Value {
    let mut paths = Map::new();
    for e in openapi::endpoints(None) {
        let mut item = Map::new();
        let params: Vec<Value> = e
            .path_parameters
            .iter()
            .map(|name| json!({"name": name, "in": "path", "required": true, "type": "string", "uniqueItems": true}))
            .collect();
        if !params.is_empty() {
            item.insert("parameters".into(), Value::Array(params));
        }
        for (method, action, write) in e.operations {
            item.insert(method.to_string(), operation(&e, method, action, *write));
        }
        paths.insert(e.path.clone(), Value::Object(item));
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (nodewarden sim --serve)", "version": "v1.33.0"},
        "paths": paths,
        "definitions": {},
    })
}

/// A protobuf message being written: fields appended in the order given.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// A string field (proto3 leaves out the empty string).
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    /// A bool field (proto3 leaves out false).
    fn flag(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }
}

fn unknown(within: &str, key: &str) -> EncodeError {
    EncodeError(format!("{within} has a field {key:?} the encoder does not know"))
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, EncodeError> {
    v.as_object().ok_or_else(|| EncodeError(format!("{what} is not an object")))
}

fn text<'a>(v: &'a Value, what: &str) -> Result<&'a str, EncodeError> {
    v.as_str().ok_or_else(|| EncodeError(format!("{what} is not a string")))
}

fn flag(v: &Value, what: &str) -> Result<bool, EncodeError> {
    v.as_bool().ok_or_else(|| EncodeError(format!("{what} is not a boolean")))
}

/// A repeated string field from a JSON array of strings.
fn strings(m: &mut Message, field: u32, v: &Value, what: &str) -> Result<(), EncodeError> {
    let items = v.as_array().ok_or_else(|| EncodeError(format!("{what} is not an array")))?;
    for s in items {
        m.bytes(field, text(s, what)?.as_bytes());
    }
    Ok(())
}

/// A vendor extension (`NamedAny`): its name and its value as YAML text
/// (`Any.yaml`). JSON is YAML, so the value is written as JSON, which the
/// clients' YAML readers take as they take gnostic's block style.
fn extension(name: &str, v: &Value) -> Message {
    let mut any = Message::default();
    any.string(2, &format!("{v}\n"));
    let mut named = Message::default();
    named.string(1, name);
    named.message(2, any);
    named
}

/// `Info`: title 1, version 2, description 3, extensions 7.
fn info(v: &Value) -> Result<Message, EncodeError> {
    let mut m = Message::default();
    for (k, val) in object(v, "info")? {
        match k.as_str() {
            "title" => m.string(1, text(val, k)?),
            "version" => m.string(2, text(val, k)?),
            "description" => m.string(3, text(val, k)?),
            x if x.starts_with("x-") => m.message(7, extension(x, val)),
            other => return Err(unknown("info", other)),
        }
    }
    Ok(m)
}

/// `ParametersItem` holding a `Parameter` holding a `NonBodyParameter`
/// whose query (3) or path (4) sub-schema this is. The two sub-schemas
/// number their fields alike up to `name` (4) and differ after it.
fn parameter(v: &Value) -> Result<Message, EncodeError> {
    let fields = object(v, "parameter")?;
    let location = fields.get("in").and_then(Value::as_str).unwrap_or_default();
    let (which, type_field, unique_field, extension_field) = match location {
        "query" => (3, 6, 20, 23),
        "path" => (4, 5, 19, 22),
        other => return Err(EncodeError(format!("a parameter in {other:?} is not encoded (only query and path)"))),
    };
    let mut sub = Message::default();
    for (k, val) in fields {
        match k.as_str() {
            "required" => sub.flag(1, flag(val, k)?),
            "in" => sub.string(2, text(val, k)?),
            "description" => sub.string(3, text(val, k)?),
            "name" => sub.string(4, text(val, k)?),
            "type" => sub.string(type_field, text(val, k)?),
            "uniqueItems" => sub.flag(unique_field, flag(val, k)?),
            x if x.starts_with("x-") => sub.message(extension_field, extension(x, val)),
            other => return Err(unknown("parameter", other)),
        }
    }
    let mut non_body = Message::default();
    non_body.message(which, sub);
    let mut param = Message::default();
    param.message(2, non_body);
    let mut item = Message::default();
    item.message(1, param);
    Ok(item)
}

fn parameters(m: &mut Message, field: u32, v: &Value) -> Result<(), EncodeError> {
    let items = v.as_array().ok_or_else(|| EncodeError("parameters is not an array".into()))?;
    for p in items {
        m.message(field, parameter(p)?);
    }
    Ok(())
}

/// `Responses`: each code a `NamedResponseValue` (1) whose `ResponseValue`
/// holds a `Response` (description 1).
fn responses(v: &Value) -> Result<Message, EncodeError> {
    let mut m = Message::default();
    for (code, val) in object(v, "responses")? {
        if code.starts_with("x-") {
            m.message(2, extension(code, val));
            continue;
        }
        let mut response = Message::default();
        for (k, field) in object(val, "response")? {
            match k.as_str() {
                "description" => response.string(1, text(field, k)?),
                other => return Err(unknown("response", other)),
            }
        }
        let mut value = Message::default();
        value.message(1, response);
        let mut named = Message::default();
        named.string(1, code);
        named.message(2, value);
        m.message(1, named);
    }
    Ok(m)
}

/// `Operation`: tags 1, summary 2, description 3, operationId 5,
/// produces 6, consumes 7, parameters 8, responses 9, schemes 10,
/// deprecated 11, extensions 13.
fn operation_message(v: &Value) -> Result<Message, EncodeError> {
    let mut m = Message::default();
    for (k, val) in object(v, "operation")? {
        match k.as_str() {
            "tags" => strings(&mut m, 1, val, k)?,
            "summary" => m.string(2, text(val, k)?),
            "description" => m.string(3, text(val, k)?),
            "operationId" => m.string(5, text(val, k)?),
            "produces" => strings(&mut m, 6, val, k)?,
            "consumes" => strings(&mut m, 7, val, k)?,
            "parameters" => parameters(&mut m, 8, val)?,
            "responses" => m.message(9, responses(val)?),
            "schemes" => strings(&mut m, 10, val, k)?,
            "deprecated" => m.flag(11, flag(val, k)?),
            x if x.starts_with("x-") => m.message(13, extension(x, val)),
            other => return Err(unknown("operation", other)),
        }
    }
    Ok(m)
}

/// `PathItem`: get 2, put 3, post 4, delete 5, options 6, head 7,
/// patch 8, parameters 9, extensions 10.
fn path_item(v: &Value) -> Result<Message, EncodeError> {
    let mut m = Message::default();
    for (k, val) in object(v, "path item")? {
        let field = match k.as_str() {
            "get" => 2,
            "put" => 3,
            "post" => 4,
            "delete" => 5,
            "options" => 6,
            "head" => 7,
            "patch" => 8,
            "parameters" => {
                parameters(&mut m, 9, val)?;
                continue;
            }
            x if x.starts_with("x-") => {
                m.message(10, extension(x, val));
                continue;
            }
            other => return Err(unknown("path item", other)),
        };
        m.message(field, operation_message(val)?);
    }
    Ok(m)
}

/// `Paths`: extensions 1, each path a `NamedPathItem` (name 1, value 2) in 2.
fn paths(v: &Value) -> Result<Message, EncodeError> {
    let mut m = Message::default();
    for (path, val) in object(v, "paths")? {
        if path.starts_with("x-") {
            m.message(1, extension(path, val));
            continue;
        }
        let mut named = Message::default();
        named.string(1, path);
        named.message(2, path_item(val)?);
        m.message(2, named);
    }
    Ok(m)
}

/// `Document`: swagger 1, info 2, host 3, basePath 4, schemes 5,
/// consumes 6, produces 7, paths 8, definitions 9 (only empty here),
/// extensions 16.
pub fn encode(doc: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut m = Message::default();
    for (k, val) in object(doc, "the document")? {
        match k.as_str() {
            "swagger" => m.string(1, text(val, k)?),
            "info" => m.message(2, info(val)?),
            "host" => m.string(3, text(val, k)?),
            "basePath" => m.string(4, text(val, k)?),
            "schemes" => strings(&mut m, 5, val, k)?,
            "consumes" => strings(&mut m, 6, val, k)?,
            "produces" => strings(&mut m, 7, val, k)?,
            "paths" => m.message(8, paths(val)?),
            "definitions" if object(val, k)?.is_empty() => m.message(9, Message::default()),
            x if x.starts_with("x-") => m.message(16, extension(x, val)),
            other => return Err(unknown("the document", other)),
        }
    }
    Ok(m.0)
}

/// An entity tag for the document: FNV-1a of its JSON, which changes only
/// with the binary (the document is the same for every server it runs).
fn etag(json: &[u8]) -> String {
    let hash = json.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016X}")
}

/// `GET /openapi/v2`, negotiated as kube-openapi negotiates it: JSON for
/// `application/json` (or no `Accept`), protobuf for either protobuf
/// type, else 406 with an empty body; a client holding the current
/// version (`If-None-Match`) gets 304.
pub fn response(accept: Option<&str>, if_none_match: Option<&str>) -> Result<Response<ResBody>, EncodeError> {
    let Some(chosen) = openapi::negotiate(accept, &["application/json", PROTOBUF_DEPRECATED, PROTOBUF]) else {
        return Ok(openapi::not_acceptable());
    };
    let doc = document();
    let json = serde_json::to_vec(&doc).map_err(|e| EncodeError(e.to_string()))?;
    // The JSON and protobuf forms share the tag, as upstream's do (the
    // answer varies with `Accept`).
    let tag = etag(&json);
    Ok(if chosen == 0 {
        openapi::tagged_response(json, "application/json", &tag, if_none_match)
    } else {
        openapi::tagged_response(encode(&doc)?, PROTOBUF, &tag, if_none_match)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_kube_openapi() {
        let v2 = ["application/json", PROTOBUF_DEPRECATED, PROTOBUF];
        // What client-go sends for the v2 document.
        assert_eq!(
            openapi::negotiate(Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), &v2),
            Some(1)
        );
        assert_eq!(
            openapi::negotiate(Some("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), &v2),
            Some(2)
        );
        assert_eq!(openapi::negotiate(None, &v2), Some(0));
        assert_eq!(openapi::negotiate(Some(""), &v2), Some(0));
        assert_eq!(openapi::negotiate(Some("application/json, */*"), &v2), Some(0));
        assert_eq!(openapi::negotiate(Some("application/*"), &v2), Some(0));
        // The highest q wins, whatever the order; concrete before wildcard.
        let pb_first = "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        assert_eq!(openapi::negotiate(Some(pb_first), &v2), Some(2));
        assert_eq!(
            openapi::negotiate(Some("*/*, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), &v2),
            Some(2)
        );
        assert_eq!(openapi::negotiate(Some("text/html, application/xml"), &v2), None);
        assert_eq!(openapi::negotiate(Some("application/vnd.kubernetes.protobuf"), &v2), None);
        assert_eq!(openapi::negotiate(Some("garbage"), &v2), None);
        assert_eq!(
            openapi::negotiate(
                Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
                &["application/json"]
            ),
            None
        );
    }

    /// Reads one message's fields: (number, wire type, bytes of a
    /// length-delimited field or the varint's value as bytes).
    fn fields(mut b: &[u8]) -> Vec<(u64, u64, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let (&byte, rest) = b.split_first().expect("truncated varint");
                *b = rest;
                v |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            v
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            match key & 7 {
                0 => out.push((key >> 3, 0, varint(&mut b).to_le_bytes().to_vec())),
                2 => {
                    let len = varint(&mut b) as usize;
                    out.push((key >> 3, 2, b[..len].to_vec()));
                    b = &b[len..];
                }
                other => panic!("unexpected wire type {other}"),
            }
        }
        out
    }

    fn field(b: &[u8], n: u64) -> Vec<Vec<u8>> {
        fields(b).into_iter().filter(|f| f.0 == n).map(|f| f.2).collect()
    }

    fn one(b: &[u8], n: u64) -> Vec<u8> {
        let mut all = field(b, n);
        assert_eq!(all.len(), 1, "field {n} appears {} times", all.len());
        all.remove(0)
    }

    #[test]
    fn protobuf_form_carries_the_paths_patch_types_and_field_validation() {
        let doc = document();
        let pb = encode(&doc).expect("encodes");
        assert_eq!(one(&pb, 1), b"2.0");
        assert_eq!(one(&one(&pb, 2), 2), b"v1.33.0");
        assert!(one(&pb, 9).is_empty(), "no definitions");
        let named_paths = field(&one(&pb, 8), 2);
        assert_eq!(named_paths.len(), doc["paths"].as_object().map_or(0, Map::len));
        let pod_item = named_paths
            .iter()
            .find(|p| one(p, 1) == b"/api/v1/namespaces/{namespace}/pods/{name}")
            .expect("the pod item path");
        let item = one(pod_item, 2);
        // Path parameters: name and namespace, as path sub-schemas.
        let path_params: Vec<Vec<u8>> = field(&item, 9).iter().map(|p| one(&one(&one(p, 1), 2), 4)).collect();
        assert_eq!(
            path_params.iter().map(|p| one(p, 4)).collect::<Vec<_>>(),
            [b"name".to_vec(), b"namespace".to_vec()]
        );
        assert!(path_params.iter().all(|p| one(p, 1) == 1u64.to_le_bytes()));
        let patch = one(&item, 8);
        let consumes = field(&patch, 7);
        assert!(consumes.contains(&b"application/strategic-merge-patch+json".to_vec()));
        assert!(!consumes.iter().any(|c| c.starts_with(b"application/apply-patch")));
        let query: Vec<Vec<u8>> = field(&patch, 8).iter().map(|p| one(&one(&one(&one(p, 1), 2), 3), 4)).collect();
        assert!(query.contains(&b"fieldValidation".to_vec()), "{query:?}");
        let gvk = field(&patch, 13)
            .into_iter()
            .find(|e| one(e, 1) == b"x-kubernetes-group-version-kind")
            .map(|e| one(&one(&e, 2), 2))
            .expect("gvk extension");
        let gvk: Value = serde_json::from_slice(&gvk).expect("the extension is JSON");
        assert_eq!(gvk, json!({"group": "", "version": "v1", "kind": "Pod"}));
        let ok = one(&one(&one(&one(&patch, 9), 1), 2), 1);
        assert_eq!(one(&ok, 1), b"OK");
    }

    #[test]
    fn unknown_parts_are_refused_not_dropped() {
        let err = encode(&json!({"swagger": "2.0", "securityDefinitions": {}})).expect_err("unknown field");
        assert!(err.to_string().contains("securityDefinitions"), "{err}");
        let body = json!({"paths": {"/x": {"post": {"parameters": [{"in": "body", "name": "body"}]}}}});
        assert!(encode(&body).expect_err("body parameter").to_string().contains("\"body\""));
        assert!(encode(&json!({"definitions": {"a": {}}})).is_err());
    }

    #[test]
    fn answers_by_accept_header() {
        let pb = response(Some(PROTOBUF_DEPRECATED), None).expect("served");
        assert_eq!(pb.status(), 200);
        assert_eq!(pb.headers()["content-type"], PROTOBUF);
        let json = response(Some("application/json"), None).expect("served");
        assert_eq!(json.headers()["content-type"], "application/json");
        assert_eq!(json.headers()["etag"], pb.headers()["etag"]);
        let tag = pb.headers()["etag"].to_str().map(str::to_string).unwrap_or_default();
        assert_eq!(response(Some(PROTOBUF), Some(&tag)).expect("served").status(), 304);
        assert_eq!(response(Some("text/html"), None).expect("served").status(), 406);
    }
}
