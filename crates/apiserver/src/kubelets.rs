//! The simulated kubelets' hands on the store: renewing node Leases and
//! posting Ready, through [`nodewarden_sim::KubeletApi`].
//!
//! Invariant: a kubelet writes only its own node and Lease, and only what
//! a real kubelet writes (Ready and the pressure conditions, the Lease's
//! renew time and holder); a node that is gone is left gone.

use nodewarden_engine::Observation;
use nodewarden_model::{ConditionStatus, Timestamp};
use nodewarden_sim::KubeletApi;
use serde_json::{Value, json};

use crate::resource::Kind;
use crate::store::{Inner, NODE_READY, key_of};
use nodewarden_objects::NODE_LEASE_NAMESPACE;
use nodewarden_objects::TimeBase;
use nodewarden_objects::write as convert;

/// The simulator's kubelets, writing to the locked store: the same
/// kubelets as in replay, so a served node heartbeats as a simulated one.
pub struct StoreKubelets<'a> {
    /// The store, locked for the kubelets' pass.
    pub s: &'a mut Inner,
    /// Formats the times they write.
    pub time: TimeBase,
    /// `leaseDurationSeconds` of the Leases they create.
    pub lease_duration: i64,
}

impl KubeletApi for StoreKubelets<'_> {
    fn ready_status(&self, node: &str) -> Option<Option<ConditionStatus>> {
        let n = self.s.get(Kind::Node, node)?;
        Some(match n.field(NODE_READY).as_deref() {
            Some("True") => Some(ConditionStatus::True),
            Some("False") => Some(ConditionStatus::False),
            Some("") | None => None,
            Some(_) => Some(ConditionStatus::Unknown),
        })
    }

    fn renew_lease(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        let key = key_of(NODE_LEASE_NAMESPACE, node);
        let v = match self.s.get(Kind::Lease, &key) {
            Some(l) => {
                let mut v = l.value();
                v["spec"]["renewTime"] = json!(self.time.micro_time(now));
                v["spec"]["holderIdentity"] = json!(node);
                v
            }
            None => {
                let Some(n) = self.s.get(Kind::Node, node) else { return Vec::new() };
                let uid = self.s.next_uid();
                convert::lease_json(node, &n.uid, &uid, now, self.lease_duration, &self.time)
            }
        };
        self.s.commit(Kind::Lease, &key, v, false);
        Vec::new()
    }

    fn post_ready(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        let Some(n) = self.s.get(Kind::Node, node) else { return Vec::new() };
        let mut v = n.value();
        let at = self.time.time(now);
        let mut found = false;
        if let Some(cs) = v.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
            for c in cs.iter_mut() {
                let kind = c["type"].as_str().unwrap_or_default().to_string();
                match kind.as_str() {
                    "Ready" => {
                        found = true;
                        if c["status"] != "True" {
                            c["lastTransitionTime"] = json!(at);
                        }
                        c["status"] = json!("True");
                        c["reason"] = json!("KubeletReady");
                        c["message"] = json!("kubelet is posting ready status");
                        c["lastHeartbeatTime"] = json!(at);
                    }
                    t @ ("MemoryPressure" | "DiskPressure" | "PIDPressure") => {
                        if c["status"] != "False" {
                            c["lastTransitionTime"] = json!(at);
                        }
                        c["status"] = json!("False");
                        c["reason"] = json!(match t {
                            "MemoryPressure" => "KubeletHasSufficientMemory",
                            "DiskPressure" => "KubeletHasNoDiskPressure",
                            _ => "KubeletHasSufficientPID",
                        });
                        c["lastHeartbeatTime"] = json!(at);
                    }
                    _ => {}
                }
            }
        }
        if !found {
            let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": at, "lastTransitionTime": at});
            match v.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
                Some(cs) => cs.push(ready),
                None => v["status"]["conditions"] = json!([ready]),
            }
        }
        self.s.commit(Kind::Node, node, v, false);
        Vec::new()
    }
}
