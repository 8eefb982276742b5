//! What the served cluster adds to an object a client creates: admission
//! (DefaultTolerationSeconds, the pod spec's defaults, a namespace's
//! finalizer and phase) and, for a pod created bound to a Ready node, its
//! kubelet starting it.
//!
//! Invariant: only fields a real cluster's admission or kubelet would set
//! are touched, and only on create; the caller stores the result (or, for
//! a dry run, only answers with it).

use nodewarden_model::Timestamp;
use serde_json::{Value, json};

use crate::cluster::ServedCluster;
use crate::resource::Kind;
use crate::store::Inner;
use nodewarden_objects::write as convert;

/// Completes an object a client creates, before it is stored, with what
/// admission and the simulated kubelets would add, so a created pod looks
/// (and is read by the controller) as on a real cluster.
pub fn on_create(sh: &ServedCluster, s: &Inner, kind: Kind, v: &mut Value, now: Timestamp) {
    match kind {
        Kind::Pod => {
            // DefaultTolerationSeconds admission.
            let mut tols = nodewarden_objects::pod_tolerations(v);
            let before = tols.len();
            sh.admission.admit(&mut tols);
            if tols.len() != before
                && let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
            {
                let mut list = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
                list.extend(tols[before..].iter().map(convert::toleration_json));
                spec.insert("tolerations".into(), Value::Array(list));
            }
            if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
                for (k, d) in [
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                    ("schedulerName", json!("default-scheduler")),
                    ("serviceAccountName", json!("default")),
                    ("securityContext", json!({})),
                    ("enableServiceLinks", json!(true)),
                    ("priority", json!(0)),
                    ("preemptionPolicy", json!("PreemptLowerPriority")),
                ] {
                    spec.entry(k).or_insert(d);
                }
            }
            // A pod bound to a Ready node is started by its kubelet at once.
            let node = v.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
            let node_obj = if node.is_empty() { None } else { s.get(Kind::Node, &node) };
            let host = node_obj.as_ref().and_then(|n| {
                let nv = n.value();
                sh.node_ready(&nv).then(|| {
                    nv.pointer("/status/addresses/0/address").and_then(Value::as_str).unwrap_or("10.0.0.1").to_string()
                })
            });
            let ip = format!("10.250.{}.{}", (s.rv() >> 8) & 0xff, s.rv() & 0xff);
            v["status"] = convert::running_status(host.is_some(), true, now, host.as_deref(), &ip, &sh.time);
        }
        Kind::Namespace => {
            let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            v["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            v["spec"]["finalizers"] = json!(["kubernetes"]);
            v["status"] = json!({"phase": "Active"});
        }
        _ => {}
    }
}
