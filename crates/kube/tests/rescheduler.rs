//! `nodewarden run --enable-rescheduler` against `nodewarden sim --serve`
//! in-process: what the adapter does for the critical-addon rescheduler
//! (budgets watched and waited for, the rescheduler's facts read as the
//! served objects carry them), and the whole loop with the engine's
//! rescheduler: an unschedulable critical addon in a full cluster gets a
//! node prepared for it through the API.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{client, eventually, fast_config, serve};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use nodewarden_apiserver::{ApiFault, FaultTarget, ServeOptions, ServeSource, ServerConfig, StoreLimits, TimeBase};
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_engine::{NodeSnapshot, PodSnapshot};
use nodewarden_kube::{Detail, RunOptions, start as run};
use nodewarden_model::scheduling::{NodeSelectorTerm, Requirement, SelectorOperator};
use nodewarden_model::{
    ControllerConfig, NodeAffinity, Placement, PodScheduling, Resources, Span, Timestamp, Toleration,
    TolerationOperator,
};
use serde_json::{Value, json};

/// `nodes` nodes in one zone, no pods of the fleet's, every request logged,
/// no fault plan.
fn quiet_cluster(nodes: usize) -> ServeOptions {
    ServeOptions {
        source: ServeSource::Fleet(FleetSpec { nodes, zones: 1, pods_per_node: 0, seed: 7 }, None),
        timing: nodewarden_testkit::served::fast_kubelets(),
        lease_duration_secs: 1,
        server: ServerConfig {
            bookmark_every: Duration::from_millis(300),
            record_requests: true,
            ..ServerConfig::default()
        },
        limits: StoreLimits::default(),
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    }
}

/// The User-Agent of the tests' clients, which targeted faults match.
const AGENT: &str = "rescheduler-test";

async fn agent_client(served: &nodewarden_apiserver::Served) -> kube::Client {
    nodewarden_testkit::served::client(served, AGENT, true).await
}

fn rescheduler_config() -> ControllerConfig {
    ControllerConfig {
        enable_rescheduler: true,
        rescheduler_housekeeping_interval: Span::from_millis(500),
        rescheduler_unschedulable_grace: Span::from_secs(1),
        rescheduler_pod_scheduled_timeout: Span::from_secs(60),
        ..fast_config()
    }
}

fn budget_requests(served: &nodewarden_apiserver::Served) -> Vec<String> {
    served.requests().into_iter().filter(|r| r.resource == "poddisruptionbudgets").map(|r| r.verb).collect()
}

/// Budgets are watched only with the rescheduler, and the first decision
/// waits for their first list as for the other watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_are_watched_and_waited_for_only_with_the_rescheduler() {
    let served = serve(quiet_cluster(3)).await;
    let c = agent_client(&served).await;
    let off =
        run(c.clone(), RunOptions { config: fast_config(), dry_run: true, ..RunOptions::default() }).expect("config");
    eventually(Duration::from_secs(20), "the caches to sync", async || off.health.synced.load(Ordering::Relaxed)).await;
    off.stop();
    assert_eq!(budget_requests(&served), Vec::<String>::new(), "no budget watch without the rescheduler");

    // The budget list is refused for a while: nothing is decided until it
    // has listed.
    served.shared.faults.inject_for(
        FaultTarget { user_agent: AGENT.into(), path: "/poddisruptionbudgets".into() },
        ApiFault::Errors { rate: 1.0, code: 503 },
        Some(Duration::from_secs(2)),
    );
    let on = run(c.clone(), RunOptions { config: rescheduler_config(), dry_run: true, ..RunOptions::default() })
        .expect("config");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(!on.health.synced.load(Ordering::Relaxed), "synced before the budgets were listed");
    eventually(Duration::from_secs(20), "the caches to sync", async || on.health.synced.load(Ordering::Relaxed)).await;
    on.stop();
    let verbs = budget_requests(&served);
    assert!(verbs.iter().any(|v| v == "list") && verbs.iter().any(|v| v == "watch"), "{verbs:?}");
    served.stop();
}

