//! HTTP plumbing: bodies, responses, query strings and content negotiation.
//!
//! Invariant: every refusal goes out as a `metav1.Status` with the
//! [`ApiError`]'s code, and `Retry-After` when it carries one.

use std::collections::HashMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::ApiError;

/// Returned by a body (or the service) to cut the connection: how an
/// outage looks from the client.
#[derive(Debug, thiserror::Error)]
#[error("connection cut by an injected API outage")]
pub struct Abort;

/// Every response body.
pub type ResBody = BoxBody<Bytes, Abort>;

/// A response body fed through a channel (watches).
pub struct ChannelBody {
    /// Chunks, or `Err` to cut the connection.
    pub rx: mpsc::Receiver<Result<Bytes, Abort>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Abort;
    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Abort>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }
}

/// A whole body.
pub fn full(b: impl Into<Bytes>) -> ResBody {
    http_body_util::Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// A JSON response.
pub fn json_response(code: u16, body: impl Into<Bytes>) -> Response<ResBody> {
    streamed_json_response(code, full(body))
}

/// A JSON response whose body is written as it is sent (a list page).
pub fn streamed_json_response(code: u16, body: ResBody) -> Response<ResBody> {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A JSON value response.
pub fn value_response(code: u16, v: &Value) -> Response<ResBody> {
    json_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// The Status response for an error.
pub fn error_response(e: &ApiError) -> Response<ResBody> {
    let mut r = value_response(e.code(), &e.status());
    if let Some(secs) = e.retry_after()
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        r.headers_mut().insert(RETRY_AFTER, v);
    }
    r
}

/// Adds `Warning: 299 - "..."` headers.
pub fn add_warnings(r: &mut Response<ResBody>, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append("Warning", v);
        }
    }
}

fn unhex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes a query component (`+` is a space).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (unhex(b[i + 1]), unhex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string (the last value of a repeated key wins).
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// What the client asked for in `Accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// The object(s) as they are.
    Object,
    /// A `meta.k8s.io` Table (`kubectl get`), at v1 or v1beta1.
    Table(&'static str),
}

/// Reads `Accept`: a Table when the client lists one (before plain JSON),
/// JSON otherwise; 406 when it accepts nothing served.
pub fn negotiate(accept: Option<&str>) -> Result<Wanted, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok(Wanted::Object) };
    let mut json_ok = false;
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        if !matches!(media, "application/json" | "*/*" | "application/*") {
            continue;
        }
        match (param("as"), param("g"), param("v")) {
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Ok(Wanted::Table("meta.k8s.io/v1")),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => return Ok(Wanted::Table("meta.k8s.io/v1beta1")),
            (None, _, _) => json_ok = true,
            _ => {}
        }
    }
    if json_ok { Ok(Wanted::Object) } else { Err(ApiError::NotAcceptable) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_accept() {
        let q = parse_query(Some("labelSelector=a%3Db%2Cc+in+(x)&watch=1&limit"));
        assert_eq!(q["labelSelector"], "a=b,c in (x)");
        assert_eq!(q["limit"], "");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(kubectl)), Ok(Wanted::Table("meta.k8s.io/v1")));
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf, application/json")), Ok(Wanted::Object));
        assert_eq!(negotiate(None), Ok(Wanted::Object));
        assert_eq!(
            negotiate(Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")),
            Ok(Wanted::Object)
        );
        assert!(negotiate(Some("application/vnd.kubernetes.protobuf")).is_err());
    }
}
