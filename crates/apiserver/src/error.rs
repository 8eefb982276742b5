//! API errors, answered as `metav1.Status` objects with the codes, reasons
//! and messages the real API server uses, so clients' error handling
//! (`IsNotFound`, `IsConflict`, retry on 429 with `Retry-After`, relist on
//! 410) works unchanged.
//!
//! This is the API's vocabulary of refusals, shared by the domain and the
//! HTTP layer; turning one into an HTTP answer is the HTTP layer's.
//! Invariant: an error's code, reason and message are upstream's for the
//! same refusal.

use serde_json::{Value, json};

/// One cause of an invalid object (`details.causes[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// The field path (`spec.taints[0].effect`).
    pub field: String,
    /// What is wrong, without the field path.
    pub message: String,
}

impl Cause {
    /// A cause with this reason at this field.
    pub fn new(reason: &'static str, field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause { reason, field: field.into(), message: message.into() }
    }
}

/// An error the API answers with. Domain code refuses in these terms too,
/// so an HTTP client and the in-process controller are told the same.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 400: the request cannot be understood (malformed JSON, wrong kind,
    /// a bad selector or parameter).
    #[error("{0}")]
    BadRequest(String),
    /// 401: the request carries no valid bearer token (the served API over
    /// HTTPS); worded as kube-apiserver words it.
    #[error("Unauthorized")]
    Unauthorized,
    /// 404: the object does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The qualified resource (`pods`, `leases.coordination.k8s.io`).
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 404: no such path or resource here.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 405: the verb is not served on this resource.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 406: no media type the client accepts is served.
    #[error("only the following media types are accepted: application/json")]
    NotAcceptable,
    /// 409: an object of this name exists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The qualified resource.
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409: the write's resourceVersion (or a precondition) is stale.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// The qualified resource.
        resource: String,
        /// The object's name.
        name: String,
        /// Why.
        message: String,
    },
    /// 410: the requested resourceVersion has been compacted away.
    #[error("{0}")]
    Gone(String),
    /// 413: the request body is larger than the server takes.
    #[error("Request entity too large: limit is {0}")]
    TooLarge(usize),
    /// 415: the patch or body type is not served.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: the object fails validation.
    #[error("{kind} \"{name}\" is invalid: {}", .causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>().join(", "))]
    Invalid {
        /// The object's kind (`Node`).
        kind: String,
        /// The group, empty for core.
        group: String,
        /// The object's name.
        name: String,
        /// What is wrong.
        causes: Vec<Cause>,
    },
    /// 429: too many requests, or an eviction a disruption budget forbids.
    #[error("{message}")]
    TooManyRequests {
        /// Why.
        message: String,
        /// `Retry-After`, seconds.
        retry_after: Option<u64>,
        /// `details.causes`, e.g. the `DisruptionBudget` cause of an eviction.
        causes: Vec<Cause>,
    },
    /// 500: something went wrong inside (a fault injected, or a bug).
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 503: the server cannot handle the request now (injected).
    #[error("{0}")]
    Unavailable(String),
    /// 504: the server timed out (a resourceVersion from the future).
    #[error("{0}")]
    Timeout(String),
    /// Any status code, for injected 5xx storms.
    #[error("{message}")]
    Code {
        /// The HTTP status code.
        code: u16,
        /// The Status reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
}

impl ApiError {
    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::NotFound { .. } | ApiError::NoRoute => 404,
            ApiError::MethodNotAllowed => 405,
            ApiError::NotAcceptable => 406,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Gone(_) => 410,
            ApiError::TooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Invalid { .. } => 422,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::Internal(_) => 500,
            ApiError::Unavailable(_) => 503,
            ApiError::Timeout(_) => 504,
            ApiError::Code { code, .. } => *code,
        }
    }

    /// The Status `reason` (`metav1.StatusReason`).
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::NotFound { .. } | ApiError::NoRoute => "NotFound",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::NotAcceptable => "NotAcceptable",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Gone(_) => "Expired",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unavailable(_) => "ServiceUnavailable",
            ApiError::Timeout(_) => "Timeout",
            ApiError::Code { reason, .. } => reason,
        }
    }

    /// `Retry-After` seconds, when the client should wait.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::TooManyRequests { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The `metav1.Status` object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name }
            | ApiError::Conflict { resource, name, .. } => {
                let (kind, group) = match resource.split_once('.') {
                    Some((k, g)) => (k, g),
                    None => (resource.as_str(), ""),
                };
                let mut d = json!({"name": name, "kind": kind});
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            ApiError::Invalid { kind, group, name, causes } => {
                let mut d = json!({"name": name, "kind": kind, "causes": causes_json(causes)});
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            ApiError::TooManyRequests { retry_after, causes, .. } => {
                let mut d = json!({});
                if let Some(r) = retry_after {
                    d["retryAfterSeconds"] = json!(r);
                }
                if !causes.is_empty() {
                    d["causes"] = causes_json(causes);
                }
                Some(d)
            }
            _ => None,
        };
        if let Some(d) = details {
            s["details"] = d;
        }
        s
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| {
                let mut v = json!({"reason": c.reason, "message": c.message});
                if !c.field.is_empty() {
                    v["field"] = json!(c.field);
                }
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_upstream_wording() {
        let e = ApiError::NotFound { resource: "leases.coordination.k8s.io".into(), name: "n".into() };
        let s = e.status();
        assert_eq!(s["message"], "leases.coordination.k8s.io \"n\" not found");
        assert_eq!(s["details"]["kind"], "leases");
        assert_eq!(s["details"]["group"], "coordination.k8s.io");
        assert_eq!(s["code"], 404);
        let e = ApiError::Invalid {
            kind: "Node".into(),
            group: String::new(),
            name: "n".into(),
            causes: vec![Cause::new("FieldValueRequired", "metadata.name", "Required value")],
        };
        assert_eq!(e.status()["message"], "Node \"n\" is invalid: metadata.name: Required value");
        let e = ApiError::TooManyRequests { message: "slow down".into(), retry_after: Some(3), causes: vec![] };
        assert_eq!(e.status()["details"]["retryAfterSeconds"], 3);
        assert_eq!(e.code(), 429);
        assert_eq!(
            ApiError::Unauthorized.status(),
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
    }
}
