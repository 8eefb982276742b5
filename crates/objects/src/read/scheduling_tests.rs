//! The rescheduler's readings ([`Detail::Scheduling`]): each field as
//! written, and each malformed field read the safe way.

use super::checked::{budget_reading, node_reading, pod_reading};
use super::*;
use nodewarden_engine::{BudgetSnapshot, Observation};
use nodewarden_model::scheduling::SelectorOperator::*;
use nodewarden_model::scheduling::{CRITICAL_POD_ANNOTATION, MIRROR_POD_ANNOTATION};
use nodewarden_model::{LabelSelector, Placement, PodScheduling, Resources, Span, Timestamp};
use serde_json::json;

fn seen() -> Timestamp {
    Timestamp::from_nanos(1_735_689_600 * 1_000_000_000)
}

fn sched(v: Value) -> PodScheduling {
    *pod_reading(&v, seen(), Detail::Scheduling).expect("read").scheduling.expect("scheduling read")
}

fn pod_spec(spec: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "kube-system", "uid": "u"}, "spec": spec})
}

fn container(requests: Value) -> Value {
    json!({"name": "c", "resources": {"requests": requests}})
}

const MI: u64 = 1 << 20;

#[test]
fn lifecycle_reads_no_scheduling_facts() {
    let v = pod_spec(json!({"containers": [container(json!({"cpu": "1"}))]}));
    assert!(pod_reading(&v, seen(), Detail::Lifecycle).unwrap().scheduling.is_none());
    let n = json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
    assert!(node_reading(&n, seen(), Detail::Lifecycle).unwrap().allocatable.is_none());
}

#[test]
fn requests_are_summed_against_init_containers_plus_overhead() {
    let s = sched(pod_spec(json!({
        "containers": [container(json!({"cpu": "100m", "memory": "64Mi"})),
                       container(json!({"cpu": "0.25", "memory": "64Mi"}))],
        "initContainers": [container(json!({"cpu": "1", "memory": "16Mi"}))],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    })));
    // cpu: max(350m, 1000m) + 10m; memory: max(128Mi, 16Mi) + 1Mi.
    assert_eq!(s.requests, Resources::pod(1010, 129 * MI));
    let none = sched(pod_spec(json!({"containers": [{"name": "c"}]})));
    assert_eq!(none.requests, Resources::pod(0, 0), "no requests: only a pod slot");
}

#[test]
fn sidecars_count_with_the_containers_and_before_later_init_containers() {
    // A restartable init container (sidecar) runs beside the app and
    // beside every init container after it, as kube-scheduler counts.
    let s = sched(pod_spec(json!({
        "containers": [container(json!({"cpu": "100m"}))],
        "initContainers": [
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
            container(json!({"cpu": "500m"})),
        ],
    })));
    // steady: 100m + 200m = 300m; init: 500m + 200m sidecar = 700m.
    assert_eq!(s.requests.cpu_millis, 700);
}

