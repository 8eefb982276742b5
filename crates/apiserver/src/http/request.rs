//! A request as the handlers see it, with the readings of its query and
//! body that several handlers share.
//!
//! Invariant: an unreadable body or parameter is refused as upstream
//! words the refusal (400), before anything is read from the cluster.

use std::collections::HashMap;

use bytes::Bytes;
use hyper::Method;
use serde_json::Value;

use super::response::Wanted;
use crate::error::ApiError;

/// A request as the handlers see it: read whole, its query parsed, its
/// media types negotiated.
pub(super) struct Req {
    pub(super) method: Method,
    pub(super) query: HashMap<String, String>,
    pub(super) wanted: Wanted,
    pub(super) content_type: String,
    pub(super) body: Bytes,
}

impl Req {
    /// A query parameter; an empty one reads as absent, as upstream's
    /// decoding of `ListOptions` takes it.
    pub(super) fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }

    /// The body as JSON, refused as upstream words it.
    pub(super) fn json_body(&self) -> Result<Value, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::BadRequest("the request body is empty".into()));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the object provided is unrecognized: couldn't get version/kind; json parse error: {e}"
            ))
        })
    }

    /// `dryRun`: only `All` is served.
    pub(super) fn dry_run(&self) -> Result<bool, ApiError> {
        match self.q("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => {
                Err(ApiError::BadRequest(format!("Invalid dryRun value {other:?}: only \"All\" is supported")))
            }
        }
    }
}
