//! The critical-addon rescheduler in the served cluster (`sim --serve
//! --controller`): the in-process controller reads the scheduling facts and
//! PodDisruptionBudgets a client would, and makes room for an addon the
//! served scheduler cannot place.

mod common;

use std::time::{Duration, Instant};

use common::{OrFail, client, options, start};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use nodewarden_apiserver::{ServeSource, Served};

/// Two full nodes and a critical addon that fits on neither. a's pod is
/// under a budget that allows no disruption; b's is not. Rescheduler
/// timings are short so the whole story takes seconds.
const BUDGETED: &str = r#"
name: a budget decides where the addon goes
config:
  enable-rescheduler: true
  rescheduler-housekeeping-interval: 500ms
  rescheduler-unschedulable-grace: 1s
cluster: {scheduler: true}
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
budgets:
- {name: default/web, selector: {matchLabels: {app: web}}, min-available: "100%"}
pods:
- {name: default/web-a, node: a, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 2}, grace-period: 30s}
- {name: default/batch-b, node: b, owner: Job, labels: {app: batch}, requests: {cpu: 2}, grace-period: 30s}
- name: kube-system/dns
  owner: ReplicaSet
  requests: {cpu: 1, memory: 70Mi}
  priority-class: system-cluster-critical
  tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
"#;

async fn serve_file(text: &str) -> Served {
    let scenario = nodewarden_cluster::parse_scenario(text).or_fail("scenario");
    let mut opts = options(1, 0);
    // The file's own controller flags, as `sim --serve --scenario FILE
    // --controller` takes them.
    opts.controller = Some(scenario.config.clone());
    opts.source = ServeSource::File(Box::new(scenario));
    start(opts).await
}

/// Every pod's `namespace/name`.
async fn pod_keys(pods: &Api<Pod>) -> Vec<String> {
    pods.list(&ListParams::default())
        .await
        .or_fail("pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.namespace.zip(p.metadata.name).map(|(ns, n)| format!("{ns}/{n}")))
        .collect()
}

fn reserved(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "CriticalAddonsOnly" && t.value.as_deref() == Some("nodewarden")))
}

