//! The simulated kubelets' hands on the store: renewing node Leases and
//! posting Ready, through [`nodewarden_cluster::KubeletApi`].
//!
//! Invariant: a kubelet writes only its own node and Lease, and only what
//! a real kubelet writes (its Ready condition, the Lease's renew time and
//! holder); a node that is gone is left gone. Its other conditions
//! (memory, disk and PID pressure) are what the scenario says the node
//! is: a file's `DiskPressure: "True"` stays True through every status
//! post, as replay's kubelets leave it, so a file plays the same over the
//! wire as in replay.

use nodewarden_cluster::KubeletApi;
use nodewarden_engine::Observation;
use nodewarden_model::{ConditionStatus, Timestamp};
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
            // Ready only: the node's other conditions are the scenario's.
            for c in cs.iter_mut().filter(|c| c["type"] == "Ready") {
                found = true;
                if c["status"] != "True" {
                    c["lastTransitionTime"] = json!(at);
                }
                c["status"] = json!("True");
                c["reason"] = json!("KubeletReady");
                c["message"] = json!("kubelet is posting ready status");
                c["lastHeartbeatTime"] = json!(at);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreLimits};

    /// A file's node under disk and memory pressure stays so through its
    /// kubelet's status posts: only Ready is the kubelet's to write.
    #[test]
    fn status_posts_keep_the_nodes_other_conditions() {
        let store = Store::new(StoreLimits::default());
        let time = TimeBase::starting_now();
        let at = time.time(Timestamp::from_secs(0));
        let condition = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastHeartbeatTime": at, "lastTransitionTime": at});
        let node = json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]},
            "status": {"conditions": [
                condition("Ready", "False"),
                condition("DiskPressure", "True"),
                condition("MemoryPressure", "True"),
                condition("PIDPressure", "False"),
            ]},
        });
        let mut s = store.lock();
        s.commit(Kind::Node, "n1", node, false);
        let mut kubelets = StoreKubelets { s: &mut s, time, lease_duration: 40 };
        for i in 1..=3 {
            kubelets.post_ready("n1", Timestamp::from_secs(10 * i));
        }
        let v = s.get(Kind::Node, "n1").expect("node").value();
        let status = |kind: &str| {
            v["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .map(|c| c["status"].as_str().unwrap_or_default().to_string())
        };
        assert_eq!(status("Ready").as_deref(), Some("True"));
        assert_eq!(status("DiskPressure").as_deref(), Some("True"));
        assert_eq!(status("MemoryPressure").as_deref(), Some("True"));
        assert_eq!(status("PIDPressure").as_deref(), Some("False"));
        assert_eq!(v["spec"]["taints"][0]["key"], "node.kubernetes.io/disk-pressure");
    }
}