/// What the served cluster writes for a simulated pod and node with
/// scheduling facts (`nodewarden_objects::write::pod_json`, `node_json`) reads
/// back in the adapter as the same facts: the two sides agree on the API
/// spelling of everything the rescheduler uses.
#[test]
fn the_served_objects_read_back_with_the_same_scheduling_facts() {
    let time = TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 };
    let seen = Timestamp::from_nanos(1_700_000_100_000_000_000);
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let scheduling = PodScheduling {
        requests: Resources::pod(250, 128 << 20),
        priority_class: Some("system-cluster-critical".into()),
        critical_annotation: true,
        mirror: false,
        controller_kind: Some("ReplicaSet".into()),
        termination_grace: Span::from_secs(5),
        labels: labels(&[("k8s-app", "kube-dns")]),
        placement: Placement {
            node_selector: labels(&[("kubernetes.io/os", "linux")]),
            affinity: Some(NodeAffinity {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: vec![Requirement {
                        key: "zone".into(),
                        operator: SelectorOperator::In,
                        values: vec!["a".into()],
                    }],
                    match_fields: vec![],
                }],
            }),
        },
        unschedulable_since: Some(Timestamp::from_nanos(50_000_000_000)),
    };
    let pod = PodSnapshot {
        version: 0,
        node_lost: false,
        key: "kube-system/coredns-1".into(),
        uid: "u1".into(),
        node: None,
        daemonset: false,
        ready: None,
        terminating: false,
        tolerations: vec![Toleration {
            key: "CriticalAddonsOnly".into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
            seconds: None,
        }],
        scheduling: Some(Box::new(scheduling.clone())),
    };
    let v = nodewarden_objects::write::pod_json(&pod, "u1", Timestamp::EPOCH, None, "10.0.0.9", &time);
    let read = nodewarden_objects::pod_reading(&v, seen, Detail::Scheduling).expect("read");
    let mut want = scheduling;
    // The served cluster's times are its own clock's, written as wall time;
    // the adapter reads wall time (Unix nanoseconds).
    want.unschedulable_since = Some(Timestamp::from_nanos(time.unix_nanos_at_epoch + 50_000_000_000));
    assert_eq!(read.scheduling.as_deref(), Some(&want));

    let node = NodeSnapshot {
        version: 0,
        name: "n1".into(),
        created: Timestamp::EPOCH,
        labels: BTreeMap::new(),
        conditions: vec![],
        taints: vec![],
        unschedulable: false,
        allocatable: Some(Resources { cpu_millis: 3500, memory_bytes: 8 << 30, pods: 30 }),
    };
    let v = nodewarden_objects::write::node_json(&node, "nu", 0, &time);
    let read = nodewarden_objects::node_reading(&v, seen, Detail::Scheduling).expect("read");
    assert_eq!(read.allocatable, node.allocatable);
    // A fleet node (no allocatable of the simulator's) reports 8 cores.
    let v = nodewarden_objects::write::node_json(&NodeSnapshot { allocatable: None, ..node }, "nu", 0, &time);
    let read = nodewarden_objects::node_reading(&v, seen, Detail::Scheduling).expect("read");
    assert_eq!(read.allocatable, Some(Resources { cpu_millis: 8000, memory_bytes: 32 << 30, pods: 110 }));
}

/// Pods deleted, with the grace period the deletion asked for.
type Deletions = Vec<(String, Option<i64>)>;

/// A pod of `cpu` millicores bound to `node`, owned by a ReplicaSet, with
/// the default 30 s grace period.
fn filler(name: &str, node: &str, cpu: u64) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "filler"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "filler",
                                          "uid": "rs-filler", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
                 "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": "1Gi"}}}]},
    }))
    .expect("a Pod")
}

fn taints(n: &Node) -> Vec<(String, Option<String>, String)> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value, t.effect))
        .collect()
}

fn reserved(n: &Node) -> bool {
    taints(n)
        .iter()
        .any(|(k, v, e)| k == "CriticalAddonsOnly" && v.as_deref() == Some("nodewarden") && e == "NoSchedule")
}

