//! The pod subresources that act rather than store: `pods/eviction`
//! (through the disruption budgets) and `pods/binding`.
//!
//! Invariant: the request is read and checked here; the decision is the
//! domain's ([`crate::pdb::evict`], [`crate::binding::bind`]), and each
//! refusal is answered with upstream's code and wording.

use bytes::Bytes;
use hyper::Response;
use serde_json::Value;

use super::response::{self, ResBody};
use super::state::HttpState;
use super::writes::grace_period;
use crate::binding::{self, BindRefused};
use crate::error::ApiError;
use crate::pdb::{self, EvictionRequest};

/// The `Status` both subresources answer with when they succeed.
const CREATED: &[u8] = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#;

/// `POST pods/{name}/eviction`: 201 when the pod was evicted (or was
/// terminating already), 429 when a budget forbids it.
pub(super) fn evict(
    sh: &HttpState,
    body: Value,
    dry: bool,
    ns: &str,
    name: &str,
) -> Result<Response<ResBody>, ApiError> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
    if kind != "Eviction" || !matches!(av, "policy/v1" | "policy/v1beta1") {
        return Err(ApiError::BadRequest(format!("{kind} in version {av:?} cannot be handled as an Eviction")));
    }
    if body.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
        return Err(ApiError::BadRequest("name in URL does not match name in Eviction object".into()));
    }
    let uid = body.pointer("/deleteOptions/preconditions/uid").and_then(Value::as_str).map(str::to_string);
    let grace = match body.get("deleteOptions") {
        Some(o) if !o.is_null() => grace_period(o)?,
        _ => None,
    };
    pdb::evict(&sh.cluster, &EvictionRequest { namespace: ns, name, uid, grace, dry })?;
    Ok(response::json_response(201, Bytes::from_static(CREATED)))
}

/// `POST pods/{name}/binding`: 201 when the pod was bound, 409 when it
/// is bound or going already.
pub(super) fn bind(
    sh: &HttpState,
    body: Value,
    dry: bool,
    ns: &str,
    name: &str,
) -> Result<Response<ResBody>, ApiError> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Binding");
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
    if kind != "Binding" || av != "v1" {
        return Err(ApiError::BadRequest(format!("{kind} in version {av:?} cannot be handled as a Binding")));
    }
    if body.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
        return Err(ApiError::BadRequest("name in URL does not match name in Binding object".into()));
    }
    let Some(node) = body.pointer("/target/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        return Err(ApiError::BadRequest("Binding.target.name is required".into()));
    };
    if body.pointer("/target/kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty() && k != "Node") {
        return Err(ApiError::BadRequest("Binding.target.kind must be Node".into()));
    }
    let uid = body.pointer("/metadata/uid").and_then(Value::as_str);
    binding::bind(&sh.cluster, ns, name, uid, node, dry).map_err(|why| binding_refused(why, name))?;
    Ok(response::json_response(201, Bytes::from_static(CREATED)))
}

/// The API's answer to a binding of the pod `name` refused for `why`.
fn binding_refused(why: BindRefused, name: &str) -> ApiError {
    let conflict =
        |resource: &str, message: String| ApiError::Conflict { resource: resource.into(), name: name.into(), message };
    match why {
        BindRefused::NoSuchPod => ApiError::NotFound { resource: "pods".into(), name: name.into() },
        BindRefused::UidMismatch(uid, actual) => {
            conflict("pods", format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"))
        }
        BindRefused::AlreadyBound(bound) => {
            conflict("pods/binding", format!("pod {name} is already assigned to node {bound:?}"))
        }
        BindRefused::Terminating => {
            conflict("pods/binding", format!("pod {name} is being deleted, cannot be assigned to a host"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused binding reads as upstream's: 404 for a missing pod, 409
    /// on `pods` for a uid precondition, 409 on `pods/binding` otherwise.
    #[test]
    fn binding_refusals_read_as_upstreams() {
        let read = |why| {
            let e = binding_refused(why, "dns");
            (e.code(), e.to_string())
        };
        assert_eq!(read(BindRefused::NoSuchPod), (404, "pods \"dns\" not found".to_string()));
        assert_eq!(
            read(BindRefused::UidMismatch("a".into(), "b".into())),
            (
                409,
                "Operation cannot be fulfilled on pods \"dns\": Precondition failed: UID in precondition: a, UID in object meta: b"
                    .to_string()
            )
        );
        assert_eq!(
            read(BindRefused::AlreadyBound("n1".into())),
            (
                409,
                "Operation cannot be fulfilled on pods/binding \"dns\": pod dns is already assigned to node \"n1\""
                    .to_string()
            )
        );
        assert_eq!(
            read(BindRefused::Terminating),
            (
                409,
                "Operation cannot be fulfilled on pods/binding \"dns\": pod dns is being deleted, cannot be assigned to a host"
                    .to_string()
            )
        );
    }
}