/// Without the pods' requests, priority and owners, and the nodes'
/// allocatable, the in-process controller knows of no critical addon and
/// the addon stays Pending; without the budget it would first try to evict
/// `web-a` (node a comes first by name), which the Eviction API refuses.
/// With both, it prepares b at once, the served scheduler binds the addon
/// there, and the reservation goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_controller_makes_room_where_the_budget_allows() {
    let served = serve_file(BUDGETED).await;
    let c = client(&served, true).await;
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let nodes: Api<Node> = Api::all(c.clone());
    let events: Api<Event> = Api::all(c.clone());
    let started = Instant::now();
    let bound_to = loop {
        if let Some(node) = system.get("dns").await.or_fail("dns").spec.and_then(|s| s.node_name) {
            break node;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the addon was never bound: no room was made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(bound_to, "b", "the addon went where the budget allowed an eviction");
    assert!(pods.get_opt("batch-b").await.or_fail("batch-b").is_none(), "b's pod was evicted");
    assert!(pods.get_opt("web-a").await.or_fail("web-a").is_some(), "the budgeted pod stays");
    let all = events.list(&ListParams::default()).await.or_fail("events").items;
    let reasons: Vec<(String, String)> = all
        .iter()
        .map(|e| (e.reason.clone().unwrap_or_default(), e.involved_object.name.clone().unwrap_or_default()))
        .collect();
    assert!(reasons.contains(&("CriticalAddonPreparing".into(), "b".into())), "{reasons:?}");
    assert!(
        !reasons.iter().any(|(r, _)| r == "FailedEviction"),
        "an eviction the budget forbids was tried: {reasons:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while nodes.list(&ListParams::default()).await.or_fail("nodes").items.iter().any(reserved) {
        assert!(Instant::now() < deadline, "the reservation was not removed once the addon was bound");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    served.stop();
}

/// With the rescheduler off (the file says nothing of it), the controller
/// reads no scheduling facts and watches no budgets: the addon stays
/// Pending and nothing is evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_the_in_process_controller_leaves_the_addon_alone() {
    let served = serve_file(&BUDGETED.replace("enable-rescheduler: true", "enable-rescheduler: false")).await;
    let c = client(&served, true).await;
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let dns = system.get("dns").await.or_fail("dns");
    assert_eq!(dns.spec.and_then(|s| s.node_name), None);
    let unschedulable = dns
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    assert!(unschedulable, "the served scheduler marks the addon Unschedulable");
    for p in ["web-a", "batch-b"] {
        assert!(pods.get_opt(p).await.or_fail(p).is_some(), "{p} was evicted with the rescheduler off");
    }
    served.stop();
}

/// `sim --serve --scenario critical-addon --controller`: the served
/// cluster is the built-in's (full nodes with their allocatable, budgets,
/// the three addons on the first node), its scheduler runs, owned pods
/// come back when deleted, and the in-process controller runs the
/// rescheduler even though its flags leave it off. The node crash of the
/// scenario comes at 1m of its timeline; this test does what it leads to
/// by hand: the first node is cordoned and an addon deleted, so its
/// replacement fits nowhere until nodewarden makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_critical_addon_scenario_is_served_and_the_rescheduler_makes_room() {
    let mut opts = options(3, 4);
    opts.source = ServeSource::Fleet(
        nodewarden_cluster::fleet::FleetSpec { nodes: 3, zones: 1, pods_per_node: 4, seed: 5 },
        Some(nodewarden_cluster::Builtin::CriticalAddon),
    );
    // The crash at 1m of the timeline comes after the test (4 minutes of
    // wall time).
    opts.scenario_speed = 0.25;
    opts.controller = Some(nodewarden_model::ControllerConfig {
        rescheduler_housekeeping_interval: nodewarden_model::Span::from_millis(500),
        rescheduler_unschedulable_grace: nodewarden_model::Span::from_secs(1),
        ..nodewarden_model::ControllerConfig::default()
    });
    let served = start(opts).await;
    let c = client(&served, true).await;
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let nodes: Api<Node> = Api::all(c.clone());
    let all_pods: Api<Pod> = Api::all(c.clone());
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::all(c.clone());

    // The built-in's cluster, as `nodewarden sim` builds it.
    for addon in ["coredns-a", "coredns-b", "metrics-server"] {
        let p = system.get(addon).await.or_fail(addon);
        let spec = p.spec.ok_or("no spec").or_fail(addon);
        assert_eq!(spec.node_name.as_deref(), Some("node-000000"), "{addon}");
        assert_eq!(spec.priority_class_name.as_deref(), Some("system-cluster-critical"), "{addon}");
    }
    let alloc = nodes.get("node-000001").await.or_fail("node").status.and_then(|s| s.allocatable).unwrap_or_default();
    assert_eq!(alloc.get("cpu").map(|q| q.0.as_str()), Some("4000m"));
    assert_eq!(pdbs.list(&ListParams::default()).await.or_fail("budgets").items.len(), 8);
    let before = pod_keys(&all_pods).await;

    // The first node is lost for scheduling, and coredns-a with it.
    let cordon = serde_json::json!({"spec": {"unschedulable": true}});
    nodes
        .patch("node-000000", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&cordon))
        .await
        .or_fail("cordon");
    system.delete("coredns-a", &kube::api::DeleteParams::default()).await.or_fail("delete coredns-a");

    // Its ReplicaSet recreates it; it fits nowhere until nodewarden
    // prepares a node; the scheduler binds it there.
    let started = Instant::now();
    let bound_to = loop {
        if let Some(p) = system.get_opt("coredns-a-r1").await.or_fail("replacement")
            && let Some(node) = p.spec.and_then(|s| s.node_name)
        {
            break node;
        }
        assert!(started.elapsed() < Duration::from_secs(40), "the replacement addon was never bound");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(bound_to, "node-000000", "the cordoned node");
    let after = pod_keys(&all_pods).await;
    let evicted: Vec<&String> = before.iter().filter(|k| k.starts_with("team-") && !after.contains(k)).collect();
    assert!(!evicted.is_empty(), "room was made by evicting ordinary pods");
    let events: Api<Event> = Api::all(c.clone());
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .or_fail("events")
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "CriticalAddonPreparing"), "{reasons:?}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while nodes.list(&ListParams::default()).await.or_fail("nodes").items.iter().any(reserved) {
        assert!(Instant::now() < deadline, "the reservation was not removed once the addon was bound");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    served.stop();
}