#[test]
fn a_limit_without_a_request_requests_the_limit() {
    let s = sched(pod_spec(json!({"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"memory": "512Mi"}}}]})));
    assert_eq!(s.requests, Resources::pod(2000, 512 * MI));
}

#[test]
fn a_malformed_quantity_fills_the_node_and_is_never_evicted() {
    for bad in [json!("lots"), json!("-1"), json!({"m": 100}), json!("1.2.3")] {
        let s = sched(pod_spec(json!({"containers": [container(json!({"cpu": bad, "memory": "1Gi"}))]})));
        assert_eq!(s.requests.cpu_millis, u64::MAX, "{bad}");
        assert_eq!(s.requests.memory_bytes, 1 << 30, "{bad}: the readable dimension is kept");
        assert!(s.mirror, "{bad}: read as unevictable");
    }
    // Wrong types further up.
    let s = sched(pod_spec(json!({"containers": "c"})));
    assert_eq!((s.requests.cpu_millis, s.requests.memory_bytes, s.mirror), (u64::MAX, u64::MAX, true));
    let s = sched(pod_spec(json!({"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]})));
    assert!(s.mirror && s.requests.cpu_millis == u64::MAX);
    let s = sched(pod_spec(json!({"containers": [], "initContainers": 3})));
    assert!(s.mirror);
    let s = sched(pod_spec(json!({"containers": [], "overhead": {"memory": "x"}})));
    assert_eq!(s.requests.memory_bytes, u64::MAX);
    // A bare number is a quantity.
    let s = sched(pod_spec(json!({"containers": [container(json!({"cpu": 2, "memory": 1024}))]})));
    assert_eq!((s.requests, s.mirror), (Resources::pod(2000, 1024), false));
}

#[test]
fn a_finished_pod_requests_nothing() {
    let mut v = pod_spec(json!({"containers": [container(json!({"cpu": "nonsense"}))]}));
    v["status"] = json!({"phase": "Succeeded"});
    let s = sched(v);
    assert_eq!((s.requests, s.mirror), (Resources::ZERO, false));
}

#[test]
fn critical_markers_owner_grace_and_labels() {
    let s = sched(json!({
        "metadata": {"name": "dns", "namespace": "kube-system", "uid": "u",
            "labels": {"k8s-app": "kube-dns", "bad": 1},
            "annotations": {CRITICAL_POD_ANNOTATION: "", MIRROR_POD_ANNOTATION: "abc"},
            "ownerReferences": [{"kind": "Deployment", "name": "x"},
                                {"kind": "ReplicaSet", "name": "dns-1", "controller": true}]},
        "spec": {"priorityClassName": "system-cluster-critical", "terminationGracePeriodSeconds": 5},
    }));
    assert!(s.critical_annotation && s.mirror);
    assert_eq!(s.priority_class.as_deref(), Some("system-cluster-critical"));
    assert_eq!(s.controller_kind.as_deref(), Some("ReplicaSet"));
    assert_eq!(s.termination_grace, Span::from_secs(5));
    assert_eq!(s.labels.len(), 1, "a label of the wrong type is skipped");

    let bare = sched(pod_spec(json!({"priorityClassName": ""})));
    assert!(!bare.critical_annotation && !bare.mirror && bare.priority_class.is_none());
    assert_eq!(bare.controller_kind, None, "no controller owner: a bare pod");
    assert_eq!(bare.termination_grace, PodScheduling::DEFAULT_TERMINATION_GRACE);
    for bad in [json!(-1), json!("10"), json!(2.5)] {
        let s = sched(pod_spec(json!({"terminationGracePeriodSeconds": bad})));
        assert_eq!(s.termination_grace, Span::from_secs(30), "{bad}");
    }
    let s = sched(pod_spec(json!({"priorityClassName": 7})));
    assert_eq!(s.priority_class, None);
    let garbled = sched(json!({"metadata": {"name": "p", "namespace": "kube-system", "uid": "u",
                                            "annotations": ["kubernetes.io/config.mirror"]}}));
    assert!(garbled.mirror && !garbled.critical_annotation, "unreadable annotations: never evicted");
}

#[test]
fn node_selector_and_required_affinity() {
    let s = sched(pod_spec(json!({
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                  {"key": "gen", "operator": "Gt", "values": ["3"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
        ]}, "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
    })));
    let p = &s.placement;
    assert_eq!(p.node_selector.get("kubernetes.io/os").map(String::as_str), Some("linux"));
    let terms = &p.affinity.as_ref().expect("affinity read").node_selector_terms;
    assert_eq!(terms.len(), 2);
    assert_eq!(terms[0].match_expressions[1].operator, Gt);
    assert_eq!(terms[1].match_fields[0].values, ["n9"]);
    let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert!(p.allows("n1", &labels(&[("kubernetes.io/os", "linux"), ("zone", "a"), ("gen", "4")])));
    assert!(p.allows("n9", &labels(&[("kubernetes.io/os", "linux")])));
    assert!(!p.allows("n1", &labels(&[("kubernetes.io/os", "linux"), ("zone", "c"), ("gen", "4")])));

    let free = sched(pod_spec(json!({})));
    assert_eq!(free.placement, Placement::default(), "no selector, no affinity: any node");
}

#[test]
fn unreadable_placement_matches_no_node() {
    let anywhere: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    for spec in [
        json!({"nodeSelector": ["zone=a"]}),
        json!({"nodeSelector": {"zone": 1}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]}}}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [1]}]}]}}}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "Gt", "values": ["1"]}]}]}}}}),
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": {"matchExpressions": []}}}}}),
    ] {
        let s = sched(pod_spec(spec.clone()));
        assert!(!s.placement.allows("n1", &anywhere), "{spec}");
    }
}

