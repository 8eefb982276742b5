//! The per-workload answers on a small hand-made snapshot: three zones of
//! two nodes; zone-a is cut off from the API server at 1m and stays so.
//!
//! - Deployment `shop/web` has its 3 replicas on zone-a's nodes: it loses
//!   all of them, the last exactly when the last of its nodes' taints is
//!   300 s old (the default toleration), and has no ready replica from the
//!   moment the controller sees the nodes dead.
//! - Deployment `shop/api` has one replica per zone: one is evicted, two
//!   stay ready throughout.
//! - StatefulSet `shop/db` has 2 of 3 replicas in zone-a and a budget of
//!   `minAvailable: 2` (one disruption allowed): the second deletion
//!   breaches it. `shop/api`'s `maxUnavailable: 1` budget holds.
//! - A critical pod (`kube-system`, `system-cluster-critical`) in zone-a
//!   is evicted; DaemonSet pods (tolerating forever) stay.

use nodewarden_model::{ControllerConfig, Span, Timestamp};
use nodewarden_whatif::WorkloadReport;
use nodewarden_whatif::read_bytes;
use nodewarden_whatif::{Faults, Played, Snapshot, play};
use serde_json::{Value, json};

const T: &str = "2026-01-01T00:00:00Z";

fn node(name: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("u-{name}"), "creationTimestamp": "2025-12-01T00:00:00Z",
                     "labels": {"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": zone,
                                "kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2025-12-31T23:59:55Z", "lastTransitionTime": "2025-12-01T00:00:00Z"}]},
    })
}

fn lease(name: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease", "uid": format!("l-{name}")},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2025-12-31T23:59:57.000000Z"},
    })
}

fn default_tolerations() -> Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ])
}

fn pod(ns: &str, name: &str, node: &str, owner: Option<(&str, &str)>, labels: Value) -> Value {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("p-{ns}-{name}"), "labels": labels,
                     "creationTimestamp": "2025-12-30T00:00:00Z"},
        "spec": {"nodeName": node, "tolerations": default_tolerations(), "priority": 0,
                 "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    });
    if let Some((kind, owner)) = owner {
        v["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "o", "controller": true}]);
    }
    v
}

fn snapshot_json() -> Value {
    let mut items = Vec::new();
    let nodes =
        [("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b"), ("b2", "zone-b"), ("c1", "zone-c"), ("c2", "zone-c")];
    for (n, z) in nodes {
        items.push(node(n, z));
        items.push(lease(n));
        let mut ds =
            pod("kube-system", &format!("proxy-{n}"), n, Some(("DaemonSet", "proxy")), json!({"app": "proxy"}));
        ds["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        items.push(ds);
    }
    let web = |i: usize, n: &str| {
        pod(
            "shop",
            &format!("web-7c9f-{i}"),
            n,
            Some(("ReplicaSet", "web-7c9f")),
            json!({"app": "web", "pod-template-hash": "7c9f"}),
        )
    };
    items.extend([web(0, "a1"), web(1, "a2"), web(2, "a2")]);
    let api = |i: usize, n: &str| {
        pod(
            "shop",
            &format!("api-55d-{i}"),
            n,
            Some(("ReplicaSet", "api-55d")),
            json!({"app": "api", "pod-template-hash": "55d"}),
        )
    };
    items.extend([api(0, "a1"), api(1, "b1"), api(2, "c1")]);
    let db = |i: usize, n: &str| pod("shop", &format!("db-{i}"), n, Some(("StatefulSet", "db")), json!({"app": "db"}));
    items.extend([db(0, "a1"), db(1, "a2"), db(2, "b2")]);
    let mut dns = pod(
        "kube-system",
        "coredns-1",
        "a1",
        Some(("ReplicaSet", "coredns-66b")),
        json!({"k8s-app": "dns", "pod-template-hash": "66b"}),
    );
    dns["spec"]["priorityClassName"] = json!("system-cluster-critical");
    dns["spec"]["priority"] = json!(2_000_000_000);
    items.push(dns);
    items.push(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
    }));
    items.push(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"maxUnavailable": "34%", "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]}},
    }));
    items.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}}));
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items})
}

