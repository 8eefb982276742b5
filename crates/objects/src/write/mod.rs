//! nodewarden's objects written as the API server holds them: whole
//! Nodes, Pods and Leases with every field a real cluster's carry, from
//! the engine's snapshots.
//!
//! The served cluster (`nodewarden sim --serve`) writes every object it
//! serves through here, and tests store objects through here too, so what
//! a test stores is what the served cluster would have written.
//!
//! Invariant: reading a written object back ([`crate::Reader`], on the
//! clock it was written on) gives the snapshot it was written from.

mod lease;
mod node;
mod pod;
mod selector;

pub use lease::{lease_json, lease_json_created};
pub use node::{KUBELET_VERSION, condition_json, node_ip, node_json, resources_json, taint_json};
pub use pod::{pod_json, running_status, toleration_json};
pub use selector::label_selector_json;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_engine::{NodeSnapshot, PodSnapshot};
    use nodewarden_model::{
        ConditionStatus, ConditionType, NodeCondition, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator,
    };

    use super::*;
    use crate::{Detail, Reader, TimeBase};

    #[test]
    fn node_and_pod_round_trip_through_json() {
        let time = TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 };
        let t = |s: i64| Timestamp::from_nanos(s * 1_000_000_000);
        let node = NodeSnapshot {
            version: 0,
            allocatable: None,
            name: "n1".into(),
            created: t(-100),
            labels: BTreeMap::from([("topology.kubernetes.io/zone".into(), "a".into())]),
            conditions: vec![NodeCondition {
                kind: ConditionType::Ready,
                status: ConditionStatus::True,
                reason: "KubeletReady".into(),
                message: String::new(),
                last_heartbeat: t(5),
                last_transition: t(-100),
            }],
            taints: vec![Taint { time_added: Some(t(3)), ..Taint::new("k", TaintEffect::NoExecute) }],
            unschedulable: true,
        };
        let v = node_json(&node, "u", 1, &time);
        let read = Reader::new(Detail::Lifecycle).on(time);
        let mut back = read.node(&v, t(0)).expect("a named node");
        assert_eq!(back.labels.remove("kubernetes.io/hostname").as_deref(), Some("n1"));
        assert_eq!(back, node);
        let pod = PodSnapshot {
            version: 0,
            node_lost: false,
            scheduling: None,
            key: "ns/p".into(),
            uid: "pu".into(),
            node: Some("n1".into()),
            daemonset: true,
            ready: Some(true),
            terminating: false,
            tolerations: vec![Toleration {
                key: "k".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: Some(TaintEffect::NoExecute),
                seconds: Some(30),
            }],
        };
        let v = pod_json(&pod, "pu", t(0), Some("10.0.0.1"), "10.1.0.1", &time);
        assert_eq!(read.pod(&v, t(0)), Some(pod));
    }
}
