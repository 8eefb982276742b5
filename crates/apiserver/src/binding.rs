//! `POST pods/{name}/binding`: what a scheduler writes to place a pod.
//!
//! The served cluster has no scheduler of its own (a deliberate absence),
//! but a test, or a scheduler run against the served API, binds pods the
//! way kube-scheduler does: a `Binding` naming the node. As upstream, a
//! pod already bound is a conflict; the bound pod gets
//! `PodScheduled=True`, and its node's kubelet starts it at once when the
//! node is Ready (as for a pod created bound).

use bytes::Bytes;
use hyper::Response;
use serde_json::{Value, json};

use crate::convert;
use crate::error::ApiError;
use crate::http::{self, ResBody};
use crate::resource::Kind;
use crate::server::Shared;
use crate::store::{Inner, key_of};
use nodewarden_model::Timestamp;

/// Binds the pod `v` to `node` as the API does: `spec.nodeName`, and
/// `PodScheduled=True`; when the node is Ready its kubelet starts the pod
/// at once (Running, Ready), as for a pod created bound.
pub fn assign(s: &Inner, sh: &Shared, v: &mut Value, node: &str, now: Timestamp) {
    let host = s.get(Kind::Node, node).and_then(|n| {
        let nv = n.value();
        let ready = convert::node_snapshot(&nv, &sh.time).conditions.iter().any(|c| {
            c.kind == nodewarden_model::ConditionType::Ready && c.status == nodewarden_model::ConditionStatus::True
        });
        ready.then(|| {
            nv.pointer("/status/addresses/0/address").and_then(Value::as_str).unwrap_or("10.0.0.1").to_string()
        })
    });
    v["spec"]["nodeName"] = json!(node);
    if host.is_some() {
        let ip = format!("10.250.{}.{}", (s.rv() >> 8) & 0xff, s.rv() & 0xff);
        v["status"] = convert::running_status(true, true, now, host.as_deref(), &ip, &sh.time);
    } else {
        let at = sh.time.time(now);
        let scheduled =
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": at});
        let mut conditions: Vec<Value> = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter().filter(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled")).cloned().collect()
            })
            .unwrap_or_default();
        conditions.push(scheduled);
        v["status"]["conditions"] = Value::Array(conditions);
    }
}

/// `POST pods/{name}/binding`.
pub fn bind(sh: &Shared, body: Value, dry: bool, ns: &str, name: &str) -> Result<Response<ResBody>, ApiError> {
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
    let mut s = sh.store.lock();
    let key = key_of(ns, name);
    let pod =
        s.get(Kind::Pod, &key).ok_or_else(|| ApiError::NotFound { resource: "pods".into(), name: name.into() })?;
    if let Some(uid) = body.pointer("/metadata/uid").and_then(Value::as_str)
        && !uid.is_empty()
        && uid != pod.uid
    {
        return Err(ApiError::Conflict {
            resource: "pods".into(),
            name: name.into(),
            message: format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", pod.uid),
        });
    }
    let mut v = pod.value();
    if let Some(bound) = v.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return Err(ApiError::Conflict {
            resource: "pods/binding".into(),
            name: name.into(),
            message: format!("pod {name} is already assigned to node {bound:?}"),
        });
    }
    if v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
        return Err(ApiError::Conflict {
            resource: "pods/binding".into(),
            name: name.into(),
            message: format!("pod {name} is being deleted, cannot be assigned to a host"),
        });
    }
    assign(&s, sh, &mut v, node, sh.time.now());
    if !dry {
        s.commit(Kind::Pod, &key, v, false);
    }
    drop(s);
    Ok(http::json_response(
        201,
        Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#),
    ))
}
