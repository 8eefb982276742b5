//! Routing: from a request's path and verb to its handler, after reading
//! the request whole (body limit, media types, query).
//!
//! Invariant: every path and verb that is not served answers as upstream's
//! router does (404 `NoRoute`, 405, 413, 415), before any handler runs.

use std::sync::Arc;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};
use tracing::warn;

use super::objects::FieldValidation;
use super::request::Req;
use super::response::{self, ResBody};
use super::state::HttpState;
use super::writes::{Op, PatchKind};
use super::{openapi, openapi_v2, protobuf, reads, subresources, watch, writes};
use crate::error::ApiError;
use crate::resource::{self, Kind, Resource};

/// Routes a request by its path: discovery, health, version, OpenAPI,
/// and the resources.
pub(super) async fn route(sh: &Arc<HttpState>, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    // The OpenAPI documents are served by kube-openapi's handlers upstream,
    // with their own media types and negotiation (client-go asks for the v2
    // document in protobuf only), not the resource endpoints'.
    if req.uri().path().starts_with("/openapi/") {
        return openapi_request(&req, accept);
    }
    let wanted = response::negotiate(accept)?;
    let query = response::parse_query(req.uri().query());
    let path = req.uri().path().trim_end_matches('/').to_string();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<usize>().ok());
    let max = sh.config.max_body;
    if declared.is_some_and(|n| n > max) {
        return Err(ApiError::TooLarge(max));
    }
    let method = req.method().clone();
    let body = match Limited::new(req.into_body(), max).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(ApiError::TooLarge(max)),
    };
    let r = Req { method, query, wanted, content_type, body };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get_only = |v: Value| -> Result<Response<ResBody>, ApiError> {
        if r.method == Method::GET { Ok(response::value_response(200, &v)) } else { Err(ApiError::MethodNotAllowed) }
    };
    match segs.as_slice() {
        ["version"] => get_only(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-nodewarden-sim",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
        })),
        ["healthz" | "livez" | "readyz"] => {
            let mut resp = response::json_response(200, "ok");
            resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
            Ok(resp)
        }
        ["api"] => get_only(resource::core_versions(&sh.addr.get().map_or_else(String::new, ToString::to_string))),
        ["apis"] => get_only(resource::group_list()),
        ["api", "v1"] => get_only(resource::resource_list("", "v1").unwrap_or_default()),
        ["apis", g] => get_only(resource::group(g).ok_or(ApiError::NoRoute)?),
        ["apis", g, v] => get_only(resource::resource_list(g, v).ok_or(ApiError::NoRoute)?),
        ["api", "v1", rest @ ..] => resource_request(sh, &r, "", "v1", rest).await,
        ["apis", "events.k8s.io", ..] if !sh.config.events_v1 => Err(ApiError::NoRoute),
        ["apis", g, v, rest @ ..] => resource_request(sh, &r, g, v, rest).await,
        _ => Err(ApiError::NoRoute),
    }
}

/// `GET /openapi/v2`, `/openapi/v3` and the v3 group-version documents.
fn openapi_request(req: &Request<Incoming>, accept: Option<&str>) -> Result<Response<ResBody>, ApiError> {
    let path = req.uri().path().trim_end_matches('/');
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let v3 = |doc: Option<Value>| doc.map(|d| openapi::v3_response(accept, &d)).ok_or(ApiError::NoRoute);
    let known = matches!(
        segs.as_slice(),
        ["openapi", "v2" | "v3"] | ["openapi", "v3", "api", _] | ["openapi", "v3", "apis", _, _]
    );
    if known && req.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(match segs.as_slice() {
        ["openapi", "v2"] => {
            let if_none_match = req.headers().get(hyper::header::IF_NONE_MATCH).and_then(|v| v.to_str().ok());
            openapi_v2::response(accept, if_none_match).map_err(|e| {
                warn!(error = %e, "the OpenAPI v2 document could not be produced");
                ApiError::Unavailable(e.to_string())
            })?
        }
        ["openapi", "v3"] => v3(Some(openapi::index()))?,
        ["openapi", "v3", "api", v] => v3(openapi::group_version("", v))?,
        ["openapi", "v3", "apis", g, v] => v3(openapi::group_version(g, v))?,
        _ => return Err(ApiError::NoRoute),
    })
}

/// What a resource path names: the resource, and the namespace, name and
/// subresource when it has them.
type Target<'a> = (&'static Resource, Option<&'a str>, Option<&'a str>, Option<&'a str>);

