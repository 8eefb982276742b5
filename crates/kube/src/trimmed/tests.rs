//! What a watch's decode gives: the typed reading of a well-formed
//! object, the lenient one of an odd object, the whole page either way;
//! and what those readings make the controller do.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{Span, Timestamp};
use nodewarden_objects::{Detail, node_reading, pod_reading};
use serde_json::{Value, json};

use crate::{Scheduled, Trimmed};

/// When the objects of these tests are seen: 2025-01-01T00:00:00Z.
fn seen() -> Timestamp {
    Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
}

fn node(v: Value) -> NodeSnapshot {
    node_reading(&v, seen(), Detail::Lifecycle).expect("a named node is read")
}

fn pod(v: Value) -> PodSnapshot {
    pod_reading(&v, seen(), Detail::Lifecycle).expect("an identified pod is read")
}

/// A pod as `nodewarden sim --serve` serves it.
fn served_pod() -> Value {
    serde_json::from_str(include_str!("../../../objects/samples/pod.json")).expect("the sample is JSON")
}

fn lenient_pod(v: &Value) -> Option<Observation> {
    pod_reading(v, Timestamp::EPOCH, Detail::Lifecycle).map(Observation::PodUpserted)
}

#[test]
fn an_odd_pod_decodes_to_its_lenient_reading() {
    let odd: [fn(&mut Value); 4] = [
        |v| v["metadata"]["ownerReferences"] = json!([{"name": "no kind"}]),
        |v| v["status"]["conditions"][2]["status"] = json!("Maybe"),
        |v| v["spec"]["tolerations"][0]["tolerationSeconds"] = json!(1.5),
        |v| v["metadata"] = json!(null),
    ];
    for (i, change) in odd.iter().enumerate() {
        let mut v = served_pod();
        change(&mut v);
        let text = v.to_string();
        assert!(nodewarden_objects::typed::pod(&text).is_none(), "case {i}: {text}");
        let decoded = Trimmed::<Pod>::from_text(&text, Timestamp::EPOCH).expect("JSON");
        assert_eq!(decoded.reading, lenient_pod(&v), "case {i}");
    }
}

#[test]
fn an_odd_lease_decodes_to_its_lenient_reading() {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n1", "namespace": "kube-node-lease", "uid": "u", "resourceVersion": "5"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-11-26T06:00:37.123456Z"}});
    for renew in [json!("2026-11-26T06:00:37.123456Z"), json!("yesterday"), json!(5)] {
        let mut v = lease.clone();
        v["spec"]["renewTime"] = renew;
        let decoded = Trimmed::<Lease>::from_text(&v.to_string(), Timestamp::EPOCH).expect("JSON");
        assert_eq!(decoded.reading, nodewarden_objects::lease_reading(&v, Timestamp::EPOCH), "{v}");
    }
}

#[test]
fn a_list_page_decodes_typed_and_odd_objects_alike() {
    let good = served_pod();
    let mut odd = served_pod();
    odd["metadata"]["name"] = json!("odd");
    odd["spec"]["tolerations"][1]["operator"] = json!("Lt");
    let page = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"},
                      "items": [good, odd]});
    let list: kube::core::ObjectList<Trimmed<Pod>> = serde_json::from_str(&page.to_string()).expect("decodes");
    let readings: Vec<_> = list.items.iter().map(|t| t.reading.clone()).collect();
    let lenient: Vec<_> = [good, odd].iter().map(lenient_pod).collect();
    assert_eq!(readings, lenient);
    assert_eq!(list.items[1].metadata.name.as_deref(), Some("odd"));
}

#[test]
fn a_list_page_with_a_malformed_object_decodes_whole() {
    let page = json!({
        "apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"},
        "items": [
            {"metadata": {"name": "good", "resourceVersion": "5"}},
            {"metadata": {"name": "bad", "resourceVersion": "6", "creationTimestamp": "9999-12-31T23:59:59Z"},
             "spec": {"taints": 12}},
            17,
        ],
    });
    assert!(serde_json::from_value::<kube::core::ObjectList<Node>>(page.clone()).is_err());
    let list: kube::core::ObjectList<Trimmed<Node>> = serde_json::from_value(page).expect("lenient page");
    let names: Vec<_> = list.items.iter().map(|n| n.metadata.name.clone()).collect();
    assert_eq!(names, [Some("good".into()), Some("bad".into()), None]);
    assert_eq!(list.items[1].metadata.resource_version.as_deref(), Some("6"));
    assert!(matches!(&list.items[1].reading, Some(Observation::NodeUpserted(n)) if n.name == "bad"));
    assert!(list.items[2].reading.is_none());
}