/// The whole loop through the API: three 8-core nodes each filled to 7
/// cores, a 2-core critical addon the scheduler has marked Unschedulable.
/// nodewarden prepares one node (the CriticalAddonsOnly taint), evicts its
/// filler with the grace shortened to 10 s, and once the addon is bound
/// there (as the scheduler would bind it), removes the taint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_critical_addon_gets_a_node_prepared_through_the_api() {
    let served = serve(quiet_cluster(3)).await;
    let c = client(&served).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let nodes: Api<Node> = Api::all(c.clone());
    let names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(names.len(), 3);
    for (i, n) in names.iter().enumerate() {
        pods.create(&PostParams::default(), &filler(&format!("filler-{i}"), n, 7000)).await.expect("filler");
    }
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let addon: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "coredns-1", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "coredns",
                                          "uid": "rs-coredns", "controller": true}]},
        "spec": {"priorityClassName": "system-cluster-critical",
                 "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                 "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
    }))
    .expect("addon");
    system.create(&PostParams::default(), &addon).await.expect("create addon");
    // The scheduler's verdict.
    let mut p = system.get_status("coredns-1").await.expect("status");
    p.status.get_or_insert_default().conditions = Some(vec![
        serde_json::from_value(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}))
        .expect("condition"),
    ]);
    system.replace_status("coredns-1", &PostParams::default(), &p).await.expect("status");

    // Every pod deletion, with the grace it was asked for.
    let deleted: Arc<Mutex<Deletions>> = Arc::default();
    let rv = pods.list(&ListParams::default()).await.expect("pods").metadata.resource_version.expect("rv");
    let mut stream = pods.watch(&WatchParams::default(), &rv).await.expect("watch").boxed();
    let seen = deleted.clone();
    let watching = tokio::spawn(async move {
        while let Ok(Some(e)) = stream.try_next().await {
            if let WatchEvent::Deleted(p) = e {
                let grace = p.metadata.deletion_grace_period_seconds;
                seen.lock().expect("lock").push((p.metadata.name.unwrap_or_default(), grace));
            }
        }
    });
    let running = run(c.clone(), RunOptions { config: rescheduler_config(), ..RunOptions::default() }).expect("config");
    let started = std::time::Instant::now();
    let prepared = loop {
        let list = nodes.list(&ListParams::default()).await.expect("nodes").items;
        let marked: Vec<String> = list.iter().filter(|n| reserved(n)).filter_map(|n| n.metadata.name.clone()).collect();
        assert!(marked.len() <= 1, "more than one node prepared: {marked:?}");
        if let Some(n) = marked.into_iter().next() {
            break n;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no node tainted CriticalAddonsOnly=nodewarden");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let index = names.iter().position(|n| *n == prepared).expect("a fleet node");
    let victim = format!("filler-{index}");
    eventually(Duration::from_secs(30), "the prepared node's filler evicted", async || {
        pods.get_opt(&victim).await.expect("get").is_none()
    })
    .await;
    let evictions: Vec<_> = served.requests().into_iter().filter(|r| r.subresource == "eviction").collect();
    assert_eq!(evictions.len(), 1, "only the prepared node's filler: {evictions:?}");
    eventually(Duration::from_secs(5), "the deletion seen", async || !deleted.lock().expect("lock").is_empty()).await;
    assert_eq!(*deleted.lock().expect("lock"), [(victim.clone(), Some(10))], "the 30 s grace shortened to 10 s");
    for (i, _) in names.iter().enumerate().filter(|(i, _)| *i != index) {
        assert!(pods.get_opt(&format!("filler-{i}")).await.expect("get").is_some(), "filler-{i} was evicted");
    }
    // The scheduler binds the addon to the space made for it.
    let bind = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "coredns-1"},
                      "target": {"kind": "Node", "name": prepared}});
    let req = http::Request::post("/api/v1/namespaces/kube-system/pods/coredns-1/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&bind).expect("json"))
        .expect("request");
    c.request::<Value>(req).await.expect("bind");
    eventually(Duration::from_secs(30), "the taint removed once the addon is bound", async || {
        !reserved(&nodes.get(&prepared).await.expect("node"))
    })
    .await;
    running.stop();
    watching.abort();
    served.stop();
}

/// The whole loop with the served cluster's scheduler (a scenario file's
/// `cluster.scheduler`, the simulator's first fit): three full nodes, a
/// critical addon that fits nowhere; nodewarden prepares one node and
/// evicts one pod there, the served scheduler binds the addon into the
/// room made, and nodewarden removes its taint. No client binds anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_scheduler_binds_the_addon_into_the_room_nodewarden_made() {
    let scenario = nodewarden_cluster::parse_scenario(
        r#"
name: a full cluster loses its DNS pod
cluster: {scheduler: true}
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
- {name: c, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
budgets:
- {name: default/web, selector: {matchLabels: {app: web}}, max-unavailable: 1}
pods:
- {name: default/web-a, node: a, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 2}, grace-period: 30s}
- {name: default/web-b, node: b, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 2}, grace-period: 30s}
- {name: default/web-c, node: c, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 2}, grace-period: 30s}
- name: kube-system/dns
  owner: ReplicaSet
  requests: {cpu: 1, memory: 70Mi}
  priority-class: system-cluster-critical
  tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
"#,
    )
    .expect("scenario");
    let mut opts = quiet_cluster(1);
    opts.source = ServeSource::File(Box::new(scenario));
    let served = serve(opts).await;
    let c = client(&served).await;
    let config = ControllerConfig {
        enable_rescheduler: true,
        rescheduler_housekeeping_interval: Span::from_millis(500),
        rescheduler_unschedulable_grace: Span::from_secs(1),
        rescheduler_pod_scheduled_timeout: Span::from_secs(60),
        ..ControllerConfig::default()
    };
    let running = run(c.clone(), RunOptions { config, ..RunOptions::default() }).expect("config");
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let nodes: Api<Node> = Api::all(c.clone());
    let started = std::time::Instant::now();
    let bound_to = loop {
        if let Some(node) = system.get("dns").await.expect("dns").spec.and_then(|s| s.node_name) {
            break node;
        }
        assert!(started.elapsed() < Duration::from_secs(40), "the addon was not bound by the served scheduler");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eventually(Duration::from_secs(20), "no CriticalAddonsOnly taint left", async || {
        !nodes.list(&ListParams::default()).await.expect("nodes").items.iter().any(reserved)
    })
    .await;
    let evictions: Vec<_> = served.requests().into_iter().filter(|r| r.subresource == "eviction").collect();
    assert_eq!(evictions.len(), 1, "one pod made room: {evictions:?}");
    let victim = &evictions[0].name;
    assert_eq!(victim.strip_prefix("web-"), Some(bound_to.as_str()), "the addon went where the room was made");
    running.stop();
    served.stop();
}