/// Reads a resource path (after the group and version) as upstream's
/// router does: 404 for a namespaced resource without its namespace (or
/// the reverse), or for a subresource it does not serve.
fn target<'a>(group: &str, version: &str, rest: &[&'a str]) -> Result<Target<'a>, ApiError> {
    let find = |plural: &str| Resource::find(group, version, plural).ok_or(ApiError::NoRoute);
    let (res, ns, name, sub): Target<'a> = match rest {
        ["namespaces", ns, plural, tail @ ..] if group.is_empty() || *plural != "status" => {
            let res = find(plural)?;
            if !res.namespaced {
                return Err(ApiError::NoRoute);
            }
            match tail {
                [] => (res, Some(*ns), None, None),
                [name] => (res, Some(*ns), Some(*name), None),
                [name, sub] => (res, Some(*ns), Some(*name), Some(*sub)),
                _ => return Err(ApiError::NoRoute),
            }
        }
        [plural] => (find(plural)?, None, None, None),
        [plural, name] => {
            let res = find(plural)?;
            if res.namespaced {
                return Err(ApiError::NoRoute);
            }
            (res, None, Some(*name), None)
        }
        [plural, name, sub] => {
            let res = find(plural)?;
            if res.namespaced {
                return Err(ApiError::NoRoute);
            }
            (res, None, Some(*name), Some(*sub))
        }
        _ => return Err(ApiError::NoRoute),
    };
    if let Some(s) = sub
        && !res.subresources.contains(&s)
    {
        return Err(ApiError::NoRoute);
    }
    Ok((res, ns, name, sub))
}

/// A request on a resource: its verb and path choose the handler.
async fn resource_request(
    sh: &Arc<HttpState>,
    r: &Req,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response<ResBody>, ApiError> {
    let (res, ns, name, sub) = target(group, version, rest)?;
    let ns_str = ns.unwrap_or_default();
    // Whole objects come as JSON, but for the one protobuf body kubectl
    // sends here (a Namespace, from `kubectl create namespace`).
    let protobuf_namespace =
        r.method == Method::POST && res.kind == Kind::Namespace && r.content_type == protobuf::MEDIA_TYPE;
    if (r.method == Method::POST || r.method == Method::PUT)
        && !r.content_type.is_empty()
        && r.content_type != "application/json"
        && !protobuf_namespace
    {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format ({:?}) - accepted media types include: application/json",
            r.content_type
        )));
    }
    match (&r.method, name, sub) {
        (&Method::GET, None, None) => {
            if matches!(r.q("watch"), Some("true" | "1")) {
                watch::watch(sh, r, res, ns).await
            } else {
                reads::list(sh, r, res, ns)
            }
        }
        (&Method::GET, Some(n), None | Some("status")) => reads::get(sh, r, res, ns_str, n),
        (&Method::POST, None, None) => writes::create(sh, r, res, ns_str),
        (&Method::POST, Some(n), Some("eviction")) => subresources::evict(sh, r.json_body()?, r.dry_run()?, ns_str, n),
        (&Method::POST, Some(n), Some("binding")) => subresources::bind(sh, r.json_body()?, r.dry_run()?, ns_str, n),
        (&Method::PUT, Some(n), None | Some("status")) => {
            let fv = FieldValidation::parse(r.q("fieldValidation"))?;
            let body = r.json_body()?;
            writes::write(sh, r, res, ns_str, n, sub, Op::Replace(body), fv)
        }
        (&Method::PATCH, Some(n), None | Some("status")) => {
            let fv = FieldValidation::parse(r.q("fieldValidation"))?;
            let kind = match r.content_type.as_str() {
                "application/merge-patch+json" => PatchKind::Merge,
                "application/json-patch+json" => PatchKind::Json,
                "application/strategic-merge-patch+json" => PatchKind::Strategic,
                "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                    return Err(ApiError::UnsupportedMediaType(
                        "server-side apply is not implemented by nodewarden sim --serve; use a JSON merge, JSON or strategic merge patch".into(),
                    ));
                }
                other => {
                    return Err(ApiError::UnsupportedMediaType(format!(
                        "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                    )));
                }
            };
            let patch = r.json_body()?;
            writes::write(sh, r, res, ns_str, n, sub, Op::Patch(kind, patch), fv)
        }
        (&Method::DELETE, Some(n), None) => writes::delete(sh, r, res, ns_str, n),
        _ => Err(ApiError::MethodNotAllowed),
    }
}