fn snapshot() -> Snapshot {
    let mut snap = Snapshot::new("test");
    let text = serde_json::to_vec(&snapshot_json()).expect("json");
    read_bytes(&text, "test", &mut snap).expect("a good snapshot reads");
    snap
}

fn zone_a_fails() -> Faults {
    Faults {
        zones: vec!["zone-a".into()],
        at: Span::from_secs(60),
        duration: Some(Span::from_secs(20 * 60)),
        ..Faults::default()
    }
}

/// Played in the instant world, so that times come out exact (the taint
/// manager counts from the observed taint: with API latency, a watch delay
/// and a write latency later).
fn played(config: ControllerConfig) -> Played {
    let instant = Some(nodewarden_cluster::ApiLatency::NONE);
    nodewarden_whatif::play_with(&snapshot(), &zone_a_fails(), config, 1, instant).expect("plays")
}

fn workload<'a>(p: &'a Played, id: &str) -> &'a WorkloadReport {
    p.report.workloads.iter().find(|w| w.id.to_string() == id).unwrap_or_else(|| panic!("no {id}"))
}

#[test]
fn the_snapshot_reads_with_its_unused_kinds_counted() {
    let snap = snapshot();
    assert_eq!((snap.nodes.len(), snap.leases.len(), snap.pods.len(), snap.pdbs.len()), (6, 6, 16, 2));
    assert_eq!(snap.skipped.get("Service"), Some(&1));
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
    // The snapshot's moment is its newest sign of life (23:59:57).
    let at = nodewarden_whatif::snapshot_time(&snap).expect("a time");
    assert_eq!(at.as_nanos() % 1_000_000_000, 0);
    let _ = T;
}

#[test]
fn a_deployment_all_in_the_failed_zone_loses_everything_at_its_toleration_end() {
    let p = played(ControllerConfig::default());
    assert!(p.outcome.safe(), "{:?}", p.outcome.violations);
    let zone_a = p.outcome.zones.iter().find(|z| z.key == "r1/zone-a").expect("zone-a");
    let (_, last_taint) = zone_a.tainted.1.expect("zone-a's nodes were tainted");
    let (first_dead, _) = zone_a.seen_dead.1.expect("seen dead");
    let web = workload(&p, "Deployment shop/web");
    assert_eq!((web.replicas, web.on_failed_nodes, web.evicted.len()), (3, 3, 3));
    assert!(web.lost_all());
    // The last replica goes exactly when its node's taint is 300 s old.
    assert_eq!(web.all_evicted_at(), Some(last_taint + Span::from_secs(300)));
    // No ready replica from when the controller saw the nodes dead (and
    // marked their pods not ready) to the end: nothing replaces them here.
    assert_eq!(web.no_ready.len(), 1);
    let (from, until) = web.no_ready[0];
    assert!(from >= first_dead && from < first_dead + Span::from_secs(10), "{from} vs {first_dead}");
    assert_eq!(until, None);
    let text = p.report.render_text(10);
    assert!(text.contains("Lose EVERY ready replica (2):\n"), "{text}");
    assert!(text.contains("\n    Deployment shop/web: 3 replica(s) in r1/zone-a; no ready replica from "), "{text}");
}

#[test]
fn a_deployment_spread_over_zones_keeps_ready_replicas() {
    let p = played(ControllerConfig::default());
    let api = workload(&p, "Deployment shop/api");
    assert_eq!((api.replicas, api.on_failed_nodes, api.evicted.len(), api.min_ready), (3, 1, 1, 2));
    assert!(!api.lost_all());
    assert_eq!(api.zones.len(), 3);
    let lost: Vec<String> = p.report.lost_all().iter().map(|w| w.id.to_string()).collect();
    // The single-replica critical addon goes with zone-a too; the
    // DaemonSet and the others keep a ready replica.
    assert_eq!(lost, ["Deployment kube-system/coredns", "Deployment shop/web"]);
}