#[test]
fn unschedulable_since_comes_from_the_pod_scheduled_condition() {
    let with = |cond: Value| {
        let mut v = pod_spec(json!({}));
        v["status"] = json!({"conditions": [{"type": "Ready", "status": "False"}, cond]});
        sched(v).unschedulable_since
    };
    let t = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "lastTransitionTime": "2024-12-31T23:59:50Z"}));
    assert_eq!(t, Some(seen() - Span::from_secs(10)));
    assert_eq!(with(json!({"type": "PodScheduled", "status": "True"})), None);
    assert_eq!(with(json!({"type": "PodScheduled", "status": "False", "reason": "SchedulerError"})), None);
    let odd = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                          "lastTransitionTime": "last tuesday"}));
    assert_eq!(odd, Some(seen()), "an unreadable time: marked when seen");
    let absent = with(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}));
    assert_eq!(absent, Some(seen()));
    let mut v = pod_spec(json!({}));
    v["status"] = json!({"conditions": "PodScheduled"});
    assert_eq!(sched(v).unschedulable_since, None);
}

#[test]
fn allocatable_is_read_and_an_unreadable_one_is_absent() {
    let node = |alloc: Value| {
        node_reading(&json!({"metadata": {"name": "n"}, "status": {"allocatable": alloc}}), seen(), Detail::Scheduling)
            .unwrap()
            .allocatable
    };
    let a = node(json!({"cpu": "3920m", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}));
    assert_eq!(a, Some(Resources { cpu_millis: 3920, memory_bytes: 16 << 30, pods: 110 }));
    assert_eq!(node(json!({"cpu": "4"})), Some(Resources { cpu_millis: 4000, memory_bytes: 0, pods: 0 }));
    assert_eq!(node(json!({"cpu": "four", "memory": "1Gi", "pods": "10"})), None);
    assert_eq!(node(json!({"cpu": "4", "memory": "1Gi", "pods": true})), None);
    assert_eq!(node(json!(["cpu"])), None);
    let absent = node_reading(&json!({"metadata": {"name": "n"}}), seen(), Detail::Scheduling).unwrap();
    assert_eq!(absent.allocatable, None);
}

fn budget(v: Value) -> Option<Observation> {
    budget_reading(&v, seen())
}

fn upserted(o: Option<Observation>) -> BudgetSnapshot {
    match o {
        Some(Observation::BudgetUpserted(b)) => b,
        other => panic!("expected a budget, got {other:?}"),
    }
}

#[test]
fn budgets_read_selector_and_disruptions_allowed() {
    let b = upserted(budget(json!({
        "metadata": {"name": "dns", "namespace": "kube-system", "generation": 2},
        "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"},
                              "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
                 "minAvailable": 1},
        "status": {"disruptionsAllowed": 2, "observedGeneration": 2},
    })));
    assert_eq!(b.key, "kube-system/dns");
    assert_eq!(b.disruptions_allowed, 2);
    assert_eq!(b.selector.match_labels.get("k8s-app").map(String::as_str), Some("kube-dns"));
    assert_eq!(b.selector.match_expressions[0].operator, NotIn);
    let all = upserted(budget(json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": {}}})));
    assert_eq!((all.selector, all.disruptions_allowed), (LabelSelector::default(), 0), "no status yet: none allowed");
}

#[test]
fn malformed_budgets_allow_nothing() {
    let meta = json!({"name": "b", "namespace": "ns"});
    for (spec, status) in [
        (json!({"selector": {"matchLabels": {"app": 1}}}), json!({"disruptionsAllowed": 3})),
        (
            json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}}),
            json!({"disruptionsAllowed": 3}),
        ),
        (json!({"selector": "app=web"}), json!({"disruptionsAllowed": 3})),
        (json!({"selector": {}}), json!({"disruptionsAllowed": -1})),
        (json!({"selector": {}}), json!({"disruptionsAllowed": "3"})),
    ] {
        let b = upserted(budget(json!({"metadata": meta, "spec": spec, "status": status})));
        assert_eq!(b.disruptions_allowed, 0, "{spec} {status}");
        assert_eq!(b.selector, LabelSelector::default(), "covers the whole namespace: {spec}");
    }
    // Status older than the spec: the Eviction API refuses until it is current.
    let stale = upserted(budget(json!({"metadata": {"name": "b", "namespace": "ns", "generation": 3},
        "spec": {"selector": {}}, "status": {"disruptionsAllowed": 4, "observedGeneration": 2}})));
    assert_eq!(stale.disruptions_allowed, 0);
    // No selector: covers no pod.
    let none = budget(json!({"metadata": meta, "spec": {"maxUnavailable": 1}}));
    assert_eq!(none, Some(Observation::BudgetDeleted { key: "ns/b".into() }));
    assert_eq!(budget(json!({"metadata": {"name": "b"}})), None, "no namespace");
    assert_eq!(budget(json!({"metadata": {"namespace": "ns"}})), None, "no name");
}
