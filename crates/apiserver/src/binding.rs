//! Binding a pod to a node: what `POST pods/{name}/binding` does, what
//! the served scheduler does for a pod that fits, and a scenario's
//! `bind-pod`.
//!
//! The served cluster runs no scheduler unless asked for, but a test, or a
//! scheduler run against the served API, binds pods the way kube-scheduler
//! does: a `Binding` naming the node. Invariant, as upstream: a pod
//! already bound (or being deleted) is never bound again; a bound pod gets
//! `PodScheduled=True`, and its node's kubelet starts it at once when the
//! node is Ready (as for a pod created bound).

use serde_json::{Value, json};

use crate::cluster::ServedCluster;
use crate::resource::Kind;
use crate::store::{Inner, key_of};
use nodewarden_model::Timestamp;
use nodewarden_objects::write as convert;

/// Binds the pod `v` to `node` as the API does: `spec.nodeName`, and
/// `PodScheduled=True`; when the node is Ready its kubelet starts the pod
/// at once (Running, Ready), as for a pod created bound.
pub fn assign(s: &Inner, sh: &ServedCluster, v: &mut Value, node: &str, now: Timestamp) {
    let host = s.get(Kind::Node, node).and_then(|n| {
        let nv = n.value();
        sh.node_ready(&nv).then(|| {
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

/// Why a binding was refused: a verdict the HTTP layer words as upstream
/// does (404, or 409 naming the pod).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindRefused {
    /// No pod of that name.
    NoSuchPod,
    /// The binding's uid precondition names another pod (the uid asked
    /// for, the stored pod's).
    UidMismatch(String, String),
    /// The pod is bound already, to this node.
    AlreadyBound(String),
    /// The pod is being deleted.
    Terminating,
}

/// Binds the pod `ns/name` to `node` unless it is bound or going already
/// (`uid`: the binding's precondition, when it has one); with `dry`,
/// judges and changes nothing.
pub fn bind(
    sh: &ServedCluster,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    node: &str,
    dry: bool,
) -> Result<(), BindRefused> {
    let mut s = sh.store.lock();
    let key = key_of(ns, name);
    let pod = s.get(Kind::Pod, &key).ok_or(BindRefused::NoSuchPod)?;
    if let Some(uid) = uid
        && !uid.is_empty()
        && uid != pod.uid
    {
        return Err(BindRefused::UidMismatch(uid.to_string(), pod.uid.clone()));
    }
    let mut v = pod.value();
    if let Some(bound) = v.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return Err(BindRefused::AlreadyBound(bound.to_string()));
    }
    if v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
        return Err(BindRefused::Terminating);
    }
    assign(&s, sh, &mut v, node, sh.time.now());
    if !dry {
        s.commit(Kind::Pod, &key, v, false);
    }
    Ok(())
}