/// Answers every write as done, with the node a taint patch leaves (so
/// the taint manager observes the taint), and records the pods deleted.
#[derive(Default)]
struct Accepting {
    deleted: Vec<String>,
    nodes: std::collections::BTreeMap<String, NodeSnapshot>,
}

impl nodewarden_controller::ClusterApi for Accepting {
    fn apply(&mut self, _now: Timestamp, action: &nodewarden_engine::Action) -> nodewarden_controller::Applied {
        let done = nodewarden_engine::WriteOutcome::Done;
        let mut observations = vec![Observation::WriteFinished { id: action.id, outcome: done.clone() }];
        match &action.kind {
            nodewarden_engine::ActionKind::DeletePod { pod, .. } => self.deleted.push(pod.clone()),
            nodewarden_engine::ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
                    n.taints.extend(add.iter().cloned());
                    observations.push(Observation::NodeUpserted(n.clone()));
                }
            }
            _ => {}
        }
        nodewarden_controller::Applied { observations, outcome: action.kind.slot().map(|_| done), violation: None }
    }
}

#[test]
fn undecodable_tolerations_keep_a_pod_on_a_tainted_node() {
    let start = seen();
    let mut c = nodewarden_controller::Controller::new(nodewarden_model::ControllerConfig::default(), start)
        .expect("default configuration");
    let ready = |name: &str, status: &str| {
        json!({"metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z",
                            "labels": {"topology.kubernetes.io/zone": "z"}},
               "spec": {"taints": if status == "True" { json!([]) } else {
                   json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                           "timeAdded": "2024-12-31T23:59:00Z"}]) }},
               "status": {"conditions": [{"type": "Ready", "status": status,
                   "lastHeartbeatTime": "2024-12-31T23:59:59Z"}]}})
    };
    let mut api = Accepting::default();
    for (name, status) in [("dead", "Unknown"), ("a", "True"), ("b", "True"), ("c", "True")] {
        let n = node(ready(name, status));
        api.nodes.insert(n.name.clone(), n.clone());
        c.observe(start, Observation::NodeUpserted(n));
    }
    let on_dead = |name: &str, tolerations: Value| {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
               "spec": {"nodeName": "dead", "tolerations": tolerations}})
    };
    for p in [
        on_dead("plain", json!([])),
        on_dead("garbled", json!("all")),
        on_dead(
            "sideways",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Sideways",
                                    "effect": "NoExecute", "tolerationSeconds": 0}]),
        ),
        on_dead(
            "stringly",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                    "effect": "NoExecute", "tolerationSeconds": "0"}]),
        ),
    ] {
        c.observe(start, Observation::PodUpserted(pod(p)));
    }
    for i in 0..120 {
        let now = start + Span::from_secs(5 * i);
        for n in ["a", "b", "c"] {
            c.observe(now, Observation::LeaseUpserted { node: n.into(), renew: Some(now) });
        }
        let _ = c.step(now, &mut api, &mut |_| {});
    }
    // The pod without tolerations shows the taint does evict; the pods
    // whose tolerations cannot be decoded stay. An unknown operator is
    // read as upstream reads it (it tolerates nothing): that pod goes too.
    api.deleted.sort();
    assert_eq!(api.deleted, ["ns/plain", "ns/sideways"]);
}

#[test]
fn scheduled_trimmed_types_read_the_rescheduler_facts() {
    let v = json!({"metadata": {"name": "n", "resourceVersion": "3"}, "status": {"allocatable": {"pods": "10"}}});
    let t = Trimmed::<Scheduled<Node>>::from_json(&v, seen());
    assert!(matches!(&t.reading, Some(Observation::NodeUpserted(n)) if n.allocatable.is_some_and(|a| a.pods == 10)));
    let t = Trimmed::<Node>::from_json(&v, seen());
    assert!(matches!(&t.reading, Some(Observation::NodeUpserted(n)) if n.allocatable.is_none()));
    let page = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList", "metadata": {},
        "items": [{"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"a": 1}}}}, 5]});
    let list: kube::core::ObjectList<Trimmed<k8s_openapi::api::policy::v1::PodDisruptionBudget>> =
        serde_json::from_value(page).expect("a lenient page");
    assert!(matches!(&list.items[0].reading, Some(Observation::BudgetUpserted(b)) if b.disruptions_allowed == 0));
    assert!(list.items[1].reading.is_none());
}