#[test]
fn evictions_beyond_a_budget_are_reported_as_breaches() {
    let p = played(ControllerConfig::default());
    let db = p.report.pdbs.iter().find(|b| b.name == "shop/db").expect("db budget");
    assert_eq!((db.selected, db.ready_at_start, db.required, db.allowed, db.evicted), (3, 3, 2, 1, 2));
    let db_pods = workload(&p, "StatefulSet shop/db");
    assert_eq!(db.breached_at, Some(db_pods.evicted[1].0), "the second deletion goes over");
    // Its ready pods fell below 2 as soon as zone-a's were marked not ready.
    assert!(!db.below_budget.is_empty());
    assert!(db.below_budget[0].0 < db.breached_at.unwrap_or(Timestamp::MAX));
    // api: 34% of 3 rounds up to 2 unavailable allowed, so 1 required
    // ready: the one deletion is within the budget.
    let api = p.report.pdbs.iter().find(|b| b.name == "shop/api").expect("api budget");
    assert_eq!((api.required, api.allowed, api.evicted, api.breached_at), (1, 2, 1, None));
    assert!(api.below_budget.is_empty());
    let text = p.report.render_text(10);
    assert!(text.contains("PodDisruptionBudgets breached (1 of 2):\n    shop/db (minAvailable 2;"), "{text}");
}

#[test]
fn critical_and_daemonset_pods_are_reported() {
    let p = played(ControllerConfig::default());
    assert_eq!(p.report.critical.len(), 1);
    assert_eq!(p.report.critical[0].pod, "kube-system/coredns-1");
    assert_eq!(p.report.critical[0].workload.to_string(), "Deployment kube-system/coredns");
    assert!(p.report.critical[0].evicted.is_some());
    assert_eq!((p.report.daemonset_pods_on_failed, p.report.daemonset_pods_evicted), (2, 0));
    let json = p.report.to_json();
    assert_eq!(json["daemonset_pods_on_failed_nodes"], 2);
    assert_eq!(json["pod_disruption_budgets"][1]["breached"], true);
}

#[test]
fn shorter_tolerations_in_the_comparison_config_change_nothing_for_pods_with_their_own() {
    // The pods carry their own 300 s tolerations (admission added them in
    // the real cluster), so a controller flag cannot shorten them; a
    // slower taint rate delays the second zone-a node instead.
    let slow = ControllerConfig { node_eviction_rate: 0.01, ..ControllerConfig::default() };
    let a = played(ControllerConfig::default());
    let b = played(slow);
    let (wa, wb) = (workload(&a, "Deployment shop/web"), workload(&b, "Deployment shop/web"));
    assert!(wb.all_evicted_at() > wa.all_evicted_at(), "{:?} vs {:?}", wa.all_evicted_at(), wb.all_evicted_at());
}

#[test]
fn the_failure_can_be_aimed_at_names_and_labels() {
    let snap = snapshot();
    let named = Faults { nodes: vec!["b2".into()], ..zone_a_fails() };
    assert_eq!(named.failed_nodes(&snap).expect("b2 + zone-a"), ["a1", "a2", "b2"]);
    let by_label = Faults { zones: vec![], selectors: vec!["kubernetes.io/hostname=c1".into()], ..Faults::default() };
    assert_eq!(by_label.failed_nodes(&snap).expect("c1"), ["c1"]);
    let region_zone = Faults { zones: vec!["r1/zone-b".into()], ..Faults::default() };
    assert_eq!(region_zone.failed_nodes(&snap).expect("zone-b"), ["b1", "b2"]);
    for bad in [
        Faults { zones: vec!["zone-x".into()], ..Faults::default() },
        Faults { nodes: vec!["nope".into()], ..Faults::default() },
        Faults { selectors: vec!["team".into()], ..Faults::default() },
        Faults { selectors: vec!["team=none".into()], ..Faults::default() },
    ] {
        let e = bad.failed_nodes(&snap).expect_err("matches nothing");
        assert!(!e.to_string().is_empty());
    }
    let e = zone_a_fails().failed_nodes(&snap).map(|_| ());
    assert!(e.is_ok());
    let err = Faults { zones: vec!["zone-x".into()], ..Faults::default() }.failed_nodes(&snap).expect_err("x");
    assert!(err.to_string().contains("r1/zone-a, r1/zone-b, r1/zone-c"), "{err}");
}

#[test]
fn a_control_plane_outage_evicts_nothing_and_scenario_events_hit_real_nodes() {
    let outage = Faults {
        control_plane_outage: Some(Span::from_secs(10 * 60)),
        at: Span::from_secs(60),
        duration: Some(Span::from_secs(20 * 60)),
        ..Faults::default()
    };
    let p = play(&snapshot(), &outage, ControllerConfig::default(), 1).expect("plays");
    assert!(p.outcome.safe());
    assert_eq!(p.report.failed_nodes, 0);
    assert!(p.report.workloads.iter().all(|w| w.evicted.is_empty() && !w.lost_all()));
    // A scenario file's events, aimed at the snapshot's node names.
    let events = nodewarden_whatif::scenario_events("events:\n- {at: 1m, kubelet-stop: [b1]}\n").expect("events");
    let snap = snapshot();
    nodewarden_whatif::check_events(&events, &snap).expect("b1 exists");
    let faults = Faults { events, duration: Some(Span::from_secs(15 * 60)), ..Faults::default() };
    let p = play(&snap, &faults, ControllerConfig::default(), 1).expect("plays");
    assert_eq!(p.report.failed_nodes, 1);
    assert_eq!(workload(&p, "Deployment shop/api").evicted.len(), 1, "api's replica on b1");
    let bad = nodewarden_whatif::scenario_events("events:\n- {at: 1m, kubelet-stop: [zz]}\n").expect("parses");
    assert!(nodewarden_whatif::check_events(&bad, &snap).is_err());
}

/// Budgets are read as the disruption controller reads them (the rule the
/// served cluster uses too): with both amounts, `maxUnavailable` counts;
/// with neither, the budget allows nothing, so db's first deletion
/// already breaches it. (what-if used to read neither as `minAvailable: 1`
/// and leave a budget with both out.)
#[test]
fn budgets_are_read_as_the_disruption_controller_reads_them() {
    let mut v = snapshot_json();
    let items = v["items"].as_array_mut().expect("items");
    for item in items.iter_mut().filter(|i| i["kind"] == "PodDisruptionBudget") {
        match item["metadata"]["name"].as_str() {
            Some("db") => item["spec"] = json!({"selector": {"matchLabels": {"app": "db"}}}),
            _ => item["spec"]["minAvailable"] = json!(3),
        }
    }
    let mut snap = Snapshot::new("test");
    read_bytes(&serde_json::to_vec(&v).expect("json"), "test", &mut snap).expect("reads");
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
    let instant = Some(nodewarden_cluster::ApiLatency::NONE);
    let p =
        nodewarden_whatif::play_with(&snap, &zone_a_fails(), ControllerConfig::default(), 1, instant).expect("plays");
    let db = p.report.pdbs.iter().find(|b| b.name == "shop/db").expect("db budget");
    assert_eq!((db.required, db.allowed, db.evicted), (0, 0, 2));
    let db_pods = workload(&p, "StatefulSet shop/db");
    assert_eq!(db.breached_at, Some(db_pods.evicted[0].0), "the first deletion goes over");
    assert!(db.budget.to_string().contains("allows nothing"), "{}", db.budget);
    let api = p.report.pdbs.iter().find(|b| b.name == "shop/api").expect("api budget");
    assert_eq!(api.budget.to_string(), "maxUnavailable 34%");
    assert_eq!((api.required, api.allowed), (1, 2));
}
